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
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "dataplane/control/counter_fields.h"
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
  // Microseconds, written in seconds (Prometheus' base unit), exactly.
  void sample_us_as_seconds(const std::string& labels, std::uint64_t us) {
    char text[32];
    std::snprintf(text, sizeof text, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
    o_ << name_;
    if (!labels.empty()) o_ << '{' << labels << '}';
    o_ << ' ' << text << '\n';
  }
  std::string text() const { return o_.str(); }

 private:
  std::ostringstream o_;
  std::string name_;
};

std::string label(const char* name, const std::string& value) { return std::string(name) + "=\"" + escape(value) + "\""; }
std::string label(const char* name, std::uint64_t value) { return label(name, std::to_string(value)); }

// A table of counter_fields.h, one family per metric: for each item, its
// `labels` and the value in `select(item)`. Fields that share a family (told
// apart by their label) are neighbours in the table and go out together,
// item by item.
template <typename Items, typename Labels, typename Select, typename Field, std::size_t N>
void families(Writer& w, const Field (&fields)[N], const Items& items, Labels labels, Select select) {
  for (std::size_t first = 0; first < N;) {
    std::size_t end = first + 1;
    while (end < N && std::strcmp(fields[end].metric, fields[first].metric) == 0) ++end;
    w.family(std::string("quicsteer_") + fields[first].metric,
             fields[first].kind == CounterKind::kGauge ? "gauge" : "counter", fields[first].help);
    for (const auto& item : items) {
      const std::string base = labels(item);
      for (std::size_t f = first; f < end; ++f) {
        const Field& field = fields[f];
        std::string l = base;
        if (*field.label) {
          if (!l.empty()) l += ',';
          l += field.label;
        }
        const std::uint64_t value = select(item).*field.value;
        if (field.unit == CounterUnit::kMicroseconds) w.sample_us_as_seconds(l, value);
        else w.sample(l, value);
      }
    }
    first = end;
  }
}

}  // namespace

std::string prometheus_text(const StatsSnapshot& s, std::uint64_t reloads_applied, std::uint64_t reloads_refused) {
  Writer w;
  auto queue_labels = [](const QueueSnapshot& q) {
    return label("lcore", q.lcore) + "," + label("port", q.port) + "," + label("queue", q.queue);
  };
  auto owner_labels = [](const LcoreSnapshot& l) {
    return label("lcore", l.lcore) + "," + label("owner", std::uint64_t(l.owner_index));
  };
  const auto itself = [](const auto& item) -> const auto& { return item; };
  families(w, kReceiveFields, s.queues, queue_labels, [](const QueueSnapshot& q) -> const ReceiveTotals& { return q.rx; });
  w.family("quicsteer_routed_packets_total", "counter",
           "Packets from an RX queue by the rule that chose their owner (QUIC-LB, a forwarding table, a hash).");
  for (const auto& q : s.queues)
    for (std::size_t m = 0; m < kResolveMethods; ++m)
      w.sample(queue_labels(q) + "," + label("rule", std::string(to_string(ResolveMethod(m)))), q.rx.routed[m]);
  if (!s.backends.empty()) {
    const auto backend_labels = [](const BackendSnapshot& b) {
      return label("backend", b.name) + "," + label("owner_lcore", b.owner_lcore);
    };
    families(w, kBackendCounterFields, s.backends, backend_labels, itself);
    w.family("quicsteer_backend_state", "gauge", "1 for the state a backend is in (active, draining, down).");
    for (const auto& b : s.backends)
      for (const char* state : {"active", "draining", "down"})
        w.sample(backend_labels(b) + "," + label("state", state), b.state == state ? 1 : 0);
    if (!s.health_checks.empty()) {
      families(w, kBackendHealthFields, s.backends, backend_labels, itself);
      w.family("quicsteer_backend_health", "gauge",
               "1 for what the health checks find a backend (up, down, unchecked: not yet probed, counted as up).");
      for (const auto& b : s.backends)
        for (const char* health : {"up", "down", "unchecked"})
          w.sample(backend_labels(b) + "," + label("health", health), b.health == health ? 1 : 0);
    }
  }
  if (s.forwarding.enabled) {
    const ForwardingSnapshot* tables[] = {&s.forwarding};
    families(w, kForwardingFields, tables, [](const ForwardingSnapshot*) { return std::string(); },
             [](const ForwardingSnapshot* f) -> const ForwardingSnapshot& { return *f; });
  }
  families(w, kQueueFields, s.queues, queue_labels, itself);
  w.family("quicsteer_queue_drops_total", "counter", "Packets an RX queue's receiver dropped, by reason.");
  for (const auto& q : s.queues)
    for (std::size_t r = 0; r < kDropReasonCount; ++r)
      w.sample(queue_labels(q) + "," + label("reason", std::string(drop_reason_name(DropReason(r)))), q.rx.drops[r]);

  w.family("quicsteer_drops_total", "counter", "Packets an lcore dropped (receiving and owning), by reason.");
  for (const auto& l : s.lcores)
    for (std::size_t r = 0; r < kDropReasonCount; ++r)
      w.sample(label("lcore", l.lcore) + "," + label("reason", std::string(drop_reason_name(DropReason(r)))),
               l.rx.drops[r] + l.owner.drops[r]);
  families(w, kLcoreFields, s.lcores, [](const LcoreSnapshot& l) { return label("lcore", l.lcore); }, itself);

  std::vector<const LcoreSnapshot*> owners;
  for (const auto& l : s.lcores)
    if (l.owner_index >= 0) owners.push_back(&l);
  families(w, kOwnerFields, owners, [&](const LcoreSnapshot* l) { return owner_labels(*l); },
           [](const LcoreSnapshot* l) -> const OwnerTotals& { return l->owner; });

  families(w, kRingFields, s.rings, [](const RingSnapshot& r) {
    return label("from_lcore", r.from_lcore) + "," + label("to_lcore", r.to_lcore);
  }, itself);
  families(w, kPortFields, s.ports, [](const PortSnapshot& p) { return label("port", p.name); }, itself);
  families(w, kExceptionFields, s.exception,
           [](const ExceptionSnapshot& x) { return label("port", x.port) + "," + label("class", x.cls); }, itself);
  families(w, kPeerSyncFields, s.peer_sync, [](const PeerSyncSnapshot&) { return std::string(); }, itself);
  families(w, kHealthChecksFields, s.health_checks, [](const HealthChecksSnapshot&) { return std::string(); }, itself);

  w.family("quicsteer_steering_generation", "gauge", "The live steering configuration: 1 + applied reloads.");
  w.sample("", s.steering_generation);
  w.family("quicsteer_steering_reloads_total", "counter", "Steering reloads asked for, by result.");
  w.sample(label("result", "applied"), reloads_applied);
  w.sample(label("result", "refused"), reloads_refused);
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

  // The published /metrics text, not copied: the response holds a reference
  // to it until the last connection that sends it is done.
  static MHD_Result answer_metrics(MHD_Connection* connection, std::shared_ptr<const std::string> text) {
    auto* held = new std::shared_ptr<const std::string>(std::move(text));
    MHD_Response* response = MHD_create_response_from_buffer_with_free_callback_cls(
        (*held)->size(), const_cast<char*>((*held)->data()),
        [](void* cls) { delete static_cast<std::shared_ptr<const std::string>*>(cls); }, held);
    if (response == nullptr) {
      delete held;
      return MHD_NO;  // out of memory: the connection is closed
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    const MHD_Result queued = MHD_queue_response(connection, MHD_HTTP_OK, response);
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
    if (path == "/healthz") {
      const Health h = self.view_->health();
      return h.healthy ? answer(connection, MHD_HTTP_OK, "text/plain", "ok\n")
                       : answer(connection, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", h.reason + "\n");
    }
    if (path == "/metrics") {
      std::shared_ptr<const std::string> text = self.view_->metrics();
      if (text == nullptr)  // never once the constructor has run; kept safe all the same
        return answer(connection, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", "starting\n");
      return answer_metrics(connection, std::move(text));
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

PrometheusEndpoint::PrometheusEndpoint(const ListenAddress& address, std::shared_ptr<LiveView> view)
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
  // Before the thread answers its first request: /metrics always has a text.
  view_->render_metrics_with(&prometheus_text);
  thread_ = std::thread([this] { serve(); });
}

PrometheusEndpoint::~PrometheusEndpoint() {
  stop_.store(true);
  thread_.join();
  MHD_stop_daemon(daemon_);  // closes every connection and the listening socket
  view_->render_metrics_with(nullptr);  // nobody serves /metrics any more
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
