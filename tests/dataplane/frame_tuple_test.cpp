// FrameTuple: the owner's in-place compare of a frame's 4-tuple with the one
// an entry records. Every octet of each address and port, in both families,
// must make a difference (IPv6's addresses are recorded as a keyed digest:
// no flip of one bit in them may give the same), and a frame of the other
// family must never match; the frames are written here from the wire
// formats, and the record by FrameTuple::record.
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <vector>

#include "dataplane/fastpath/connection_stage.h"
#include "dataplane/fastpath/steer_meta.h"

namespace qs {
namespace {

constexpr std::uint64_t kSeed = 0x5eed5eed12345678ull;

// Ethernet, then an IPv4 (20 octets) or IPv6 (40) header, UDP and a
// two-octet payload: a short-header QUIC packet with a one-octet DCID, the
// shortest frame the owner tracks, so that a compare reading past the
// headers would read past the frame.
std::vector<std::uint8_t> frame(bool ipv6, std::uint8_t seed) {
  const std::size_t ip = ipv6 ? 40 : 20;
  std::vector<std::uint8_t> f(14 + ip + 8 + 2, 0);
  f[12] = ipv6 ? 0x86 : 0x08;
  f[13] = ipv6 ? 0xdd : 0x00;
  f[14] = ipv6 ? 0x60 : 0x45;
  const std::size_t src = 14 + (ipv6 ? 8 : 12);
  const std::size_t addr = ipv6 ? 16 : 4;
  for (std::size_t i = 0; i < 2 * addr + 4; ++i) f[src + i] = std::uint8_t(seed + 7 * i + 1);  // addresses, ports
  return f;
}

struct Frame {
  explicit Frame(std::vector<std::uint8_t> bytes, bool ipv6) : data(std::move(bytes)) {
    mbuf.buf_addr = data.data();
    mbuf.data_off = 0;
    meta.backend = 0xffff;  // l3 at 14: no VLAN tag in the flags
    meta.l4_offset = std::uint16_t(14 + (ipv6 ? 40 : 20));
    meta.flags = std::uint8_t(ipv6 ? kSteerMetaIpv6 : 0);
  }
  FrameTuple tuple() { return FrameTuple(&mbuf, meta); }
  std::vector<std::uint8_t> data;
  rte_mbuf mbuf{};
  SteerMeta meta{};
};

TEST(FrameTuple, EveryAddressAndPortOctetCountsInBothFamilies) {
  for (const bool ipv6 : {false, true}) {
    Frame recorded(frame(ipv6, 3), ipv6);
    Connection t;
    recorded.tuple().record(t, kSeed);
    EXPECT_TRUE(recorded.tuple().matches(t, kSeed)) << ipv6;
    const std::size_t src = 14 + (ipv6 ? 8 : 12);
    const std::size_t end = 14 + (ipv6 ? 40 : 20) + 4;  // through the UDP ports
    for (std::size_t at = src; at < end; ++at) {
      for (const std::uint8_t flip : {std::uint8_t(0x01), std::uint8_t(0x80)}) {
        auto bytes = recorded.data;
        bytes[at] ^= flip;
        Frame changed(bytes, ipv6);
        EXPECT_FALSE(changed.tuple().matches(t, kSeed)) << (ipv6 ? "IPv6" : "IPv4") << " octet " << at;
      }
    }
    // Octets outside the tuple do not count (the IPv4 header's others, the
    // UDP length and checksum, the payload).
    for (std::size_t at = 14; at < recorded.data.size(); ++at) {
      if (at >= src && at < end) continue;
      auto bytes = recorded.data;
      bytes[at] ^= 0xff;
      Frame changed(bytes, ipv6);
      EXPECT_TRUE(changed.tuple().matches(t, kSeed)) << (ipv6 ? "IPv6" : "IPv4") << " octet " << at;
    }
  }
}

TEST(FrameTuple, TheOtherFamilyNeverMatches) {
  // The same leading address octets in both: only the family tells them apart.
  Frame v4(frame(false, 3), false);
  Frame v6(frame(true, 3), true);
  Connection t4, t6;
  v4.tuple().record(t4, kSeed);
  v6.tuple().record(t6, kSeed);
  EXPECT_FALSE(v4.tuple().matches(t6, kSeed));
  EXPECT_FALSE(v6.tuple().matches(t4, kSeed));
  // A record that differs from an IPv4 one by its family alone still differs.
  Connection like4 = t4;
  like4.tuple_ipv6 = 1;
  EXPECT_FALSE(v4.tuple().matches(like4, kSeed));
}

TEST(FrameTuple, TheIpv6DigestIsKeyed) {
  // Another shard's seed gives another digest of the same addresses, so a
  // pair that hides a change cannot be found without the seed.
  Frame v6(frame(true, 3), true);
  Connection a;
  v6.tuple().record(a, kSeed);
  EXPECT_FALSE(v6.tuple().matches(a, kSeed ^ 1));
  EXPECT_TRUE(v6.tuple().matches(a, kSeed));
}

}  // namespace
}  // namespace qs
