// HealthMonitor: the verdict /healthz and /quicsteer/health publish, from
// successive samples of the lcores' heartbeats and the ports' links.
#include "dataplane/control/health_monitor.h"

#include <gtest/gtest.h>

namespace qs {
namespace {

using std::chrono::milliseconds;
using Clock = HealthMonitor::Clock;

HealthSample sample(std::uint64_t beats1, std::uint64_t beats2, bool wire_up = true, bool sink_up = true) {
  HealthSample s;
  s.lcores = {{1, beats1}, {2, beats2}};
  s.ports = {{"wire", wire_up}, {"sink", sink_up}};
  return s;
}

TEST(Health, StartingUntilEveryLcoreHasMovedThenHealthy) {
  HealthMonitor m(milliseconds(1000));
  const auto t0 = Clock::now();
  const Health first = m.judge(sample(5, 0), t0);
  EXPECT_FALSE(first.healthy);
  EXPECT_EQ(first.reason, "lcore 1 has not started yet; lcore 2 has not started yet");
  const Health one = m.judge(sample(6, 0), t0 + milliseconds(20));
  EXPECT_FALSE(one.healthy);
  EXPECT_EQ(one.reason, "lcore 2 has not started yet");
  const Health both = m.judge(sample(7, 1), t0 + milliseconds(40));
  EXPECT_TRUE(both.healthy);
  EXPECT_EQ(both.reason, "");
}

// Heartbeats come once per housekeeping tick, not per packet: samples taken
// faster than the ticks see the same count, and that is no stall.
TEST(Health, StallsOnlyAfterTheThresholdAndRecovers) {
  HealthMonitor m(milliseconds(1000));
  const auto t0 = Clock::now();
  m.judge(sample(1, 1), t0);
  EXPECT_TRUE(m.judge(sample(2, 2), t0 + milliseconds(10)).healthy);
  EXPECT_TRUE(m.judge(sample(2, 3), t0 + milliseconds(20)).healthy);
  EXPECT_TRUE(m.judge(sample(2, 4), t0 + milliseconds(1010)).healthy);
  const Health stalled = m.judge(sample(2, 5), t0 + milliseconds(1011));
  EXPECT_FALSE(stalled.healthy);
  EXPECT_EQ(stalled.reason, "lcore 1 made no progress for 1001 ms");
  EXPECT_TRUE(m.judge(sample(3, 6), t0 + milliseconds(1500)).healthy);
}

TEST(Health, EveryLinkDownIsNamedWithTheStalls) {
  HealthMonitor m(milliseconds(100));
  const auto t0 = Clock::now();
  m.judge(sample(1, 1), t0);
  EXPECT_TRUE(m.judge(sample(2, 2), t0 + milliseconds(10)).healthy);
  const Health down = m.judge(sample(3, 3, false, true), t0 + milliseconds(20));
  EXPECT_FALSE(down.healthy);
  EXPECT_EQ(down.reason, "port wire link down");
  const Health worse = m.judge(sample(3, 4, false, false), t0 + milliseconds(200));
  EXPECT_EQ(worse.reason, "lcore 1 made no progress for 180 ms; port wire link down; port sink link down");
  EXPECT_TRUE(m.judge(sample(4, 5), t0 + milliseconds(210)).healthy);
}

// The watchdog and READY=1 follow progress alone: a lost link makes the
// appliance unhealthy (the router routes around it), never stalled (the
// manager would restart it, which brings no link back).
TEST(Health, ALinkDownIsUnhealthyButProgressing) {
  HealthMonitor m(milliseconds(100));
  const auto t0 = Clock::now();
  EXPECT_FALSE(m.judge(sample(1, 1, false), t0).progressing);
  const Health down = m.judge(sample(2, 2, false), t0 + milliseconds(10));
  EXPECT_FALSE(down.healthy);
  EXPECT_TRUE(down.progressing);
  EXPECT_EQ(down.reason, "port wire link down");
  const Health stalled = m.judge(sample(2, 3, false), t0 + milliseconds(200));
  EXPECT_FALSE(stalled.progressing);
}

HealthSample with_tx(std::uint64_t beats, bool timed_out, std::uint64_t drops) {
  HealthSample s = sample(beats, beats);
  s.tx_queues = {{"sink", 0, false, 0}, {"sink", 1, timed_out, drops}};
  return s;
}

// A TX queue that takes nothing (tx_timeout on every packet) is unhealthy
// while its drops go on; once traffic stops coming (the route withdrawn) it
// reads healthy again, so that traffic returns and tries it, and a queue
// that takes a packet again is healthy at once.
TEST(Health, ADeadTxQueueIsUnhealthyWhileItDrops) {
  HealthMonitor m(milliseconds(100));
  const auto t0 = Clock::now();
  m.judge(with_tx(1, false, 0), t0);
  EXPECT_TRUE(m.judge(with_tx(2, false, 0), t0 + milliseconds(10)).healthy);
  const Health dead = m.judge(with_tx(3, true, 32), t0 + milliseconds(20));
  EXPECT_FALSE(dead.healthy);
  EXPECT_TRUE(dead.progressing);
  EXPECT_EQ(dead.reason, "port sink TX queue 1 takes nothing (tx_timeout)");
  EXPECT_FALSE(m.judge(with_tx(4, true, 64), t0 + milliseconds(100)).healthy);
  EXPECT_FALSE(m.judge(with_tx(5, true, 64), t0 + milliseconds(200)).healthy);
  EXPECT_TRUE(m.judge(with_tx(6, true, 64), t0 + milliseconds(201)).healthy);
  EXPECT_FALSE(m.judge(with_tx(7, true, 65), t0 + milliseconds(210)).healthy);
  EXPECT_TRUE(m.judge(with_tx(8, false, 65), t0 + milliseconds(220)).healthy);
}

TEST(Health, TheThresholdCoversATickAndANap) {
  EXPECT_EQ(stall_threshold(100, 0), milliseconds(1001));
  EXPECT_EQ(stall_threshold(100, 500000), milliseconds(1501));
  EXPECT_EQ(stall_threshold(0, 0), milliseconds(1000));
}

}  // namespace
}  // namespace qs
