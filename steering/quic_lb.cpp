#include "steering/quic_lb.h"

#include <stdexcept>
#include <string>

#include "steering/aes128.h"

namespace qs {
namespace {

// Four-pass state for one CID: the two Feistel halves, half_len octets each.
// With an odd plaintext length the middle octet is split by nibbles: left
// keeps its high nibble, right its low nibble (draft 5.4.2 step 2).
struct FeistelHalves {
  std::uint8_t left[16];
  std::uint8_t right[16];
};

struct FeistelShape {
  std::uint8_t plaintext_len;  // server ID + nonce
  std::uint8_t half_len;       // plaintext_len / 2 rounded up
  bool odd;

  explicit FeistelShape(std::uint8_t len)
      : plaintext_len(len), half_len(std::uint8_t((len + 1) / 2)), odd((len & 1) != 0) {}

  void clear_left(std::uint8_t* left) const {
    if (odd) left[half_len - 1] &= 0xf0;
  }
  void clear_right(std::uint8_t* right) const {
    if (odd) right[0] &= 0x0f;
  }
  void split(const std::uint8_t* text, FeistelHalves& h) const {
    std::memcpy(h.left, text, half_len);
    std::memcpy(h.right, text + (plaintext_len - half_len), half_len);
    clear_left(h.left);
    clear_right(h.right);
  }
  // Concatenation that drops the zero nibbles of an odd split (step 12).
  void join(const FeistelHalves& h, std::uint8_t* text) const {
    std::memcpy(text, h.left, half_len);
    if (odd) {
      text[half_len - 1] = std::uint8_t(text[half_len - 1] | h.right[0]);
      std::memcpy(text + half_len, h.right + 1, half_len - 1u);
    } else {
      std::memcpy(text + half_len, h.right, half_len);
    }
  }
  // expand(plaintext_len, pass, half): the half in the most significant
  // octets, zero padding, then length and pass in the last two (draft -19+).
  void expand(std::uint8_t pass, const std::uint8_t* half, std::uint8_t block[16]) const {
    std::memset(block, 0, 16);
    std::memcpy(block, half, half_len);
    block[14] = plaintext_len;
    block[15] = pass;
  }
  void xor_into(std::uint8_t* dst, const std::uint8_t* block) const {
    for (unsigned i = 0; i < half_len; ++i) dst[i] ^= block[i];
  }
};

// Processes CIDs in groups this large so the scratch stays on the stack.
constexpr std::size_t kBatch = 32;

}  // namespace

QuicLbCodec::QuicLbCodec(const QuicLbConfig& config, AesBackend backend) : config_(config) {
  const auto bad = [&](const std::string& what) {
    throw std::invalid_argument("QUIC-LB config " + std::to_string(config.config_id) + ": " +
                                what);
  };
  if (config.config_id >= kUnroutableConfigId)
    bad("config_id must be 0..6 (7 is reserved for unroutable connection IDs)");
  if (config.server_id_len < 1 || config.server_id_len > kMaxServerIdLen)
    bad("server_id_len must be 1..15, got " + std::to_string(config.server_id_len));
  if (config.nonce_len < 4 || config.nonce_len > 18)
    bad("nonce_len must be 4..18, got " + std::to_string(config.nonce_len));
  if (config.server_id_len + config.nonce_len > 19)
    bad("server_id_len + nonce_len must be at most 19, got " +
        std::to_string(config.server_id_len + config.nonce_len));
  cid_len_ = config.cid_len();
  if (config.key) {
    algorithm_ = config.server_id_len + config.nonce_len == 16 ? Algorithm::kSinglePass
                                                               : Algorithm::kFourPass;
    aes_ = std::make_unique<Aes128>(config.key->data(), backend == AesBackend::kAuto);
  }
}

QuicLbCodec::~QuicLbCodec() = default;
QuicLbCodec::QuicLbCodec(QuicLbCodec&&) noexcept = default;
QuicLbCodec& QuicLbCodec::operator=(QuicLbCodec&&) noexcept = default;

bool QuicLbCodec::uses_aes_ni() const {
  return aes_ && aes_->backend() == Aes128::Backend::kAesNi;
}

void QuicLbCodec::encode(const std::uint8_t* server_id, const std::uint8_t* nonce,
                         std::uint8_t* out, std::uint8_t first_octet_entropy) const {
  const std::uint8_t low_bits = config_.len_self_encode ? std::uint8_t(cid_len_ - 1)
                                                        : std::uint8_t(first_octet_entropy & 0x1f);
  out[0] = std::uint8_t(config_.config_id << 5 | low_bits);
  std::uint8_t text[19];
  std::memcpy(text, server_id, config_.server_id_len);
  std::memcpy(text + config_.server_id_len, nonce, config_.nonce_len);
  switch (algorithm_) {
    case Algorithm::kPlaintext:
      std::memcpy(out + 1, text, cid_len_ - 1u);
      return;
    case Algorithm::kSinglePass:
      aes_->encrypt(text, out + 1);
      return;
    case Algorithm::kFourPass: {
      const FeistelShape shape(std::uint8_t(cid_len_ - 1));
      FeistelHalves h;
      shape.split(text, h);
      std::uint8_t block[16];
      // Passes 1..4 alternate: an odd pass feeds the left half and updates the
      // right, an even pass the other way round.
      for (std::uint8_t pass = 1; pass <= 4; ++pass) {
        const bool odd_pass = pass & 1;
        shape.expand(pass, odd_pass ? h.left : h.right, block);
        aes_->encrypt(block, block);
        if (odd_pass) {
          shape.xor_into(h.right, block);
          shape.clear_right(h.right);
        } else {
          shape.xor_into(h.left, block);
          shape.clear_left(h.left);
        }
      }
      shape.join(h, out + 1);
      return;
    }
  }
}

void QuicLbCodec::decode_encrypted(const std::uint8_t* ciphertext,
                                   std::uint8_t* server_id_out) const {
  if (algorithm_ == Algorithm::kSinglePass) {
    std::uint8_t block[16];
    aes_->decrypt(ciphertext, block);
    std::memcpy(server_id_out, block, config_.server_id_len);
    return;
  }
  const std::uint8_t* one[1] = {ciphertext};
  std::uint8_t sid[1][16];
  four_pass_decode_many(one, 1, sid);
  std::memcpy(server_id_out, sid[0], config_.server_id_len);
}

void QuicLbCodec::four_pass_decode_many(const std::uint8_t* const* ciphertexts, std::size_t n,
                                        std::uint8_t (*server_ids)[16]) const {
  const FeistelShape shape(std::uint8_t(cid_len_ - 1));
  // The server ID sits wholly in left_0 when it is no longer than the nonce,
  // so pass 1 (which recovers right_0, i.e. the nonce's tail) can be skipped.
  const bool fourth_pass = 2u * config_.server_id_len > shape.plaintext_len;
  FeistelHalves h[kBatch];
  Aes128::Block blocks[kBatch];
  for (std::size_t base = 0; base < n; base += kBatch) {
    const std::size_t m = n - base < kBatch ? n - base : kBatch;
    for (std::size_t i = 0; i < m; ++i) shape.split(ciphertexts[base + i], h[i]);
    // Decryption runs the passes backwards: 4 (right -> left), 3 (left ->
    // right), 2 (right -> left), then 1 (left -> right) only if needed.
    for (std::uint8_t pass = 4; pass >= (fourth_pass ? 1 : 2); --pass) {
      const bool odd_pass = pass & 1;
      for (std::size_t i = 0; i < m; ++i)
        shape.expand(pass, odd_pass ? h[i].left : h[i].right, blocks[i]);
      aes_->encrypt_many(blocks, m);
      for (std::size_t i = 0; i < m; ++i) {
        if (odd_pass) {
          shape.xor_into(h[i].right, blocks[i]);
          shape.clear_right(h[i].right);
        } else {
          shape.xor_into(h[i].left, blocks[i]);
          shape.clear_left(h[i].left);
        }
      }
    }
    for (std::size_t i = 0; i < m; ++i) {
      if (fourth_pass) {
        std::uint8_t text[19];
        shape.join(h[i], text);
        std::memcpy(server_ids[base + i], text, config_.server_id_len);
      } else {
        std::memcpy(server_ids[base + i], h[i].left, config_.server_id_len);
      }
    }
  }
}

void QuicLbCodec::decode_many(const std::uint8_t* const* cids, const std::uint8_t* lens,
                              std::size_t n, std::uint8_t (*server_ids)[16], bool* ok) const {
  if (algorithm_ == Algorithm::kPlaintext) {
    for (std::size_t i = 0; i < n; ++i) ok[i] = decode(cids[i], lens[i], server_ids[i]);
    return;
  }
  // Gather the acceptable CIDs, run their AES work together, scatter back.
  const std::uint8_t* texts[kBatch];
  std::size_t where[kBatch];
  std::uint8_t sid[kBatch][16];
  Aes128::Block blocks[kBatch];
  for (std::size_t base = 0; base < n; base += kBatch) {
    const std::size_t m = n - base < kBatch ? n - base : kBatch;
    std::size_t k = 0;
    for (std::size_t i = base; i < base + m; ++i) {
      ok[i] = accepts(cids[i], lens[i]);
      if (ok[i]) {
        texts[k] = cids[i] + 1;
        where[k++] = i;
      }
    }
    if (algorithm_ == Algorithm::kSinglePass) {
      for (std::size_t j = 0; j < k; ++j) std::memcpy(blocks[j], texts[j], 16);
      aes_->decrypt_many(blocks, k);
      for (std::size_t j = 0; j < k; ++j)
        std::memcpy(server_ids[where[j]], blocks[j], config_.server_id_len);
    } else {
      four_pass_decode_many(texts, k, sid);
      for (std::size_t j = 0; j < k; ++j)
        std::memcpy(server_ids[where[j]], sid[j], config_.server_id_len);
    }
  }
}

}  // namespace qs
