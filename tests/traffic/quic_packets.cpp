#include "tests/traffic/quic_packets.h"

#include <algorithm>

namespace qs::traffic {

std::vector<std::uint8_t> long_header_packet(LongType type, std::span<const std::uint8_t> dcid,
                                             std::span<const std::uint8_t> scid, std::size_t initial_datagram) {
  LongHeader h;
  h.type = type;
  h.dcid = dcid;
  h.scid = scid;
  std::size_t pn_offset = 0;
  std::size_t payload = 40;
  std::vector<std::uint8_t> q = build_long_header(h, payload, &pn_offset);
  if (type == LongType::kInitial && q.size() + payload < initial_datagram) {
    // The Length field counts the payload, so the header is built again; its
    // size stays (Length is always two octets), so the padding comes out exact.
    payload = initial_datagram - q.size();
    q = build_long_header(h, payload, &pn_offset);
  }
  q.resize(q.size() + payload, 0x5a);
  return q;
}

std::vector<std::uint8_t> short_header_packet(std::span<const std::uint8_t> dcid, std::size_t payload_len) {
  // Built in place: GCC 12's -Warray-bounds misreads an insert into a
  // one-octet vector under -O2.
  std::vector<std::uint8_t> q(1 + dcid.size() + payload_len, 0xa5);
  q[0] = 0x41;
  std::copy(dcid.begin(), dcid.end(), q.begin() + 1);
  return q;
}

std::vector<std::uint8_t> random_cid(std::mt19937_64& rng, std::size_t len) {
  std::vector<std::uint8_t> c(len);
  for (auto& b : c) b = std::uint8_t(rng());
  return c;
}

}  // namespace qs::traffic
