// libFuzzer target over steering/: parse + QUIC-LB decode + owner resolution
// of arbitrary frames, and the codec on arbitrary CIDs. Built with clang++
// -fsanitize=fuzzer,address,undefined by tests/fuzz/run_steering_fuzz.sh; any
// over-read, UB or broken invariant below aborts with the input saved.
//
// Invariants checked on every input:
//   - the located DCID/SCID/QUIC header and UDP header lie inside the frame;
//   - a routed decision names an existing owner; malformed frames route nowhere;
//   - classify_burst() decides as classify() does, AES-NI or OpenSSL;
//   - decode(encode(sid, nonce)) == sid for the codec each input picks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "steering/packet_classifier.h"
#include "steering/quic_lb.h"
#include "tests/steering/packet_fixtures.h"

namespace {

[[noreturn]] void broken(const char* what) {
  __builtin_printf("steering fuzz invariant broken: %s\n", what);
  std::abort();
}

qs::PacketClassifier& classifier() {
  static qs::PacketClassifier c(qs::test::fixture_steering_config());
  return c;
}
qs::PacketClassifier& openssl_classifier() {
  static qs::PacketClassifier c(qs::test::fixture_steering_config(),
                                      qs::QuicLbCodec::AesBackend::kOpenSsl);
  return c;
}

void check_frame(const std::uint8_t* data, std::size_t size) {
  const qs::Decision d = classifier().classify(data, size);
  const qs::ParsedPacket& p = d.packet;
  if (p.is_quic()) {
    if (std::size_t(p.dcid_offset) + p.dcid_len > size) broken("DCID past the frame");
    if (std::size_t(p.scid_offset) + p.scid_len > size) broken("SCID past the frame");
    if (p.quic_offset >= size) broken("QUIC header past the frame");
    if (std::size_t(p.l4_offset) + 8 > size) broken("UDP header past the frame");
    if (p.form == qs::QuicForm::kNone) broken("QUIC without a form");
  }
  if (p.verdict == qs::Verdict::kMalformed && d.resolution.routed()) broken("malformed routed");
  if (p.verdict != qs::Verdict::kMalformed && p.reason != qs::MalformedReason::kNone)
    broken("reason without malformed verdict");
  if (d.resolution.routed() && d.resolution.owner_index >= classifier().resolver().owner_count())
    broken("owner index out of range");
  // A burst of the frame and its prefixes, through both AES backends.
  const std::uint8_t* frames[4];
  std::uint16_t lens[4];
  const unsigned n = size > 3 ? 4 : 1;
  for (unsigned i = 0; i < n; ++i) {
    frames[i] = data;
    lens[i] = std::uint16_t(size - i * (size / 4));
  }
  qs::Decision burst[4], slow[4];
  classifier().classify_burst(frames, lens, n, burst);
  openssl_classifier().classify_burst(frames, lens, n, slow);
  for (unsigned i = 0; i < n; ++i) {
    const qs::Decision one = classifier().classify(frames[i], lens[i]);
    for (const qs::Decision* b : {&burst[i], &slow[i]}) {
      if (b->packet.verdict != one.packet.verdict || b->packet.reason != one.packet.reason ||
          b->resolution.owner_index != one.resolution.owner_index ||
          b->resolution.how != one.resolution.how)
        broken("classify_burst differs from classify");
    }
  }
}

void check_codec(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  static const std::vector<qs::QuicLbCodec> codecs = [] {
    std::vector<qs::QuicLbCodec> v;
    for (const auto& c : qs::test::fixture_steering_config().quic_lb) v.emplace_back(c);
    return v;
  }();
  const qs::QuicLbCodec& codec = codecs[data[0] % codecs.size()];
  // Decoding arbitrary bytes must stay inside them.
  std::uint8_t sid[16];
  const std::size_t cid_len = size - 1 > qs::kMaxCidLen ? qs::kMaxCidLen : size - 1;
  std::vector<std::uint8_t> cid(data + 1, data + 1 + cid_len);  // exact size for ASan
  codec.decode(cid.data(), cid.size(), sid);
  // Round trip with server ID and nonce taken from the input.
  std::uint8_t in[qs::kMaxServerIdLen + 18] = {};
  std::memcpy(in, data + 1, size - 1 < sizeof in ? size - 1 : sizeof in);
  std::uint8_t encoded[qs::kMaxCidLen], back[16];
  codec.encode(in, in + codec.server_id_len(), encoded, data[1]);
  if (!codec.decode(encoded, codec.cid_len(), back)) broken("encoded CID does not decode");
  if (std::memcmp(back, in, codec.server_id_len()) != 0) broken("round trip changed the server ID");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 0xffff) return 0;  // no frame is longer; burst lengths are 16-bit
  check_frame(data, size);
  check_codec(data, size);
  return 0;
}
