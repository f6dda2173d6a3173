#include "steering/aes128.h"

#include <cstring>

// The AES_KEY interface is deprecated in OpenSSL 3 in favour of EVP, but EVP
// contexts are mutable per call and would need one per thread; AES_KEY is a
// read-only schedule (see aes128.h).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/aes.h>

#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QS_HAVE_AES_NI 1
#else
#define QS_HAVE_AES_NI 0
#endif

namespace qs {

struct Aes128::OpenSslKeys {
  AES_KEY enc;
  AES_KEY dec;
};

#if QS_HAVE_AES_NI
namespace {

#define QS_AES_TARGET __attribute__((target("aes,sse4.1")))

// One step of the AES-128 key expansion (FIPS-197 5.2) done by the CPU's
// AESKEYGENASSIST: the assist computes SubWord(RotWord(w3)) ^ rcon, the
// shifts and XORs fold it into the previous round key.
QS_AES_TARGET inline __m128i expand_step(__m128i key, __m128i assist) {
  assist = _mm_shuffle_epi32(assist, 0xff);
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  return _mm_xor_si128(key, assist);
}

QS_AES_TARGET void expand_key(const std::uint8_t key[16], std::uint8_t enc[11][16],
                              std::uint8_t dec[11][16]) {
  __m128i rk[11];
  rk[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  // The round constant must be an immediate, hence the unrolled sequence.
  rk[1] = expand_step(rk[0], _mm_aeskeygenassist_si128(rk[0], 0x01));
  rk[2] = expand_step(rk[1], _mm_aeskeygenassist_si128(rk[1], 0x02));
  rk[3] = expand_step(rk[2], _mm_aeskeygenassist_si128(rk[2], 0x04));
  rk[4] = expand_step(rk[3], _mm_aeskeygenassist_si128(rk[3], 0x08));
  rk[5] = expand_step(rk[4], _mm_aeskeygenassist_si128(rk[4], 0x10));
  rk[6] = expand_step(rk[5], _mm_aeskeygenassist_si128(rk[5], 0x20));
  rk[7] = expand_step(rk[6], _mm_aeskeygenassist_si128(rk[6], 0x40));
  rk[8] = expand_step(rk[7], _mm_aeskeygenassist_si128(rk[7], 0x80));
  rk[9] = expand_step(rk[8], _mm_aeskeygenassist_si128(rk[8], 0x1b));
  rk[10] = expand_step(rk[9], _mm_aeskeygenassist_si128(rk[9], 0x36));
  for (int i = 0; i < 11; ++i) _mm_store_si128(reinterpret_cast<__m128i*>(enc[i]), rk[i]);
  // AESDEC implements the "equivalent inverse cipher": reversed round keys,
  // the middle ones passed through InvMixColumns.
  _mm_store_si128(reinterpret_cast<__m128i*>(dec[0]), rk[10]);
  for (int i = 1; i < 10; ++i)
    _mm_store_si128(reinterpret_cast<__m128i*>(dec[i]), _mm_aesimc_si128(rk[10 - i]));
  _mm_store_si128(reinterpret_cast<__m128i*>(dec[10]), rk[0]);
}

// Up to kLanes blocks go through the rounds side by side. The lane count is
// a template parameter so that each group's rounds unroll into straight
// AESENC sequences on registers; with a run-time count every round of every
// lane went through the stack with loop overhead, four times the instructions.
constexpr std::size_t kLanes = 8;

template <bool kEncrypt, std::size_t kN>
QS_AES_TARGET inline void crypt_lanes(const __m128i* rk, Aes128::Block* blocks) {
  __m128i b[kN];
  for (std::size_t i = 0; i < kN; ++i)
    b[i] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[i])), rk[0]);
  for (int r = 1; r < 10; ++r)
    for (std::size_t i = 0; i < kN; ++i)
      b[i] = kEncrypt ? _mm_aesenc_si128(b[i], rk[r]) : _mm_aesdec_si128(b[i], rk[r]);
  for (std::size_t i = 0; i < kN; ++i) {
    b[i] = kEncrypt ? _mm_aesenclast_si128(b[i], rk[10]) : _mm_aesdeclast_si128(b[i], rk[10]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(blocks[i]), b[i]);
  }
}

template <bool kEncrypt>
QS_AES_TARGET void crypt_many(const std::uint8_t keys[11][16], Aes128::Block* blocks,
                              std::size_t n) {
  const __m128i* rk = reinterpret_cast<const __m128i*>(keys);
  for (; n >= kLanes; n -= kLanes, blocks += kLanes) crypt_lanes<kEncrypt, kLanes>(rk, blocks);
  switch (n) {
    case 7: crypt_lanes<kEncrypt, 7>(rk, blocks); break;
    case 6: crypt_lanes<kEncrypt, 6>(rk, blocks); break;
    case 5: crypt_lanes<kEncrypt, 5>(rk, blocks); break;
    case 4: crypt_lanes<kEncrypt, 4>(rk, blocks); break;
    case 3: crypt_lanes<kEncrypt, 3>(rk, blocks); break;
    case 2: crypt_lanes<kEncrypt, 2>(rk, blocks); break;
    case 1: crypt_lanes<kEncrypt, 1>(rk, blocks); break;
    default: break;
  }
}

template <bool kEncrypt>
QS_AES_TARGET void crypt_one(const std::uint8_t keys[11][16], const std::uint8_t in[16],
                             std::uint8_t out[16]) {
  __m128i b = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)),
                            _mm_load_si128(reinterpret_cast<const __m128i*>(keys[0])));
  for (int r = 1; r < 10; ++r) {
    const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(keys[r]));
    b = kEncrypt ? _mm_aesenc_si128(b, k) : _mm_aesdec_si128(b, k);
  }
  const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(keys[10]));
  b = kEncrypt ? _mm_aesenclast_si128(b, k) : _mm_aesdeclast_si128(b, k);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), b);
}

}  // namespace
#endif

bool Aes128::cpu_has_aes_ni() {
#if QS_HAVE_AES_NI
  __builtin_cpu_init();
  return __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1");
#else
  return false;
#endif
}

Aes128::Aes128(const std::uint8_t key[16], bool prefer_aes_ni) {
  std::memset(enc_keys_, 0, sizeof enc_keys_);
  std::memset(dec_keys_, 0, sizeof dec_keys_);
#if QS_HAVE_AES_NI
  if (prefer_aes_ni && cpu_has_aes_ni()) {
    backend_ = Backend::kAesNi;
    expand_key(key, enc_keys_, dec_keys_);
    return;
  }
#else
  (void)prefer_aes_ni;
#endif
  backend_ = Backend::kOpenSsl;
  openssl_ = std::make_unique<OpenSslKeys>();
  if (AES_set_encrypt_key(key, 128, &openssl_->enc) != 0 ||
      AES_set_decrypt_key(key, 128, &openssl_->dec) != 0)
    throw std::runtime_error("OpenSSL rejected the AES-128 key");
}

Aes128::~Aes128() = default;

void Aes128::encrypt(const std::uint8_t in[16], std::uint8_t out[16]) const {
#if QS_HAVE_AES_NI
  if (backend_ == Backend::kAesNi) return crypt_one<true>(enc_keys_, in, out);
#endif
  AES_encrypt(in, out, &openssl_->enc);
}

void Aes128::decrypt(const std::uint8_t in[16], std::uint8_t out[16]) const {
#if QS_HAVE_AES_NI
  if (backend_ == Backend::kAesNi) return crypt_one<false>(dec_keys_, in, out);
#endif
  AES_decrypt(in, out, &openssl_->dec);
}

void Aes128::encrypt_many(Block* blocks, std::size_t n) const {
#if QS_HAVE_AES_NI
  if (backend_ == Backend::kAesNi) return crypt_many<true>(enc_keys_, blocks, n);
#endif
  for (std::size_t i = 0; i < n; ++i) AES_encrypt(blocks[i], blocks[i], &openssl_->enc);
}

void Aes128::decrypt_many(Block* blocks, std::size_t n) const {
#if QS_HAVE_AES_NI
  if (backend_ == Backend::kAesNi) return crypt_many<false>(dec_keys_, blocks, n);
#endif
  for (std::size_t i = 0; i < n; ++i) AES_decrypt(blocks[i], blocks[i], &openssl_->dec);
}

}  // namespace qs
