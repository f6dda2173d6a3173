// MonotonicPortCounters: totals that carry across a device's counter reset.
#include "dataplane/control/port_counters.h"

#include <gtest/gtest.h>

namespace qs {
namespace {

PortCounters reading(std::uint64_t ipackets, std::uint64_t opackets) {
  PortCounters c;
  c[PortCounters::kIpackets] = ipackets;
  c[PortCounters::kOpackets] = opackets;
  return c;
}

TEST(PortCounters, FollowTheDeviceWhileItCounts) {
  MonotonicPortCounters m;
  EXPECT_EQ(m.update(reading(10, 5))[PortCounters::kIpackets], 10u);
  EXPECT_EQ(m.update(reading(25, 9))[PortCounters::kOpackets], 9u);
  EXPECT_EQ(m.resets(), 0u);
}

// net_memif zeroes its counters when the peer disconnects: 37 M packets
// must not become 0, and a rate across the reset must not wrap.
TEST(PortCounters, CarryAcrossAResetAndNeverGoBackwards) {
  MonotonicPortCounters m;
  m.update(reading(37000000, 36000000));
  const PortCounters after = m.update(reading(0, 0));
  EXPECT_EQ(after[PortCounters::kIpackets], 37000000u);
  EXPECT_EQ(after[PortCounters::kOpackets], 36000000u);
  EXPECT_EQ(m.update(reading(100, 50))[PortCounters::kIpackets], 37000100u);
  EXPECT_EQ(m.resets(), 1u);
  m.update(reading(3, 1));  // a second reset
  EXPECT_EQ(m.totals()[PortCounters::kIpackets], 37000103u);
  EXPECT_EQ(m.totals()[PortCounters::kOpackets], 36000051u);
  EXPECT_EQ(m.resets(), 2u);
}

}  // namespace
}  // namespace qs
