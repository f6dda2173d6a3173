// quicsteer_healthy: every lcore moved (busy cycles or idle sleeps), every
// port's link up, not draining; the reason names the first fault.
#include "dataplane/health.h"

#include <gtest/gtest.h>

#include <string>

namespace {

qs::StatsSnapshot two_lcores_two_ports() {
  qs::StatsSnapshot s;
  s.lcores.resize(2);
  s.lcores[0].lcore = 1;
  s.lcores[1].lcore = 2;
  s.ports.resize(2);
  s.ports[0].name = "wire";
  s.ports[1].name = "sink";
  for (auto& p : s.ports) p.link_up = true;
  return s;
}

TEST(Health, EveryLcoreMovedAndEveryLinkUpIsHealthy) {
  const qs::StatsSnapshot before = two_lcores_two_ports();
  qs::StatsSnapshot now = before;
  now.lcores[0].busy_cycles = 1000;  // moved packets
  now.lcores[1].idle_sleeps = 3;     // slept between empty polls
  std::string reason = "stale";
  EXPECT_TRUE(qs::quicsteer_healthy(now, before, &reason));
  EXPECT_EQ(reason, "");
  EXPECT_TRUE(qs::quicsteer_healthy(now, before, nullptr));
}

TEST(Health, AnLcoreThatDidNotMoveIsNamed) {
  const qs::StatsSnapshot before = two_lcores_two_ports();
  qs::StatsSnapshot now = before;
  now.lcores[0].idle_sleeps = 5;
  now.lcores[1].doorbell_wakes = 9;  // not progress of its own loop
  std::string reason;
  EXPECT_FALSE(qs::quicsteer_healthy(now, before, &reason));
  EXPECT_EQ(reason, "lcore 2 made no progress");
  EXPECT_FALSE(qs::quicsteer_healthy(now, before, nullptr));
}

TEST(Health, AnLcoreTheEarlierSnapshotLacksHasNotBeenSeenMoving) {
  qs::StatsSnapshot before = two_lcores_two_ports();
  qs::StatsSnapshot now = before;
  before.lcores.pop_back();
  now.lcores[0].busy_cycles = 1;
  now.lcores[1].busy_cycles = 1;
  std::string reason;
  EXPECT_FALSE(qs::quicsteer_healthy(now, before, &reason));
  EXPECT_EQ(reason, "lcore 2 made no progress");
}

TEST(Health, APortWithItsLinkDownIsNamed) {
  const qs::StatsSnapshot before = two_lcores_two_ports();
  qs::StatsSnapshot now = before;
  now.lcores[0].busy_cycles = 1;
  now.lcores[1].busy_cycles = 1;
  now.ports[1].link_up = false;
  std::string reason;
  EXPECT_FALSE(qs::quicsteer_healthy(now, before, &reason));
  EXPECT_EQ(reason, "port sink: link down");
}

TEST(Health, NoOpenPortIsUnhealthy) {
  qs::StatsSnapshot before = two_lcores_two_ports();
  before.ports.clear();
  qs::StatsSnapshot now = before;
  now.lcores[0].busy_cycles = 1;
  now.lcores[1].busy_cycles = 1;
  std::string reason;
  EXPECT_FALSE(qs::quicsteer_healthy(now, before, &reason));
  EXPECT_EQ(reason, "no port is open");
}

TEST(Health, DrainingIsUnhealthyWhileEverythingRuns) {
  const qs::StatsSnapshot before = two_lcores_two_ports();
  qs::StatsSnapshot now = before;
  now.lcores[0].busy_cycles = 1;
  now.lcores[1].busy_cycles = 1;
  now.draining = true;
  std::string reason;
  EXPECT_FALSE(qs::quicsteer_healthy(now, before, &reason));
  EXPECT_EQ(reason, "draining");
}

}  // namespace
