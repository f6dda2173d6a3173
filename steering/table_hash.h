// A keyed 64-bit hash for table keys, several times cheaper than SipHash on
// short inputs: eight octets at a time through a 64x64->128-bit multiply,
// folded (wyhash-style). Not a MAC: it keeps anyone who does not know the
// seed from precomputing keys that collide, which is what a table needs
// against flooding. What decides an owner (the fallback) stays on SipHash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace qs {

inline std::uint64_t table_hash(std::uint64_t seed, const std::uint8_t* p, std::size_t len) {
  auto mix = [](std::uint64_t a, std::uint64_t b) {
    const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
    return std::uint64_t(r) ^ std::uint64_t(r >> 64);
  };
  std::uint64_t h = seed ^ (0x9e3779b97f4a7c15ull * (len + 1));
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w, 0xa0761d6478bd642full);
  }
  if (i < len) {
    std::uint64_t tail = 0;
    std::memcpy(&tail, p + i, len - i);  // little endian: the remaining octets, zero-extended
    h = mix(h ^ tail, 0xe7037ed1a0b428dbull);
  }
  return mix(h ^ seed, 0x8ebc6af09c88c6e3ull);
}

}  // namespace qs
