// SipHash (Aumasson & Bernstein, "SipHash: a fast short-input PRF"), keyed
// with 128 bits. The fallback owner of a connection is a function of its
// keyed hash, so without the key an attacker cannot choose connection IDs or
// 4-tuples that all land on one owner. SipHash-1-3 is the data-path variant
// (one compression round, three finalization rounds, as Rust's HashMap uses
// against hash flooding); SipHash-2-4 is the paper's default, kept for its
// published test vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace qs {

struct SipHashKey {
  std::uint64_t k0 = 0;
  std::uint64_t k1 = 0;

  // The key's octets as the paper orders them: k0 is octets 0..7, little endian.
  static SipHashKey from_bytes(const std::array<std::uint8_t, 16>& bytes) {
    SipHashKey key;
    for (int i = 7; i >= 0; --i) key.k0 = key.k0 << 8 | bytes[std::size_t(i)];
    for (int i = 15; i >= 8; --i) key.k1 = key.k1 << 8 | bytes[std::size_t(i)];
    return key;
  }
};

namespace siphash_detail {

inline std::uint64_t rotl(std::uint64_t x, int b) { return x << b | x >> (64 - b); }

struct State {
  std::uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  }
};

inline std::uint64_t load_le64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

}  // namespace siphash_detail

template <int kCompressionRounds, int kFinalRounds>
inline std::uint64_t siphash(const SipHashKey& key, const std::uint8_t* in, std::size_t len) {
  using namespace siphash_detail;
  State s{0x736f6d6570736575ULL ^ key.k0, 0x646f72616e646f6dULL ^ key.k1,
          0x6c7967656e657261ULL ^ key.k0, 0x7465646279746573ULL ^ key.k1};
  const std::size_t whole = len & ~std::size_t(7);
  for (std::size_t i = 0; i < whole; i += 8) {
    const std::uint64_t m = load_le64(in + i);
    s.v3 ^= m;
    for (int r = 0; r < kCompressionRounds; ++r) s.round();
    s.v0 ^= m;
  }
  // Last word: the remaining 0..7 octets, the length's low octet on top.
  // From eight octets on, the remaining ones are the top of the input's last
  // eight, loaded at once rather than octet by octet.
  std::uint64_t m = std::uint64_t(len) << 56;
  const std::size_t rest = len - whole;
  if (len >= 8) {
    if (rest != 0) m |= load_le64(in + len - 8) >> (8 * (8 - rest));
  } else {
    for (std::size_t i = rest; i > 0; --i) m |= std::uint64_t(in[whole + i - 1]) << (8 * (i - 1));
  }
  s.v3 ^= m;
  for (int r = 0; r < kCompressionRounds; ++r) s.round();
  s.v0 ^= m;
  s.v2 ^= 0xff;
  for (int r = 0; r < kFinalRounds; ++r) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

inline std::uint64_t siphash13(const SipHashKey& key, const std::uint8_t* in, std::size_t len) {
  return siphash<1, 3>(key, in, len);
}
inline std::uint64_t siphash24(const SipHashKey& key, const std::uint8_t* in, std::size_t len) {
  return siphash<2, 4>(key, in, len);
}

}  // namespace qs
