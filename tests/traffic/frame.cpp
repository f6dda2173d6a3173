#include "tests/traffic/frame.h"

#include <cstdio>
#include <stdexcept>

#include "tests/traffic/checksum.h"

namespace qs::traffic {

namespace {

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(std::uint8_t(v >> 8));
  out.push_back(std::uint8_t(v));
}

void set16(std::uint8_t* at, std::uint16_t v) {
  at[0] = std::uint8_t(v >> 8);
  at[1] = std::uint8_t(v);
}

std::uint16_t get16(const std::uint8_t* at) { return std::uint16_t(at[0] << 8 | at[1]); }

}  // namespace

std::string IpAddress::to_string() const {
  char text[48];
  if (!v6) {
    std::snprintf(text, sizeof text, "%u.%u.%u.%u", bytes[0], bytes[1], bytes[2], bytes[3]);
    return text;
  }
  // Full form (no :: compression); only used in messages and summaries.
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(text, sizeof text, "%s%x", i ? ":" : "", unsigned(bytes[i] << 8 | bytes[i + 1]));
    out += text;
  }
  return out;
}

std::vector<std::uint8_t> build_udp_frame(const L2Header& l2, const IpAddress& src_ip, std::uint16_t src_port,
                                          const IpAddress& dst_ip, std::uint16_t dst_port,
                                          std::span<const std::uint8_t> payload, std::uint16_t ip_id,
                                          std::uint32_t flow_label) {
  if (src_ip.v6 != dst_ip.v6) throw std::invalid_argument("build_udp_frame: mixed IPv4/IPv6 addresses");
  const std::size_t udp_len = 8 + payload.size();
  const std::size_t ip_header_len = src_ip.v6 ? 40 : 20;
  if (udp_len + (src_ip.v6 ? 0 : ip_header_len) > 0xffff)
    throw std::invalid_argument("build_udp_frame: datagram too large for an IP packet");

  std::vector<std::uint8_t> out;
  out.reserve(14 + 8 + ip_header_len + udp_len);
  out.insert(out.end(), l2.dst.begin(), l2.dst.end());
  out.insert(out.end(), l2.src.begin(), l2.src.end());
  if (l2.outer_vlan) {
    put16(out, kEtherTypeQinQ);
    put16(out, l2.outer_vlan & 0x0fff);
  }
  if (l2.vlan || l2.outer_vlan) {
    put16(out, kEtherTypeVlan);
    put16(out, l2.vlan & 0x0fff);
  }
  put16(out, src_ip.v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);

  const std::size_t l3 = out.size();
  if (src_ip.v6) {
    const std::uint32_t first = 0x60000000u | (flow_label & 0xfffff);
    put16(out, std::uint16_t(first >> 16));
    put16(out, std::uint16_t(first));
    put16(out, std::uint16_t(udp_len));
    out.push_back(kIpProtoUdp);
    out.push_back(64);  // hop limit
  } else {
    out.push_back(0x45);  // version 4, 5-word header
    out.push_back(0);     // DSCP/ECN
    put16(out, std::uint16_t(ip_header_len + udp_len));
    put16(out, ip_id);
    put16(out, 0x4000);  // don't fragment: QUIC sets DF (RFC 9000 section 14)
    out.push_back(64);   // TTL
    out.push_back(kIpProtoUdp);
    put16(out, 0);  // checksum, below
  }
  out.insert(out.end(), src_ip.bytes.begin(), src_ip.bytes.begin() + std::ptrdiff_t(src_ip.size()));
  out.insert(out.end(), dst_ip.bytes.begin(), dst_ip.bytes.begin() + std::ptrdiff_t(dst_ip.size()));
  if (!src_ip.v6) set16(&out[l3 + 10], ipv4_header_checksum(&out[l3], 20));

  const std::size_t l4 = out.size();
  put16(out, src_port);
  put16(out, dst_port);
  put16(out, std::uint16_t(udp_len));
  put16(out, 0);  // checksum, below
  out.insert(out.end(), payload.begin(), payload.end());
  std::uint16_t sum = udp_checksum(src_ip.bytes.data(), dst_ip.bytes.data(), src_ip.size(), &out[l4], udp_len);
  if (sum == 0) sum = 0xffff;  // 0 means "no checksum" in IPv4 and is forbidden in IPv6
  set16(&out[l4 + 6], sum);
  return out;
}

UdpFrameView parse_udp_frame(std::span<const std::uint8_t> frame) {
  UdpFrameView view;
  if (frame.size() < 14) return view;
  std::size_t at = 12;
  std::uint16_t type = get16(&frame[at]);
  at += 2;
  while (type == kEtherTypeVlan || type == kEtherTypeQinQ) {
    if (frame.size() < at + 4 || view.vlan_ids.size() == 2) return view;
    view.vlan_ids.push_back(get16(&frame[at]) & 0x0fff);
    type = get16(&frame[at + 2]);
    at += 4;
  }
  view.l3_offset = at;
  std::size_t udp_len_from_ip = 0;
  if (type == kEtherTypeIpv4) {
    if (frame.size() < at + 20 || (frame[at] >> 4) != 4) return view;
    const std::size_t ihl = std::size_t(frame[at] & 0x0f) * 4;
    const std::size_t total = get16(&frame[at + 2]);
    if (ihl < 20 || frame[at + 9] != kIpProtoUdp || total < ihl || frame.size() < at + total) return view;
    view.l4_offset = at + ihl;
    udp_len_from_ip = total - ihl;
  } else if (type == kEtherTypeIpv6) {
    if (frame.size() < at + 40 || (frame[at] >> 4) != 6 || frame[at + 6] != kIpProtoUdp) return view;
    view.v6 = true;
    view.l4_offset = at + 40;
    udp_len_from_ip = get16(&frame[at + 4]);
    if (frame.size() < view.l4_offset + udp_len_from_ip) return view;
  } else {
    return view;
  }
  if (udp_len_from_ip < 8) return view;
  const std::uint8_t* udp = &frame[view.l4_offset];
  const std::size_t udp_len = get16(udp + 4);
  if (udp_len < 8 || udp_len > udp_len_from_ip) return view;
  view.src_port = get16(udp);
  view.dst_port = get16(udp + 2);
  view.payload_offset = view.l4_offset + 8;
  view.payload_len = udp_len - 8;
  view.ok = true;
  return view;
}

}  // namespace qs::traffic
