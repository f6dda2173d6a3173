// us_to_tsc: exact over the whole range the profile allows (issue 13, defect 1).
#include "dataplane/fastpath/tsc.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

TEST(UsToTsc, LongestIdleTimeoutDoesNotWrap) {
  // action.idle_timeout_ms accepts up to 86,400,000 ms (a day). At 3 GHz the
  // old us * hz / 10^6 wrapped above about 1.7 h.
  constexpr std::uint64_t day_us = 86400000ull * 1000;
  EXPECT_EQ(qs::us_to_tsc(day_us, 3000000000ull), 86400ull * 3000000000ull);
  EXPECT_EQ(qs::us_to_tsc(2ull * 3600 * 1000000, 3000000000ull), 7200ull * 3000000000ull);
  EXPECT_EQ(qs::us_to_tsc(day_us, 5000000000ull), 86400ull * 5000000000ull);
}

TEST(UsToTsc, ExactForSmallValuesAndFractions) {
  EXPECT_EQ(qs::us_to_tsc(0, 3000000000ull), 0u);
  EXPECT_EQ(qs::us_to_tsc(1, 3000000000ull), 3000u);
  EXPECT_EQ(qs::us_to_tsc(1, 2994373000ull), 2994u);  // rounds down, as before
  EXPECT_EQ(qs::us_to_tsc(1500000, 2000000000ull), 3000000000ull);
  EXPECT_EQ(qs::us_to_tsc(10000, 2994373000ull), 29943730u);
}

TEST(UsToTsc, SaturatesInsteadOfWrapping) {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(qs::us_to_tsc(max, 3000000000ull), max);
  EXPECT_EQ(qs::us_to_tsc(max / 2, 1000000ull), max / 2);  // 1 MHz: one cycle per microsecond
}

}  // namespace
