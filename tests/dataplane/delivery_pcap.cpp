// Writes what delivery.h makes of the fixtures' client frames, one frame per
// case in a fixed order, for delivery_tshark_test.sh to dissect:
//    1 l2, IPv4 on VLAN 100          2 l2, IPv6
//    3 ipip 4 in 4                    4 ipip 6 in 6
//    5 ipip 4 in 6 (IPv6-only backend) 6 ipip 6 in 4 (IPv4-only backend)
//    7 ipip 4 in 4, inner DF clear (the outer has DF all the same)
//    8 vxlan 4 in 4                   9 vxlan 6 in 6
//   10 vxlan 6 in 4 (IPv4-only)      11 vxlan 4 in 6 (IPv6-only), from QinQ 100/200
//   12 ICMP frag. needed, VLAN 100   13 ICMPv6 packet too big
// Usage: delivery_pcap OUT.pcap
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <vector>

#include "dataplane/fastpath/delivery.h"
#include "tests/dataplane/delivery_fixtures.h"
#include "tests/traffic/pcap_writer.h"

namespace {

using namespace qs;

struct Case {
  DeliveryMode mode;
  bool backend_v4, backend_v6;
  bool inner_v6;
  std::uint16_t vlan, outer_vlan;
  bool clear_df;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.pcap\n", argv[0]);
    return 2;
  }
  try {
    traffic::PcapWriter pcap(argv[1]);
    std::uint64_t ts = 1'700'000'000'000'000'000ull;
    const Case cases[] = {
        {DeliveryMode::kL2, true, true, false, 100, 0, false},
        {DeliveryMode::kL2, true, true, true, 0, 0, false},
        {DeliveryMode::kIpip, true, true, false, 0, 0, false},
        {DeliveryMode::kIpip, true, true, true, 0, 0, false},
        {DeliveryMode::kIpip, false, true, false, 0, 0, false},
        {DeliveryMode::kIpip, true, false, true, 0, 0, false},
        {DeliveryMode::kIpip, true, true, false, 0, 0, true},
        {DeliveryMode::kVxlan, true, true, false, 0, 0, false},
        {DeliveryMode::kVxlan, true, true, true, 0, 0, false},
        {DeliveryMode::kVxlan, true, false, true, 0, 0, false},
        {DeliveryMode::kVxlan, false, true, false, 100, 200, false},
    };
    for (const Case& c : cases) {
      const auto t = build_backend_template(test::delivery_config(c.mode), test::backend(c.backend_v4, c.backend_v6),
                                            test::kPortMac, 1500);
      auto frame = test::client_frame(c.inner_v6, 301, c.vlan, c.outer_vlan);
      const std::uint16_t l3 = test::l3_offset_of(frame);
      if (c.clear_df) {
        // DF off, and the inner header checksum adjusted (tshark checks it too).
        frame[l3 + 6] &= std::uint8_t(~0x40);
        const std::uint32_t sum = (std::uint32_t(frame[l3 + 10]) << 8 | frame[l3 + 11]) + 0x4000;
        const std::uint32_t folded = (sum & 0xffff) + (sum >> 16);
        frame[l3 + 10] = std::uint8_t(folded >> 8), frame[l3 + 11] = std::uint8_t(folded);
      }
      test::Buffer b(frame, 128);
      const auto r = b.deliver(t, c.inner_v6, l3, 0x9e3779b9);
      if (r.status != DeliveryStatus::kOk) throw std::runtime_error("a case did not deliver");
      pcap.write({r.frame, r.len}, ts += 1000);
    }
    for (const bool v6 : {false, true}) {
      const auto frame = test::client_frame(v6, 1490, v6 ? 0 : 100);
      std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
      const std::uint32_t n = build_icmp_too_big(frame.data(), std::uint32_t(frame.size()), test::l3_offset_of(frame),
                                                 v6, 1430, test::kRxPortMac, out.data(), std::uint32_t(out.size()));
      if (n == 0) throw std::runtime_error("no ICMP reply");
      pcap.write({out.data(), n}, ts += 1000);
    }
    pcap.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "delivery_pcap: %s\n", e.what());
    return 1;
  }
  return 0;
}
