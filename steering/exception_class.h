// What the exception path carries to the kernel, by class: the frames of an
// appliance's own host (steering/service_table.h: neither a service's nor
// to a service address), told apart so that each class is policed on its
// own and routing's frames go first (dataplane/fastpath/exception_path.h). A plain byte
// buffer in, no DPDK: the receive loop calls it on mbuf data, the tests on
// fixtures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace qs {

// Ordered by precedence: every class up to kLink is control-plane traffic
// the appliance cannot lose without losing its place in the network.
enum class ExceptionClass : std::uint8_t {
  kArp,    // ARP (EtherType 0x0806)
  kNd,     // ICMPv6 Neighbour Discovery: router/neighbour solicitation and advertisement, redirect (133..137)
  kBgp,    // TCP from or to port 179
  kBfd,    // UDP to 3784 (single hop), 3785 (echo) or 4784 (multihop): RFC 5881, 5883
  kLink,   // LACP and the slow protocols (0x8809), LLDP (0x88cc), anything to 01:80:c2:00:00:0X
  kIcmp,   // ICMP, and ICMPv6 other than ND
  kOther,  // anything else for the host
};
inline constexpr unsigned kExceptionClasses = unsigned(ExceptionClass::kOther) + 1;

// Whether a class goes through the control ring, drained before the bulk one.
constexpr bool is_control(ExceptionClass c) { return c <= ExceptionClass::kLink; }

constexpr std::string_view exception_class_name(ExceptionClass c) {
  switch (c) {
    case ExceptionClass::kArp: return "arp";
    case ExceptionClass::kNd: return "nd";
    case ExceptionClass::kBgp: return "bgp";
    case ExceptionClass::kBfd: return "bfd";
    case ExceptionClass::kLink: return "link";
    case ExceptionClass::kIcmp: return "icmp";
    case ExceptionClass::kOther: return "other";
  }
  return "?";
}

namespace exception_detail {
inline std::uint16_t be16(const std::uint8_t* p) { return std::uint16_t(p[0] << 8 | p[1]); }

inline ExceptionClass by_transport(std::uint8_t proto, const std::uint8_t* l4, std::size_t avail) {
  if (proto == 6 && avail >= 4) {
    if (be16(l4) == 179 || be16(l4 + 2) == 179) return ExceptionClass::kBgp;
  } else if (proto == 17 && avail >= 4) {
    const std::uint16_t dst = be16(l4 + 2);
    if (dst == 3784 || dst == 3785 || dst == 4784) return ExceptionClass::kBfd;
  }
  return ExceptionClass::kOther;
}
}  // namespace exception_detail

// Never reads past len; a frame too short for what its headers announce is
// kOther (the kernel judges it, within the class's police).
inline ExceptionClass exception_class(const std::uint8_t* frame, std::size_t len) {
  using namespace exception_detail;
  if (len < 14) return ExceptionClass::kOther;
  // IEEE 802.1 link-local group addresses: LACP, LLDP, STP, PAUSE, ...
  if (frame[0] == 0x01 && frame[1] == 0x80 && frame[2] == 0xc2 && frame[3] == 0 && frame[4] == 0 &&
      (frame[5] & 0xf0) == 0)
    return ExceptionClass::kLink;
  std::size_t off = 12;
  std::uint16_t type = be16(frame + off);
  for (int tags = 0; (type == 0x8100 || type == 0x88a8) && tags < 2; ++tags) {
    if (len < off + 6) return ExceptionClass::kOther;
    off += 4;
    type = be16(frame + off);
  }
  off += 2;
  switch (type) {
    case 0x0806: return ExceptionClass::kArp;
    case 0x8809:
    case 0x88cc: return ExceptionClass::kLink;
    case 0x0800: {
      if (len < off + 20) return ExceptionClass::kOther;
      const std::uint8_t* ip = frame + off;
      const std::size_t ihl = std::size_t(ip[0] & 0x0f) * 4;
      if ((ip[0] >> 4) != 4 || ihl < 20 || len < off + ihl) return ExceptionClass::kOther;
      if ((be16(ip + 6) & 0x1fff) != 0) return ExceptionClass::kOther;  // a later fragment: no header to read
      if (ip[9] == 1) return ExceptionClass::kIcmp;
      return by_transport(ip[9], ip + ihl, len - off - ihl);
    }
    case 0x86dd: {
      if (len < off + 40) return ExceptionClass::kOther;
      const std::uint8_t* ip = frame + off;
      std::uint8_t next = ip[6];
      std::size_t l4 = off + 40;
      // Hop-by-hop, routing and destination options (MLD rides hop-by-hop).
      for (int n = 0; (next == 0 || next == 43 || next == 60) && n < 4; ++n) {
        if (len < l4 + 8) return ExceptionClass::kOther;
        next = frame[l4];
        l4 += (std::size_t(frame[l4 + 1]) + 1) * 8;
      }
      if (len < l4) return ExceptionClass::kOther;
      if (next == 58) {
        if (len < l4 + 1) return ExceptionClass::kOther;
        const std::uint8_t icmp_type = frame[l4];
        return icmp_type >= 133 && icmp_type <= 137 ? ExceptionClass::kNd : ExceptionClass::kIcmp;
      }
      return by_transport(next, frame + l4, len - l4);
    }
    default: return ExceptionClass::kOther;
  }
}

}  // namespace qs
