#include "steering/quic_lb.h"

#include <stdexcept>
#include <string>

#include "steering/aes128.h"

namespace qs {
namespace {

// The four-pass halves are handled as 128-bit integers whose byte i is octet i
// of the half (little-endian hosts), so that split, expand, XOR and the
// nibble clearing are a few register operations instead of byte loops.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "FeistelShape assumes little endian");
using u128 = unsigned __int128;

// Octets p[0..n), 1 <= n <= 16, zero-extended; reads nothing past p + n.
// Two overlapping loads cover any length; the overlap holds the same octets.
inline u128 load_octets(const std::uint8_t* p, unsigned n) {
  if (n >= 8) {
    std::uint64_t lo, hi;
    std::memcpy(&lo, p, 8);
    std::memcpy(&hi, p + n - 8, 8);
    return u128(lo) | u128(hi) << (8 * (n - 8));
  }
  if (n >= 4) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return u128(lo) | u128(hi) << (8 * (n - 4));
  }
  if (n >= 2) {
    std::uint16_t lo, hi;
    std::memcpy(&lo, p, 2);
    std::memcpy(&hi, p + n - 2, 2);
    return u128(lo) | u128(hi) << (8 * (n - 2));
  }
  return p[0];
}

inline u128 low_octets_mask(unsigned n) { return n >= 16 ? ~u128(0) : (u128(1) << (8 * n)) - 1; }

// The four-pass Feistel network of one configuration (draft 5.4.2). With an
// odd plaintext length the middle octet is split by nibbles: left keeps its
// high nibble, right its low nibble, and every pass clears the other nibble.
struct FeistelShape {
  std::uint8_t plaintext_len;  // server ID + nonce
  std::uint8_t half_len;       // plaintext_len / 2 rounded up
  bool odd;
  u128 left_mask;   // half_len octets, the last one's low nibble cleared if odd
  u128 right_mask;  // half_len octets, the first one's high nibble cleared if odd

  explicit FeistelShape(std::uint8_t len)
      : plaintext_len(len), half_len(std::uint8_t((len + 1) / 2)), odd((len & 1) != 0) {
    left_mask = right_mask = low_octets_mask(half_len);
    if (odd) {
      left_mask &= ~(u128(0x0f) << (8 * (half_len - 1)));
      right_mask &= ~u128(0xf0);
    }
  }

  void split(const std::uint8_t* text, u128& left, u128& right) const {
    left = load_octets(text, half_len) & left_mask;
    right = load_octets(text + (plaintext_len - half_len), half_len) & right_mask;
  }
  // The first 16 octets of left || right (all a server ID needs).
  u128 join_prefix(u128 left, u128 right) const {
    return left | right << (8 * (odd ? half_len - 1 : half_len));
  }
  // All plaintext_len octets of left || right (step 12: an odd split's zero
  // nibbles are dropped).
  void join(u128 left, u128 right, std::uint8_t* out) const {
    std::uint8_t l[16], r[16], text[32];
    std::memcpy(l, &left, 16);
    std::memcpy(r, &right, 16);
    std::memcpy(text, l, half_len);
    if (odd) {
      text[half_len - 1] = std::uint8_t(text[half_len - 1] | r[0]);
      std::memcpy(text + half_len, r + 1, half_len - 1u);
    } else {
      std::memcpy(text + half_len, r, half_len);
    }
    std::memcpy(out, text, plaintext_len);
  }
  // expand(plaintext_len, pass, half): the half in the most significant
  // octets, zero padding, then length and pass in the last two (draft -19+).
  void expand(std::uint8_t pass, u128 half, std::uint8_t block[16]) const {
    const u128 b = half | u128(plaintext_len) << 112 | u128(pass) << 120;
    std::memcpy(block, &b, 16);
  }
  // dst ^= truncate(AES output, half_len), then the pass's nibble clearing.
  static u128 mix(u128 dst, const std::uint8_t block[16], u128 mask) {
    u128 b;
    std::memcpy(&b, block, 16);
    return (dst ^ b) & mask;
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
      u128 left, right;
      shape.split(text, left, right);
      std::uint8_t block[16];
      // Passes 1..4 alternate: an odd pass feeds the left half and updates the
      // right, an even pass the other way round.
      for (std::uint8_t pass = 1; pass <= 4; ++pass) {
        const bool odd_pass = pass & 1;
        shape.expand(pass, odd_pass ? left : right, block);
        aes_->encrypt(block, block);
        if (odd_pass) {
          right = FeistelShape::mix(right, block, shape.right_mask);
        } else {
          left = FeistelShape::mix(left, block, shape.left_mask);
        }
      }
      shape.join(left, right, out + 1);
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
  u128 left[kBatch], right[kBatch];
  Aes128::Block blocks[kBatch];
  for (std::size_t base = 0; base < n; base += kBatch) {
    const std::size_t m = n - base < kBatch ? n - base : kBatch;
    for (std::size_t i = 0; i < m; ++i) shape.split(ciphertexts[base + i], left[i], right[i]);
    // Decryption runs the passes backwards: 4 (right -> left), 3 (left ->
    // right), 2 (right -> left), then 1 (left -> right) only if needed. Each
    // pass clears the nibble of the half it wrote (the draft's decode
    // pseudocode clears left_1 after pass 3, a typo for right_1).
    for (std::uint8_t pass = 4; pass >= (fourth_pass ? 1 : 2); --pass) {
      const bool odd_pass = pass & 1;
      for (std::size_t i = 0; i < m; ++i)
        shape.expand(pass, odd_pass ? left[i] : right[i], blocks[i]);
      aes_->encrypt_many(blocks, m);
      for (std::size_t i = 0; i < m; ++i) {
        if (odd_pass) {
          right[i] = FeistelShape::mix(right[i], blocks[i], shape.right_mask);
        } else {
          left[i] = FeistelShape::mix(left[i], blocks[i], shape.left_mask);
        }
      }
    }
    for (std::size_t i = 0; i < m; ++i) {
      const u128 text = fourth_pass ? shape.join_prefix(left[i], right[i]) : left[i];
      std::memcpy(server_ids[base + i], &text, 16);
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
      // Whole blocks: a reader of the server ID then loads from one 16-octet
      // store, which forwards, rather than from a mosaic of narrow ones.
      for (std::size_t j = 0; j < k; ++j) std::memcpy(server_ids[where[j]], blocks[j], 16);
    } else {
      four_pass_decode_many(texts, k, sid);
      for (std::size_t j = 0; j < k; ++j) std::memcpy(server_ids[where[j]], sid[j], 16);
    }
  }
}

}  // namespace qs
