// Ethernet (+ 802.1Q / 802.1ad tags) / IPv4 or IPv6 / UDP frames with valid
// IPv4 header and UDP checksums.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace qs::traffic {

struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // IPv4 uses the first 4

  static IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    IpAddress ip;
    ip.bytes[0] = a, ip.bytes[1] = b, ip.bytes[2] = c, ip.bytes[3] = d;
    return ip;
  }
  std::size_t size() const { return v6 ? 16 : 4; }
  std::string to_string() const;
  bool operator==(const IpAddress&) const = default;
};

// A connection's addressing as the client sees it; the server side is the
// service address (VIP) and QUIC port.
struct FourTuple {
  IpAddress client_ip;
  std::uint16_t client_port = 0;
  IpAddress server_ip;
  std::uint16_t server_port = 0;
  bool operator==(const FourTuple&) const = default;
};

using MacAddress = std::array<std::uint8_t, 6>;

struct L2Header {
  MacAddress dst{};
  MacAddress src{};
  std::uint16_t outer_vlan = 0;  // 802.1ad S-tag VLAN ID (QinQ); 0 = none
  std::uint16_t vlan = 0;        // 802.1Q C-tag VLAN ID; 0 = none
};

inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr std::uint16_t kEtherTypeVlan = 0x8100;
inline constexpr std::uint16_t kEtherTypeQinQ = 0x88a8;
inline constexpr std::uint8_t kIpProtoUdp = 17;

// Builds one frame: L2 header, IPv4 (DF, TTL 64, identification ip_id) or
// IPv6 (hop limit 64, flow label) per the addresses' family, UDP, payload.
// Throws std::invalid_argument if the families differ or the datagram cannot
// fit an IP packet.
std::vector<std::uint8_t> build_udp_frame(const L2Header& l2, const IpAddress& src_ip, std::uint16_t src_port,
                                          const IpAddress& dst_ip, std::uint16_t dst_port,
                                          std::span<const std::uint8_t> payload, std::uint16_t ip_id,
                                          std::uint32_t flow_label);

// Where a frame's layers start, as an independent reader finds them (used by
// tests and by the checksum self-check); ok = false when the frame is not
// Ethernet/[VLAN]/IP/UDP or is truncated.
struct UdpFrameView {
  bool ok = false;
  bool v6 = false;
  std::size_t l3_offset = 0;
  std::size_t l4_offset = 0;
  std::size_t payload_offset = 0;
  std::size_t payload_len = 0;
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  std::vector<std::uint16_t> vlan_ids;  // outermost first
};
UdpFrameView parse_udp_frame(std::span<const std::uint8_t> frame);

}  // namespace qs::traffic
