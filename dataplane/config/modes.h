// The modes the fast path runs in, as the profile names them: the
// back-pressure policy, the owner's action and how forward delivers to a
// backend. Plain types, apart from the profile (dataplane/config/profile.h),
// so that the per-packet code includes these and not the profile loader.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace qs {

enum class BackpressurePolicy { kPark, kDrop, kShedNew };

enum class OwnerAction { kForward, kReflect, kSink };

// How forward hands a frame to its backend (dataplane/fastpath/delivery.h).
enum class DeliveryMode : std::uint8_t {
  kAsIs,   // the frame unchanged (no backends needed)
  kL2,     // destination MAC := the backend's, source := the TX port's (direct routing)
  kIpip,   // the IP packet inside an outer IPv4/IPv6 header to the backend
  kVxlan,  // the whole frame inside outer Ethernet/IP/UDP/VXLAN (RFC 7348)
};

struct DeliveryConfig {
  DeliveryMode mode = DeliveryMode::kAsIs;
  // The outer source address of ipip and vxlan, per outer family (required
  // by the loader for a family some backend is reached over).
  std::optional<std::array<std::uint8_t, 4>> source_ipv4;
  std::optional<std::array<std::uint8_t, 16>> source_ipv6;
  std::uint32_t vxlan_vni = 1;            // 0..2^24-1
  std::uint16_t vxlan_port = 4789;        // the outer UDP destination port
  // The inner destination MAC for a backend without its own vxlan_mac
  // (a fleet whose VXLAN devices share one MAC); absent: each backend names its own.
  std::optional<std::array<std::uint8_t, 6>> vxlan_mac;
  std::uint8_t ttl = 64;                  // outer TTL / hop limit
  // ICMP "fragmentation needed" / ICMPv6 "packet too big" sent back per
  // owner per second at most, for frames that do not fit the TX port's MTU
  // once encapsulated (0: none sent; each such frame is counted all the same).
  std::uint32_t icmp_too_big_per_s = 100;
  // Of those, at most this many per second to one client (its address), so
  // that one sender of oversized frames cannot take every client's share
  // (0: no bound per client). A client needs one per round trip.
  std::uint32_t icmp_too_big_per_client_per_s = 10;
};

// One class's police on the exception path (dataplane/fastpath/exception_path.h):
// what a port lets through to its kernel per second, in packets and in
// bytes; a frame goes only when both allow it (0 packets: none of the class).
struct PoliceRate {
  std::uint64_t packets_per_s = 0;
  std::uint64_t bytes_per_s = 0;
};

}  // namespace qs
