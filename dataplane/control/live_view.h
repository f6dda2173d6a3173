// LiveView: what the control loop publishes for the operator's live
// interfaces (rte_telemetry commands on DPDK's telemetry thread, the
// Prometheus endpoint on its own thread), and the mailbox through which a
// telemetry command asks the control loop for a steering reload.
//
// Only the control loop touches the Dataplane. It publishes the snapshot it
// takes for the live table anyway (Dataplane::snapshot), so the readers cost
// the data path nothing more; they copy what was published under a mutex of
// the control plane, which no lcore ever takes.
//
// /metrics is rendered once per publish (and per counted reload), by the
// thread that publishes, and kept as one shared text: a scrape copies a
// pointer, whatever the size of the fleet, and never waits for a rendering.
// Health has a mutex of its own, held only to copy the verdict, so that
// /healthz never waits behind a snapshot or a profile being copied; and
// snapshots and steering states are copied outside the lock, from the
// immutable state published, so that no reader holds the control loop's
// publish for longer than a pointer copy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/config/file_descriptor.h"
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
  // The /metrics text of a snapshot and the reload counters.
  using MetricsRenderer =
      std::function<std::string(const StatsSnapshot& stats, std::uint64_t reloads_applied, std::uint64_t reloads_refused)>;

  // Renders the stats' /metrics text too, when a renderer is set.
  void publish(const StatsSnapshot& stats);
  // Everything but the reload counters, which stay as counted.
  void publish(const SteeringState& steering);
  // One reload's verdict, from the control loop (a reload it read) or the
  // telemetry thread (a path it refused before asking): both count, and a
  // publish of a state copied before the count cannot undo it.
  void count_reload(bool applied);  // renders /metrics again, when a renderer is set
  // The control loop's latest verdict (HealthMonitor), for /healthz and
  // /quicsteer/health; "starting" until the first one.
  void publish(const Health& health);
  StatsSnapshot stats() const;
  SteeringState steering() const;
  Health health() const;

  // From now on each publish of stats and each counted reload render the
  // /metrics text with `renderer`, on the calling thread; renders once now.
  void render_metrics_with(MetricsRenderer renderer);
  // The latest rendered /metrics text (nullptr before any renderer is set).
  std::shared_ptr<const std::string> metrics() const;

  // Telemetry thread: asks the control loop to reload from `path` (empty:
  // the profile quicsteer was started with), read from `file` when it is
  // open (confine_reload_path opened it), and waits for its answer, which
  // says what happened. Requests are served one at a time.
  std::string request_reload(const std::string& path, FileDescriptor file, std::chrono::milliseconds wait);
  // Control loop: the path of a pending request, if any; answer it with
  // answer_reload().
  std::optional<std::string> take_reload_request();
  // Control loop: the file of the request take_reload_request() took last
  // (empty when it gave none); the reload reads it rather than its path.
  FileDescriptor take_reload_file();
  void answer_reload(const std::string& answer);
  // The control loop has stopped: pending and later requests are answered so.
  void close();

 private:
  void render_metrics();
  // A published state with the reload counters of the same instant, read
  // under mutex_ (the state itself is copied, if at all, outside it).
  template <typename T>
  struct WithReloads {
    std::shared_ptr<const T> published;
    std::uint64_t applied = 0, refused = 0;
  };
  template <typename T>
  WithReloads<T> read_with_reloads(const std::shared_ptr<const T> LiveView::*member) const {
    std::lock_guard lock(mutex_);
    return {this->*member, reloads_applied_, reloads_refused_};
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<const StatsSnapshot> stats_ = std::make_shared<const StatsSnapshot>();
  // Published states are never changed, so that readers copy them (the
  // resolved profile, up to 4 MiB) outside the lock; the reload counters are
  // kept apart (count_reload) and set in each copy steering() returns.
  std::shared_ptr<const SteeringState> steering_ = std::make_shared<const SteeringState>();
  std::uint64_t reloads_applied_ = 0, reloads_refused_ = 0;
  std::shared_ptr<const std::string> metrics_;
  mutable std::mutex health_mutex_;  // health_ only
  Health health_{false, "starting"};
  // Held for a whole rendering (never with mutex_ held), so that renderings
  // from several threads end in the order they read what they render: the
  // text kept is always that of the latest state.
  std::mutex render_mutex_;
  MetricsRenderer renderer_;  // under render_mutex_
  bool closed_ = false;
  // The reload mailbox: at most one request in it.
  bool request_waiting_ = false;   // posted, not yet taken by the control loop
  std::string request_path_;
  FileDescriptor request_file_;  // with the request while it waits, then until the control loop takes it
  std::uint64_t requests_posted_ = 0;    // id of the latest request
  std::uint64_t requests_answered_ = 0;  // id of the latest answered one
  bool busy_ = false;                    // a request is posted and not yet answered
  std::string answer_;
};

}  // namespace qs
