// Health probes on plain bytes (issue 39; dataplane/runtime/health_checks.h
// sends them): the probe, and the receive path's test for its answer.
//
// The probe is a QUIC long header of a reserved version (RFC 9000 section
// 15: versions of the form 0x?a?a?a?a are never a QUIC version), in a UDP
// datagram of 1,200 octets (section 14.1: a server answers only datagrams
// that could open a connection), from the appliance's own address to a
// service address and port. Any QUIC server answers it with Version
// Negotiation (section 6.1): no handshake, no state on the server, no change
// to it. The answer echoes the probe's connection IDs swapped (section
// 17.2.1: its DCID is the probe's SCID and its SCID the probe's DCID), and
// comes from the service address to the appliance's: the checker holds the
// CIDs of every probe out and believes only an answer that echoes them from
// where the probe went.
//
// Nothing here depends on DPDK: the checker builds probes into mbufs, the
// receivers test frames in them, the tests use arrays.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "dataplane/fastpath/delivery.h"

namespace qs {

inline constexpr std::uint32_t kProbeVersion = 0x1a2a3a4a;  // of the reserved form 0x?a?a?a?a
inline constexpr std::uint32_t kProbeCidLen = 8;
inline constexpr std::uint32_t kProbeUdpPayload = 1200;
// Ethernet, IPv6, UDP and the payload: the longest probe frame before delivery.
inline constexpr std::uint32_t kMaxProbeFrame = kEthernetLen + kIpv6HeaderLen + kUdpHeaderLen + kProbeUdpPayload;

// One probe's addresses: the appliance's own (source) to a service's.
struct ProbeAddresses {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> source{};  // IPv4 in the first 4 octets
  std::array<std::uint8_t, 16> target{};
  std::uint16_t source_port = 0;
  std::uint16_t target_port = 0;
};

// Writes the probe's Ethernet frame (MACs zero: the backend's delivery
// writes them; ethertype of the family) into out, which holds
// kMaxProbeFrame. Returns its length. The UDP checksum is valid.
inline std::uint32_t build_probe_frame(const ProbeAddresses& a, const std::uint8_t* dcid, const std::uint8_t* scid,
                                       std::uint8_t first_octet_bits, std::uint8_t* out) {
  using delivery_detail::put16;
  using delivery_detail::sum_be16;
  const std::uint32_t ip_header = a.ipv6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  const std::uint32_t udp_len = kUdpHeaderLen + kProbeUdpPayload;
  const std::uint32_t len = kEthernetLen + ip_header + udp_len;
  std::memset(out, 0, len);
  put16(out + 12, a.ipv6 ? 0x86dd : 0x0800);
  std::uint8_t* ip = out + kEthernetLen;
  std::uint32_t pseudo = 0;  // the UDP pseudo-header's sum, unfolded
  if (a.ipv6) {
    ip[0] = 0x60;
    put16(ip + 4, udp_len);
    ip[6] = 17;
    ip[7] = 64;
    std::memcpy(ip + 8, a.source.data(), 16);
    std::memcpy(ip + 24, a.target.data(), 16);
    pseudo = sum_be16(ip + 8, 32);
  } else {
    ip[0] = 0x45;
    put16(ip + 2, kIpv4HeaderLen + udp_len);
    put16(ip + 6, 0x4000);  // DF: the probe tests the path's MTU as the clients' packets do
    ip[8] = 64;
    ip[9] = 17;
    std::memcpy(ip + 12, a.source.data(), 4);
    std::memcpy(ip + 16, a.target.data(), 4);
    put16(ip + 10, std::uint16_t(~sum_be16(ip, kIpv4HeaderLen)));
    pseudo = sum_be16(ip + 12, 8);
  }
  std::uint8_t* udp = ip + ip_header;
  put16(udp, a.source_port);
  put16(udp + 2, a.target_port);
  put16(udp + 4, udp_len);
  std::uint8_t* q = udp + kUdpHeaderLen;
  // A long header (form and fixed bits set, RFC 9000 17.2); the rest of the
  // first octet is the version's to define, any value will do.
  q[0] = std::uint8_t(0xc0 | (first_octet_bits & 0x3f));
  q[1] = std::uint8_t(kProbeVersion >> 24);
  q[2] = std::uint8_t(kProbeVersion >> 16);
  q[3] = std::uint8_t(kProbeVersion >> 8);
  q[4] = std::uint8_t(kProbeVersion);
  q[5] = kProbeCidLen;
  std::memcpy(q + 6, dcid, kProbeCidLen);
  q[6 + kProbeCidLen] = kProbeCidLen;
  std::memcpy(q + 7 + kProbeCidLen, scid, kProbeCidLen);
  // The rest stays zero: padding to the size a server answers.
  pseudo += 17 + udp_len + sum_be16(udp, udp_len);
  const std::uint16_t c = std::uint16_t(~delivery_detail::fold32(pseudo));
  put16(udp + 6, c ? c : 0xffff);
  return len;
}

// A Version Negotiation to the probes' port, as the receive path finds it.
struct ProbeAnswer {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> source{};  // who sent it (IPv4 in the first 4 octets)
  std::array<std::uint8_t, 16> destination{};
  std::uint16_t source_port = 0;
  std::uint8_t dcid_len = 0, scid_len = 0;
  std::array<std::uint8_t, 20> dcid{}, scid{};
};

namespace probe_detail {

// The UDP payload of an IPv4 or IPv6 datagram to `port` in the frame (after
// at most two VLAN tags), or null. No extension headers, no fragments.
inline const std::uint8_t* udp_payload_to(const std::uint8_t* frame, std::uint32_t len, std::uint16_t port,
                                          std::uint32_t& payload_len, const std::uint8_t*& ip, bool& ipv6) {
  using delivery_detail::get16;
  std::uint32_t off = 12;
  if (len < kEthernetLen) return nullptr;
  std::uint32_t type = get16(frame + off);
  for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8); ++tags) {
    off += 4;
    if (len < off + 2) return nullptr;
    type = get16(frame + off);
  }
  off += 2;
  ip = frame + off;
  std::uint32_t header;
  if (type == 0x0800) {
    if (len < off + kIpv4HeaderLen || (ip[0] >> 4) != 4 || ip[9] != 17 || (get16(ip + 6) & 0x3fff)) return nullptr;
    header = (ip[0] & 0x0fu) * 4u;
    ipv6 = false;
  } else if (type == 0x86dd) {
    if (len < off + kIpv6HeaderLen || (ip[0] >> 4) != 6 || ip[6] != 17) return nullptr;
    header = kIpv6HeaderLen;
    ipv6 = true;
  } else {
    return nullptr;
  }
  if (header < kIpv4HeaderLen || len < off + header + kUdpHeaderLen) return nullptr;
  const std::uint8_t* udp = ip + header;
  if (get16(udp + 2) != port) return nullptr;
  const std::uint32_t udp_len = get16(udp + 4);
  if (udp_len < kUdpHeaderLen || udp_len > len - off - header) return nullptr;
  payload_len = udp_len - kUdpHeaderLen;
  return udp + kUdpHeaderLen;
}

}  // namespace probe_detail

// Whether the frame is a Version Negotiation (a long header of version 0,
// RFC 9000 17.2.1) to UDP port `port`, with connection IDs of at most 20
// octets that fit; fills *answer when given. The receivers' test, before
// the exception path: a few loads for any other frame.
inline bool parse_probe_answer(const std::uint8_t* frame, std::uint32_t len, std::uint16_t port,
                               ProbeAnswer* answer = nullptr) {
  std::uint32_t n = 0;
  const std::uint8_t* ip = nullptr;
  bool ipv6 = false;
  const std::uint8_t* q = probe_detail::udp_payload_to(frame, len, port, n, ip, ipv6);
  if (q == nullptr || n < 7 || !(q[0] & 0x80) || q[1] != 0 || q[2] != 0 || q[3] != 0 || q[4] != 0) return false;
  const std::uint32_t dl = q[5];
  if (dl > 20 || n < 7 + dl) return false;
  const std::uint32_t sl = q[6 + dl];
  if (sl > 20 || n < 7 + dl + sl) return false;
  if (answer == nullptr) return true;
  answer->ipv6 = ipv6;
  answer->source = {};
  answer->destination = {};
  if (ipv6) {
    std::memcpy(answer->source.data(), ip + 8, 16);
    std::memcpy(answer->destination.data(), ip + 24, 16);
  } else {
    std::memcpy(answer->source.data(), ip + 12, 4);
    std::memcpy(answer->destination.data(), ip + 16, 4);
  }
  const std::uint8_t* udp = q - kUdpHeaderLen;
  answer->source_port = std::uint16_t(delivery_detail::get16(udp));
  answer->dcid_len = std::uint8_t(dl);
  answer->scid_len = std::uint8_t(sl);
  answer->dcid = {};
  answer->scid = {};
  std::memcpy(answer->dcid.data(), q + 6, dl);
  std::memcpy(answer->scid.data(), q + 7 + dl, sl);
  return true;
}

}  // namespace qs
