// Microseconds to TSC cycles, for settings read from the profile. Control
// path: the data path compares TSC values only.
#pragma once

#include <cstdint>

namespace qs {

// Exact for every input: whole seconds and the remainder are scaled
// separately, so us * tsc_hz never has to fit in 64 bits (it does not for
// action.idle_timeout_ms above about 1.7 hours at 3 GHz). Saturates at the
// largest uint64_t instead of wrapping.
constexpr std::uint64_t us_to_tsc(std::uint64_t us, std::uint64_t tsc_hz) {
  constexpr std::uint64_t kUsPerSecond = 1000000;
  const std::uint64_t seconds = us / kUsPerSecond;
  const std::uint64_t rest = us % kUsPerSecond;
  const std::uint64_t max = ~std::uint64_t{0};
  if (seconds != 0 && tsc_hz > max / seconds) return max;
  const std::uint64_t whole = seconds * tsc_hz;
  // rest < 10^6: rest * tsc_hz overflows only for tsc_hz above ~1.8e13.
  const std::uint64_t part = tsc_hz > max / kUsPerSecond ? rest * (tsc_hz / kUsPerSecond)
                                                         : rest * tsc_hz / kUsPerSecond;
  return whole > max - part ? max : whole + part;
}

}  // namespace qs
