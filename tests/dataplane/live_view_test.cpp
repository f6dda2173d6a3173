// LiveView's reload counters: counted by count_reload from the control loop
// and from the telemetry thread (a path refused before the control loop saw
// it), never set by a publish.
#include "dataplane/control/live_view.h"

#include <gtest/gtest.h>

namespace {

TEST(LiveView, CountReloadCountsEachVerdict) {
  qs::LiveView live;
  live.count_reload(false);
  live.count_reload(false);
  live.count_reload(true);
  const qs::SteeringState s = live.steering();
  EXPECT_EQ(s.reloads_refused, 2u);
  EXPECT_EQ(s.reloads_applied, 1u);
}

// The control loop copies the state, works on it and publishes it; a
// refusal the telemetry thread counted in between must stay counted.
TEST(LiveView, PublishOfAnEarlierCopyKeepsLaterCounts) {
  qs::LiveView live;
  qs::SteeringState copy = live.steering();
  live.count_reload(false);
  copy.generation = 2;
  copy.last_reload = "applied: steering generation 2 is live";
  live.publish(copy);
  const qs::SteeringState s = live.steering();
  EXPECT_EQ(s.generation, 2u);
  EXPECT_EQ(s.last_reload, "applied: steering generation 2 is live");
  EXPECT_EQ(s.reloads_refused, 1u);
  EXPECT_EQ(s.reloads_applied, 0u);
}

// A publish sets no counter, whatever the state it carries says.
TEST(LiveView, PublishSetsNoCounter) {
  qs::LiveView live;
  qs::SteeringState s;
  s.reloads_applied = 7;
  s.reloads_refused = 9;
  live.publish(s);
  EXPECT_EQ(live.steering().reloads_applied, 0u);
  EXPECT_EQ(live.steering().reloads_refused, 0u);
}

}  // namespace
