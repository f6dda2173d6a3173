// The Prometheus text endpoint (exposition format 0.0.4): GET /metrics
// answers the counters of the last snapshot the control loop published, with
// conventional names (quicsteer_..._total) and labels (lcore, port, queue,
// owner, reason); GET /healthz answers 200 "ok" while the control loop's last
// health verdict is healthy, else 503 and the reason. Served by one
// control-plane thread (started by the main lcore, on its CPUs), never by a
// data-path lcore. That thread renders nothing: the text of /metrics is
// rendered once per publish (LiveView::render_metrics_with) and shared by
// every scrape, so no scrape, however large the fleet, holds the thread while
// /healthz waits.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "dataplane/control/live_view.h"
#include "dataplane/config/listen_address.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace qs {

// The exposition text for one snapshot and the steering reloads counted.
std::string prometheus_text(const StatsSnapshot& s, std::uint64_t reloads_applied, std::uint64_t reloads_refused);

// Serves GET (and HEAD) /metrics and /healthz over HTTP/1.1 with
// libmicrohttpd, many clients at once: one thread polls every connection
// (epoll), so a slow or idle client costs one slot and a little memory, never
// another client's scrape. Bounded so that no client can hold more:
class PrometheusEndpoint {
 public:
  static constexpr unsigned kMaxClients = 2048;      // connections at once (fewer if the fd limit is lower)
  static constexpr unsigned kMaxClientsPerIp = 256;  // so that one address cannot take every slot
  static constexpr unsigned kIdleTimeoutS = 5;       // a connection that sends or reads nothing for this long is closed
  static constexpr std::chrono::seconds kRequestDeadline{10};  // from connect (or the previous answer) to the answer sent
  static constexpr std::size_t kMemoryPerClient = 16 * 1024;  // request line and headers; more is answered 431

  // Listens on `address` and serves from its own thread until destroyed;
  // has `view` render /metrics with prometheus_text from now on.
  // Throws std::runtime_error naming the address when it cannot listen.
  PrometheusEndpoint(const ListenAddress& address, std::shared_ptr<LiveView> view);
  ~PrometheusEndpoint();  // within one poll period (kPollMs), whatever the clients do
  PrometheusEndpoint(const PrometheusEndpoint&) = delete;
  PrometheusEndpoint& operator=(const PrometheusEndpoint&) = delete;

  std::uint16_t port() const { return port_; }  // the bound port
  unsigned max_clients() const { return max_clients_; }

 private:
  static constexpr int kPollMs = 100;  // the thread looks at deadlines and at stop_ this often
  struct Client {
    int fd;
    std::chrono::steady_clock::time_point deadline;
  };
  void serve();
  friend struct EndpointCallbacks;

  std::shared_ptr<LiveView> view_;
  MHD_Daemon* daemon_ = nullptr;
  std::uint16_t port_ = 0;
  unsigned max_clients_ = 0;
  std::unordered_map<MHD_Connection*, Client> clients_;  // the serving thread's only
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace qs
