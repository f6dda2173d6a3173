// The one list of counters (counter_fields.h) and the outputs it feeds,
// without EAL: a snapshot with one item of every scope, each counter a value
// of its own, must show every counter with that value in the summary, the
// JSON and the Prometheus text. (quicsteer_counters_test.py checks the same
// of a running quicsteer, telemetry included.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "dataplane/control/counter_fields.h"
#include "dataplane/control/live_view.h"
#include "dataplane/control/prometheus.h"
#include "tests/dataplane/print_capture.h"

namespace qs {
namespace {

// Each field of `fields` in `item` gets the next value of `next`.
template <typename Snapshot, typename Field, std::size_t N>
void fill(Snapshot& item, const Field (&fields)[N], std::uint64_t& next) {
  for (const Field& f : fields) item.*f.value = next++;
}

struct Filled {
  StatsSnapshot s;
  std::uint64_t first = 1000001;  // values past 10^6: a microsecond counter is over a second
};

Filled one_of_each() {
  Filled r;
  std::uint64_t v = r.first;
  StatsSnapshot& s = r.s;
  s.elapsed_s = 1;
  QueueSnapshot q;
  q.port = "wire";
  fill(q.rx, kReceiveFields, v);
  fill(q, kQueueFields, v);
  s.queues = {q};
  LcoreSnapshot l;
  l.lcore = 1;
  l.owner_index = 0;
  l.rx = q.rx;
  fill(l, kLcoreFields, v);
  fill(l.owner, kOwnerFields, v);
  s.lcores = {l};
  s.rx_total = l.rx;
  s.owner_total = l.owner;
  RingSnapshot ring;
  ring.from_lcore = 1;
  ring.to_lcore = 2;
  fill(ring, kRingFields, v);
  s.rings = {ring};
  PortSnapshot p;
  p.name = "wire";
  fill(p, kPortFields, v);
  s.ports = {p};
  s.forwarding.enabled = true;
  fill(s.forwarding, kForwardingFields, v);
  BackendSnapshot b;
  b.name = "b0";
  b.state = "active";
  b.health = "up";
  fill(b, kBackendCounterFields, v);
  fill(b, kBackendHealthFields, v);
  s.backends = {b};
  ExceptionSnapshot x;
  x.port = "wire";
  x.cls = "bgp";
  fill(x, kExceptionFields, v);
  s.exception = {x};
  PeerSyncSnapshot ps;
  fill(ps, kPeerSyncFields, v);
  s.peer_sync = {ps};
  HealthChecksSnapshot hc;
  fill(hc, kHealthChecksFields, v);
  s.health_checks = {hc};
  return r;
}

// Every field of every table, as (name, value in the snapshot).
template <typename Snapshot, typename Field, std::size_t N>
void expect_each(const Field (&fields)[N], const Snapshot& item, const std::string& text, const char* pattern) {
  for (const Field& f : fields) {
    char want[256];
    std::snprintf(want, sizeof want, pattern, f.name, static_cast<unsigned long long>(item.*f.value));
    EXPECT_NE(text.find(want), std::string::npos) << "missing " << want << " in\n" << text;
  }
}

// Every field of every table of one_of_each(), each shown in `text` with its
// value by `pattern` (name, value).
void expect_every_table(const Filled& f, const std::string& text, const char* pattern) {
  expect_each(kReceiveFields, f.s.rx_total, text, pattern);
  expect_each(kQueueFields, f.s.queues[0], text, pattern);
  expect_each(kOwnerFields, f.s.owner_total, text, pattern);
  expect_each(kLcoreFields, f.s.lcores[0], text, pattern);
  expect_each(kRingFields, f.s.rings[0], text, pattern);
  expect_each(kPortFields, f.s.ports[0], text, pattern);
  expect_each(kForwardingFields, f.s.forwarding, text, pattern);
  expect_each(kBackendCounterFields, f.s.backends[0], text, pattern);
  expect_each(kExceptionFields, f.s.exception[0], text, pattern);
  expect_each(kPeerSyncFields, f.s.peer_sync[0], text, pattern);
  expect_each(kBackendHealthFields, f.s.backends[0], text, pattern);
  expect_each(kHealthChecksFields, f.s.health_checks[0], text, pattern);
}

TEST(CounterFields, NamesAreUniquePerScopeAndMetricsAcrossAll) {
  std::set<std::string> metrics;
  std::size_t n = 0;
  const auto add = [&](const auto& fields) {
    std::set<std::string> names;
    for (const auto& f : fields) {
      EXPECT_TRUE(names.insert(f.name).second) << f.name;
      EXPECT_TRUE(metrics.insert(std::string(f.metric) + f.label).second) << f.metric << f.label;
      EXPECT_EQ(std::string(f.metric).ends_with("_total"), f.kind == CounterKind::kCounter) << f.metric;
      ++n;
    }
  };
  add(kReceiveFields);
  add(kQueueFields);
  add(kOwnerFields);
  add(kLcoreFields);
  add(kRingFields);
  add(kPortFields);
  add(kForwardingFields);
  add(kBackendCounterFields);
  add(kExceptionFields);
  add(kPeerSyncFields);
  add(kBackendHealthFields);
  add(kHealthChecksFields);
  const std::string list = capture([](std::FILE* f) { print_counter_list(f); });
  EXPECT_EQ(std::size_t(std::count(list.begin(), list.end(), '\n')), n) << list;
}

TEST(CounterFields, EveryCounterIsInTheSummary) {
  const Filled f = one_of_each();
  const std::string out = capture([&](std::FILE* file) { print_summary(file, f.s, 0); });
  expect_every_table(f, out, "%s %llu");
}

TEST(CounterFields, EveryCounterIsInTheJson) {
  const Filled f = one_of_each();
  const std::string out = stats_json(f.s, "p.yaml", 0, 1);
  expect_every_table(f, out, "\"%s\": %llu");
}

// The Prometheus sample of a field: its family and label after the item's
// labels, its value (microseconds in seconds, to the microsecond).
template <typename Snapshot, typename Field, std::size_t N>
void expect_samples(const Field (&fields)[N], const Snapshot& item, const std::string& labels, const std::string& text) {
  for (const Field& f : fields) {
    std::string all = labels;
    if (*f.label) {
      if (!all.empty()) all += ',';
      all += f.label;
    }
    std::string line = std::string("\nquicsteer_") + f.metric + (all.empty() ? "" : "{" + all + "}") + " ";
    const std::uint64_t v = item.*f.value;
    if (f.unit == CounterUnit::kMicroseconds) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%llu.%06llu", static_cast<unsigned long long>(v / 1000000),
                    static_cast<unsigned long long>(v % 1000000));
      line += seconds;
    } else {
      line += std::to_string(v);
    }
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << "missing" << line << " in\n" << text;
    EXPECT_NE(text.find(std::string("# TYPE quicsteer_") + f.metric + " " + to_string(f.kind) + "\n"),
              std::string::npos)
        << f.metric;
  }
}

TEST(CounterFields, EveryCounterIsInThePrometheusText) {
  const Filled f = one_of_each();
  const std::string out = prometheus_text(f.s, 0, 0);
  expect_samples(kReceiveFields, f.s.queues[0].rx, "lcore=\"0\",port=\"wire\",queue=\"0\"", out);
  expect_samples(kQueueFields, f.s.queues[0], "lcore=\"0\",port=\"wire\",queue=\"0\"", out);
  expect_samples(kOwnerFields, f.s.lcores[0].owner, "lcore=\"1\",owner=\"0\"", out);
  expect_samples(kLcoreFields, f.s.lcores[0], "lcore=\"1\"", out);
  expect_samples(kRingFields, f.s.rings[0], "from_lcore=\"1\",to_lcore=\"2\"", out);
  expect_samples(kPortFields, f.s.ports[0], "port=\"wire\"", out);
  expect_samples(kForwardingFields, f.s.forwarding, "", out);
  expect_samples(kBackendCounterFields, f.s.backends[0], "backend=\"b0\",owner_lcore=\"0\"", out);
  expect_samples(kExceptionFields, f.s.exception[0], "port=\"wire\",class=\"bgp\"", out);
  expect_samples(kPeerSyncFields, f.s.peer_sync[0], "", out);
  expect_samples(kBackendHealthFields, f.s.backends[0], "backend=\"b0\",owner_lcore=\"0\"", out);
  expect_samples(kHealthChecksFields, f.s.health_checks[0], "", out);
  EXPECT_NE(out.find("\nquicsteer_backend_health{backend=\"b0\",owner_lcore=\"0\",health=\"up\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace qs
