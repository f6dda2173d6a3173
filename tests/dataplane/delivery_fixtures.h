// Delivery test fixtures shared by delivery_test.cpp and delivery_pcap.cpp
// (the tshark check): one delivery section per mode, a backend, client
// frames, and a buffer with headroom to deliver them in.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/fastpath/delivery.h"
#include "tests/traffic/frame.h"

namespace qs::test {

inline constexpr std::array<std::uint8_t, 6> kPortMac{0x02, 0, 0, 0, 0, 0x01};
inline constexpr std::array<std::uint8_t, 6> kBackendMac{0x02, 0, 0, 0, 0, 0x02};
inline constexpr std::array<std::uint8_t, 6> kBackendVxlanMac{0x02, 0, 0, 0, 0xaa, 0x02};
inline constexpr std::array<std::uint8_t, 6> kFleetVxlanMac{0x02, 0, 0, 0, 0xbb, 0xbb};
inline constexpr std::array<std::uint8_t, 6> kClientMac{0x02, 0, 0, 0, 0xcc, 0x07};
inline constexpr std::array<std::uint8_t, 6> kRxPortMac{0x02, 0, 0, 0, 0, 0x09};
inline constexpr std::array<std::uint8_t, 4> kSource4{10, 0, 0, 1};
inline constexpr std::array<std::uint8_t, 4> kBackend4{10, 0, 0, 2};
inline constexpr std::array<std::uint8_t, 16> kSource6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
inline constexpr std::array<std::uint8_t, 16> kBackend6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
inline constexpr std::uint32_t kVni = 0x123456;
inline constexpr std::uint8_t kOuterTtl = 32;

inline DeliveryConfig delivery_config(DeliveryMode mode) {
  DeliveryConfig d;
  d.mode = mode;
  d.source_ipv4 = kSource4;
  d.source_ipv6 = kSource6;
  d.vxlan_vni = kVni;
  d.ttl = kOuterTtl;
  return d;
}

// Backend b1, with an address of each family asked for.
inline BackendConfig backend(bool v4 = true, bool v6 = true) {
  BackendConfig b;
  b.name = "b1";
  if (v4) b.ipv4 = kBackend4;
  if (v6) b.ipv6 = kBackend6;
  b.mac = kBackendMac;
  b.vxlan_mac = kBackendVxlanMac;
  return b;
}

inline traffic::IpAddress client_ip(bool v6) {
  if (!v6) return traffic::IpAddress::v4(198, 51, 100, 7);
  traffic::IpAddress a;
  a.v6 = true;
  a.bytes = {0x20, 0x01, 0x0d, 0xb8, 0, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x07};
  return a;
}
inline traffic::IpAddress vip(bool v6) {
  if (!v6) return traffic::IpAddress::v4(203, 0, 113, 10);
  traffic::IpAddress a;
  a.v6 = true;
  a.bytes = {0x20, 0x01, 0x0d, 0xb8, 0, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
  return a;
}

// A client's QUIC datagram to the VIP (DF set for IPv4) whose IP packet is
// ip_len octets, on VLANs `vlan` (802.1Q) and `outer_vlan` (802.1ad) when
// not 0.
inline std::vector<std::uint8_t> client_frame(bool v6, std::uint32_t ip_len, std::uint16_t vlan = 0,
                                              std::uint16_t outer_vlan = 0) {
  traffic::L2Header l2;
  l2.dst = kRxPortMac;
  l2.src = kClientMac;
  l2.vlan = vlan;
  l2.outer_vlan = outer_vlan;
  std::vector<std::uint8_t> payload(ip_len - (v6 ? 40 : 20) - 8);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = std::uint8_t(i * 7 + 3);
  if (!payload.empty()) payload[0] = 0x40;  // a short header
  return traffic::build_udp_frame(l2, client_ip(v6), 50000, vip(v6), 443, payload, 0x1234, 0xabcde);
}

inline std::uint16_t l3_offset_of(const std::vector<std::uint8_t>& frame) {
  return std::uint16_t(traffic::parse_udp_frame(frame).l3_offset);
}

// A frame in a buffer with `headroom` octets before it, as an mbuf holds one.
struct Buffer {
  std::vector<std::uint8_t> bytes;
  std::uint32_t headroom;
  std::uint32_t len;
  Buffer(const std::vector<std::uint8_t>& frame, std::uint32_t headroom_)
      : bytes(headroom_ + frame.size(), 0xee), headroom(headroom_), len(std::uint32_t(frame.size())) {
    std::memcpy(bytes.data() + headroom, frame.data(), frame.size());
  }
  std::uint8_t* frame() { return bytes.data() + headroom; }
  DeliveryResult deliver(const BackendTemplate& t, bool v6, std::uint16_t l3_offset, std::uint32_t flow_hash) {
    return qs::deliver(t, frame(), len, headroom, l3_offset, v6, flow_hash);
  }
};

}  // namespace qs::test
