#include "dataplane/prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "dataplane/drop_reason.h"

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

PrometheusEndpoint::PrometheusEndpoint(const ListenAddress& address, std::shared_ptr<const LiveView> view)
    : view_(std::move(view)) {
  const std::string where = (address.ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
  const auto fail = [&](const char* what) {
    const std::string message = "telemetry.prometheus_listen: cannot " + std::string(what) + " " + where + ": " +
                                std::strerror(errno);
    if (listener_ >= 0) ::close(listener_);
    if (wake_ >= 0) ::close(wake_);
    throw std::runtime_error(message);
  };
  listener_ = ::socket(address.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) fail("open a socket for");
  const int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
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
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&storage), length) != 0) fail("listen on");
  if (::listen(listener_, 16) != 0) fail("listen on");
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  port_ = ntohs(address.ipv6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_ < 0) fail("set up the endpoint for");
  thread_ = std::thread([this] { serve(); });
}

PrometheusEndpoint::~PrometheusEndpoint() {
  const std::uint64_t one = 1;
  if (::write(wake_, &one, sizeof one) < 0) {
    // The thread then only stops at its next poll timeout.
  }
  thread_.join();
  ::close(listener_);
  ::close(wake_);
}

void PrometheusEndpoint::serve() {
  for (;;) {
    pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    // A client that sends or reads nothing cannot hold the endpoint long.
    const timeval timeout{2, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    answer(client);
    ::close(client);
  }
}

void PrometheusEndpoint::answer(int client) {
  // The request line and headers, up to the blank line (at most 8 KiB).
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos &&
         request.size() < 8192) {
    const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    request.append(buffer, std::size_t(n));
  }
  const std::string line = request.substr(0, request.find_first_of("\r\n"));
  std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  const bool get = line.rfind("GET ", 0) == 0, head = line.rfind("HEAD ", 0) == 0;
  const std::string target = line.substr(line.find(' ') + 1, line.rfind(' ') - line.find(' ') - 1);
  const std::string path = target.substr(0, target.find('?'));
  if (!get && !head) {
    status = "405 Method Not Allowed";
    type = "text/plain";
    body = "only GET /metrics\n";
  } else if (path != "/metrics") {
    status = "404 Not Found";
    type = "text/plain";
    body = "quicsteer serves its metrics at /metrics\n";
  } else {
    body = prometheus_text(view_->stats(), view_->steering());
  }
  std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) response += body;
  for (std::size_t sent = 0; sent < response.size();) {
    const ssize_t n = ::send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += std::size_t(n);
  }
}

}  // namespace qs
