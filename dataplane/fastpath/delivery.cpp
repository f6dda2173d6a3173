// Delivery templates (start-up and reload) and the ICMP "too big" reply
// (rate-limited, off the per-packet path): see delivery.h.
#include "dataplane/fastpath/delivery.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace qs {
namespace {

using delivery_detail::get16;
using delivery_detail::put16;

constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
constexpr std::uint16_t kEtherTypeIpv6 = 0x86dd;
constexpr std::uint8_t kProtoIpip = 4;   // IPv4 in IP
constexpr std::uint8_t kProtoIpv6 = 41;  // IPv6 in IP
constexpr std::uint8_t kProtoUdp = 17;
constexpr std::uint8_t kProtoIcmp = 1;
constexpr std::uint8_t kProtoIcmpv6 = 58;
constexpr std::uint32_t kIcmpHeaderLen = 8;
constexpr std::uint8_t kReplyTtl = 64;

// Big-endian 16-bit words of an even-length header, unfolded (a few dozen
// octets: no overflow).
std::uint32_t sum_words(const std::uint8_t* p, std::size_t len) {
  std::uint32_t s = 0;
  for (std::size_t i = 0; i + 1 < len; i += 2) s += get16(p + i);
  return s;
}

[[noreturn]] void refuse(const BackendConfig& b, const std::string& what) {
  throw std::invalid_argument("backend '" + b.name + "': " + what);
}

// The profile's spelling (delivery_mode_name lives with the loader, which
// this DPDK-free library does not link).
const char* mode_name(DeliveryMode m) {
  switch (m) {
    case DeliveryMode::kAsIs: return "as_is";
    case DeliveryMode::kL2: return "l2";
    case DeliveryMode::kIpip: return "ipip";
    case DeliveryMode::kVxlan: return "vxlan";
  }
  return "?";
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
  return std::all_of(p, p + n, [](std::uint8_t x) { return x == 0; });
}

// The prefix for one inner family: Ethernet, outer IP, and for vxlan UDP,
// VXLAN and the inner Ethernet header.
EncapTemplate build_encap(const DeliveryConfig& d, const BackendConfig& b, const std::array<std::uint8_t, 6>& port_mac,
                          bool inner_ipv6) {
  EncapTemplate e;
  const bool has_own = inner_ipv6 ? b.ipv6.has_value() : b.ipv4.has_value();
  e.outer_ipv6 = has_own ? inner_ipv6 : !inner_ipv6;
  std::uint8_t* p = e.prefix.data();
  std::memcpy(p, b.mac.data(), 6);
  std::memcpy(p + 6, port_mac.data(), 6);
  put16(p + 12, e.outer_ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  std::uint8_t* ip = p + kEthernetLen;
  const bool vxlan = d.mode == DeliveryMode::kVxlan;
  const std::uint8_t proto = vxlan ? kProtoUdp : inner_ipv6 ? kProtoIpv6 : kProtoIpip;
  std::uint8_t* next;
  if (!e.outer_ipv6) {
    if (!d.source_ipv4) refuse(b, "reached over IPv4, but the delivery has no source_ipv4");
    ip[0] = 0x45;
    // Total length: per packet. Identification 0 and DF, always: RFC 6864
    // lets an atomic datagram (DF set, not a fragment) keep a constant ID,
    // and only such a one may (a fragmentable one needs an ID unique per
    // source, destination and protocol). An inner IPv4 packet that allows
    // fragmentation (QUIC never does) then meets a smaller link as a drop
    // and an ICMP error to this appliance, not as fragments.
    put16(ip + 6, 0x4000);
    ip[8] = d.ttl;
    ip[9] = proto;
    std::memcpy(ip + 12, d.source_ipv4->data(), 4);
    std::memcpy(ip + 16, b.ipv4->data(), 4);
    e.partial_sum = sum_words(ip, kIpv4HeaderLen);
    next = ip + kIpv4HeaderLen;
  } else {
    if (!d.source_ipv6) refuse(b, "reached over IPv6, but the delivery has no source_ipv6");
    ip[0] = 0x60;
    ip[6] = proto;
    ip[7] = d.ttl;
    std::memcpy(ip + 8, d.source_ipv6->data(), 16);
    std::memcpy(ip + 24, b.ipv6->data(), 16);
    next = ip + kIpv6HeaderLen;
  }
  if (vxlan) {
    std::uint8_t* udp = next;
    put16(udp + 2, d.vxlan_port);
    std::uint8_t* vx = udp + kUdpHeaderLen;
    vx[0] = 0x08;  // I: the VNI is valid
    vx[4] = std::uint8_t(d.vxlan_vni >> 16);
    vx[5] = std::uint8_t(d.vxlan_vni >> 8);
    vx[6] = std::uint8_t(d.vxlan_vni);
    std::uint8_t* inner = vx + kVxlanHeaderLen;
    std::memcpy(inner, b.vxlan_mac ? b.vxlan_mac->data() : d.vxlan_mac->data(), 6);
    std::memcpy(inner + 6, port_mac.data(), 6);
    put16(inner + 12, inner_ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
    next = inner + kEthernetLen;
    if (e.outer_ipv6) {
      // Pseudo-header addresses and next header, the destination port, the
      // VXLAN and inner Ethernet headers: what no packet changes.
      e.partial_sum = sum_words(ip + 8, 32) + kProtoUdp + d.vxlan_port +
                      sum_words(vx, kVxlanHeaderLen + kEthernetLen);
    }
  }
  e.prefix_len = std::uint8_t(next - p);
  // deliver_as copies the prefix by this length as a constant.
  if (e.prefix_len != encap_prefix_len(d.mode, e.outer_ipv6))
    throw std::logic_error("delivery: a prefix of " + std::to_string(e.prefix_len) + " octets, not " +
                           std::to_string(encap_prefix_len(d.mode, e.outer_ipv6)));
  return e;
}

}  // namespace

BackendTemplate build_backend_template(const DeliveryConfig& delivery, const BackendConfig& backend,
                                       const std::array<std::uint8_t, 6>& port_mac, std::uint16_t port_mtu) {
  BackendTemplate t;
  t.mode = delivery.mode;
  t.mtu = port_mtu;
  if (delivery.mode == DeliveryMode::kAsIs) return t;
  if (all_zero(backend.mac.data(), 6)) refuse(backend, "no mac (the next hop towards it)");
  if (delivery.mode == DeliveryMode::kL2) {
    std::memcpy(t.macs.data(), backend.mac.data(), 6);
    std::memcpy(t.macs.data() + 6, port_mac.data(), 6);
  } else {
    if (!backend.ipv4 && !backend.ipv6)
      refuse(backend, std::string("no address (ipv4 or ipv6) to ") + mode_name(delivery.mode) + " to");
    if (delivery.mode == DeliveryMode::kVxlan) {
      if (!backend.vxlan_mac && !delivery.vxlan_mac)
        refuse(backend, "no vxlan_mac, and the delivery has no fleet-wide vxlan_mac");
      if (delivery.vxlan_vni >> 24)
        refuse(backend, "vxlan_vni " + std::to_string(delivery.vxlan_vni) + " is over 24 bits");
    }
    t.encap[0] = build_encap(delivery, backend, port_mac, false);
    t.encap[1] = build_encap(delivery, backend, port_mac, true);
  }
  // The smallest packet every link must carry: 68 octets for IPv4 (RFC
  // 791), 1280 for IPv6 (RFC 8200 section 5), whose hosts ignore a "too
  // big" below that. An MTU that leaves less after the overhead would drop
  // such packets with a reply that cannot help.
  for (const bool inner_ipv6 : {false, true}) {
    const std::uint32_t minimum = inner_ipv6 ? 1280u : 68u;
    if (port_mtu < t.overhead(inner_ipv6) + minimum)
      refuse(backend, "the TX port's MTU " + std::to_string(port_mtu) + " leaves under " + std::to_string(minimum) +
                          " octets for " + (inner_ipv6 ? "IPv6" : "IPv4") + " after the " +
                          std::to_string(t.overhead(inner_ipv6)) + " of " + mode_name(delivery.mode) +
                          (inner_ipv6 ? " (RFC 8200 requires 1280)" : ""));
  }
  return t;
}

std::uint32_t build_icmp_too_big(const std::uint8_t* frame, std::uint32_t len, std::uint16_t l3_offset, bool ipv6,
                                 std::uint16_t next_hop_mtu, const std::array<std::uint8_t, 6>& port_mac,
                                 std::uint8_t* out, std::uint32_t out_cap, const std::uint8_t* source) {
  const std::uint32_t ip_header = ipv6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  if (l3_offset < kEthernetLen || len < l3_offset + ip_header) return 0;
  // Only a frame sent to this port answers: a promiscuous port also sees
  // frames flooded towards other hosts, and a reply in their name (their
  // MAC, their address) would teach the switch and the client a lie. A
  // frame to a group MAC (broadcast, multicast) has the group bit set and
  // is never the port's own.
  if (!std::equal(port_mac.begin(), port_mac.end(), frame)) return 0;
  const std::uint8_t* ip = frame + l3_offset;
  const std::uint8_t* src = ip + (ipv6 ? 8 : 12);
  const std::uint8_t* dst = ip + (ipv6 ? 24 : 16);
  const std::uint8_t* reply_src = source != nullptr ? source : dst;
  std::uint32_t ip_len;  // of the original, as far as the frame holds it
  if (!ipv6) {
    ip_len = get16(ip + 2);
    const std::uint32_t frag = get16(ip + 6);
    if (!(frag & 0x4000) || (frag & 0x1fff) || ip[9] == kProtoIcmp) return 0;
    if (src[0] == 0 || src[0] >= 224) return 0;  // 0.0.0.0/8, multicast, reserved, broadcast
    if (dst[0] == 0 || dst[0] >= 224) return 0;  // the reply's source must be a unicast address
  } else {
    ip_len = kIpv6HeaderLen + get16(ip + 4);
    if (ip[6] == kProtoIcmpv6) return 0;
    if (src[0] == 0xff || all_zero(src, 16)) return 0;
    if (dst[0] == 0xff || all_zero(dst, 16)) return 0;
  }
  ip_len = std::min(ip_len, len - l3_offset);
  const std::uint32_t max_ip = ipv6 ? kIcmpv6ErrorMaxIp : kIcmpv4ErrorMaxIp;
  const std::uint32_t quote = std::min(ip_len, max_ip - ip_header - kIcmpHeaderLen);
  const std::uint32_t icmp_len = kIcmpHeaderLen + quote;
  const std::uint32_t total = l3_offset + ip_header + icmp_len;
  if (total > out_cap) return 0;

  // Ethernet: back where it came from, from the port (whose MAC the frame
  // was sent to), on the same VLANs.
  std::memcpy(out, frame + 6, 6);
  std::memcpy(out + 6, port_mac.data(), 6);
  std::memcpy(out + 12, frame + 12, l3_offset - 12u);
  std::uint8_t* oip = out + l3_offset;
  std::memset(oip, 0, ip_header + kIcmpHeaderLen);
  std::uint8_t* icmp = oip + ip_header;
  std::memcpy(icmp + kIcmpHeaderLen, ip, quote);
  std::uint64_t sum = delivery_detail::sum_be16(icmp + kIcmpHeaderLen, quote);
  if (!ipv6) {
    oip[0] = 0x45;
    oip[1] = 0xc0;  // precedence internetwork control (RFC 1812 section 4.3.2.5)
    put16(oip + 2, ip_header + icmp_len);
    oip[8] = kReplyTtl;
    oip[9] = kProtoIcmp;
    std::memcpy(oip + 12, reply_src, 4);
    std::memcpy(oip + 16, src, 4);
    put16(oip + 10, std::uint16_t(~delivery_detail::fold(sum_words(oip, kIpv4HeaderLen))));
    icmp[0] = 3;  // destination unreachable
    icmp[1] = 4;  // fragmentation needed and DF set
    put16(icmp + 6, next_hop_mtu);
    sum += sum_words(icmp, kIcmpHeaderLen);
  } else {
    oip[0] = 0x60;
    put16(oip + 4, icmp_len);
    oip[6] = kProtoIcmpv6;
    oip[7] = kReplyTtl;
    std::memcpy(oip + 8, reply_src, 16);
    std::memcpy(oip + 24, src, 16);
    icmp[0] = 2;  // packet too big
    put16(icmp + 6, next_hop_mtu);  // a 32-bit MTU: the high half stays 0
    // RFC 4443 section 2.3: over the pseudo-header too (RFC 8200 8.1).
    sum += sum_words(oip + 8, 32) + icmp_len + kProtoIcmpv6 + sum_words(icmp, kIcmpHeaderLen);
  }
  put16(icmp + 2, std::uint16_t(~delivery_detail::fold(sum)));
  return total;
}

}  // namespace qs
