// Whether this quicsteer should receive traffic: what a route announcer
// (FRR, a watcher script), the service manager's watchdog and an operator ask.
// Computed on the control loop from two snapshots a period apart, so it needs
// no extra state in the data path.
#pragma once

#include <string>

#include "dataplane/stats_snapshot.h"

namespace qs {

// True when every lcore made progress between `before` and `now` (its
// busy_cycles or its idle_sleeps moved: a loop that moves packets, or sleeps
// between empty polls, is running), every port's link is up in `now` and
// `now` is not draining. Otherwise false, and `reason` (when not null) says
// why, naming the first lcore or port at fault ("lcore 2 made no progress",
// "port wire: link down", "draining"); it is cleared on true.
//
// An lcore on a dedicated core with polling.idle_sleep_us 0 and no traffic
// moves neither counter: it reads as stalled.
bool quicsteer_healthy(const StatsSnapshot& now, const StatsSnapshot& before, std::string* reason);

}  // namespace qs
