// The DCID hash (steering/cid_hash.h) against CBC-MAC computed by OpenSSL's
// AES-128-CBC on the encoding the header specifies; batched equals single,
// AES-NI equals OpenSSL, and every octet, the length and the key count.
#include "steering/cid_hash.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "steering/aes128.h"

namespace qs {
namespace {

SipHashKey test_key() { return SipHashKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL}; }

// The AES key the header specifies: SipHash-2-4 of two labels.
std::array<std::uint8_t, 16> expected_aes_key(const SipHashKey& key) {
  static constexpr std::uint8_t l0[] = "quicsteer: the AES key of the DCID hash, octets 0-7";
  static constexpr std::uint8_t l1[] = "quicsteer: the AES key of the DCID hash, octets 8-15";
  const std::uint64_t h[2] = {siphash24(key, l0, sizeof l0), siphash24(key, l1, sizeof l1)};
  std::array<std::uint8_t, 16> k;
  for (std::size_t i = 0; i < 16; ++i) k[i] = std::uint8_t(h[i / 8] >> (8 * (i % 8)));
  return k;
}

// CBC-MAC by OpenSSL: AES-128-CBC with a zero IV over the encoding, the last
// ciphertext block's first eight octets little-endian.
std::uint64_t reference(const SipHashKey& key, const std::uint8_t* cid, std::size_t len) {
  std::vector<std::uint8_t> msg(16, 0);
  std::memcpy(msg.data(), cid, std::min<std::size_t>(len, 15));
  msg[15] = std::uint8_t(len);
  for (std::size_t off = 15; off < len; off += 16) {
    std::uint8_t block[16] = {};
    std::memcpy(block, cid + off, std::min<std::size_t>(len - off, 16));
    msg.insert(msg.end(), block, block + 16);
  }
  const auto k = expected_aes_key(key);
  const std::uint8_t iv[16] = {};
  std::vector<std::uint8_t> ct(msg.size() + 16);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_128_cbc(), nullptr, k.data(), iv), 1);
  EVP_CIPHER_CTX_set_padding(ctx, 0);
  EXPECT_EQ(EVP_EncryptUpdate(ctx, ct.data(), &n, msg.data(), int(msg.size())), 1);
  EVP_CIPHER_CTX_free(ctx);
  std::uint64_t h = 0;
  for (int b = 7; b >= 0; --b) h = h << 8 | ct[msg.size() - 16 + std::size_t(b)];
  return h;
}

TEST(CidHash, EqualsCbcMacByOpenSslAtEveryLength) {
  std::mt19937_64 rng(1);
  for (bool aes_ni : {true, false}) {
    const CidHash hash(test_key(), aes_ni);
    if (aes_ni && !Aes128::cpu_has_aes_ni()) continue;
    EXPECT_EQ(hash.uses_aes_ni(), aes_ni);
    for (std::size_t len = 0; len <= 255; ++len) {
      std::vector<std::uint8_t> cid(len + 1);
      for (auto& b : cid) b = std::uint8_t(rng());
      ASSERT_EQ(hash.hash(cid.data(), len), reference(test_key(), cid.data(), len)) << len;
    }
  }
}

// A burst of DCIDs of mixed lengths, some with octets to spare after them
// (loaded wide and masked) and some ending the buffer (copied), equals one at
// a time; the spare octets are noise that must not count.
TEST(CidHash, ManyEqualsOneWhateverIsReadable) {
  const CidHash hash(test_key());
  std::mt19937_64 rng(2);
  for (std::size_t n : {1u, 7u, 64u, 65u, 200u}) {
    std::vector<std::vector<std::uint8_t>> buffers(n);
    std::vector<const std::uint8_t*> cids(n);
    std::vector<std::uint8_t> lens(n);
    std::vector<std::uint16_t> readable(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t len = i % 3 == 0 ? rng() % 256 : rng() % 21;
      const std::size_t spare = rng() % 2 ? 0 : 1 + rng() % 40;
      buffers[i].resize(len + spare);
      for (auto& b : buffers[i]) b = std::uint8_t(rng());
      cids[i] = buffers[i].data();
      lens[i] = std::uint8_t(len);
      readable[i] = std::uint16_t(len + spare);
    }
    std::vector<std::uint64_t> out(n);
    hash.hash_many(cids.data(), lens.data(), readable.data(), n, out.data());
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], hash.hash(cids[i], lens[i])) << "n " << n << " i " << i << " len " << int(lens[i]);
  }
}

// Flipping any octet of a DCID of any length 1..40 changes its hash, and so
// does its length alone (zero DCIDs of every length hash apart).
TEST(CidHash, EveryOctetAndTheLengthCount) {
  const CidHash hash(test_key());
  std::set<std::uint64_t> zeros;
  std::uint8_t zero[64] = {};
  for (std::size_t len = 0; len <= 40; ++len) {
    EXPECT_TRUE(zeros.insert(hash.hash(zero, len)).second) << len;
    std::uint8_t cid[40];
    for (std::size_t i = 0; i < len; ++i) cid[i] = std::uint8_t(i * 37 + len);
    const std::uint64_t base = hash.hash(cid, len);
    for (std::size_t i = 0; i < len; ++i) {
      cid[i] ^= 0x01;
      EXPECT_NE(hash.hash(cid, len), base) << "len " << len << " octet " << i;
      cid[i] ^= 0x01;
    }
  }
}

TEST(CidHash, AnotherKeyAnotherHash) {
  SipHashKey other = test_key();
  other.k0 ^= 1;
  const CidHash a(test_key()), b(other);
  const std::uint8_t cid[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_NE(a.hash(cid, 8), b.hash(cid, 8));
}

}  // namespace
}  // namespace qs
