// TxStage: order, the bound, the gate, the stall clock.
#include "dataplane/fastpath/tx_stage.h"

#include <gtest/gtest.h>

#include <vector>

namespace qs {
namespace {

// A TX queue that takes at most `accept` packets per offer and records them.
struct FakeQueue {
  unsigned accept = ~0u;
  std::vector<int> sent;
  unsigned operator()(int* pkts, unsigned n) {
    const unsigned took = n < accept ? n : accept;
    sent.insert(sent.end(), pkts, pkts + took);
    return took;
  }
};

TEST(TxStage, AddSignalsEachWholeBurst) {
  TxStage<int> s(4);
  EXPECT_FALSE(s.add(0));
  EXPECT_FALSE(s.add(1));
  EXPECT_FALSE(s.add(2));
  EXPECT_TRUE(s.add(3));
  EXPECT_EQ(s.count(), 4u);
  // Not sent (a refused burst stays): the next signal is at two bursts, not
  // at every packet in between.
  EXPECT_FALSE(s.add(4));
  EXPECT_FALSE(s.add(5));
  EXPECT_FALSE(s.add(6));
  EXPECT_TRUE(s.add(7));
}

TEST(TxStage, WhatTheQueueRefusesStaysInOrderAndGoesFirst) {
  TxStage<int> s(4);
  FakeQueue q;
  q.accept = 3;
  for (int i = 0; i < 4; ++i) s.add(i);
  EXPECT_EQ(s.send(std::ref(q), 100), 3u);
  EXPECT_EQ(s.count(), 1u);
  for (int i = 4; i < 8; ++i) s.add(i);
  q.accept = ~0u;
  EXPECT_EQ(s.send(std::ref(q), 101), 5u);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(q.sent, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// A forwarding owner stages each burst whole: behind what a refusing queue
// left, in order, signalling once a whole burst waits.
TEST(TxStage, AddBurstAppendsInOrderBehindWhatWaits) {
  TxStage<int> s(4);
  FakeQueue q;
  const int first[] = {0, 1, 2};
  EXPECT_FALSE(s.add_burst(first, 3));
  EXPECT_EQ(s.count(), 3u);
  const int second[] = {3, 4, 5, 6};
  TxStage<int> exact(4);
  EXPECT_TRUE(exact.add_burst(second, 4));  // one whole burst
  EXPECT_TRUE(s.add_burst(second, 4));
  q.accept = 2;
  EXPECT_EQ(s.send(std::ref(q), 100), 2u);
  EXPECT_EQ(s.count(), 5u);
  EXPECT_FALSE(s.has_room());
  q.accept = ~0u;
  EXPECT_EQ(s.send(std::ref(q), 101), 5u);
  const int third[] = {7};
  EXPECT_FALSE(s.add_burst(third, 1));
  EXPECT_EQ(s.send(std::ref(q), 102), 1u);
  EXPECT_EQ(q.sent, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// The owner takes a burst of work only while has_room(): one more burst then
// always fits, so the stage never holds more than two bursts.
TEST(TxStage, HasRoomIsFalseOncePastOneBurst) {
  TxStage<int> s(kMaxBurst);
  FakeQueue refuse;
  refuse.accept = 0;
  unsigned bursts = 0;
  while (s.has_room()) {
    for (unsigned i = 0; i < kMaxBurst; ++i)
      if (s.add(int(i))) s.send(std::ref(refuse), 0);
    ++bursts;
  }
  EXPECT_EQ(bursts, 2u);
  EXPECT_EQ(s.count(), TxStage<int>::kCapacity);
  EXPECT_TRUE(refuse.sent.empty());
}

TEST(TxStage, StallClockRunsOnlyWhileTheQueueTakesNothing) {
  TxStage<int> s(2);
  FakeQueue q;
  EXPECT_EQ(s.stalled_for(50), 0u);
  s.add(1);
  s.add(2);
  q.accept = 0;
  s.send(std::ref(q), 1000);           // refused: the clock starts
  EXPECT_EQ(s.stalled_for(1500), 500u);
  s.send(std::ref(q), 2000);           // refused again: the clock keeps running
  EXPECT_EQ(s.stalled_for(2500), 1500u);
  q.accept = 1;
  s.send(std::ref(q), 3000);           // progress restarts it
  EXPECT_EQ(s.stalled_for(3100), 100u);
  q.accept = ~0u;
  s.send(std::ref(q), 4000);           // empty: no clock
  EXPECT_EQ(s.stalled_for(9000), 0u);
}

TEST(TxStage, DiscardEmptiesInOrderAndStopsTheClock) {
  TxStage<int> s(4);
  FakeQueue refuse;
  refuse.accept = 0;
  for (int i = 0; i < 6; ++i) s.add(i);
  s.send(std::ref(refuse), 10);
  std::vector<int> out;
  EXPECT_EQ(s.discard([&](int p) { out.push_back(p); }), 6u);
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.stalled_for(1000000), 0u);
}

}  // namespace
}  // namespace qs
