// Frame -> QUIC header fields, on a plain byte buffer (the dataplane passes an
// mbuf's data; the tools a pcap record).
//
// Layers: Ethernet II with up to two VLAN tags (802.1Q 0x8100, 802.1ad
// 0x88a8, in any combination); IPv4 with options, or IPv6 with hop-by-hop,
// routing, destination-options and fragment extension headers; UDP; then the
// QUIC version-independent invariants (RFC 8999) of the first QUIC packet in
// the datagram (coalesced packets are routed by the first).
//
// Which datagrams are QUIC: UDP whose destination port is one of the
// profile's quic_ports (client -> server, what an appliance in front of
// servers steers), or failing that whose source port is (server -> client,
// so that captures of both directions parse; from_quic_port tells them apart).
//
// Every frame gets a verdict and never a read past `len`:
//   kQuic       long or short header, DCID located (and SCID for long ones)
//   kNotQuic    UDP, neither port is a QUIC port
//   kNotUdp     not IP, IP carrying another protocol, or a non-first IP
//               fragment (it has no UDP header; `fragment` is set)
//   kMalformed  `reason` names the field that did not fit or made no sense
// Fields are read within min(frame, the IP header's declared length). A frame
// whose headers all parse but that is shorter than its IP header declares is
// kMalformed/kTruncatedPayload (every field found so far is still filled in).
// Longer frames (Ethernet padding) are fine. A frame whose bytes are not all
// in one buffer (a multi-segment mbuf) is parsed on the first `len` bytes
// with `frame_len` its whole length: it is judged on what that first part
// holds, and is not truncated for lacking the rest. IPv4 header checksums are not
// verified (NICs do that, and a bad one changes no routing decision).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "steering/steering_config.h"

namespace qs {

enum class Verdict : std::uint8_t { kQuic, kNotQuic, kNotUdp, kMalformed };

enum class MalformedReason : std::uint8_t {
  kNone,
  kTruncatedEthernet,      // shorter than the 14-octet Ethernet header
  kTruncatedVlan,          // a VLAN tag cut short
  kTooManyVlans,           // a third VLAN tag
  kTruncatedIpv4,          // shorter than the 20-octet IPv4 header
  kIpVersionMismatch,      // the IP version nibble contradicts the EtherType
  kBadIpv4HeaderLength,    // IHL below 5
  kTruncatedIpv4Options,   // IHL reaches past the frame
  kBadIpv4TotalLength,     // total length smaller than the header
  kTruncatedIpv6,          // shorter than the 40-octet IPv6 header
  kTruncatedIpv6Extension, // an extension header cut short
  kTooManyIpv6Extensions,  // more than kMaxIpv6Extensions extension headers
  kTruncatedUdp,           // shorter than the 8-octet UDP header
  kBadUdpLength,           // UDP length below 8 or past the IP payload
  kEmptyUdpPayload,        // a QUIC port but not even a first octet
  kTruncatedVersion,       // long header: version cut short
  kTruncatedDcidLength,    // long header: no DCID length octet
  kCidTooLong,             // a v1/v2 connection ID over 20 octets
  kTruncatedDcid,          // the DCID runs past the datagram
  kEmptyShortDcid,         // short header ends after its first octet, a DCID was expected
  kTruncatedScidLength,    // long header: no SCID length octet
  kTruncatedScid,          // the SCID runs past the datagram
  kTruncatedPayload,       // frame shorter than the IP header declares
};

enum class QuicForm : std::uint8_t { kNone, kLong, kShort };
enum class QuicPacketType : std::uint8_t {
  kNone,  // not QUIC, or a long header of a version we do not know
  kInitial,
  kZeroRtt,
  kHandshake,
  kRetry,
  kVersionNegotiation,
  kOneRtt,
};

inline constexpr std::uint32_t kQuicVersion1 = 0x00000001;  // RFC 9000
inline constexpr std::uint32_t kQuicVersion2 = 0x6b3343cf;  // RFC 9369
inline constexpr unsigned kMaxIpv6Extensions = 8;

struct ParsedPacket {
  Verdict verdict = Verdict::kMalformed;
  MalformedReason reason = MalformedReason::kNone;
  std::uint8_t ip_version = 0;  // 0 (not IP), 4 or 6
  std::uint8_t ip_proto = 0;    // after IPv6 extension headers
  bool fragment = false;        // an IP fragment, first or not
  bool from_quic_port = false;  // QUIC recognised by the source port
  QuicForm form = QuicForm::kNone;
  QuicPacketType type = QuicPacketType::kNone;
  // Initial or 0-RTT of v1/v2, or any long header of an unknown version:
  // the servers speak v1/v2 only, so such a packet belongs to no connection
  // and can only be an attempt at a new one (the shed-new policy drops these).
  bool opens_connection = false;
  std::uint8_t dcid_len = 0;
  std::uint8_t scid_len = 0;     // long headers only
  std::uint16_t l3_offset = 0;   // IP header
  std::uint16_t l4_offset = 0;   // UDP header (0: none)
  std::uint16_t quic_offset = 0; // first QUIC octet (0: none)
  std::uint16_t dcid_offset = 0;
  std::uint16_t scid_offset = 0;
  std::uint16_t src_port = 0;    // host order; 0 without a UDP header
  std::uint16_t dst_port = 0;
  std::uint32_t version = 0;     // long headers only

  bool is_quic() const { return verdict == Verdict::kQuic; }
  // The addresses, as the frame holds them (network order); 4 or 16 octets.
  std::size_t addr_len() const { return ip_version == 6 ? 16 : 4; }
  const std::uint8_t* src_addr(const std::uint8_t* frame) const {
    return frame + l3_offset + (ip_version == 6 ? 8 : 12);
  }
  const std::uint8_t* dst_addr(const std::uint8_t* frame) const {
    return frame + l3_offset + (ip_version == 6 ? 24 : 16);
  }
  const std::uint8_t* dcid(const std::uint8_t* frame) const { return frame + dcid_offset; }
  const std::uint8_t* scid(const std::uint8_t* frame) const { return frame + scid_offset; }
};

// What the parser needs from the profile, in a form cheap to consult.
class ParserConfig {
 public:
  static constexpr std::size_t kMaxPorts = 16;
  // Marks a config-rotation codepoint whose DCIDs self-encode their length.
  static constexpr std::uint8_t kSelfEncodedLength = 0xff;

  ParserConfig() : ParserConfig(SteeringConfig{}) {}
  // Throws std::invalid_argument on more than kMaxPorts ports, port 0, a
  // short_dcid_len over 20 or a QUIC-LB config_id over 6.
  explicit ParserConfig(const SteeringConfig& config);

  // Every packet asks once or twice: all 16 slots are compared at once, the
  // unused ones hold 0, which is why port 0 is tested apart.
  bool is_quic_port(std::uint16_t port) const {
#if defined(__SSE2__)
    const __m128i p = _mm_set1_epi16(static_cast<short>(port));
    const __m128i lo = _mm_cmpeq_epi16(p, _mm_load_si128(reinterpret_cast<const __m128i*>(ports_.data())));
    const __m128i hi = _mm_cmpeq_epi16(p, _mm_load_si128(reinterpret_cast<const __m128i*>(ports_.data() + 8)));
    return (_mm_movemask_epi8(_mm_or_si128(lo, hi)) != 0) & (port != 0);
#else
    for (std::size_t i = 0; i < port_count_; ++i)
      if (ports_[i] == port) return true;
    return false;
#endif
  }
  // The short-header DCID length a first DCID octet announces: the QUIC-LB
  // config at its codepoint (its cid_len, or the self-encoded length), the
  // reserved codepoint 0b111 (self-encoded, draft 3.2) when QUIC-LB is in
  // use, otherwise short_dcid_len.
  std::uint8_t short_dcid_len(std::uint8_t first_dcid_octet) const {
    const std::uint8_t rule = by_codepoint_[first_dcid_octet >> 5];
    return rule == kSelfEncodedLength ? std::uint8_t((first_dcid_octet & 0x1f) + 1) : rule;
  }
  std::uint8_t default_short_dcid_len() const { return default_short_len_; }

 private:
  static_assert(kMaxPorts == 16, "is_quic_port compares two vectors of eight");
  alignas(16) std::array<std::uint16_t, kMaxPorts> ports_{};  // unused slots: 0
  std::size_t port_count_ = 0;
  std::array<std::uint8_t, 8> by_codepoint_{};
  std::uint8_t default_short_len_ = 8;
};

std::string_view to_string(Verdict v);
std::string_view to_string(MalformedReason r);
std::string_view to_string(QuicForm f);
std::string_view to_string(QuicPacketType t);  // "-" for kNone

namespace parser_detail {

inline std::uint16_t be16(const std::uint8_t* p) { return std::uint16_t(p[0] << 8 | p[1]); }
inline std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}

// Long-header packet type from the two type bits (RFC 9000 17.2, RFC 9369 3.2).
inline QuicPacketType long_type(std::uint32_t version, std::uint8_t first) {
  const unsigned bits = (first >> 4) & 3;
  if (version == kQuicVersion1) {
    constexpr QuicPacketType v1[4] = {QuicPacketType::kInitial, QuicPacketType::kZeroRtt,
                                      QuicPacketType::kHandshake, QuicPacketType::kRetry};
    return v1[bits];
  }
  constexpr QuicPacketType v2[4] = {QuicPacketType::kRetry, QuicPacketType::kInitial,
                                    QuicPacketType::kZeroRtt, QuicPacketType::kHandshake};
  return v2[bits];
}

inline void parse_quic(const std::uint8_t* __restrict data, std::size_t begin, std::size_t end,
                       const ParserConfig& config, ParsedPacket& r) {
  const auto fail = [&r](MalformedReason why) {
    r.verdict = Verdict::kMalformed;
    r.reason = why;
  };
  r.quic_offset = std::uint16_t(begin);
  if (end <= begin) return fail(MalformedReason::kEmptyUdpPayload);
  const std::size_t avail = end - begin;
  const std::uint8_t* q = data + begin;
  if (q[0] & 0x80) {
    r.form = QuicForm::kLong;
    if (avail < 5) return fail(MalformedReason::kTruncatedVersion);
    r.version = be32(q + 1);
    const bool known = r.version == kQuicVersion1 || r.version == kQuicVersion2;
    // RFC 8999 lets other versions (Version Negotiation included) carry
    // connection IDs of up to 255 octets; v1 and v2 cap them at 20.
    if (avail < 6) return fail(MalformedReason::kTruncatedDcidLength);
    const std::uint8_t dcid_len = q[5];
    r.dcid_offset = std::uint16_t(begin + 6);
    r.dcid_len = dcid_len;
    if (known && dcid_len > 20) return fail(MalformedReason::kCidTooLong);
    if (avail < 6u + dcid_len) return fail(MalformedReason::kTruncatedDcid);
    if (avail < 7u + dcid_len) return fail(MalformedReason::kTruncatedScidLength);
    const std::uint8_t scid_len = q[6 + dcid_len];
    r.scid_offset = std::uint16_t(begin + 7 + dcid_len);
    r.scid_len = scid_len;
    if (known && scid_len > 20) return fail(MalformedReason::kCidTooLong);
    if (avail < 7u + dcid_len + scid_len) return fail(MalformedReason::kTruncatedScid);
    if (r.version == 0) {
      r.type = QuicPacketType::kVersionNegotiation;
    } else if (known) {
      r.type = long_type(r.version, q[0]);
      r.opens_connection =
          r.type == QuicPacketType::kInitial || r.type == QuicPacketType::kZeroRtt;
    } else {
      r.opens_connection = true;  // see ParsedPacket::opens_connection
    }
  } else {
    r.form = QuicForm::kShort;
    r.type = QuicPacketType::kOneRtt;
    r.dcid_offset = std::uint16_t(begin + 1);
    if (avail < 2) {
      // Zero-length connection IDs are legal when the servers use them.
      if (config.default_short_dcid_len() == 0) return void(r.verdict = Verdict::kQuic);
      return fail(MalformedReason::kEmptyShortDcid);
    }
    // Server -> client, the DCID is the client's own CID: QUIC-LB says
    // nothing about its first octet, so a client CID that happens to start
    // with a config's codepoint (or 0b111) must not be measured by it.
    const std::uint8_t dcid_len =
        r.from_quic_port ? config.default_short_dcid_len() : config.short_dcid_len(q[1]);
    r.dcid_len = dcid_len;
    if (dcid_len > 20) return fail(MalformedReason::kCidTooLong);
    if (avail < 1u + dcid_len) return fail(MalformedReason::kTruncatedDcid);
  }
  r.verdict = Verdict::kQuic;
}

// Every layer the parser knows, for any frame: what parse_packet falls back
// to when parse_plain_udp declines. `r` arrives zeroed, `len` at most 0xffff.
// Out of line: the common frame never comes here, and the burst loop that
// inlines parse_packet stays small.
[[gnu::noinline]] inline void parse_layers(const std::uint8_t* __restrict data, std::size_t len,
                                          const ParserConfig& config, ParsedPacket& r,
                                          std::size_t frame_len) {
  const auto fail = [&r](MalformedReason why) {
    r.verdict = Verdict::kMalformed;
    r.reason = why;
  };
  // Ethernet and VLAN tags.
  if (len < 14) return fail(MalformedReason::kTruncatedEthernet);
  std::size_t off = 14;
  std::uint16_t ether_type = be16(data + 12);
  for (unsigned tags = 0; ether_type == 0x8100 || ether_type == 0x88a8; ++tags) {
    if (tags == 2) return fail(MalformedReason::kTooManyVlans);
    if (len < off + 4) return fail(MalformedReason::kTruncatedVlan);
    ether_type = be16(data + off + 2);
    off += 4;
  }
  r.l3_offset = std::uint16_t(off);

  // IP. ip_end is where the IP header says the packet ends; fields are read
  // only below min(len, ip_end).
  std::size_t ip_end;
  std::size_t l4;
  bool later_fragment = false;
  if (ether_type == 0x0800) {
    if (len < off + 20) return fail(MalformedReason::kTruncatedIpv4);
    r.ip_version = 4;
    if ((data[off] >> 4) != 4) return fail(MalformedReason::kIpVersionMismatch);
    const std::size_t ihl = std::size_t(data[off] & 0x0f) * 4;
    if (ihl < 20) return fail(MalformedReason::kBadIpv4HeaderLength);
    if (len < off + ihl) return fail(MalformedReason::kTruncatedIpv4Options);
    const std::size_t total = be16(data + off + 2);
    if (total < ihl) return fail(MalformedReason::kBadIpv4TotalLength);
    ip_end = off + total;
    const std::uint16_t frag = be16(data + off + 6);
    r.fragment = (frag & 0x3fff) != 0;  // MF or an offset
    later_fragment = (frag & 0x1fff) != 0;
    r.ip_proto = data[off + 9];
    l4 = off + ihl;
  } else if (ether_type == 0x86dd) {
    if (len < off + 40) return fail(MalformedReason::kTruncatedIpv6);
    r.ip_version = 6;
    if ((data[off] >> 4) != 6) return fail(MalformedReason::kIpVersionMismatch);
    ip_end = off + 40 + be16(data + off + 4);
    const std::size_t bound = len < ip_end ? len : ip_end;
    std::uint8_t next = data[off + 6];
    l4 = off + 40;
    for (unsigned count = 0;; ++count) {
      const bool generic = next == 0 || next == 43 || next == 60;  // HbH, routing, dest opts
      if (!generic && next != 44) break;
      if (count == kMaxIpv6Extensions) return fail(MalformedReason::kTooManyIpv6Extensions);
      if (bound < l4 + 8) return fail(MalformedReason::kTruncatedIpv6Extension);
      std::size_t ext_len = 8;
      if (generic) {
        ext_len = (std::size_t(data[l4 + 1]) + 1) * 8;
        if (bound < l4 + ext_len) return fail(MalformedReason::kTruncatedIpv6Extension);
      } else {
        r.fragment = true;
        if ((be16(data + l4 + 2) & 0xfff8) != 0) later_fragment = true;
      }
      next = data[l4];
      l4 += ext_len;
      if (later_fragment) break;  // what follows is not a header
    }
    r.ip_proto = next;
  } else {
    r.verdict = Verdict::kNotUdp;  // ARP, LLDP, MPLS, ...
    return;
  }
  const bool frame_short = (frame_len > len ? frame_len : len) < ip_end;
  // Fields are read below min(len, ip_end) even when the frame is whole: the
  // rest of a multi-segment frame is not in this buffer.
  const std::size_t bound = len < ip_end ? len : ip_end;
  const auto finish = [&](Verdict v) {
    r.verdict = v;
    if (frame_short) {
      r.verdict = Verdict::kMalformed;
      r.reason = MalformedReason::kTruncatedPayload;
    }
  };
  if (r.ip_proto != 17 || later_fragment) return finish(Verdict::kNotUdp);

  // UDP.
  if (bound < l4 + 8) return fail(MalformedReason::kTruncatedUdp);
  r.l4_offset = std::uint16_t(l4);
  r.src_port = be16(data + l4);
  r.dst_port = be16(data + l4 + 2);
  const std::size_t udp_len = be16(data + l4 + 4);
  std::size_t udp_end = bound;
  // A first fragment carries only the start of the datagram: its UDP length
  // legitimately exceeds the IP payload.
  if (udp_len < 8 || (!r.fragment && l4 + udp_len > ip_end))
    return fail(MalformedReason::kBadUdpLength);
  if (!r.fragment && l4 + udp_len < udp_end) udp_end = l4 + udp_len;

  if (!config.is_quic_port(r.dst_port)) {
    if (!config.is_quic_port(r.src_port)) return finish(Verdict::kNotQuic);
    r.from_quic_port = true;
  }
  parse_quic(data, l4 + 8, udp_end, config, r);
  if (r.verdict == Verdict::kMalformed) return;
  finish(Verdict::kQuic);
}

// The frame nearly every packet is: untagged Ethernet II, IPv4 without
// options or IPv6 without extension headers, not a fragment, UDP whose
// length fits the IP packet, and the frame holds that whole packet. For
// these every check of parse_layers passes, so a few compares prove them
// all and the fields are read at fixed offsets (in the ring_loop demo the
// parser's instructions per packet went from 164 to 128).
// Any other frame is declined (false, `r` untouched) and parse_layers judges
// it. packet_parser_test compares the two on every fixture and thousands of
// mutations of them.
[[gnu::always_inline]] inline bool parse_plain_udp(const std::uint8_t* __restrict data,
                                                   std::size_t len, const ParserConfig& config,
                                                   ParsedPacket& r) {
  constexpr std::size_t kIpv4Udp = 14 + 20;
  constexpr std::size_t kIpv6Udp = 14 + 40;
  if (len < kIpv4Udp + 8) return false;
  const std::uint16_t ether_type = be16(data + 12);
  std::size_t l4;
  std::size_t ip_end;
  std::uint8_t version;
  if (ether_type == 0x0800) {
    // Version 4 with IHL 5; no MF flag or offset (DF may be set); UDP.
    if (data[14] != 0x45 || (be16(data + 20) & 0x3fff) != 0 || data[23] != 17) return false;
    l4 = kIpv4Udp;
    ip_end = 14 + std::size_t(be16(data + 16));
    version = 4;
  } else if (ether_type == 0x86dd) {
    if (len < kIpv6Udp + 8 || (data[14] >> 4) != 6 || data[20] != 17) return false;
    l4 = kIpv6Udp;
    ip_end = kIpv6Udp + std::size_t(be16(data + 18));
    version = 6;
  } else {
    return false;
  }
  const std::size_t udp_len = be16(data + l4 + 4);
  // Also proves the IP packet holds a UDP header: l4 + 8 <= ip_end <= len.
  if (ip_end > len || udp_len < 8 || l4 + udp_len > ip_end) return false;
  r.l3_offset = 14;
  r.ip_version = version;
  r.ip_proto = 17;
  r.l4_offset = std::uint16_t(l4);
  r.src_port = be16(data + l4);
  r.dst_port = be16(data + l4 + 2);
  if (!config.is_quic_port(r.dst_port)) {
    if (!config.is_quic_port(r.src_port)) {
      r.verdict = Verdict::kNotQuic;
      return true;
    }
    r.from_quic_port = true;
  }
  parse_quic(data, l4 + 8, l4 + udp_len, config, r);
  return true;
}

}  // namespace parser_detail

// Fills `r` in place: callers parse straight into their burst array, and no
// struct assembled from narrow stores is copied with wide loads (a
// store-forwarding stall per packet).
[[gnu::always_inline]] inline void parse_packet(const std::uint8_t* __restrict data,
                                               std::size_t len, const ParserConfig& config,
                                               ParsedPacket& r, std::size_t frame_len = 0) {
  using namespace parser_detail;
  r = ParsedPacket{};
  // Offsets are 16-bit; no IP packet (64 KiB) plus its link header needs more.
  if (len > 0xffff) len = 0xffff;
  if (parse_plain_udp(data, len, config, r)) return;
  parse_layers(data, len, config, r, frame_len);
}

inline ParsedPacket parse_packet(const std::uint8_t* data, std::size_t len,
                                 const ParserConfig& config) {
  ParsedPacket r;
  parse_packet(data, len, config, r);
  return r;
}

}  // namespace qs
