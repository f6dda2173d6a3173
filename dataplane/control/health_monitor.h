// Whether quicsteer is healthy, for /healthz (beside /metrics), the
// /quicsteer/health telemetry command, and whatever announces the appliance
// to its routers: healthy while every lcore's loop keeps iterating and every
// port's link is up.
//
// The control loop samples the inputs (Dataplane::health_sample: each
// lcore's heartbeat counter, each port's link from rte_eth_link_get_nowait)
// and judges them here; the verdict is published in the LiveView, so the
// HTTP and telemetry threads never call into DPDK or the data path.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qs {

struct Health {
  bool healthy = false;
  std::string reason;  // empty when healthy; else what is wrong, "; "-separated
};

// What the control loop reads for one judgement.
struct HealthSample {
  struct Lcore {
    unsigned lcore = 0;
    std::uint64_t heartbeats = 0;  // housekeeping ticks of its loop (LoopStats::heartbeats)
  };
  struct Port {
    std::string name;
    bool link_up = false;
  };
  std::vector<Lcore> lcores;
  std::vector<Port> ports;
};

// Judges successive samples. An lcore is stalled once its heartbeat has not
// moved for `stall_after`; until it first moves it is starting (also
// unhealthy, so that nothing announces an appliance that has not run yet).
class HealthMonitor {
 public:
  using Clock = std::chrono::steady_clock;
  explicit HealthMonitor(std::chrono::milliseconds stall_after) : stall_after_(stall_after) {}
  Health judge(const HealthSample& sample, Clock::time_point now);

 private:
  struct Beat {
    std::uint64_t heartbeats = 0;
    Clock::time_point changed;  // when `heartbeats` was first seen at this value
    bool moved = false;         // it has moved since the first sample
  };
  std::chrono::milliseconds stall_after_;
  std::map<unsigned, Beat> beats_;  // by lcore id
};

// How long an lcore may go without a heartbeat before it counts as stalled:
// one housekeeping tick (`tick_us`) plus one idle nap (`nap_us`) is the
// longest a running loop goes between heartbeats; the rest is slack for a
// shared or busy CPU.
std::chrono::milliseconds stall_threshold(std::uint32_t tick_us, std::uint32_t nap_us);

}  // namespace qs
