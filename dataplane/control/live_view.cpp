#include "dataplane/control/live_view.h"

namespace qs {

void LiveView::publish(const StatsSnapshot& stats) {
  std::lock_guard lock(mutex_);
  stats_ = stats;
}

void LiveView::publish(const SteeringState& steering) {
  std::lock_guard lock(mutex_);
  const std::uint64_t applied = steering_.reloads_applied, refused = steering_.reloads_refused;
  steering_ = steering;
  steering_.reloads_applied = applied;
  steering_.reloads_refused = refused;
}

void LiveView::count_reload(bool applied) {
  std::lock_guard lock(mutex_);
  ++(applied ? steering_.reloads_applied : steering_.reloads_refused);
}

void LiveView::publish(const Health& health) {
  std::lock_guard lock(mutex_);
  health_ = health;
}

Health LiveView::health() const {
  std::lock_guard lock(mutex_);
  return health_;
}

StatsSnapshot LiveView::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

SteeringState LiveView::steering() const {
  std::lock_guard lock(mutex_);
  return steering_;
}

std::string LiveView::request_reload(const std::string& path, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  if (!changed_.wait_until(lock, deadline, [&] { return closed_ || !busy_; }))
    return "refused: another reload is still running; try again";
  if (closed_) return "refused: quicsteer is stopping";
  busy_ = true;
  request_waiting_ = true;
  request_path_ = path;
  const std::uint64_t id = ++requests_posted_;
  changed_.notify_all();
  if (!changed_.wait_until(lock, deadline, [&] { return closed_ || requests_answered_ == id; })) {
    if (request_waiting_) {
      // Never taken: withdrawn, so that it does not run after this answer.
      request_waiting_ = false;
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
  changed_.notify_all();
}

}  // namespace qs
