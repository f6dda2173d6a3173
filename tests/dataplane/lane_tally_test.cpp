// LaneTally: every kind counted apart, up to a whole burst of one kind.
#include "dataplane/fastpath/lane_tally.h"

#include <gtest/gtest.h>

#include <random>

namespace qs {
namespace {

TEST(LaneTally, AWholeBurstOfOneKindFillsOnlyItsLane) {
  for (unsigned kind = 0; kind < 8; ++kind) {
    LaneTally<8> t;
    for (unsigned i = 0; i < kMaxBurst; ++i) t.add(kind);
    for (unsigned k = 0; k < 8; ++k) EXPECT_EQ(t[k], k == kind ? kMaxBurst : 0u) << "kind " << kind << ", lane " << k;
  }
}

TEST(LaneTally, MixedBurstsMatchAnArrayOfCounts) {
  std::mt19937 rng(7);
  for (unsigned round = 0; round < 1000; ++round) {
    LaneTally<8> t;
    unsigned expected[8] = {};
    const unsigned n = rng() % (kMaxBurst + 1);
    for (unsigned i = 0; i < n; ++i) {
      const unsigned kind = rng() % 8;
      t.add(kind);
      ++expected[kind];
    }
    for (unsigned k = 0; k < 8; ++k) ASSERT_EQ(t[k], expected[k]) << "round " << round << ", lane " << k;
  }
}

}  // namespace
}  // namespace qs
