// The service manager's notify protocol (systemd's sd_notify(3), Type=notify):
// one datagram per state change to the AF_UNIX socket named by $NOTIFY_SOCKET
// ("READY=1", "RELOADING=1", "STOPPING=1", "WATCHDOG=1", "STATUS=..."), and the
// watchdog interval the manager expects from $WATCHDOG_USEC. Written here
// rather than linked from libsystemd: the protocol is a sendto(), and this
// keeps quicsteer's dependencies to DPDK's. Control path only (a syscall per
// message).
#pragma once

#include <chrono>
#include <string>

namespace qs {

class ServiceNotifier {
 public:
  // From the environment: without NOTIFY_SOCKET every send is a no-op (run
  // by hand, or not as Type=notify). WATCHDOG_USEC is taken when WATCHDOG_PID
  // is absent or names this process. A malformed NOTIFY_SOCKET or
  // WATCHDOG_USEC is reported in `problem` and ignored.
  static ServiceNotifier from_environment(std::string* problem);

  bool enabled() const { return !socket_path_.empty(); }
  // 0 when the manager runs no watchdog; otherwise it wants WATCHDOG=1 more
  // often than this (sd_watchdog_enabled(3) suggests every half of it).
  std::chrono::microseconds watchdog_interval() const { return watchdog_; }

  // Sends `state` (newline-separated assignments) as one datagram. True when
  // it was sent or there is no manager; false with errno's text in `error`.
  bool notify(const std::string& state, std::string* error) const;

 private:
  std::string socket_path_;  // as in NOTIFY_SOCKET: a path, or "@name" for the abstract namespace
  std::chrono::microseconds watchdog_{0};
};

}  // namespace qs
