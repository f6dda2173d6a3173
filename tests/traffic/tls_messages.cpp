#include "tests/traffic/tls_messages.h"

#include <stdexcept>

#include "tests/traffic/quic_wire.h"

namespace qs::traffic {

namespace {

constexpr std::uint16_t kTls12 = 0x0303;  // legacy_version
constexpr std::uint16_t kTls13 = 0x0304;
constexpr std::uint16_t kX25519 = 0x001d;

class Writer {
 public:
  // Room for any hello up front: besides saving regrowth, it keeps GCC 12's
  // -Warray-bounds from misjudging the buffer size after a reallocation.
  Writer() { out_.reserve(1024); }
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { u8(std::uint8_t(v >> 8)), u8(std::uint8_t(v)); }
  void bytes(std::span<const std::uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void random(Rng& rng, std::size_t n) {
    const std::size_t at = out_.size();
    out_.resize(at + n);
    rng.fill(out_.data() + at, n);
  }
  void text(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  void varint(std::uint64_t v) { put_varint(out_, v); }

  // Opens a length-prefixed block of `width` octets; close() backfills it.
  std::size_t open(int width) {
    const std::size_t at = out_.size();
    out_.insert(out_.end(), std::size_t(width), 0);
    return at;
  }
  void close(std::size_t at, int width) {
    const std::size_t len = out_.size() - at - std::size_t(width);
    if (len >> (8 * width)) throw std::logic_error("TLS block too long for its length prefix");
    for (int i = 0; i < width; ++i) out_[at + std::size_t(i)] = std::uint8_t(len >> (8 * (width - 1 - i)));
  }

  std::vector<std::uint8_t>& out() { return out_; }

 private:
  std::vector<std::uint8_t> out_;
};

void transport_parameter(Writer& w, std::uint64_t id, std::uint64_t value) {
  w.varint(id);
  w.varint(varint_size(value));
  w.varint(value);
}

}  // namespace

std::vector<std::uint8_t> build_client_hello(Rng& rng, std::string_view server_name,
                                             std::span<const std::uint8_t> client_scid) {
  Writer w;
  w.u8(1);  // client_hello
  const auto body = w.open(3);
  w.u16(kTls12);
  w.random(rng, 32);  // random
  w.u8(0);                 // legacy_session_id: empty in QUIC (RFC 9001 section 8.4)
  const auto suites = w.open(2);
  w.u16(0x1301), w.u16(0x1302), w.u16(0x1303);
  w.close(suites, 2);
  w.u8(1), w.u8(0);  // legacy_compression_methods: null
  const auto extensions = w.open(2);

  w.u16(0x0000);  // server_name
  auto ext = w.open(2);
  auto list = w.open(2);
  w.u8(0);  // host_name
  auto name = w.open(2);
  w.text(server_name);
  w.close(name, 2), w.close(list, 2), w.close(ext, 2);

  w.u16(0x000a);  // supported_groups
  ext = w.open(2), list = w.open(2);
  w.u16(kX25519), w.u16(0x0017);  // x25519, secp256r1
  w.close(list, 2), w.close(ext, 2);

  w.u16(0x000d);  // signature_algorithms
  ext = w.open(2), list = w.open(2);
  w.u16(0x0403), w.u16(0x0804), w.u16(0x0401);
  w.close(list, 2), w.close(ext, 2);

  w.u16(0x0010);  // application_layer_protocol_negotiation
  ext = w.open(2), list = w.open(2);
  name = w.open(1);
  w.text("h3");
  w.close(name, 1), w.close(list, 2), w.close(ext, 2);

  w.u16(0x002b);  // supported_versions
  ext = w.open(2), list = w.open(1);
  w.u16(kTls13);
  w.close(list, 1), w.close(ext, 2);

  w.u16(0x002d);  // psk_key_exchange_modes: psk_dhe_ke
  ext = w.open(2);
  w.u8(1), w.u8(1);
  w.close(ext, 2);

  w.u16(0x0033);  // key_share
  ext = w.open(2), list = w.open(2);
  w.u16(kX25519);
  auto key = w.open(2);
  w.random(rng, 32);
  w.close(key, 2), w.close(list, 2), w.close(ext, 2);

  w.u16(0x0039);  // quic_transport_parameters (RFC 9001 section 8.2)
  ext = w.open(2);
  transport_parameter(w, 0x01, 30000);     // max_idle_timeout (ms)
  transport_parameter(w, 0x03, 1472);      // max_udp_payload_size
  transport_parameter(w, 0x04, 15728640);  // initial_max_data
  transport_parameter(w, 0x05, 6291456);   // initial_max_stream_data_bidi_local
  transport_parameter(w, 0x06, 6291456);   // initial_max_stream_data_bidi_remote
  transport_parameter(w, 0x07, 6291456);   // initial_max_stream_data_uni
  transport_parameter(w, 0x08, 100);       // initial_max_streams_bidi
  transport_parameter(w, 0x09, 103);       // initial_max_streams_uni
  w.varint(0x0f);                          // initial_source_connection_id
  w.varint(client_scid.size());
  w.bytes(client_scid);
  w.close(ext, 2);

  w.close(extensions, 2);
  w.close(body, 3);
  return std::move(w.out());
}

std::vector<std::uint8_t> build_server_hello(Rng& rng) {
  Writer w;
  w.u8(2);  // server_hello
  const auto body = w.open(3);
  w.u16(kTls12);
  w.random(rng, 32);
  w.u8(0);         // legacy_session_id_echo
  w.u16(0x1301);   // TLS_AES_128_GCM_SHA256
  w.u8(0);         // legacy_compression_method
  const auto extensions = w.open(2);
  w.u16(0x002b);  // supported_versions
  auto ext = w.open(2);
  w.u16(kTls13);
  w.close(ext, 2);
  w.u16(0x0033);  // key_share
  ext = w.open(2);
  w.u16(kX25519);
  const auto key = w.open(2);
  w.random(rng, 32);
  w.close(key, 2), w.close(ext, 2);
  w.close(extensions, 2);
  w.close(body, 3);
  return std::move(w.out());
}

}  // namespace qs::traffic
