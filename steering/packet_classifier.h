// Parse + resolve, one frame or a burst: what an RX lcore calls.
//
// classify_burst() first parses the whole burst, then decodes the encrypted
// QUIC-LB DCIDs of each config together so that their AES blocks overlap in
// the pipeline (one block is latency-bound; a burst's worth is not), then
// resolves. Its decisions equal classify() frame by frame.
#pragma once

#include <cstddef>
#include <cstdint>

#include "steering/owner_resolver.h"
#include "steering/packet_parser.h"
#include "steering/steering_config.h"

namespace qs {

struct Decision {
  ParsedPacket packet;
  Resolution resolution;
};

class PacketClassifier {
 public:
  // Throws std::invalid_argument on a configuration the parser or the
  // resolver rejects (see ParserConfig and OwnerResolver).
  explicit PacketClassifier(const SteeringConfig& config,
                            QuicLbCodec::AesBackend backend = QuicLbCodec::AesBackend::kAuto)
      : parser_(config), resolver_(config, backend) {}

  const ParserConfig& parser_config() const { return parser_; }
  const OwnerResolver& resolver() const { return resolver_; }

  Decision classify(const std::uint8_t* frame, std::size_t len) const {
    Decision d;
    parse_packet(frame, len, parser_, d.packet);
    d.resolution = resolver_.resolve(frame, d.packet);
    return d;
  }

  // lens[i]: the bytes of frames[i] that can be read; frame_lens[i] (when
  // given): the whole frame's length, larger for a multi-segment mbuf whose
  // first segment is frames[i] (see parse_packet).
  void classify_burst(const std::uint8_t* const* frames, const std::uint16_t* lens, unsigned n,
                      Decision* out, const std::uint32_t* frame_lens = nullptr) const;

 private:
  ParserConfig parser_;
  OwnerResolver resolver_;
};

}  // namespace qs
