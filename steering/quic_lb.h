// QUIC-LB connection IDs (draft-ietf-quic-load-balancers-21, section 5).
//
// A QuicLbCodec is one configuration (one config-rotation codepoint): it
// encodes a server ID and nonce into a CID (servers, traffic tools) and
// decodes a CID back to its server ID (the load balancer's routing step).
// The algorithm follows from the configuration:
//   no key                          plaintext: server ID then nonce in clear
//   key, server_id+nonce == 16      single pass: one AES-128-ECB block
//   key, any other length           four-pass Feistel network, AES round function
// Decoding the four-pass form stops after three passes when the server ID
// lies entirely in the left half (server_id_len <= nonce_len), as the draft
// allows.
//
// encode/decode never allocate and are safe to call from many threads at once
// on one codec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "steering/steering_config.h"

namespace qs {

inline constexpr std::size_t kMaxCidLen = 20;          // QUIC v1/v2 limit
inline constexpr std::size_t kMaxServerIdLen = 15;
inline constexpr std::uint8_t kUnroutableConfigId = 7;  // draft 3.2: never a config

// Top three bits of a CID's first octet (draft 3.1).
inline std::uint8_t quic_lb_config_id(std::uint8_t first_octet) { return first_octet >> 5; }
// Low five bits with length self-description: the CID length minus one.
inline std::uint8_t quic_lb_self_encoded_len(std::uint8_t first_octet) {
  return std::uint8_t((first_octet & 0x1f) + 1);
}

class Aes128;

class QuicLbCodec {
 public:
  enum class Algorithm : std::uint8_t { kPlaintext, kSinglePass, kFourPass };
  // kOpenSsl forces the libcrypto AES path even where AES-NI exists (tests
  // and benchmarks compare the two).
  enum class AesBackend : std::uint8_t { kAuto, kOpenSsl };

  // Throws std::invalid_argument when the configuration breaks the draft's
  // limits (config_id 0..6, server ID 1..15, nonce 4..18, sum <= 19).
  explicit QuicLbCodec(const QuicLbConfig& config, AesBackend backend = AesBackend::kAuto);
  ~QuicLbCodec();
  QuicLbCodec(QuicLbCodec&&) noexcept;
  QuicLbCodec& operator=(QuicLbCodec&&) noexcept;

  const QuicLbConfig& config() const { return config_; }
  std::uint8_t config_id() const { return config_.config_id; }
  std::uint8_t cid_len() const { return cid_len_; }
  std::uint8_t server_id_len() const { return config_.server_id_len; }
  std::uint8_t nonce_len() const { return config_.nonce_len; }
  Algorithm algorithm() const { return algorithm_; }
  bool uses_aes_ni() const;

  // Writes cid_len() octets to `out`: server_id is server_id_len() octets,
  // nonce nonce_len() octets. Without length self-description the low five
  // bits of the first octet come from first_octet_entropy (the server should
  // pass random bits so that CIDs stay unlinkable).
  void encode(const std::uint8_t* server_id, const std::uint8_t* nonce, std::uint8_t* out,
              std::uint8_t first_octet_entropy = 0) const;

  // Writes server_id_len() octets to server_id_out and returns true when `cid`
  // (len octets, the DCID as the packet carries it) belongs to this
  // configuration: its config-rotation bits match, it is at least cid_len()
  // long (servers may append octets) and, with length self-description, its
  // first octet states len. Otherwise returns false and writes nothing.
  bool decode(const std::uint8_t* cid, std::size_t len, std::uint8_t* server_id_out) const {
    if (!accepts(cid, len)) return false;
    if (algorithm_ == Algorithm::kPlaintext) {
      std::memcpy(server_id_out, cid + 1, config_.server_id_len);
      return true;
    }
    decode_encrypted(cid + 1, server_id_out);
    return true;
  }

  // decode() for n CIDs at once; their AES blocks share the pipeline. ok[i]
  // says whether server_ids[i] was written: the server ID in its first
  // server_id_len() octets, the rest of the 16 unspecified.
  void decode_many(const std::uint8_t* const* cids, const std::uint8_t* lens, std::size_t n,
                   std::uint8_t (*server_ids)[16], bool* ok) const;

  // The checks decode() makes before touching the ciphertext.
  bool accepts(const std::uint8_t* cid, std::size_t len) const {
    if (len < cid_len_ || quic_lb_config_id(cid[0]) != config_.config_id) return false;
    return !config_.len_self_encode || quic_lb_self_encoded_len(cid[0]) == len;
  }

 private:
  void decode_encrypted(const std::uint8_t* ciphertext, std::uint8_t* server_id_out) const;
  void four_pass_decode_many(const std::uint8_t* const* ciphertexts, std::size_t n,
                             std::uint8_t (*server_ids)[16]) const;

  QuicLbConfig config_;
  std::uint8_t cid_len_ = 0;
  Algorithm algorithm_ = Algorithm::kPlaintext;
  std::unique_ptr<Aes128> aes_;
};

}  // namespace qs
