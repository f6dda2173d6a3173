// Parse + resolve, one frame or a burst: what an RX lcore calls.
//
// classify_burst() first parses the whole burst, then decodes the encrypted
// QUIC-LB DCIDs of each config together so that their AES blocks overlap in
// the pipeline (one block is latency-bound; a burst's worth is not), then
// resolves. Its decisions equal classify() frame by frame.
//
// With forwarding tables (use_tables), DCIDs QUIC-LB does not route go
// through the tables' rules (steering/forwarding_rules.h), which learn as
// they route: the tables are shared, mutable state, and `now_ms` (a clock in
// milliseconds, wrapping) ages their entries. So classify, resolve and
// classify_burst are not const: they may write. Several lcores call them at
// once on one classifier all the same: what they write is the tables, which
// are made for concurrent use; the classifier's own members never change.
#pragma once

#include <cstddef>
#include <cstdint>

#include "steering/forwarding_rules.h"
#include "steering/owner_resolver.h"
#include "steering/packet_parser.h"
#include "steering/service_table.h"
#include "steering/steering_config.h"

namespace qs {

struct Decision {
  ParsedPacket packet;
  Resolution resolution;  // none unless destination is kService
  Destination destination;
};

// What classify_burst calls once per chunk of a burst, after the chunk's
// frames are parsed and before any of them is resolved: decisions[i].packet
// is frames[i]'s parse, `first` the index of frames[0] in the burst. The
// receive loop starts its owner's connection-table loads there, a whole
// classification ahead of the lookups (dataplane/fastpath/mbuf_classifier.h);
// steering/ knows nothing of what it does.
struct ParsedHook {
  void (*fn)(void* context, const std::uint8_t* const* frames, const Decision* decisions, unsigned first,
             unsigned n) = nullptr;
  void* context = nullptr;
};

class PacketClassifier {
 public:
  // Throws std::invalid_argument on a configuration the parser or the
  // resolver rejects (see ParserConfig and OwnerResolver).
  explicit PacketClassifier(const SteeringConfig& config,
                            QuicLbCodec::AesBackend backend = QuicLbCodec::AesBackend::kAuto)
      : parser_(config), resolver_(config, backend), services_(config.services) {}

  const ParserConfig& parser_config() const { return parser_; }
  const OwnerResolver& resolver() const { return resolver_; }
  const ServiceTable& services() const { return services_; }

  // Whose a parsed frame is (ServiceTable): always kService without
  // services. A malformed frame stays the service's, to be dropped as
  // malformed: what the parser could not read it cannot send anywhere.
  Destination destination(const std::uint8_t* frame, const ParsedPacket& p) const {
    if (!services_.active() || p.verdict == Verdict::kMalformed) return Destination::kService;
    if (p.ip_version == 0) return Destination::kHost;
    return services_.classify(p.ip_version, p.dst_addr(frame), p.l4_offset != 0 ? p.dst_port : 0);
  }

  // Routes through `tables` from now on (nullptr: no tables). The tables
  // must outlive their use here.
  void use_tables(ForwardingTables* tables) { tables_ = tables; }

  Decision classify(const std::uint8_t* frame, std::size_t len, std::uint32_t now_ms = 0,
                    LearnCounts* counts = nullptr) {
    Decision d;
    parse_packet(frame, len, parser_, d.packet);
    d.destination = destination(frame, d.packet);
    if (d.destination == Destination::kService) {
      d.resolution = resolve(frame, d.packet, now_ms, counts);
    } else if (d.destination == Destination::kNotService) {
      route_quoted(frame, len, d, now_ms);
    }
    return d;
  }

  // The owner of a frame parse_packet already parsed (with this classifier's
  // parser_config()), through the tables when there are some.
  Resolution resolve(const std::uint8_t* frame, const ParsedPacket& p, std::uint32_t now_ms = 0,
                     LearnCounts* counts = nullptr) {
    if (tables_ != nullptr && routes_by_dcid(p)) {
      LearnCounts ignored;
      const Resolution r = resolver_.resolve_quic_lb(p.dcid(frame), p.dcid_len);
      if (r.routed()) return r;
      return tables_->resolve(resolver_, frame, p, now_ms, counts ? *counts : ignored);
    }
    return resolver_.resolve(frame, p);
  }

  // An ICMP or ICMPv6 error sent to a service address (a router on the way
  // to a client reports a server's datagram: too big, unreachable, time
  // exceeded) belongs to the connection of the datagram it quotes, whose
  // backend must hear of it (as Katran routes them). The quote is a
  // server -> client UDP datagram from the service address: its QUIC long
  // header's SCID (the server's CID, by QUIC-LB), else the connection's
  // 4-tuple as the forwarding tables learned it from the client. Routed:
  // true, with the resolution in d and the frame then steered as UDP that
  // is not QUIC (verdict kNotQuic, l4_offset at the ICMP header). A quote
  // that names no connection leaves d as it is (not_service).
  bool route_quoted(const std::uint8_t* frame, std::size_t len, Decision& d, std::uint32_t now_ms);

  // lens[i]: the bytes of frames[i] that can be read; frame_lens[i] (when
  // given): the whole frame's length, larger for a multi-segment mbuf whose
  // first segment is frames[i] (see parse_packet). `parsed` (when given) is
  // called on each chunk between its parse and its resolution.
  void classify_burst(const std::uint8_t* const* frames, const std::uint16_t* lens, unsigned n,
                      Decision* out, const std::uint32_t* frame_lens = nullptr,
                      std::uint32_t now_ms = 0, LearnCounts* counts = nullptr, const ParsedHook* parsed = nullptr);

 private:
  bool routes_by_dcid(const ParsedPacket& p) const {
    return p.verdict == Verdict::kQuic && p.dcid_len > 0 && resolver_.mode() == SteeringMode::kCid;
  }
  ParserConfig parser_;
  OwnerResolver resolver_;
  ServiceTable services_;
  ForwardingTables* tables_ = nullptr;
};

}  // namespace qs
