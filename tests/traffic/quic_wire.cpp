#include "tests/traffic/quic_wire.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

namespace qs::traffic {

namespace {

constexpr std::array<std::uint8_t, 20> kInitialSaltV1 = {0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
                                                         0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a};
constexpr std::array<std::uint8_t, 20> kInitialSaltV2 = {0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
                                                         0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9};

[[noreturn]] void crypto_failure(const char* what) {
  throw std::runtime_error(std::string("libcrypto: ") + what + " failed");
}

struct KdfCtxFree {
  void operator()(EVP_KDF_CTX* ctx) const { EVP_KDF_CTX_free(ctx); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using KdfCtx = std::unique_ptr<EVP_KDF_CTX, KdfCtxFree>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

KdfCtx new_hkdf() {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (!kdf) crypto_failure("EVP_KDF_fetch(HKDF)");
  KdfCtx ctx(EVP_KDF_CTX_new(kdf));
  EVP_KDF_free(kdf);
  if (!ctx) crypto_failure("EVP_KDF_CTX_new");
  return ctx;
}

// One HKDF-SHA256 call: extract (key = IKM, `extra` = the salt) or expand
// (key = the secret, `extra` = the info), writing out.size() octets.
void hkdf(int mode, std::span<const std::uint8_t> key, const char* extra_name, std::span<const std::uint8_t> extra,
          std::span<std::uint8_t> out, const char* what) {
  KdfCtx ctx = new_hkdf();
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<std::uint8_t*>(key.data()), key.size()),
      OSSL_PARAM_construct_octet_string(extra_name, const_cast<std::uint8_t*>(extra.data()), extra.size()),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) crypto_failure(what);
}

std::array<std::uint8_t, 32> hkdf_extract(std::span<const std::uint8_t> salt, std::span<const std::uint8_t> ikm) {
  std::array<std::uint8_t, 32> prk{};
  hkdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, ikm, OSSL_KDF_PARAM_SALT, salt, prk, "HKDF-Extract");
  return prk;
}

// HKDF-Expand-Label (RFC 8446 section 7.1) with an empty context.
template <std::size_t N>
std::array<std::uint8_t, N> hkdf_expand_label(std::span<const std::uint8_t> secret, const std::string& label) {
  const std::string full = "tls13 " + label;
  // HkdfLabel: uint16 length, opaque label<7..255>, opaque context<0..255> (empty).
  std::array<std::uint8_t, 2 + 1 + 255 + 1> info{};
  if (full.size() > 255) throw std::invalid_argument("HKDF label too long");
  info[0] = std::uint8_t(N >> 8);
  info[1] = std::uint8_t(N);
  info[2] = std::uint8_t(full.size());
  std::copy(full.begin(), full.end(), info.begin() + 3);
  const std::size_t info_len = 3 + full.size() + 1;  // the final octet (context length) stays 0
  std::array<std::uint8_t, N> out{};
  hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, secret, OSSL_KDF_PARAM_INFO, std::span(info.data(), info_len), out,
       "HKDF-Expand-Label");
  return out;
}

// AES-128-ECB of one block: the header-protection mask (RFC 9001 section 5.4.3).
std::array<std::uint8_t, 16> hp_mask(const std::array<std::uint8_t, 16>& hp_key, const std::uint8_t* sample) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) crypto_failure("EVP_CIPHER_CTX_new");
  std::array<std::uint8_t, 16> mask{};
  int len = 0;
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ecb(), nullptr, hp_key.data(), nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx.get(), 0) != 1 ||
      EVP_EncryptUpdate(ctx.get(), mask.data(), &len, sample, 16) != 1 || len != 16)
    crypto_failure("AES-ECB header protection");
  return mask;
}

std::array<std::uint8_t, 12> packet_nonce(const PacketKeys& keys, std::uint64_t pn) {
  std::array<std::uint8_t, 12> nonce = keys.iv;
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= std::uint8_t(pn >> (8 * i));
  return nonce;
}

}  // namespace

std::uint8_t long_type_bits(std::uint32_t version, LongType type) {
  const auto bits = std::uint8_t(type);
  // RFC 9369 section 3.2: v2 Initial=1, 0-RTT=2, Handshake=3, Retry=0.
  return version == kQuicV2 ? std::uint8_t((bits + 1) & 3) : bits;
}

std::size_t varint_size(std::uint64_t value) {
  return value < (1u << 6) ? 1 : value < (1u << 14) ? 2 : value < (1u << 30) ? 4 : 8;
}

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t value) {
  const std::size_t size = varint_size(value);
  const std::uint8_t prefix = size == 1 ? 0x00 : size == 2 ? 0x40 : size == 4 ? 0x80 : 0xc0;
  for (std::size_t i = 0; i < size; ++i) {
    std::uint8_t octet = std::uint8_t(value >> (8 * (size - 1 - i)));
    if (i == 0) octet |= prefix;
    out.push_back(octet);
  }
}

std::vector<std::uint8_t> build_long_header(const LongHeader& header, std::size_t payload_len,
                                            std::size_t* pn_offset) {
  if (header.pn_len < 1 || header.pn_len > 4) throw std::invalid_argument("packet number length must be 1..4");
  if (header.dcid.size() > 255 || header.scid.size() > 255) throw std::invalid_argument("connection ID too long");
  const std::size_t length = header.pn_len + payload_len;
  if (length >= (1u << 14)) throw std::invalid_argument("long header packet too large for a two-octet Length");
  std::vector<std::uint8_t> out;
  out.push_back(std::uint8_t(0xc0 | long_type_bits(header.version, header.type) << 4 |
                             (header.reserved_bits & 3) << 2 | (header.pn_len - 1)));
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(std::uint8_t(header.version >> shift));
  out.push_back(std::uint8_t(header.dcid.size()));
  out.insert(out.end(), header.dcid.begin(), header.dcid.end());
  out.push_back(std::uint8_t(header.scid.size()));
  out.insert(out.end(), header.scid.begin(), header.scid.end());
  if (header.type == LongType::kInitial) {
    put_varint(out, header.token.size());
    out.insert(out.end(), header.token.begin(), header.token.end());
  }
  out.push_back(std::uint8_t(0x40 | length >> 8));
  out.push_back(std::uint8_t(length));
  *pn_offset = out.size();
  for (int i = header.pn_len - 1; i >= 0; --i) out.push_back(std::uint8_t(header.pn >> (8 * i)));
  return out;
}

PacketKeys derive_initial_keys(std::uint32_t version, std::span<const std::uint8_t> client_dcid, bool server_side) {
  const bool v2 = version == kQuicV2;
  const auto& salt = v2 ? kInitialSaltV2 : kInitialSaltV1;
  const auto initial_secret = hkdf_extract(salt, client_dcid);
  const auto secret = hkdf_expand_label<32>(initial_secret, server_side ? "server in" : "client in");
  PacketKeys keys;
  keys.key = hkdf_expand_label<16>(secret, v2 ? "quicv2 key" : "quic key");
  keys.iv = hkdf_expand_label<12>(secret, v2 ? "quicv2 iv" : "quic iv");
  keys.hp = hkdf_expand_label<16>(secret, v2 ? "quicv2 hp" : "quic hp");
  return keys;
}

void protect_packet(std::vector<std::uint8_t>& packet, std::size_t pn_offset, std::size_t pn_len,
                    std::uint64_t pn, const PacketKeys& keys) {
  const std::size_t header_len = pn_offset + pn_len;
  if (packet.size() < header_len) throw std::invalid_argument("protect_packet: packet shorter than its header");
  const auto nonce = packet_nonce(keys, pn);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) crypto_failure("EVP_CIPHER_CTX_new");
  int len = 0;
  const int plain_len = int(packet.size() - header_len);
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, int(nonce.size()), nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, keys.key.data(), nonce.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, packet.data(), int(header_len)) != 1)
    crypto_failure("AES-GCM set-up");
  if (plain_len > 0 &&
      EVP_EncryptUpdate(ctx.get(), packet.data() + header_len, &len, packet.data() + header_len, plain_len) != 1)
    crypto_failure("AES-GCM encrypt");
  std::array<std::uint8_t, kAeadTagLen> tag{};
  if (EVP_EncryptFinal_ex(ctx.get(), tag.data(), &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, int(tag.size()), tag.data()) != 1)
    crypto_failure("AES-GCM tag");
  packet.insert(packet.end(), tag.begin(), tag.end());

  // The sample starts 4 octets after the start of the packet number field,
  // whatever its length (RFC 9001 section 5.4.2).
  if (packet.size() < pn_offset + 4 + 16) throw std::invalid_argument("protect_packet: too short to sample");
  const auto mask = hp_mask(keys.hp, packet.data() + pn_offset + 4);
  packet[0] ^= mask[0] & ((packet[0] & 0x80) ? 0x0f : 0x1f);
  for (std::size_t i = 0; i < pn_len; ++i) packet[pn_offset + i] ^= mask[1 + i];
}

bool unprotect_packet(std::span<const std::uint8_t> packet, std::size_t pn_offset, const PacketKeys& keys,
                      std::vector<std::uint8_t>& plaintext, std::uint64_t& pn) {
  if (packet.size() < pn_offset + 4 + 16) return false;
  std::vector<std::uint8_t> header(packet.begin(), packet.begin() + std::ptrdiff_t(pn_offset + 4));
  const auto mask = hp_mask(keys.hp, packet.data() + pn_offset + 4);
  header[0] ^= mask[0] & ((header[0] & 0x80) ? 0x0f : 0x1f);
  const std::size_t pn_len = (header[0] & 3) + 1;
  header.resize(pn_offset + pn_len);
  pn = 0;
  for (std::size_t i = 0; i < pn_len; ++i) {
    header[pn_offset + i] ^= mask[1 + i];
    pn = pn << 8 | header[pn_offset + i];
  }
  const std::size_t header_len = pn_offset + pn_len;
  if (packet.size() < header_len + kAeadTagLen) return false;
  const std::size_t cipher_len = packet.size() - header_len - kAeadTagLen;
  const auto nonce = packet_nonce(keys, pn);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) crypto_failure("EVP_CIPHER_CTX_new");
  plaintext.assign(cipher_len, 0);
  int len = 0;
  std::array<std::uint8_t, kAeadTagLen> tag{};
  std::copy(packet.end() - kAeadTagLen, packet.end(), tag.begin());
  if (EVP_DecryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, int(nonce.size()), nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, keys.key.data(), nonce.data()) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, header.data(), int(header.size())) != 1)
    crypto_failure("AES-GCM set-up");
  if (cipher_len > 0 &&
      EVP_DecryptUpdate(ctx.get(), plaintext.data(), &len, packet.data() + header_len, int(cipher_len)) != 1)
    crypto_failure("AES-GCM decrypt");
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, int(tag.size()), tag.data()) != 1)
    crypto_failure("AES-GCM set tag");
  return EVP_DecryptFinal_ex(ctx.get(), tag.data(), &len) == 1;
}

}  // namespace qs::traffic
