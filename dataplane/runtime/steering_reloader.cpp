#include "dataplane/runtime/steering_reloader.h"

#include <exception>

#include "dataplane/config/profile.h"

namespace qs {

SteeringReloader::~SteeringReloader() { abandon(); }

void SteeringReloader::start(std::string path, std::string asked_by, bool telemetry, FileDescriptor file) {
  if (busy_) throw std::logic_error("SteeringReloader::start while a reload is being prepared");
  result_ = std::make_unique<Prepared>();
  result_->path = std::move(path);
  result_->asked_by = std::move(asked_by);
  result_->telemetry = telemetry;
  done_.store(false, std::memory_order_relaxed);
  busy_ = true;
  thread_ = std::thread([this, r = result_.get(), file = std::move(file)]() mutable {
    try {
      const Profile next = file ? load_profile(std::move(file), r->path) : load_profile(r->path);
      r->steering = dp_.prepare_steering(next);
      if (!r->steering.refused()) r->resolved_profile = dump_profile(r->steering.profile());
    } catch (const ProfileError& e) {
      r->load_error = e.what();
    } catch (const std::exception& e) {
      // Out of memory for a huge profile, say: refused like any other.
      r->load_error = r->path + ": " + e.what();
    }
    done_.store(true, std::memory_order_release);
  });
}

std::optional<SteeringReloader::Prepared> SteeringReloader::take() {
  if (!busy_ || !done_.load(std::memory_order_acquire)) return std::nullopt;
  thread_.join();
  busy_ = false;
  std::optional<Prepared> r(std::move(*result_));
  result_.reset();
  return r;
}

void SteeringReloader::abandon() {
  if (thread_.joinable()) thread_.join();
  busy_ = false;
  result_.reset();
}

}  // namespace qs
