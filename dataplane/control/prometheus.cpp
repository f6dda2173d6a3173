#include "dataplane/control/prometheus.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "dataplane/fastpath/drop_reason.h"

namespace qs {
namespace {

// A label value, escaped as the exposition format wants (\\, \", \n).
std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Writer {
 public:
  // Starts a metric family: HELP and TYPE once, then its samples.
  void family(const std::string& name, const char* type, const char* help) {
    name_ = name;
    o_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& labels, std::uint64_t value) {
    o_ << name_;
    if (!labels.empty()) o_ << '{' << labels << '}';
    o_ << ' ' << value << '\n';
  }
  std::string text() const { return o_.str(); }

 private:
  std::ostringstream o_;
  std::string name_;
};

std::string label(const char* name, const std::string& value) { return std::string(name) + "=\"" + escape(value) + "\""; }
std::string label(const char* name, std::uint64_t value) { return label(name, std::to_string(value)); }

}  // namespace

std::string prometheus_text(const StatsSnapshot& s, const SteeringState& steering) {
  Writer w;
  auto queue_labels = [](const QueueSnapshot& q) {
    return label("lcore", q.lcore) + "," + label("port", q.port) + "," + label("queue", q.queue);
  };
  auto owner_labels = [](const LcoreSnapshot& l) {
    return label("lcore", l.lcore) + "," + label("owner", std::uint64_t(l.owner_index));
  };
  const auto per_queue = [&](const char* name, const char* help, auto value) {
    w.family(name, "counter", help);
    for (const auto& q : s.queues) w.sample(queue_labels(q), value(q.rx));
  };
  per_queue("quicsteer_rx_packets_total", "Packets received from an RX queue.", [](const ReceiveTotals& r) { return r.rx; });
  w.family("quicsteer_steered_packets_total", "counter",
           "Packets steered from an RX queue: to the receiving lcore itself or handed over on a ring.");
  for (const auto& q : s.queues) {
    w.sample(queue_labels(q) + "," + label("to", "self"), q.rx.steered_self);
    w.sample(queue_labels(q) + "," + label("to", "other"), q.rx.steered_other);
  }
  per_queue("quicsteer_enqueued_packets_total", "Packets handed over on receiver->owner rings.",
            [](const ReceiveTotals& r) { return r.enqueued; });
  per_queue("quicsteer_not_quic_packets_total", "Packets that were not QUIC (steered by their 4-tuple).",
            [](const ReceiveTotals& r) { return r.not_quic; });
  per_queue("quicsteer_parks_total", "Times an RX queue was parked (back-pressure).",
            [](const ReceiveTotals& r) { return r.parks; });
  per_queue("quicsteer_parked_packets_total", "Packets held in an RX queue's parking ticket.",
            [](const ReceiveTotals& r) { return r.parked_packets; });
  w.family("quicsteer_routed_packets_total", "counter",
           "Packets from an RX queue by the rule that chose their owner (QUIC-LB, a forwarding table, a hash).");
  for (const auto& q : s.queues)
    for (std::size_t m = 0; m < kResolveMethods; ++m)
      w.sample(queue_labels(q) + "," + label("rule", std::string(to_string(ResolveMethod(m)))), q.rx.routed[m]);
  per_queue("quicsteer_forwarding_learned_total", "Entries an RX queue's packets added to the forwarding table.",
            [](const ReceiveTotals& r) { return r.learned; });
  per_queue("quicsteer_forwarding_setups_total", "Connection set-ups (first Initials) recorded in the setup table.",
            [](const ReceiveTotals& r) { return r.setups; });
  per_queue("quicsteer_forwarding_setup_evicted_total", "Setup entries replaced by newer ones (the setup table was full).",
            [](const ReceiveTotals& r) { return r.setup_evicted; });
  per_queue("quicsteer_forwarding_table_full_total",
            "Entries the full forwarding table refused (those packets were routed by the hash).",
            [](const ReceiveTotals& r) { return r.table_full; });
  if (!s.backends.empty()) {
    const auto backend_labels = [](const BackendSnapshot& b) {
      return label("backend", b.name) + "," + label("owner_lcore", b.owner_lcore);
    };
    for (const auto& f : kBackendCounterFields) {
      w.family(std::string("quicsteer_backend_") + f.name + "_total", "counter", f.help);
      for (const auto& b : s.backends) w.sample(backend_labels(b), b.*f.value);
    }
    w.family("quicsteer_backend_state", "gauge", "1 for the state a backend is in (active, draining, down).");
    for (const auto& b : s.backends)
      for (const char* state : {"active", "draining", "down"})
        w.sample(backend_labels(b) + "," + label("state", state), b.state == state ? 1 : 0);
  }
  if (s.forwarding.enabled) {
    w.family("quicsteer_forwarding_entries", "gauge", "Entries in a forwarding table.");
    w.sample(label("table", "established"), s.forwarding.entries);
    w.sample(label("table", "setup"), s.forwarding.setup_entries);
    w.family("quicsteer_forwarding_slots", "gauge", "Slots of a forwarding table.");
    w.sample(label("table", "established"), s.forwarding.slots);
    w.sample(label("table", "setup"), s.forwarding.setup_slots);
    w.family("quicsteer_forwarding_expired_total", "counter", "Idle forwarding-table entries removed.");
    w.sample("", s.forwarding.expired);
  }
  w.family("quicsteer_queue_parked", "gauge", "1 while the RX queue is parked.");
  for (const auto& q : s.queues) w.sample(queue_labels(q), q.parked_now ? 1 : 0);
  w.family("quicsteer_queue_drops_total", "counter", "Packets an RX queue's receiver dropped, by reason.");
  for (const auto& q : s.queues)
    for (std::size_t r = 0; r < kDropReasonCount; ++r)
      w.sample(queue_labels(q) + "," + label("reason", std::string(drop_reason_name(DropReason(r)))), q.rx.drops[r]);

  w.family("quicsteer_drops_total", "counter", "Packets an lcore dropped (receiving and owning), by reason.");
  for (const auto& l : s.lcores)
    for (std::size_t r = 0; r < kDropReasonCount; ++r)
      w.sample(label("lcore", l.lcore) + "," + label("reason", std::string(drop_reason_name(DropReason(r)))),
               l.rx.drops[r] + l.owner.drops[r]);
  w.family("quicsteer_lcore_busy_cycles_total", "counter", "TSC cycles of loop iterations that moved packets.");
  for (const auto& l : s.lcores) w.sample(label("lcore", l.lcore), l.busy_cycles);
  w.family("quicsteer_lcore_idle_sleeps_total", "counter", "Idle naps of an lcore's loop.");
  for (const auto& l : s.lcores) w.sample(label("lcore", l.lcore), l.idle_sleeps);

  const auto per_owner = [&](const char* name, const char* type, const char* help, auto value) {
    w.family(name, type, help);
    for (const auto& l : s.lcores)
      if (l.owner_index >= 0) w.sample(owner_labels(l), value(l.owner));
  };
  per_owner("quicsteer_owner_dequeued_packets_total", "counter", "Packets an owner took from its inbound rings.",
            [](const OwnerTotals& o) { return o.dequeued; });
  per_owner("quicsteer_owner_processed_packets_total", "counter", "Packets an owner's connection stage processed.",
            [](const OwnerTotals& o) { return o.processed; });
  per_owner("quicsteer_owner_tx_packets_total", "counter", "Packets an owner transmitted.",
            [](const OwnerTotals& o) { return o.tx; });
  per_owner("quicsteer_owner_sunk_packets_total", "counter", "Packets an owner counted and freed (action sink).",
            [](const OwnerTotals& o) { return o.sunk; });
  per_owner("quicsteer_connections_total", "counter",
            "Connections an owner started tracking (the CIDs it could tie together count once).",
            [](const OwnerTotals& o) { return o.connections; });
  per_owner("quicsteer_cids_total", "counter", "CIDs an owner started tracking.",
            [](const OwnerTotals& o) { return o.cids; });
  per_owner("quicsteer_cids_live", "gauge", "CIDs in an owner's table.", [](const OwnerTotals& o) { return o.cids_live; });
  per_owner("quicsteer_connections_expired_total", "counter", "Connections an owner expired after idle_timeout_ms.",
            [](const OwnerTotals& o) { return o.connections_expired; });
  per_owner("quicsteer_connections_live", "gauge", "Connections in an owner's table.",
            [](const OwnerTotals& o) { return o.connections_live; });
  per_owner("quicsteer_migrations_total", "counter",
            "Times a known connection arrived from a new 4-tuple, whichever its CID (migrations, NAT rebinding).",
            [](const OwnerTotals& o) { return o.migrations; });
  per_owner("quicsteer_tx_holds_total", "counter", "Times an owner was held by a TX queue that took nothing more.",
            [](const OwnerTotals& o) { return o.tx_holds; });

  auto ring_labels = [](const RingSnapshot& r) {
    return label("from_lcore", r.from_lcore) + "," + label("to_lcore", r.to_lcore);
  };
  w.family("quicsteer_ring_full_events_total", "counter", "Times a receiver->owner ring refused packets.");
  for (const auto& r : s.rings) w.sample(ring_labels(r), r.full_events);
  w.family("quicsteer_ring_occupancy", "gauge", "Packets in a receiver->owner ring.");
  for (const auto& r : s.rings) w.sample(ring_labels(r), r.occupancy);
  w.family("quicsteer_ring_capacity", "gauge", "Slots of a receiver->owner ring.");
  for (const auto& r : s.rings) w.sample(ring_labels(r), r.capacity);

  const auto per_port = [&](const char* name, const char* help, auto value) {
    w.family(name, "counter", help);
    for (const auto& p : s.ports) w.sample(label("port", p.name), value(p));
  };
  per_port("quicsteer_port_rx_packets_total", "Packets the port received (ipackets).",
           [](const PortSnapshot& p) { return p.ipackets; });
  per_port("quicsteer_port_tx_packets_total", "Packets the port sent (opackets).",
           [](const PortSnapshot& p) { return p.opackets; });
  per_port("quicsteer_port_rx_bytes_total", "Bytes received (ibytes).", [](const PortSnapshot& p) { return p.ibytes; });
  per_port("quicsteer_port_tx_bytes_total", "Bytes sent (obytes).", [](const PortSnapshot& p) { return p.obytes; });
  per_port("quicsteer_port_rx_missed_total", "Packets the NIC dropped for want of RX descriptors (imissed).",
           [](const PortSnapshot& p) { return p.imissed; });
  per_port("quicsteer_port_rx_errors_total", "Erroneous received packets (ierrors).",
           [](const PortSnapshot& p) { return p.ierrors; });
  per_port("quicsteer_port_tx_errors_total", "Failed transmissions (oerrors).",
           [](const PortSnapshot& p) { return p.oerrors; });
  per_port("quicsteer_port_rx_nombuf_total", "RX mbuf allocation failures (rx_nombuf).",
           [](const PortSnapshot& p) { return p.rx_nombuf; });

  w.family("quicsteer_steering_generation", "gauge", "The live steering configuration: 1 + applied reloads.");
  w.sample("", s.steering_generation);
  w.family("quicsteer_steering_reloads_total", "counter", "Steering reloads asked for, by result.");
  w.sample(label("result", "applied"), steering.reloads_applied);
  w.sample(label("result", "refused"), steering.reloads_refused);
  return w.text();
}

// libmicrohttpd's callbacks, all on the endpoint's thread (MHD_run_wait).
struct EndpointCallbacks {
  static MHD_Result answer(MHD_Connection* connection, unsigned status, const std::string& type,
                           const std::string& body, bool allow = false) {
    MHD_Response* response =
        MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;  // out of memory: the connection is closed
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type.c_str());
    if (allow) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    const MHD_Result queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return queued;
  }

  // Called once the request line and headers are in (HEAD is answered as
  // GET, without the body, by libmicrohttpd).
  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                               const char*, const char*, std::size_t*, void**) {
    const auto& self = *static_cast<const PrometheusEndpoint*>(cls);
    const std::string path = url;
    const std::string m = method;
    if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD)
      return answer(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "only GET and HEAD\n", true);
    if (path == "/metrics")
      return answer(connection, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                    prometheus_text(self.view_->stats(), self.view_->steering()));
    if (path == "/healthz") {
      const Health h = self.view_->health();
      return h.healthy ? answer(connection, MHD_HTTP_OK, "text/plain", "ok\n")
                       : answer(connection, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", h.reason + "\n");
    }
    return answer(connection, MHD_HTTP_NOT_FOUND, "text/plain", "quicsteer serves /metrics and /healthz\n");
  }

  // Each connection's deadline runs from its accept, and again from each
  // answer (a keep-alive connection's next request).
  static void on_connection(void* cls, MHD_Connection* connection, void**, MHD_ConnectionNotificationCode code) {
    auto& self = *static_cast<PrometheusEndpoint*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
      self.clients_.erase(connection);
      return;
    }
    const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info != nullptr)
      self.clients_[connection] = {info->connect_fd, std::chrono::steady_clock::now() + PrometheusEndpoint::kRequestDeadline};
  }
  static void on_completed(void* cls, MHD_Connection* connection, void**, MHD_RequestTerminationCode) {
    auto& self = *static_cast<PrometheusEndpoint*>(cls);
    const auto it = self.clients_.find(connection);
    if (it != self.clients_.end()) it->second.deadline = std::chrono::steady_clock::now() + PrometheusEndpoint::kRequestDeadline;
  }
};

namespace {

// Descriptors open now: what the process needs besides the endpoint.
unsigned open_descriptors() {
  unsigned n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// Raises the soft descriptor limit so that kMaxClients fit (a default soft
// limit of 1024 would not); where the hard limit is lower, fewer clients.
unsigned client_budget(unsigned wanted) {
  constexpr unsigned kSpare = 256;  // for the rest of quicsteer: telemetry clients, devices, files
  const rlim_t needed = rlim_t(open_descriptors()) + kSpare + wanted;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 64;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return wanted;
  const rlim_t others = rlim_t(open_descriptors()) + kSpare;
  return limit.rlim_cur > others + 64 ? unsigned(limit.rlim_cur - others) : 64;
}

}  // namespace

PrometheusEndpoint::PrometheusEndpoint(const ListenAddress& address, std::shared_ptr<const LiveView> view)
    : view_(std::move(view)) {
  const std::string where = (address.ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
  int listener = -1;
  const auto fail = [&](const char* what) {
    const std::string message = "telemetry.prometheus_listen: cannot " + std::string(what) + " " + where + ": " +
                                std::strerror(errno);
    if (listener >= 0) ::close(listener);
    throw std::runtime_error(message);
  };
  // The socket is ours to bind, so that the error names the address and
  // port 0 tells which port it got; libmicrohttpd serves on it.
  listener = ::socket(address.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener < 0) fail("open a socket for");
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (address.ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(address.port);
    ::inet_pton(AF_INET6, address.host.c_str(), &a->sin6_addr);
    length = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    a->sin_port = htons(address.port);
    ::inet_pton(AF_INET, address.host.c_str(), &a->sin_addr);
    length = sizeof *a;
  }
  if (::bind(listener, reinterpret_cast<sockaddr*>(&storage), length) != 0) fail("listen on");
  // A backlog that a burst of connections does not overflow; the kernel caps it.
  if (::listen(listener, 1024) != 0) fail("listen on");
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  port_ = ntohs(address.ipv6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  max_clients_ = client_budget(kMaxClients);
  // No internal thread: ours runs it, so that it can also close connections
  // past their deadline (libmicrohttpd 0.9.75's timeout is for inactivity
  // only) between two runs, where no callback holds them.
  daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL | (address.ipv6 ? MHD_USE_IPv6 : 0), 0, nullptr, nullptr, &EndpointCallbacks::on_request, this,
      MHD_OPTION_LISTEN_SOCKET, listener, MHD_OPTION_CONNECTION_LIMIT, max_clients_,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, std::min(kMaxClientsPerIp, max_clients_),
      MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, kMemoryPerClient,
      MHD_OPTION_NOTIFY_CONNECTION, &EndpointCallbacks::on_connection, this,
      MHD_OPTION_NOTIFY_COMPLETED, &EndpointCallbacks::on_completed, this, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    errno = EINVAL;
    fail("start the HTTP server (libmicrohttpd) on");
  }
  thread_ = std::thread([this] { serve(); });
}

PrometheusEndpoint::~PrometheusEndpoint() {
  stop_.store(true);
  thread_.join();
  MHD_stop_daemon(daemon_);  // closes every connection and the listening socket
}

void PrometheusEndpoint::serve() {
  while (!stop_.load()) {
    // Waits for the sockets at most kPollMs, answers what is complete.
    MHD_run_wait(daemon_, kPollMs);
    // A client that trickles its request, or reads the answer slowly, is cut
    // off at its deadline: the connection sees end of file on its next run.
    const auto now = std::chrono::steady_clock::now();
    for (auto& [connection, client] : clients_)
      if (now > client.deadline) ::shutdown(client.fd, SHUT_RDWR);
  }
}

}  // namespace qs
