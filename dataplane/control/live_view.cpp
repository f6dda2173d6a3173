#include "dataplane/control/live_view.h"

namespace qs {

void LiveView::publish(const StatsSnapshot& stats) {
  auto copy = std::make_shared<const StatsSnapshot>(stats);  // copied before the lock is taken
  {
    std::lock_guard lock(mutex_);
    stats_ = std::move(copy);
  }
  render_metrics();
}

void LiveView::publish(const SteeringState& steering) {
  auto copy = std::make_shared<const SteeringState>(steering);  // the resolved profile too: not under the lock
  std::lock_guard lock(mutex_);
  steering_ = std::move(copy);
}

void LiveView::count_reload(bool applied) {
  {
    std::lock_guard lock(mutex_);
    ++(applied ? reloads_applied_ : reloads_refused_);
  }
  render_metrics();
}

void LiveView::publish(const Health& health) {
  std::lock_guard lock(health_mutex_);
  health_ = health;
}

Health LiveView::health() const {
  std::lock_guard lock(health_mutex_);
  return health_;
}

StatsSnapshot LiveView::stats() const {
  std::shared_ptr<const StatsSnapshot> stats;
  {
    std::lock_guard lock(mutex_);
    stats = stats_;
  }
  return *stats;  // copied outside the lock; what was published never changes
}

void LiveView::render_metrics_with(MetricsRenderer renderer) {
  {
    std::lock_guard render(render_mutex_);
    renderer_ = std::move(renderer);
  }
  render_metrics();
}

std::shared_ptr<const std::string> LiveView::metrics() const {
  std::lock_guard lock(mutex_);
  return metrics_;
}

void LiveView::render_metrics() {
  std::lock_guard render(render_mutex_);
  if (!renderer_) return;
  const WithReloads<StatsSnapshot> now = read_with_reloads(&LiveView::stats_);
  auto text = std::make_shared<const std::string>(renderer_(*now.published, now.applied, now.refused));
  std::lock_guard lock(mutex_);
  metrics_ = std::move(text);
}

SteeringState LiveView::steering() const {
  const WithReloads<SteeringState> now = read_with_reloads(&LiveView::steering_);
  SteeringState s = *now.published;  // copied outside the lock: it may hold a profile of megabytes
  s.reloads_applied = now.applied;
  s.reloads_refused = now.refused;
  return s;
}

std::string LiveView::request_reload(const std::string& path, FileDescriptor file, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  if (!changed_.wait_until(lock, deadline, [&] { return closed_ || !busy_; }))
    return "refused: another reload is still running; try again";
  if (closed_) return "refused: quicsteer is stopping";
  busy_ = true;
  request_waiting_ = true;
  request_path_ = path;
  request_file_ = std::move(file);
  const std::uint64_t id = ++requests_posted_;
  changed_.notify_all();
  if (!changed_.wait_until(lock, deadline, [&] { return closed_ || requests_answered_ == id; })) {
    if (request_waiting_) {
      // Never taken: withdrawn, so that it does not run after this answer.
      request_waiting_ = false;
      request_file_.close();
      busy_ = false;
      changed_.notify_all();
      return "refused: the control loop did not take the request in time; nothing changed";
    }
    return "unknown: the reload is still running; /quicsteer/steering will show its outcome";
  }
  if (requests_answered_ != id) return "refused: quicsteer is stopping";
  return answer_;
}

std::optional<std::string> LiveView::take_reload_request() {
  std::lock_guard lock(mutex_);
  if (!request_waiting_) return std::nullopt;
  request_waiting_ = false;
  return request_path_;
}

FileDescriptor LiveView::take_reload_file() {
  std::lock_guard lock(mutex_);
  return std::move(request_file_);
}

void LiveView::answer_reload(const std::string& answer) {
  std::lock_guard lock(mutex_);
  answer_ = answer;
  requests_answered_ = requests_posted_;
  busy_ = false;
  changed_.notify_all();
}

void LiveView::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  request_waiting_ = false;
  request_file_.close();
  changed_.notify_all();
}

}  // namespace qs
