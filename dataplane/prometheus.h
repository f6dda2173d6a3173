// The Prometheus text endpoint (exposition format 0.0.4): GET /metrics
// answers the counters of the last snapshot the control loop published, with
// conventional names (quicsteer_..._total) and labels (lcore, port, queue,
// owner, reason). Served by one control-plane thread (started by the main
// lcore, on its CPUs), never by a data-path lcore.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "dataplane/live_view.h"
#include "dataplane/profile.h"

namespace qs {

// The exposition text for one snapshot and steering state.
std::string prometheus_text(const StatsSnapshot& s, const SteeringState& steering);

class PrometheusEndpoint {
 public:
  // Listens on `address` and serves from its own thread until destroyed.
  // Throws std::runtime_error naming the address when it cannot listen.
  PrometheusEndpoint(const ListenAddress& address, std::shared_ptr<const LiveView> view);
  ~PrometheusEndpoint();
  PrometheusEndpoint(const PrometheusEndpoint&) = delete;
  PrometheusEndpoint& operator=(const PrometheusEndpoint&) = delete;

  std::uint16_t port() const { return port_; }  // the bound port

 private:
  void serve();
  void answer(int client);

  std::shared_ptr<const LiveView> view_;
  int listener_ = -1;
  int wake_ = -1;  // eventfd: the destructor asks the thread to stop
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace qs
