// LiveView: what the control loop publishes for the operator's live
// interfaces (rte_telemetry commands on DPDK's telemetry thread, the
// Prometheus endpoint on its own thread), and the mailbox through which a
// telemetry command asks the control loop for a steering reload.
//
// Only the control loop touches the Dataplane. It publishes the snapshot it
// takes for the live table anyway (Dataplane::snapshot), so the readers cost
// the data path nothing more; they copy what was published under a mutex of
// the control plane, which no lcore ever takes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/control/health_monitor.h"
#include "dataplane/control/stats_snapshot.h"

namespace qs {

// The steering configuration in force, for /quicsteer/steering and
// /quicsteer/profile.
struct SteeringState {
  std::uint64_t generation = 1;
  std::string profile_path;      // where the live configuration was read from
  std::string resolved_profile;  // dump_profile of the live profile
  std::vector<unsigned> quic_lb_config_ids;
  std::size_t servers = 0;
  // Counted by LiveView::count_reload, never by a publish (see there).
  std::uint64_t reloads_applied = 0, reloads_refused = 0;
  std::string last_reload;  // "applied: ..." or "refused: ..." (empty: none yet)
  // A reload is being read and prepared off the control loop (the live
  // steering is still `generation`).
  bool reload_running = false;
};

class LiveView {
 public:
  void publish(const StatsSnapshot& stats);
  // Everything but the reload counters, which stay as counted.
  void publish(const SteeringState& steering);
  // One reload's verdict, from the control loop (a reload it read) or the
  // telemetry thread (a path it refused before asking): both count, and a
  // publish of a state copied before the count cannot undo it.
  void count_reload(bool applied);
  // The control loop's latest verdict (HealthMonitor), for /healthz and
  // /quicsteer/health; "starting" until the first one.
  void publish(const Health& health);
  StatsSnapshot stats() const;
  SteeringState steering() const;
  Health health() const;

  // Telemetry thread: asks the control loop to reload from `path` (empty:
  // the profile quicsteer was started with) and waits for its answer,
  // which says what happened. Requests are served one at a time.
  std::string request_reload(const std::string& path, std::chrono::milliseconds wait);
  // Control loop: the path of a pending request, if any; answer it with
  // answer_reload().
  std::optional<std::string> take_reload_request();
  void answer_reload(const std::string& answer);
  // The control loop has stopped: pending and later requests are answered so.
  void close();

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  StatsSnapshot stats_;
  SteeringState steering_;
  Health health_{false, "starting"};
  bool closed_ = false;
  // The reload mailbox: at most one request in it.
  bool request_waiting_ = false;   // posted, not yet taken by the control loop
  std::string request_path_;
  std::uint64_t requests_posted_ = 0;    // id of the latest request
  std::uint64_t requests_answered_ = 0;  // id of the latest answered one
  bool busy_ = false;                    // a request is posted and not yet answered
  std::string answer_;
};

}  // namespace qs
