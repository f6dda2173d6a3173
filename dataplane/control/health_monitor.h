// Whether quicsteer is healthy, for /healthz (beside /metrics), the
// /quicsteer/health telemetry command, and whatever announces the appliance
// to its routers: healthy while every lcore's loop keeps iterating, every
// port's link is up and no TX queue drops everything it is given.
//
// Two verdicts come out of one judgement, for two readers:
// - `progressing`: every lcore's loop runs. The service manager's READY=1
//   and watchdog follow this alone: a restart helps a stalled lcore, never a
//   lost link (a restart would only lose the forwarding tables);
// - `healthy`: progressing, and every link up and every TX queue taking
//   packets. /healthz follows this: a router stops sending here, and starts
//   again once it passes, with no restart.
//
// The control loop samples the inputs (Dataplane::health_sample: each
// lcore's heartbeat counter, each port's link from rte_eth_link_get_nowait
// and, for a port that is a kernel interface, the interface's own state,
// each TX queue's timed-out state) and judges them here; the verdict is
// published in the LiveView, so the HTTP and telemetry threads never call
// into DPDK or the data path.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qs {

struct Health {
  bool healthy = false;
  std::string reason;  // empty when healthy; else what is wrong, "; "-separated
  bool progressing = false;  // every lcore's loop makes progress, links and TX queues aside
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
  // An owner's TX queue that took nothing for park_timeout and has taken
  // nothing since (TxQueueContext::timed_out), with the packets it dropped so.
  struct TxQueue {
    std::string port;
    std::uint16_t queue = 0;
    bool timed_out = false;
    std::uint64_t timeout_drops = 0;
  };
  std::vector<Lcore> lcores;
  std::vector<Port> ports;
  std::vector<TxQueue> tx_queues;
  // Peer sync: false while a starting instance waits for a peer's copy of
  // the forwarding tables (peer_sync.h), so that routers send nothing here
  // before it knows what its peers learned.
  bool peer_sync_ready = true;
  // Health checks: false when every backend the operator has not set down
  // fails its probes, so that the routers stop sending here (the route is
  // withdrawn) rather than to servers that do not answer.
  bool backends_answer = true;
};

// Judges successive samples. An lcore is stalled once its heartbeat has not
// moved for `stall_after`; until it first moves it is starting (also
// unhealthy, so that nothing announces an appliance that has not run yet).
// A TX queue is dead while it is timed out and has dropped a packet within
// `stall_after`: a queue that took nothing for park_timeout and then saw no
// traffic (the route was withdrawn because of it) reads healthy again, so
// that traffic comes back and tries it; if it is still dead its drops make
// it unhealthy again at once. A timed-out queue is not retried without
// traffic, so health would otherwise never come back.
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
  struct Drops {
    std::uint64_t count = 0;
    Clock::time_point changed;  // when `count` last moved
  };
  std::chrono::milliseconds stall_after_;
  std::map<unsigned, Beat> beats_;  // by lcore id
  std::map<std::pair<std::string, std::uint16_t>, Drops> tx_drops_;  // by port and TX queue
};

// How long an lcore may go without a heartbeat before it counts as stalled:
// one housekeeping tick (`tick_us`) plus one idle nap (`nap_us`) is the
// longest a running loop goes between heartbeats; the rest is slack for a
// shared or busy CPU.
std::chrono::milliseconds stall_threshold(std::uint32_t tick_us, std::uint32_t nap_us);

}  // namespace qs
