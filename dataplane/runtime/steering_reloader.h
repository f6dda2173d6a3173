// SteeringReloader: a steering reload read, validated and built on a thread of
// its own, so that the control loop (signals, the duration, the live table,
// health, what telemetry and Prometheus read) goes on while a large profile
// is read: a profile of 100,000 servers takes seconds. The control loop
// starts a reload, looks each turn whether it is ready, and puts it live
// itself (Dataplane::apply_steering: the RCU swap, microseconds).
// One reload at a time; control loop only.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dataplane/runtime/dataplane.h"

namespace qs {

class SteeringReloader {
 public:
  struct Prepared {
    std::string path;
    std::string asked_by;       // "SIGHUP", "/quicsteer/reload"
    bool telemetry = false;     // a telemetry command waits for the answer
    std::string load_error;     // the profile could not be read or is invalid (nothing prepared)
    Dataplane::PreparedSteering steering;
    std::string resolved_profile;  // dump_profile of what goes live when applied
  };

  explicit SteeringReloader(const Dataplane& dp) : dp_(dp) {}
  // Waits for a reload still being prepared and discards it.
  ~SteeringReloader();
  SteeringReloader(const SteeringReloader&) = delete;
  SteeringReloader& operator=(const SteeringReloader&) = delete;

  // Starts reading `path` (from `file` when it is open: a telemetry request's
  // file, opened where its path was confined) and preparing the reload from
  // it. Only while !busy(): the data path's steering must not change until
  // the reload started here was taken (take()) and applied or dropped.
  void start(std::string path, std::string asked_by, bool telemetry, FileDescriptor file = {});
  // Started and not yet taken.
  bool busy() const { return busy_; }
  // The prepared reload once the thread is done (then not busy() any more),
  // or nothing yet.
  std::optional<Prepared> take();
  // Waits for the thread and discards what it prepared (quicsteer stops).
  void abandon();

 private:
  const Dataplane& dp_;
  std::thread thread_;
  bool busy_ = false;
  std::atomic<bool> done_{false};
  std::unique_ptr<Prepared> result_;  // written by the thread until done_
};

}  // namespace qs
