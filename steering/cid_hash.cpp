#include "steering/cid_hash.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "steering/aes128.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace qs {
namespace {

constexpr std::size_t kBatch = 64;

std::array<std::uint8_t, 16> derive_aes_key(const SipHashKey& key) {
  static constexpr std::uint8_t kLabel0[] = "quicsteer: the AES key of the DCID hash, octets 0-7";
  static constexpr std::uint8_t kLabel1[] = "quicsteer: the AES key of the DCID hash, octets 8-15";
  const std::uint64_t halves[2] = {siphash24(key, kLabel0, sizeof kLabel0),
                                   siphash24(key, kLabel1, sizeof kLabel1)};
  std::array<std::uint8_t, 16> out;
  for (std::size_t i = 0; i < 16; ++i) out[i] = std::uint8_t(halves[i / 8] >> (8 * (i % 8)));
  return out;
}

// `count` (0..16) octets from p, zero past them, `top` ORed into octet 15
// (zero there when count < 16), XORed into `chain` (the previous block's
// ciphertext, or null for none), written to `out` with one store so that the
// cipher's load of the block is forwarded from that store.
// `readable`: how many octets from p on may be read.
inline void load_block(const std::uint8_t* p, std::size_t count, std::size_t readable,
                       std::uint8_t top, const std::uint8_t* chain, std::uint8_t* out) {
#if defined(__SSE2__)
  // 16 ones then 16 zeros: the 16 octets from 16 - count are a mask of count ones.
  alignas(16) static constexpr std::uint8_t kOnes[32] = {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  __m128i v;
  if (readable >= 16) {
    v = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kOnes + 16 - count)));
  } else {
    alignas(16) std::uint8_t tmp[16] = {};
    if (count != 0) std::memcpy(tmp, p, count);  // p may be null with nothing to read
    v = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  }
  v = _mm_or_si128(v, _mm_slli_si128(_mm_cvtsi32_si128(top), 15));
  if (chain != nullptr) v = _mm_xor_si128(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(chain)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
#else
  (void)readable;
  std::uint8_t tmp[16] = {};
  if (count != 0) std::memcpy(tmp, p, count);
  tmp[15] |= top;
  for (std::size_t i = 0; i < 16; ++i) out[i] = std::uint8_t(tmp[i] ^ (chain != nullptr ? chain[i] : 0));
#endif
}

// Block 0: octets 0..14 of the DCID, its length in octet 15.
inline void first_block(const std::uint8_t* cid, std::size_t len, std::size_t readable,
                        std::uint8_t* out) {
  load_block(cid, std::min<std::size_t>(len, 15), readable, std::uint8_t(len), nullptr, out);
}

}  // namespace

CidHash::CidHash(const SipHashKey& key, bool prefer_aes_ni)
    : aes_(std::make_unique<Aes128>(derive_aes_key(key).data(), prefer_aes_ni)) {}
CidHash::~CidHash() = default;
CidHash::CidHash(CidHash&&) noexcept = default;
CidHash& CidHash::operator=(CidHash&&) noexcept = default;

bool CidHash::uses_aes_ni() const { return aes_->backend() == Aes128::Backend::kAesNi; }

std::uint64_t CidHash::hash(const std::uint8_t* cid, std::size_t len) const {
  const std::uint8_t len8 = std::uint8_t(len);
  const std::uint16_t readable = std::uint16_t(len);
  std::uint64_t out;
  hash_many(&cid, &len8, &readable, 1, &out);
  return out;
}

void CidHash::hash_many(const std::uint8_t* const* cids, const std::uint8_t* lens,
                        const std::uint16_t* readable, std::size_t n, std::uint64_t* out) const {
  for (std::size_t base = 0; base < n; base += kBatch) {
    const std::size_t m = std::min(n - base, kBatch);
    alignas(16) Aes128::Block blocks[kBatch];
    // DCIDs longer than 15 octets chain further blocks, all such DCIDs of the
    // batch together.
    std::uint8_t longer[kBatch];
    std::size_t k = 0;
    for (std::size_t i = 0; i < m; ++i) {
      first_block(cids[base + i], lens[base + i], readable[base + i], blocks[i]);
      longer[k] = std::uint8_t(i);
      k += lens[base + i] > 15;
    }
    aes_->encrypt_many(blocks, m);
    for (std::size_t offset = 15; k > 0; offset += 16) {
      alignas(16) Aes128::Block next[kBatch];
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t i = longer[j];
        load_block(cids[base + i] + offset, std::min<std::size_t>(lens[base + i] - offset, 16),
                   readable[base + i] - offset, 0, blocks[i], next[j]);
      }
      aes_->encrypt_many(next, k);
      std::size_t still = 0;
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t i = longer[j];
        std::memcpy(blocks[i], next[j], 16);
        if (lens[base + i] > offset + 16) longer[still++] = std::uint8_t(i);
      }
      k = still;
    }
    for (std::size_t i = 0; i < m; ++i) out[base + i] = siphash_detail::load_le64(blocks[i]);
  }
}

}  // namespace qs
