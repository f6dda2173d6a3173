// Snapshots as a person reads them (live table, summary) and as a program
// reads them (JSON). Control path only.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <sstream>
#include <string>

#include "dataplane/control/counter_fields.h"

namespace qs {

void ReceiveTotals::add(const ReceiveTotals& o) {
  for (const auto& f : kReceiveFields) this->*f.value += o.*f.value;
  for (std::size_t i = 0; i < kResolveMethods; ++i) routed[i] += o.routed[i];
  for (std::size_t i = 0; i < kDropReasonCount; ++i) drops[i] += o.drops[i];
}

void OwnerTotals::add(const OwnerTotals& o) {
  for (const auto& f : kOwnerFields) this->*f.value += o.*f.value;
  for (std::size_t i = 0; i < kDropReasonCount; ++i) drops[i] += o.drops[i];
}

std::uint64_t StatsSnapshot::drops_sum() const {
  std::uint64_t n = 0;
  for (auto d : drops_total) n += d;
  return n;
}

namespace {

// Counters never go backwards (port counters carry across device resets), but
// a rate is 0 rather than a wrapped subtraction should one ever do.
double pps(std::uint64_t now, std::uint64_t before, double seconds) {
  return seconds > 0 && now >= before ? double(now - before) / seconds : 0.0;
}

std::string drops_text(const DropArray& d) {
  std::string out;
  for (std::size_t i = 0; i < kDropReasonCount; ++i) {
    if (d[i] == 0) continue;
    if (!out.empty()) out += ' ';
    out += std::string(drop_reason_name(DropReason(i))) + "=" + std::to_string(d[i]);
  }
  return out.empty() ? "-" : out;
}

// What the live table shows of counter_fields.h, by name.
constexpr const OwnerField& kLiveConnections = counter_field(kOwnerFields, "connections_live");
constexpr const OwnerField& kLiveMigrations = counter_field(kOwnerFields, "migrations");
constexpr const ReceiveField& kLiveParks = counter_field(kReceiveFields, "parks");
constexpr const PortField& kLivePortMissed = counter_field(kPortFields, "imissed");
constexpr const PortField& kLivePortNombuf = counter_field(kPortFields, "rx_nombuf");

// A table's counters as "name value" pairs after `prefix`, wrapped under it.
template <typename Snapshot, typename Field, std::size_t N>
void print_fields(std::FILE* out, const std::string& prefix, const Field (&fields)[N], const Snapshot& s) {
  constexpr std::size_t kWidth = 100;
  std::string line = prefix;
  bool first = true;
  for (const Field& f : fields) {
    const std::string pair = std::string(f.name) + " " + std::to_string(s.*f.value);
    if (!first && line.size() + 2 + pair.size() > kWidth) {
      std::fprintf(out, "%s\n", line.c_str());
      line.assign(prefix.size(), ' ');
      first = true;
    }
    line += (first ? "" : "  ") + pair;
    first = false;
  }
  std::fprintf(out, "%s\n", line.c_str());
}

// "  heading       ": the summary's column of headings.
std::string heading(const std::string& text) {
  std::string h = "  " + text;
  h.resize(std::max<std::size_t>(h.size() + 1, 16), ' ');
  return h;
}

}  // namespace

std::string format_rate(double packets_per_second) {
  char buf[32];
  if (!(packets_per_second > 0)) return "0 pps";
  if (packets_per_second >= 1e6) std::snprintf(buf, sizeof buf, "%.3f Mpps", packets_per_second / 1e6);
  else if (packets_per_second >= 1e3) std::snprintf(buf, sizeof buf, "%.3f kpps", packets_per_second / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f pps", packets_per_second);
  return buf;
}

void print_stats_table(std::FILE* out, const StatsSnapshot& now, const StatsSnapshot& prev) {
  const double dt = now.elapsed_s - prev.elapsed_s;
  std::uint64_t processed_delta = 0;
  for (std::size_t i = 0; i < now.lcores.size(); ++i)
    processed_delta += now.lcores[i].owner.processed - (i < prev.lcores.size() ? prev.lcores[i].owner.processed : 0);
  std::fprintf(out, "\n%7.1fs  lcore owner  busy     rx rate     tx rate  share  conns   migr  parks  parked  drops\n",
               now.elapsed_s);
  for (std::size_t i = 0; i < now.lcores.size(); ++i) {
    const LcoreSnapshot& l = now.lcores[i];
    const LcoreSnapshot p = i < prev.lcores.size() ? prev.lcores[i] : LcoreSnapshot{};
    const std::uint64_t processed = l.owner.processed - p.owner.processed;
    DropArray d = l.rx.drops;
    for (std::size_t r = 0; r < kDropReasonCount; ++r) d[r] += l.owner.drops[r];
    bool parked_now = false;
    for (const auto& q : now.queues) parked_now |= q.lcore == l.lcore && q.parked_now;
    char owner[16];
    if (l.owner_index >= 0) std::snprintf(owner, sizeof owner, "%d", l.owner_index);
    else std::snprintf(owner, sizeof owner, "-");
    const double busy = dt > 0 && now.tsc_hz ? 100.0 * double(l.busy_cycles - p.busy_cycles) / (dt * double(now.tsc_hz)) : 0.0;
    std::fprintf(out, "          %5u %5s  %3.0f%%  %10s  %10s  %4.0f%%  %5" PRIu64 "  %5" PRIu64 "  %5" PRIu64
                      "  %-6s  %s\n",
                 l.lcore, owner, busy, format_rate(pps(l.rx.rx, p.rx.rx, dt)).c_str(),
                 format_rate(pps(l.owner.tx + l.owner.sunk, p.owner.tx + p.owner.sunk, dt)).c_str(),
                 processed_delta ? 100.0 * double(processed) / double(processed_delta) : 0.0,
                 l.owner.*kLiveConnections.value, l.owner.*kLiveMigrations.value, l.rx.*kLiveParks.value,
                 parked_now ? "yes" : "no",
                 drops_text(d).c_str());
  }
  if (!now.backends.empty()) {
    // Compact: one line for the fleet, the busiest backends' rates on it.
    std::uint64_t total = 0, down = 0, too_big = 0;
    unsigned active = 0, draining = 0, unhealthy = 0;
    std::string unhealthy_names;
    for (const auto& b : now.backends) {
      active += b.state == "active";
      draining += b.state == "draining";
      if (b.health == "down") {
        if (unhealthy++ < 4) unhealthy_names.append(" ").append(b.name);
      }
      down += b.backend_down;
      too_big += b.too_big;
    }
    std::vector<std::pair<double, const BackendSnapshot*>> rates;
    for (std::size_t i = 0; i < now.backends.size(); ++i) {
      const BackendSnapshot& b = now.backends[i];
      std::uint64_t before = 0;
      for (const auto& p : prev.backends)
        if (p.slot == b.slot) before = p.packets;
      total += b.packets - std::min(before, b.packets);
      rates.emplace_back(pps(b.packets, std::min(before, b.packets), dt), &b);
    }
    std::sort(rates.begin(), rates.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::fprintf(out, "          backends %zu (%u active, %u draining) %10s  down drops %" PRIu64 "  too big %" PRIu64 " ",
                 now.backends.size(), active, draining, format_rate(dt > 0 ? double(total) / dt : 0.0).c_str(), down,
                 too_big);
    if (!now.health_checks.empty())
      std::fprintf(out, " health down %u%s%s ", unhealthy, unhealthy_names.c_str(), unhealthy > 4 ? " ..." : "");
    for (std::size_t i = 0; i < rates.size() && i < 4; ++i)
      std::fprintf(out, " %s %s", rates[i].second->name.c_str(), format_rate(rates[i].first).c_str());
    std::fprintf(out, "\n");
  }
  for (std::size_t i = 0; i < now.ports.size(); ++i) {
    const PortSnapshot& p = now.ports[i];
    const PortSnapshot q = i < prev.ports.size() ? prev.ports[i] : PortSnapshot{};
    std::fprintf(out, "          port %-8s rx %10s  tx %10s  %s %" PRIu64 "  %s %" PRIu64 "\n", p.name.c_str(),
                 format_rate(pps(p.ipackets, q.ipackets, dt)).c_str(), format_rate(pps(p.opackets, q.opackets, dt)).c_str(),
                 kLivePortMissed.name, p.*kLivePortMissed.value, kLivePortNombuf.name, p.*kLivePortNombuf.value);
  }
  std::fflush(out);
}

void print_summary(std::FILE* out, const StatsSnapshot& s, std::int64_t leaked) {
  const double t = s.elapsed_s > 0 ? s.elapsed_s : 1;
  // Only owners follow migrations; name the one with most, if any did.
  const LcoreSnapshot* busiest = nullptr;
  for (const auto& l : s.lcores)
    if (l.owner_index >= 0 && l.owner.migrations > 0 && (!busiest || l.owner.migrations > busiest->owner.migrations))
      busiest = &l;
  std::fprintf(out, "\n== quicsteer summary (%.1f s)\n", s.elapsed_s);
  std::fprintf(out, "  steering      generation %" PRIu64 " live at the end (%" PRIu64 " reloads applied)\n",
               s.steering_generation, s.steering_generation - 1);
  std::fprintf(out, "  received      %" PRIu64 " packets, %s\n", s.rx_total.rx,
               format_rate(double(s.rx_total.rx) / t).c_str());
  std::fprintf(out, "  processed     %" PRIu64 " packets by owners (%" PRIu64 " handed over on rings, %" PRIu64 " run locally)\n",
               s.owner_total.processed, s.rx_total.enqueued, s.rx_total.steered_self);
  std::fprintf(out, "  transmitted   %" PRIu64 "   sunk %" PRIu64 "\n", s.owner_total.tx, s.owner_total.sunk);
  std::fprintf(out, "  connections   %" PRIu64 " seen (%" PRIu64 " CIDs), %" PRIu64 " migrations followed",
               s.owner_total.connections, s.owner_total.cids, s.owner_total.migrations);
  if (busiest) std::fprintf(out, " (most on owner lcore %u: %" PRIu64 ")", busiest->lcore, busiest->owner.migrations);
  std::fprintf(out, "\n");
  for (const auto& l : s.lcores)
    if (l.owner_index >= 0)
      std::fprintf(out, "    owner lcore %u: %" PRIu64 " packets, %" PRIu64 " connections (%" PRIu64 " CIDs), %" PRIu64
                        " migrations\n",
                   l.lcore, l.owner.processed, l.owner.connections, l.owner.cids, l.owner.migrations);
  {
    const auto& r = s.rx_total.routed;
    const auto at = [&](ResolveMethod m) { return r[static_cast<std::size_t>(m)]; };
    std::fprintf(out, "  routed by     quic_lb %" PRIu64 ", learned setup %" PRIu64 " / cid %" PRIu64 " / 4-tuple %" PRIu64
                      ", hash of dcid %" PRIu64 " (unknown short-header cid %" PRIu64 "), hash of 4-tuple %" PRIu64 "\n",
                 at(ResolveMethod::kQuicLb), at(ResolveMethod::kLearnedSetup), at(ResolveMethod::kLearnedCid),
                 at(ResolveMethod::kLearnedTuple), at(ResolveMethod::kFallbackDcid),
                 at(ResolveMethod::kFallbackUnknownCid), at(ResolveMethod::kFallbackTuple));
  }
  if (s.forwarding.enabled)
    std::fprintf(out, "  forwarding    %" PRIu64 " of %" PRIu64 " slots in use, %" PRIu64 " setups in %" PRIu64
                      " slots; %" PRIu64 " learned, %" PRIu64 " refused (table full), %" PRIu64 " setups evicted, %" PRIu64
                      " expired\n",
                 s.forwarding.entries, s.forwarding.slots, s.forwarding.setup_entries, s.forwarding.setup_slots,
                 s.rx_total.learned, s.rx_total.table_full, s.rx_total.setup_evicted, s.forwarding.expired);
  if (!s.backends.empty()) {
    std::fprintf(out, "  backends      %zu\n", s.backends.size());
    for (const auto& b : s.backends) {
      std::fprintf(out, "    %-16s %-8s health %-9s owner lcore %-3u", b.name.c_str(), b.state.c_str(),
                   b.health.c_str(), b.owner_lcore);
      for (const auto& f : kBackendCounterFields) std::fprintf(out, " %s %" PRIu64, f.name, b.*f.value);
      if (b.health != "off")
        for (const auto& f : kBackendHealthFields) std::fprintf(out, " %s %" PRIu64, f.name, b.*f.value);
      std::fprintf(out, "\n");
    }
  }
  std::fprintf(out, "  back-pressure %" PRIu64 " parks, %" PRIu64 " packets parked, %.1f ms parked in total\n",
               s.rx_total.parks, s.rx_total.parked_packets, double(s.rx_total.parked_us) / 1000.0);
  std::fprintf(out, "                %" PRIu64 " TX holds (a full TX queue stopped an owner), %.1f ms held in total\n",
               s.owner_total.tx_holds, double(s.owner_total.tx_held_us) / 1000.0);
  std::fprintf(out, "  drops         %s\n", drops_text(s.drops_total).c_str());
  // Every counter of counter_fields.h, by its name: in total, per ring and
  // per port (per lcore and per queue in the JSON).
  std::fprintf(out, "  counters      in total (per lcore and per queue: the JSON, telemetry, Prometheus)\n");
  print_fields(out, heading("  receive"), kReceiveFields, s.rx_total);
  print_fields(out, heading("  owner"), kOwnerFields, s.owner_total);
  LcoreSnapshot lcores;
  for (const auto& l : s.lcores)
    for (const auto& f : kLcoreFields) lcores.*f.value += l.*f.value;
  print_fields(out, heading("  lcores"), kLcoreFields, lcores);
  QueueSnapshot queues;
  for (const auto& q : s.queues)
    for (const auto& f : kQueueFields) queues.*f.value += q.*f.value;
  print_fields(out, heading("  queues"), kQueueFields, queues);
  if (s.forwarding.enabled) print_fields(out, heading("  forwarding"), kForwardingFields, s.forwarding);
  for (const auto& r : s.rings)
    print_fields(out, heading("  ring " + std::to_string(r.from_lcore) + "->" + std::to_string(r.to_lcore)), kRingFields,
                 r);
  for (const auto& x : s.exception)
    print_fields(out, heading("  exception " + x.port + " " + x.cls), kExceptionFields, x);
  for (const auto& x : s.peer_sync) print_fields(out, heading("  peer sync"), kPeerSyncFields, x);
  for (const auto& x : s.health_checks) print_fields(out, heading("  health checks"), kHealthChecksFields, x);
  for (const auto& p : s.ports) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "  port %-8s  ", p.name.c_str());
    print_fields(out, prefix, kPortFields, p);
    if (p.counter_resets != 0)
      std::fprintf(out, "                  the device reset its counters %" PRIu64 " time(s); these totals carry across\n",
                   p.counter_resets);
  }
  std::fprintf(out, "  mbuf leak check: %s (%" PRId64 " not returned; %" PRIu64 " were held by devices and came back when the ports closed)\n",
               leaked == 0 ? "ok" : "LEAK", leaked, s.mbufs_held_by_devices);
  if (s.mbufs_kept_by_drivers != 0)
    std::fprintf(out, "                  %" PRIu64 " sit in net_af_xdp fill rings, which the driver never returns to the pool\n",
                 s.mbufs_kept_by_drivers);
  std::fflush(out);
}

namespace {

std::string quote(const std::string& v) {
  std::string o = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    o += ch;
  }
  return o + "\"";
}

void drops_json(std::ostringstream& o, const DropArray& d) {
  o << "{";
  for (std::size_t i = 0; i < kDropReasonCount; ++i)
    o << (i ? ", " : "") << quote(std::string(drop_reason_name(DropReason(i)))) << ": " << d[i];
  o << "}";
}

// A table's counters as "name": value pairs, each after ", " (or not, the first).
template <typename Snapshot, typename Field, std::size_t N>
void fields_json(std::ostringstream& o, const Field (&fields)[N], const Snapshot& s, bool first = false) {
  for (const Field& f : fields) {
    o << (first ? "" : ", ") << quote(f.name) << ": " << s.*f.value;
    first = false;
  }
}

void receive_json(std::ostringstream& o, const ReceiveTotals& r) {
  fields_json(o, kReceiveFields, r, true);
  o << ", \"routed\": {";
  for (std::size_t m = 0; m < kResolveMethods; ++m)
    o << (m ? ", " : "") << quote(std::string(to_string(ResolveMethod(m)))) << ": " << r.routed[m];
  o << "}, \"drops\": ";
  drops_json(o, r.drops);
}

void owner_json(std::ostringstream& o, const OwnerTotals& w) {
  fields_json(o, kOwnerFields, w, true);
  o << ", \"owner_drops\": ";
  drops_json(o, w.drops);
}

}  // namespace

std::string stats_json(const StatsSnapshot& s, const std::string& profile_path, std::int64_t leaked,
                       std::uint64_t mbufs_total) {
  std::ostringstream o;
  o << "{\n  \"profile\": " << quote(profile_path) << ",\n  \"elapsed_s\": " << s.elapsed_s
    << ",\n  \"steering_generation\": " << s.steering_generation << ",\n";
  o << "  \"total\": {";
  receive_json(o, s.rx_total);
  o << ", ";
  owner_json(o, s.owner_total);
  o << ", \"drops_total\": ";
  drops_json(o, s.drops_total);
  o << ", \"drops_sum\": " << s.drops_sum() << ", \"busy_cycles\": " << s.busy_cycles_total
    << ", \"tsc_hz\": " << s.tsc_hz << "},\n  \"lcores\": [";
  for (std::size_t i = 0; i < s.lcores.size(); ++i) {
    const auto& l = s.lcores[i];
    o << (i ? "," : "") << "\n    {\"lcore\": " << l.lcore << ", \"owner_index\": " << l.owner_index;
    fields_json(o, kLcoreFields, l);
    o << ", ";
    receive_json(o, l.rx);
    o << ", ";
    owner_json(o, l.owner);
    o << "}";
  }
  o << "\n  ],\n  \"queues\": [";
  for (std::size_t i = 0; i < s.queues.size(); ++i) {
    const auto& q = s.queues[i];
    o << (i ? "," : "") << "\n    {\"port\": " << quote(q.port) << ", \"queue\": " << q.queue << ", \"lcore\": " << q.lcore;
    fields_json(o, kQueueFields, q);
    o << ", ";
    receive_json(o, q.rx);
    o << "}";
  }
  o << "\n  ],\n  \"rings\": [";
  for (std::size_t i = 0; i < s.rings.size(); ++i) {
    const auto& r = s.rings[i];
    o << (i ? "," : "") << "\n    {\"from_lcore\": " << r.from_lcore << ", \"to_lcore\": " << r.to_lcore;
    fields_json(o, kRingFields, r);
    o << "}";
  }
  o << "\n  ],\n  \"forwarding\": {\"enabled\": " << (s.forwarding.enabled ? "true" : "false");
  fields_json(o, kForwardingFields, s.forwarding);
  o << "}";
  o << ",\n  \"backends\": [";
  for (std::size_t i = 0; i < s.backends.size(); ++i) {
    const auto& b = s.backends[i];
    o << (i ? "," : "") << "\n    {\"name\": " << quote(b.name) << ", \"slot\": " << b.slot
      << ", \"state\": " << quote(b.state) << ", \"health\": " << quote(b.health)
      << ", \"owner_lcore\": " << b.owner_lcore << ", \"weight\": " << b.weight;
    fields_json(o, kBackendCounterFields, b);
    fields_json(o, kBackendHealthFields, b);
    o << "}";
  }
  o << (s.backends.empty() ? "]" : "\n  ]");
  o << ",\n  \"exception\": [";
  for (std::size_t i = 0; i < s.exception.size(); ++i) {
    const auto& x = s.exception[i];
    o << (i ? "," : "") << "\n    {\"port\": " << quote(x.port) << ", \"class\": " << quote(x.cls);
    fields_json(o, kExceptionFields, x);
    o << "}";
  }
  o << (s.exception.empty() ? "]" : "\n  ]");
  if (!s.peer_sync.empty()) {
    o << ",\n  \"peer_sync\": {\"enabled\": true";
    fields_json(o, kPeerSyncFields, s.peer_sync.front());
    o << "}";
  }
  if (!s.health_checks.empty()) {
    o << ",\n  \"health_checks\": {\"enabled\": true";
    fields_json(o, kHealthChecksFields, s.health_checks.front());
    o << "}";
  }
  o << ",\n  \"ports\": [";
  for (std::size_t i = 0; i < s.ports.size(); ++i) {
    const auto& p = s.ports[i];
    o << (i ? "," : "") << "\n    {\"name\": " << quote(p.name) << ", \"port_id\": " << p.port_id;
    fields_json(o, kPortFields, p);
    o << ", \"pause_xstats\": {";
    for (std::size_t k = 0; k < p.pause_xstats.size(); ++k)
      o << (k ? ", " : "") << quote(p.pause_xstats[k].first) << ": " << p.pause_xstats[k].second;
    o << "}}";
  }
  o << "\n  ],\n  \"mbufs\": {\"total\": " << mbufs_total << ", \"held_by_devices\": " << s.mbufs_held_by_devices
    << ", \"kept_by_drivers\": " << s.mbufs_kept_by_drivers
    << ", \"leaked\": " << leaked
    << ", \"ok\": " << (leaked == 0 ? "true" : "false") << "}\n}\n";
  return o.str();
}

const char* to_string(CounterKind kind) { return kind == CounterKind::kGauge ? "gauge" : "counter"; }

const char* to_string(CounterUnit unit) {
  switch (unit) {
    case CounterUnit::kCount: return "-";
    case CounterUnit::kPackets: return "packets";
    case CounterUnit::kBytes: return "bytes";
    case CounterUnit::kCycles: return "cycles";
    case CounterUnit::kMicroseconds: return "us";
  }
  return "-";
}

namespace {

template <typename Field, std::size_t N>
void list_fields(std::FILE* out, const char* scope, const Field (&fields)[N]) {
  for (const Field& f : fields)
    std::fprintf(out, "%s\t%s\tquicsteer_%s%s%s%s\t%s\t%s\t%s\n", scope, f.name, f.metric, *f.label ? "{" : "", f.label,
                 *f.label ? "}" : "", to_string(f.kind), to_string(f.unit), f.help);
}

}  // namespace

void print_counter_list(std::FILE* out) {
  list_fields(out, "receive", kReceiveFields);
  list_fields(out, "queue", kQueueFields);
  list_fields(out, "owner", kOwnerFields);
  list_fields(out, "lcore", kLcoreFields);
  list_fields(out, "ring", kRingFields);
  list_fields(out, "port", kPortFields);
  list_fields(out, "forwarding", kForwardingFields);
  list_fields(out, "backend", kBackendCounterFields);
  list_fields(out, "exception", kExceptionFields);
  list_fields(out, "peer_sync", kPeerSyncFields);
  list_fields(out, "backend_health", kBackendHealthFields);
  list_fields(out, "health_checks", kHealthChecksFields);
}

}  // namespace qs
