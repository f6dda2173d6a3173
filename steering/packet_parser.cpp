#include "steering/packet_parser.h"

#include "steering/quic_lb.h"

namespace qs {

ParserConfig::ParserConfig(const SteeringConfig& config) {
  if (config.quic_ports.size() > kMaxPorts)
    throw std::invalid_argument("steering.quic_ports: at most " + std::to_string(kMaxPorts) +
                                " ports, got " + std::to_string(config.quic_ports.size()));
  for (std::uint16_t port : config.quic_ports) {
    if (port == 0) throw std::invalid_argument("steering.quic_ports: port 0 is not a port");
    if (!is_quic_port(port)) ports_[port_count_++] = port;
  }
  if (config.short_dcid_len > kMaxCidLen)
    throw std::invalid_argument("steering.short_dcid_len: at most 20, got " +
                                std::to_string(config.short_dcid_len));
  default_short_len_ = config.short_dcid_len;
  by_codepoint_.fill(config.short_dcid_len);
  if (!config.quic_lb.empty()) by_codepoint_[kUnroutableConfigId] = kSelfEncodedLength;
  for (const QuicLbConfig& lb : config.quic_lb) {
    if (lb.config_id >= kUnroutableConfigId)
      throw std::invalid_argument("steering.quic_lb: config_id must be 0..6, got " +
                                  std::to_string(lb.config_id));
    by_codepoint_[lb.config_id] = lb.len_self_encode ? kSelfEncodedLength : lb.cid_len();
  }
}

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::kQuic: return "quic";
    case Verdict::kNotQuic: return "not_quic";
    case Verdict::kNotUdp: return "not_udp";
    case Verdict::kMalformed: return "malformed";
  }
  return "?";
}

std::string_view to_string(MalformedReason r) {
  switch (r) {
    case MalformedReason::kNone: return "none";
    case MalformedReason::kTruncatedEthernet: return "truncated_ethernet";
    case MalformedReason::kTruncatedVlan: return "truncated_vlan";
    case MalformedReason::kTooManyVlans: return "too_many_vlans";
    case MalformedReason::kTruncatedIpv4: return "truncated_ipv4";
    case MalformedReason::kIpVersionMismatch: return "ip_version_mismatch";
    case MalformedReason::kBadIpv4HeaderLength: return "bad_ipv4_header_length";
    case MalformedReason::kTruncatedIpv4Options: return "truncated_ipv4_options";
    case MalformedReason::kBadIpv4TotalLength: return "bad_ipv4_total_length";
    case MalformedReason::kTruncatedIpv6: return "truncated_ipv6";
    case MalformedReason::kTruncatedIpv6Extension: return "truncated_ipv6_extension";
    case MalformedReason::kTooManyIpv6Extensions: return "too_many_ipv6_extensions";
    case MalformedReason::kTruncatedUdp: return "truncated_udp";
    case MalformedReason::kBadUdpLength: return "bad_udp_length";
    case MalformedReason::kEmptyUdpPayload: return "empty_udp_payload";
    case MalformedReason::kTruncatedVersion: return "truncated_version";
    case MalformedReason::kTruncatedDcidLength: return "truncated_dcid_length";
    case MalformedReason::kCidTooLong: return "cid_too_long";
    case MalformedReason::kTruncatedDcid: return "truncated_dcid";
    case MalformedReason::kEmptyShortDcid: return "empty_short_dcid";
    case MalformedReason::kTruncatedScidLength: return "truncated_scid_length";
    case MalformedReason::kTruncatedScid: return "truncated_scid";
    case MalformedReason::kTruncatedPayload: return "truncated_payload";
  }
  return "?";
}

std::string_view to_string(QuicForm f) {
  switch (f) {
    case QuicForm::kNone: return "-";
    case QuicForm::kLong: return "long";
    case QuicForm::kShort: return "short";
  }
  return "?";
}

std::string_view to_string(QuicPacketType t) {
  switch (t) {
    case QuicPacketType::kNone: return "-";
    case QuicPacketType::kInitial: return "initial";
    case QuicPacketType::kZeroRtt: return "0rtt";
    case QuicPacketType::kHandshake: return "handshake";
    case QuicPacketType::kRetry: return "retry";
    case QuicPacketType::kVersionNegotiation: return "vn";
    case QuicPacketType::kOneRtt: return "1rtt";
  }
  return "?";
}

}  // namespace qs
