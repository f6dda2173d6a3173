// ParkingTicket on its own: order per owner, partial releases, discarding.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/fastpath/parking_ticket.h"

namespace qs {
namespace {

TEST(ParkingTicket, StartsEmptyAndRecordsWhenIssued) {
  ParkingTicket<int> t;
  EXPECT_FALSE(t.held());
  t.park(1, 0, 100);
  t.park(2, 0, 200);  // a later park keeps the issue time
  EXPECT_TRUE(t.held());
  EXPECT_EQ(t.count(), 2u);
  EXPECT_EQ(t.issued_tsc(), 100u);
}

TEST(ParkingTicket, ReleasesEachOwnersPacketsInArrivalOrder) {
  ParkingTicket<int> t;
  // Packets 10.. for owner 1 and 20.. for owner 2, interleaved.
  const int pkts[] = {10, 20, 11, 21, 12, 22};
  const std::uint16_t owners[] = {1, 2, 1, 2, 1, 2};
  for (int i = 0; i < 6; ++i) t.park(pkts[i], owners[i], 5);
  std::vector<std::pair<int, std::vector<int>>> offered;
  const unsigned released = t.release([&](std::uint16_t owner, int* p, unsigned n) {
    offered.push_back({owner, std::vector<int>(p, p + n)});
    return n;
  });
  EXPECT_EQ(released, 6u);
  EXPECT_FALSE(t.held());
  ASSERT_EQ(offered.size(), 2u);
  EXPECT_EQ(offered[0].first, 1);
  EXPECT_EQ(offered[0].second, (std::vector<int>{10, 11, 12}));
  EXPECT_EQ(offered[1].first, 2);
  EXPECT_EQ(offered[1].second, (std::vector<int>{20, 21, 22}));
}

TEST(ParkingTicket, KeepsWhatAnOwnerDidNotTakeAndItsOrder) {
  ParkingTicket<int> t;
  const int pkts[] = {10, 20, 11, 21, 12};
  const std::uint16_t owners[] = {1, 2, 1, 2, 1};
  for (int i = 0; i < 5; ++i) t.park(pkts[i], owners[i], 7);
  // Owner 1 takes a prefix of one packet; owner 2 takes nothing.
  EXPECT_EQ(t.release([](std::uint16_t owner, int*, unsigned) { return owner == 1 ? 1u : 0u; }), 1u);
  EXPECT_EQ(t.count(), 4u);
  EXPECT_EQ(t.issued_tsc(), 7u);  // still the same wait
  std::vector<int> left;
  t.release([&](std::uint16_t owner, int* p, unsigned n) {
    if (owner == 1) left.insert(left.end(), p, p + n);
    return 0u;
  });
  EXPECT_EQ(left, (std::vector<int>{11, 12}));
  std::vector<int> discarded;
  EXPECT_EQ(t.discard([&](int p, std::uint16_t) { discarded.push_back(p); }), 4u);
  EXPECT_EQ(discarded, (std::vector<int>{20, 11, 21, 12}));
  EXPECT_FALSE(t.held());
}

TEST(ParkingTicket, HoldsAFullBurst) {
  ParkingTicket<unsigned> t;
  for (unsigned i = 0; i < kMaxBurst; ++i) t.park(i, std::uint16_t(i % 3), 1);
  EXPECT_EQ(t.count(), kMaxBurst);
  std::vector<unsigned> order;
  t.discard([&](unsigned p, std::uint16_t owner) {
    EXPECT_EQ(owner, p % 3);
    order.push_back(p);
  });
  for (unsigned i = 0; i < kMaxBurst; ++i) EXPECT_EQ(order[i], i);
}

// The owners a ticket waits for: what keeps sibling queues from overtaking it.
TEST(ParkingTicket, OwnerMaskFollowsWhatIsParked) {
  ParkingTicket<int> t;
  EXPECT_EQ(t.owner_mask(), 0u);
  t.park(1, 3, 5);
  t.park(2, 63, 5);
  t.park(3, 3, 5);
  EXPECT_EQ(t.owner_mask(), (1ull << 3) | (1ull << 63));
  // Owner 3 takes both of its packets: only 63 is waited for.
  EXPECT_EQ(t.release([](std::uint16_t owner, int*, unsigned n) { return owner == 3 ? n : 0u; }), 2u);
  EXPECT_EQ(t.owner_mask(), 1ull << 63);
  t.restart_clock(40);
  EXPECT_EQ(t.issued_tsc(), 40u);
  t.discard([](int, std::uint16_t) {});
  EXPECT_EQ(t.owner_mask(), 0u);
}

}  // namespace
}  // namespace qs
