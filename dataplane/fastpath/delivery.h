// Delivery: the bytes forward writes around a frame so that its backend gets
// it (DeliveryMode, dataplane/config/profile.h), on plain byte buffers. Nothing here
// depends on DPDK: the owner lcore applies deliver() to an mbuf's data (the
// headroom before it is where the outer headers go) and the tests to arrays.
//
// At start-up and at each reload, build_backend_template() turns the delivery
// settings and one backend into a BackendTemplate: for ipip and vxlan the
// whole prefix that goes in front of the inner IP packet (Ethernet, outer IP,
// for vxlan UDP, VXLAN and the inner Ethernet header), once per inner family,
// with the outer IPv4 header's checksum summed over everything but its total
// length. Per packet deliver() copies that prefix and writes only what
// changes: lengths, checksums, the VXLAN source port and the IPv6 flow label
// (both from the flow hash).
//
// What each mode sends:
//   as-is  the frame unchanged.
//   l2     the frame with destination MAC := the backend's, source := the TX
//          port's (direct routing: the backend holds the VIP).
//   ipip   Ethernet (backend's MAC, port's MAC) / outer IPv4 (protocol 4 or
//          41) or IPv6 (next header 4 or 41) from the configured source to the
//          backend / the inner IP packet. The frame's Ethernet header and
//          VLAN tags are replaced (Katran's layout; Linux ipip/ip6tnl/sit
//          devices decapsulate it). The outer IPv4 has DF set and ID 0
//          (RFC 6864: an atomic datagram), whatever the inner packet's DF.
//          In both modes the outer header carries the inner one's DSCP and
//          ECN (RFC 6040, normal mode).
//   vxlan  Ethernet / outer IPv4 (DF set) or IPv6 / UDP (destination
//          vxlan_port, source 49152..65535 from the flow hash: RFC 7348
//          section 5) / VXLAN (I flag, VNI) / inner Ethernet (destination the
//          backend's vxlan_mac or the fleet's, source the TX port's MAC) /
//          the inner IP packet. The inner frame carries no VLAN tag (RFC 7348
//          section 6.1: an encapsulating VTEP SHOULD NOT include one, and a
//          decapsulating one SHOULD drop such frames), so the frame's tags go.
// The outer family of ipip and vxlan is the inner packet's when the backend
// has an address of that family, the other one otherwise.
//
// The MTU rule: the IP packet leaving (the outer IP header onwards, or the
// frame's own IP packet for as-is and l2) is at most the TX port's MTU. A
// packet that would exceed it is not sent (kTooBig); build_icmp_too_big()
// writes the ICMP "fragmentation needed" / ICMPv6 "packet too big" reply
// that tells the client the MTU it may use (BackendTemplate::next_hop_mtu).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "dataplane/config/modes.h"
#include "steering/steering_config.h"  // BackendConfig

namespace qs {

inline constexpr std::uint32_t kEthernetLen = 14;
inline constexpr std::uint32_t kIpv4HeaderLen = 20;  // the outer one carries no options
inline constexpr std::uint32_t kIpv6HeaderLen = 40;
inline constexpr std::uint32_t kUdpHeaderLen = 8;
inline constexpr std::uint32_t kVxlanHeaderLen = 8;
// The longest prefix: vxlan over IPv6.
inline constexpr std::uint32_t kMaxEncapPrefix =
    kEthernetLen + kIpv6HeaderLen + kUdpHeaderLen + kVxlanHeaderLen + kEthernetLen;  // 84
// The ICMP replies' sizes (RFC 1812 section 4.3.2.3: an ICMPv4 error's IP
// packet is at most 576 octets; RFC 4443 section 2.4 (c): an ICMPv6 error's
// at most the IPv6 minimum MTU).
inline constexpr std::uint32_t kIcmpv4ErrorMaxIp = 576;
inline constexpr std::uint32_t kIcmpv6ErrorMaxIp = 1280;
// The largest frame build_icmp_too_big() writes (Ethernet, two VLAN tags,
// an IPv6 packet of 1280): an out_cap of this always suffices.
inline constexpr std::uint32_t kMaxIcmpTooBigFrame = kEthernetLen + 8 + kIcmpv6ErrorMaxIp;

// What a mode adds to the IP packet leaving the TX port (ipip: the outer IP
// header; vxlan: outer IP, UDP, VXLAN and the inner Ethernet header), given
// the outer family. As-is and l2 add nothing.
constexpr std::uint32_t delivery_overhead(DeliveryMode mode, bool outer_ipv6) {
  const std::uint32_t ip = outer_ipv6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  switch (mode) {
    case DeliveryMode::kIpip: return ip;
    case DeliveryMode::kVxlan: return ip + kUdpHeaderLen + kVxlanHeaderLen + kEthernetLen;
    case DeliveryMode::kAsIs:
    case DeliveryMode::kL2: break;
  }
  return 0;
}

// ipip and vxlan, for one inner family: everything in front of the inner IP
// packet as it is sent, with the per-packet fields (lengths, IPv4 DF and
// checksum, UDP source port and checksum, IPv6 flow label) zero.
struct EncapTemplate {
  std::array<std::uint8_t, kMaxEncapPrefix> prefix{};
  std::uint8_t prefix_len = 0;  // octets before the inner IP packet
  bool outer_ipv6 = false;
  // IPv4 outer: the one's-complement sum (RFC 1071, of big-endian words,
  // unfolded) of the outer header as the prefix holds it. vxlan over IPv6:
  // the UDP checksum's sum over the pseudo-header's addresses and next
  // header, the UDP destination port, the VXLAN and the inner Ethernet
  // header. Otherwise 0.
  std::uint32_t partial_sum = 0;
};

// One backend's delivery, as deliver() applies it to each of its frames.
struct BackendTemplate {
  DeliveryMode mode = DeliveryMode::kAsIs;
  std::uint16_t mtu = 1500;  // the TX port's
  // l2: the frame's first 12 octets (backend MAC, port MAC).
  std::array<std::uint8_t, 12> macs{};
  // ipip and vxlan, by the inner packet's family: [0] IPv4, [1] IPv6.
  std::array<EncapTemplate, 2> encap{};

  // What the IP packet leaving grows by for an inner packet of this family.
  std::uint32_t overhead(bool inner_ipv6) const {
    if (mode != DeliveryMode::kIpip && mode != DeliveryMode::kVxlan) return 0;
    return delivery_overhead(mode, encap[inner_ipv6].outer_ipv6);
  }
  // The largest inner IP packet of this family that fits: the MTU a "too
  // big" reply announces.
  std::uint16_t next_hop_mtu(bool inner_ipv6) const { return std::uint16_t(mtu - overhead(inner_ipv6)); }
};

// Builds a backend's template. port_mac and port_mtu are the TX port's.
// Throws std::invalid_argument naming the backend and what it (or the
// delivery section) lacks for the mode: a MAC (l2, ipip, vxlan), an address
// of either family (ipip, vxlan), the source address of an outer family it
// is reached over, an inner MAC (vxlan: its own vxlan_mac or the fleet's),
// a VNI of 24 bits, or an MTU that leaves room for an inner packet (at
// least 68 octets, RFC 791) once the overhead is taken.
BackendTemplate build_backend_template(const DeliveryConfig& delivery, const BackendConfig& backend,
                                       const std::array<std::uint8_t, 6>& port_mac, std::uint16_t port_mtu);

enum class DeliveryStatus : std::uint8_t {
  kOk,
  kTooBig,      // the IP packet leaving would exceed the MTU: answer with build_icmp_too_big()
  kNoHeadroom,  // fewer writable octets before the frame than the outer headers need
  kMalformed,   // the IP header's length is below its header or past the frame
};

struct DeliveryResult {
  std::uint8_t* frame = nullptr;  // the first octet to send (may be before the frame given); null unless kOk
  std::uint32_t len = 0;          // octets to send
  DeliveryStatus status = DeliveryStatus::kOk;
};

namespace delivery_detail {

inline void put16(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 8);
  p[1] = std::uint8_t(v);
}
inline std::uint32_t get16(const std::uint8_t* p) { return std::uint32_t(p[0]) << 8 | p[1]; }

inline std::uint16_t fold(std::uint64_t sum) {
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return std::uint16_t(sum);
}

// fold() for a sum below 2^32: what every per-packet sum of encapsulate()
// is (a template's partial sum of at most 20 words, a few 16-bit words and
// folded payload sums), in two steps instead of five.
inline std::uint16_t fold32(std::uint32_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return std::uint16_t(sum);
}

// The one's-complement sum of len octets (a zero octet pads an odd tail), as
// the folded value of big-endian 16-bit words. Sums native 64-bit words with
// end-around carry and swaps once at the end: the sum is byte-order
// independent up to that swap (RFC 1071 section 2 (B)).
inline std::uint16_t sum_be16(const std::uint8_t* p, std::uint32_t len) {
  std::uint64_t s = 0;
  for (; len >= 8; p += 8, len -= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    s += w;
    s += s < w;
  }
  if (len) {
    std::uint8_t tail[8] = {};
    std::memcpy(tail, p, len);
    std::uint64_t w;
    std::memcpy(&w, tail, 8);
    s += w;
    s += s < w;
  }
  const std::uint16_t native = fold(s);
  if constexpr (std::endian::native == std::endian::little) return std::uint16_t(native << 8 | native >> 8);
  return native;
}

}  // namespace delivery_detail

// The octets in front of the inner IP packet for a mode and outer family:
// what EncapTemplate::prefix_len holds, as a constant for the per-packet
// copy (a copy of known length is a few vector moves, not a call).
constexpr std::uint32_t encap_prefix_len(DeliveryMode mode, bool outer_ipv6) {
  return kEthernetLen + delivery_overhead(mode, outer_ipv6);
}

namespace delivery_detail {

// The one's-complement sum (unfolded) of an inner IP packet of ip_len
// octets, for vxlan's outer UDP checksum over IPv6. When the packet is one
// unfragmented UDP datagram with a checksum (always so over IPv6, and for
// every QUIC stack over IPv4), that checksum already makes the datagram's
// sum the complement of its pseudo-header's, so only the IP header is read
// (Linux's local checksum offload, Documentation/networking/checksum-
// offloads.rst): the payload is not touched. The outer checksum is then
// valid exactly when the inner one is, so a corrupted datagram is dropped by
// the backend's VXLAN device instead of its UDP socket, as it would have
// been. Anything else (no UDP checksum, a fragment, extension headers, a UDP
// length that disagrees with the IP packet's) is summed whole.
template <bool kIpv6>
inline std::uint32_t inner_packet_sum(const std::uint8_t* ip, std::uint32_t ip_len) {
  constexpr std::uint8_t kUdp = 17;
  std::uint32_t header_len;
  std::uint32_t pseudo;  // the inner datagram's pseudo-header, less its addresses for IPv6 (see below)
  if constexpr (!kIpv6) {
    header_len = (ip[0] & 0x0fu) * 4u;
    if (ip[9] != kUdp || (get16(ip + 6) & 0x3fff) || header_len < kIpv4HeaderLen) return sum_be16(ip, ip_len);
    pseudo = get16(ip + 12) + get16(ip + 14) + get16(ip + 16) + get16(ip + 18);
  } else {
    header_len = kIpv6HeaderLen;
    if (ip[6] != kUdp) return sum_be16(ip, ip_len);
    pseudo = 0;
  }
  const std::uint8_t* udp = ip + header_len;
  if (ip_len < header_len + kUdpHeaderLen) return sum_be16(ip, ip_len);
  const std::uint32_t udp_len = get16(udp + 4);
  if (udp_len != ip_len - header_len || get16(udp + 6) == 0) return sum_be16(ip, ip_len);
  // sum(datagram) = ~sum(pseudo-header). Over IPv6 the header's addresses
  // are the pseudo-header's and cancel: only its first 8 octets are summed.
  pseudo += udp_len + kUdp;
  const std::uint32_t header = kIpv6 ? get16(ip) + get16(ip + 2) + get16(ip + 4) + get16(ip + 6)
                                     : sum_be16(ip, header_len);
  return header + std::uint16_t(~fold32(pseudo));
}

// One encapsulating mode (ipip or vxlan), outer family and inner family: the
// prefix's length and every offset in it are constants.
template <DeliveryMode kMode, bool kOuterIpv6, bool kInnerIpv6>
inline DeliveryResult encapsulate(const BackendTemplate& t, const EncapTemplate& e, std::uint8_t* frame,
                                  std::uint32_t headroom, std::uint16_t l3_offset, std::uint32_t ip_len,
                                  std::uint32_t flow_hash) {
  constexpr std::uint32_t kPrefix = encap_prefix_len(kMode, kOuterIpv6);
  const std::uint8_t* ip = frame + l3_offset;
  const std::uint32_t outer_len = kPrefix - kEthernetLen + ip_len;  // the IP packet leaving
  if (outer_len > t.mtu) return {nullptr, 0, DeliveryStatus::kTooBig};
  if (kPrefix > headroom + l3_offset) return {nullptr, 0, DeliveryStatus::kNoHeadroom};
  // The prefix ends where the inner IP header starts; it overwrites the
  // frame's Ethernet header and VLAN tags, which nothing below reads.
  std::uint8_t* out = frame + l3_offset - kPrefix;
  std::memcpy(out, e.prefix.data(), kPrefix);
  std::uint8_t* oip = out + kEthernetLen;
  std::uint8_t* udp;
  // The inner packet's DSCP and ECN go to the outer header (RFC 6040's
  // normal mode, and the uniform model of RFC 2983): the path to the
  // backend keeps its class of service, and a congested hop's CE mark
  // reaches the decapsulator, which copies it back in.
  std::uint32_t tos;
  if constexpr (kInnerIpv6) {
    tos = std::uint32_t(get16(ip) >> 4) & 0xff;
  } else {
    tos = ip[1];
  }
  if constexpr (!kOuterIpv6) {
    // DF and ID 0 are the prefix's (an atomic datagram, RFC 6864).
    oip[1] = std::uint8_t(tos);
    put16(oip + 2, outer_len);
    put16(oip + 10, std::uint16_t(~fold32(e.partial_sum + outer_len + tos)));
    udp = oip + kIpv4HeaderLen;
  } else {
    // RFC 6438: the flow label carries the tunnel's entropy for ECMP.
    put16(oip, std::uint16_t(0x6000 | tos << 4 | ((flow_hash >> 16) & 0x0f)));
    put16(oip + 2, flow_hash & 0xffff);
    put16(oip + 4, outer_len - kIpv6HeaderLen);
    udp = oip + kIpv6HeaderLen;
  }
  if constexpr (kMode == DeliveryMode::kVxlan) {
    // RFC 7348 section 5: a source port from the inner flow's hash, in the
    // dynamic range 49152..65535.
    const std::uint32_t sport = 0xc000 | ((flow_hash ^ (flow_hash >> 14) ^ (flow_hash >> 28)) & 0x3fff);
    const std::uint32_t udp_len = outer_len - (kOuterIpv6 ? kIpv6HeaderLen : kIpv4HeaderLen);
    put16(udp, sport);
    put16(udp + 4, udp_len);
    if constexpr (kOuterIpv6) {
      // Over IPv4 the outer UDP checksum stays 0 (RFC 7348 section 5
      // allows it). Over IPv6 a zero checksum is legal for tunnels only by
      // RFC 6935/6936 opt-in, and Linux's vxlan drops such datagrams unless
      // the device was created with udp6zerocsumrx: compute it, from the
      // inner datagram's own checksum where it has one (inner_packet_sum).
      const std::uint32_t sum = e.partial_sum + 2 * udp_len + sport + inner_packet_sum<kInnerIpv6>(ip, ip_len);
      const std::uint16_t c = std::uint16_t(~fold32(sum));
      put16(udp + 6, c ? c : 0xffff);  // RFC 8200 section 8.1: 0 goes as 0xffff
    }
  }
  return {out, kPrefix + ip_len, DeliveryStatus::kOk};
}

// The length of the IP packet at l3_offset by its header, or 0 when the
// header is not all in the `len` octets at `frame`, or its length is below
// its header or past them (kMalformed).
inline std::uint32_t ip_packet_len(const std::uint8_t* frame, std::uint32_t len, std::uint16_t l3_offset, bool ipv6) {
  const std::uint8_t* ip = frame + l3_offset;
  if (len < l3_offset + (ipv6 ? kIpv6HeaderLen : kIpv4HeaderLen)) return 0;
  const std::uint32_t ip_len = ipv6 ? kIpv6HeaderLen + get16(ip + 4) : get16(ip + 2);
  if (ip_len > len - l3_offset || (!ipv6 && ip_len < kIpv4HeaderLen)) return 0;
  return ip_len;
}

// ipip and vxlan for an inner packet of one family: its header's lengths and
// the template's outer family are then the only per-packet choices, and the
// outer family follows the inner one for every backend with an address of
// it, so the branch on it is predicted with the family's.
template <DeliveryMode kMode, bool kInnerIpv6>
inline DeliveryResult encapsulate_family(const BackendTemplate& t, std::uint8_t* frame, std::uint32_t len,
                                         std::uint32_t headroom, std::uint16_t l3_offset, std::uint32_t flow_hash) {
  const std::uint32_t ip_len = ip_packet_len(frame, len, l3_offset, kInnerIpv6);
  if (ip_len == 0) return {nullptr, 0, DeliveryStatus::kMalformed};
  const EncapTemplate& e = t.encap[kInnerIpv6];
  return e.outer_ipv6 ? encapsulate<kMode, true, kInnerIpv6>(t, e, frame, headroom, l3_offset, ip_len, flow_hash)
                      : encapsulate<kMode, false, kInnerIpv6>(t, e, frame, headroom, l3_offset, ip_len, flow_hash);
}

}  // namespace delivery_detail

// Delivers one frame by `t`, whose mode is kMode. frame: its first octet,
// with `headroom` writable octets before it; len: its octets contiguous from
// `frame` (an mbuf's data_len: a frame whose IP packet does not all lie in
// the first segment is kMalformed, never read past); l3_offset: where its IP
// header starts (after Ethernet and any VLAN tags, as
// ParsedPacket::l3_offset); ipv6: its family; flow_hash: the connection's
// entropy (VXLAN source port, IPv6 outer flow label), the same for every
// packet of a connection.
//
// On kOk the octets to send are [result.frame, result.frame + result.len):
// for ipip and vxlan that starts prefix_len - l3_offset octets before
// `frame` and ends with the inner IP packet (Ethernet padding after it is
// left out); for as-is and l2 it is the frame. With an mbuf: prepend
// (frame - result.frame) octets (an l3_offset longer than the prefix cannot
// happen: the shortest prefix is 34 octets, the longest Ethernet header 22),
// then trim to result.len. Otherwise the frame is untouched.
template <DeliveryMode kMode>
inline DeliveryResult deliver_as(const BackendTemplate& t, std::uint8_t* frame, std::uint32_t len,
                                 std::uint32_t headroom, std::uint16_t l3_offset, bool ipv6, std::uint32_t flow_hash) {
  using namespace delivery_detail;
  if constexpr (kMode == DeliveryMode::kAsIs || kMode == DeliveryMode::kL2) {
    const std::uint32_t ip_len = ip_packet_len(frame, len, l3_offset, ipv6);
    if (ip_len == 0) return {nullptr, 0, DeliveryStatus::kMalformed};
    if (ip_len > t.mtu) return {nullptr, 0, DeliveryStatus::kTooBig};
    if constexpr (kMode == DeliveryMode::kL2) std::memcpy(frame, t.macs.data(), t.macs.size());
    return {frame, len, DeliveryStatus::kOk};
  } else {
    return ipv6 ? encapsulate_family<kMode, true>(t, frame, len, headroom, l3_offset, flow_hash)
                : encapsulate_family<kMode, false>(t, frame, len, headroom, l3_offset, flow_hash);
  }
}

// deliver_as by the template's own mode.
inline DeliveryResult deliver(const BackendTemplate& t, std::uint8_t* frame, std::uint32_t len,
                              std::uint32_t headroom, std::uint16_t l3_offset, bool ipv6, std::uint32_t flow_hash) {
  switch (t.mode) {
    case DeliveryMode::kAsIs: return deliver_as<DeliveryMode::kAsIs>(t, frame, len, headroom, l3_offset, ipv6, flow_hash);
    case DeliveryMode::kL2: return deliver_as<DeliveryMode::kL2>(t, frame, len, headroom, l3_offset, ipv6, flow_hash);
    case DeliveryMode::kIpip: return deliver_as<DeliveryMode::kIpip>(t, frame, len, headroom, l3_offset, ipv6, flow_hash);
    case DeliveryMode::kVxlan:
      return deliver_as<DeliveryMode::kVxlan>(t, frame, len, headroom, l3_offset, ipv6, flow_hash);
  }
  return {nullptr, 0, DeliveryStatus::kMalformed};
}

// Writes the whole Ethernet frame that answers `frame` (too big once
// delivered) towards its client: to its source MAC from port_mac (the port
// it came in on), VLAN tags kept, IP source := `source` (4 or 16 octets as
// the family: an address of the appliance's own, its TAP's) or, when null,
// the frame's destination (a port without a TAP has no address of the
// appliance's), destination := its source, TTL / hop limit 64. IPv4: ICMP type 3 code 4 ("fragmentation needed and DF set",
// RFC 792, RFC 1191) with next_hop_mtu, quoting as much of the frame's IP
// packet as keeps the reply's within 576 octets. IPv6: ICMPv6 type 2
// ("packet too big", RFC 4443) with next_hop_mtu, quoting up to a reply of
// 1280. Checksums valid (ICMPv6's over the pseudo-header).
// Returns the reply's length, or 0 when none is due or it cannot be built:
// out_cap too small (kMaxIcmpTooBigFrame always suffices), l3_offset below
// 14 or the IP header past len, an IPv4 packet without DF (its sender allows
// fragmentation: the error does not apply) or a non-first fragment, a
// packet carrying ICMP / ICMPv6 (no error about an error, RFC 1122 3.2.2 and
// RFC 4443 2.4 (e)), a source no reply can go to (unspecified,
// multicast, IPv4 limited broadcast), a destination that is no unicast
// address, or a frame whose destination MAC is not port_mac (flooded
// towards another host, or to a group).
std::uint32_t build_icmp_too_big(const std::uint8_t* frame, std::uint32_t len, std::uint16_t l3_offset, bool ipv6,
                                 std::uint16_t next_hop_mtu, const std::array<std::uint8_t, 6>& port_mac,
                                 std::uint8_t* out, std::uint32_t out_cap, const std::uint8_t* source = nullptr);

}  // namespace qs
