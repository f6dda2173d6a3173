// The generator's only source of randomness. Our own xoshiro256** and our own
// bounded draws (not std::uniform_int_distribution, whose output differs
// between standard libraries) so that a --seed gives the same capture with
// g++/libstdc++ and clang/libc++ alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace qs::traffic {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    // splitmix64 spreads any seed (0 included) over the whole state.
    for (auto& word : state_) word = splitmix(seed);
  }

  // An independent stream for one sub-object (a connection, an extra packet),
  // so that its contents do not shift when options add or remove others.
  static Rng derive(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    std::uint64_t mixed = seed;
    mixed ^= splitmix(mixed) + stream * 0x9e3779b97f4a7c15ULL;
    mixed ^= splitmix(mixed) + index * 0xc2b2ae3d27d4eb4fULL;
    return Rng(mixed);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [lo, hi] (inclusive), by rejection so it is exactly uniform.
  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) {
    const std::uint64_t span = hi - lo;
    if (span == ~std::uint64_t{0}) return next();
    const std::uint64_t range = span + 1;
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % range);
    std::uint64_t draw;
    do draw = next(); while (draw >= limit);
    return lo + draw % range;
  }

  double unit() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  bool chance(double probability) { return unit() < probability; }
  std::uint8_t byte() { return std::uint8_t(next()); }

  void fill(std::uint8_t* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = byte();
  }
  std::vector<std::uint8_t> bytes(std::size_t n) {
    std::vector<std::uint8_t> out(n);
    fill(out.data(), n);
    return out;
  }

  // Fisher-Yates with our own draws.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      const std::size_t j = std::size_t(uniform(0, i - 1));
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_[4];
};

}  // namespace qs::traffic
