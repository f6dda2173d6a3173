// What the DPDK-native baselines of scripts/bench/e2e.sh share
// (distributor_pipeline: rte_distributor; eventdev_pipeline: event_sw): the
// command line, what they need of the profile, the ports and the pool, a
// worker's connection stage and TX (the work a quicsteer owner does), the
// accounting contract and the JSON summary. Each baseline differs only in the
// hand-off between its first lcore (RX + classification) and its workers.
// Header-only: each baseline is one translation unit.
#pragma once

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/fastpath/connection_stage.h"
#include "dataplane/fastpath/connection_table.h"
#include "dataplane/runtime/dataplane.h"  // make_connection_table
#include "dataplane/runtime/eal_init.h"
#include "dataplane/fastpath/lcore_stats.h"
#include "dataplane/fastpath/mbuf_classifier.h"
#include "dataplane/fastpath/burst.h"
#include "dataplane/runtime/port.h"
#include "dataplane/config/profile.h"
#include "dataplane/fastpath/steer_meta.h"

namespace qs::baseline {

struct AppArgs {
  std::string profile;
  double duration = 5;
  std::string json;
  std::vector<std::string> flags;  // the program's own valueless options given (e.g. --symmetric)
  bool has(const std::string& flag) const {
    for (const auto& f : flags)
      if (f == flag) return true;
    return false;
  }
};

// `roles` says what the profile's lcores do in this baseline (usage text),
// including what its own options (`flags`) change.
[[noreturn]] inline void usage_exit(const char* program, const char* roles, const std::vector<std::string>& flags,
                                    const std::string& why) {
  std::string options;
  for (const auto& f : flags) options += " [" + f + "]";
  std::fprintf(stderr,
               "%s: %s\n"
               "usage: %s [EAL args] -- --profile FILE [--duration SECONDS] [--json FILE]%s\n"
               "  %s\n",
               program, why.c_str(), program, options.c_str(), roles);
  std::exit(2);
}

// `known_flags`: the valueless options this program accepts besides the
// common ones.
inline AppArgs parse_app_args(const char* program, const char* roles, const std::vector<std::string>& known_flags,
                              const std::vector<std::string>& a) {
  AppArgs out;
  auto usage = [&](const std::string& why) { usage_exit(program, roles, known_flags, why); };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::find(known_flags.begin(), known_flags.end(), a[i]) != known_flags.end()) {
      out.flags.push_back(a[i]);
      continue;
    }
    if (i + 1 >= a.size()) usage(a[i] + " needs a value");
    const std::string& v = a[++i];
    if (a[i - 1] == "--profile") {
      out.profile = v;
    } else if (a[i - 1] == "--duration") {
      char* end = nullptr;
      out.duration = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || out.duration <= 0)
        usage("--duration wants seconds > 0, not '" + v + "'");
    } else if (a[i - 1] == "--json") {
      out.json = v;
    } else {
      usage("unknown argument '" + a[i - 1] + "'");
    }
  }
  if (out.profile.empty()) usage("--profile FILE is required");
  return out;
}

// The profile's first lcore takes packets in (`first_role` names it in
// errors), the others are workers that transmit as quicsteer's owners do;
// or, `all_work`, every lcore takes packets in and is a worker.
inline void check_profile(const Profile& profile, const char* first_role, bool all_work = false) {
  if (!all_work && profile.lcores.size() < 2)
    throw std::runtime_error(std::string("the profile needs at least two lcores: ") + first_role + " and a worker");
  if (profile.action.type != OwnerAction::kForward)
    throw std::runtime_error("the profile's action must be forward (the workers transmit as quicsteer's owners do)");
  for (const auto& l : profile.lcores)
    if (!rte_lcore_is_enabled(l.id) || l.id == rte_get_main_lcore())
      throw std::runtime_error("lcore " + std::to_string(l.id) + " must be an EAL worker lcore (--lcores)");
  const auto& tx_cfg = profile.ports[std::size_t(profile.action.tx_port)];
  const std::size_t workers = all_work ? profile.lcores.size() : profile.lcores.size() - 1;
  if (tx_cfg.tx_queues < workers)
    throw std::runtime_error("port " + tx_cfg.name + " has " + std::to_string(tx_cfg.tx_queues) + " TX queues; the " +
                             std::to_string(workers) + " workers need one each");
}

struct PolledQueue {
  std::uint16_t port;  // DPDK port id
  std::uint16_t queue;
};

// One burst of `q`, classified as a quicsteer receiver classifies it (the
// same MbufClassifier, without forwarding tables). What no owner can take
// (malformed, not UDP) is freed, as quicsteer frees it; the rest moves to the
// front of `pkts`, in arrival order, with its owner at the same index of
// `owner`. Counts what was read and what was freed. Returns how many were
// kept; `read` says how many the queue gave.
inline unsigned receive_classified(const PolledQueue& q, MbufClassifier& classifier, unsigned burst,
                                   rte_mbuf** pkts, std::uint16_t* owner, Counter& rx, Counter& unclassifiable,
                                   unsigned& read) {
  RxClass cls[kMaxBurst];
  const std::uint16_t n = rte_eth_rx_burst(q.port, q.queue, pkts, std::uint16_t(burst));
  read = n;
  if (n == 0) return 0;
  rx.add(n);
  RouteCounts routes;  // the baselines route without forwarding tables
  SteerMeta meta[kMaxBurst];
  // Every packet goes to a worker, which reads its SteerMeta from the mbuf
  // (as a quicsteer owner does with a packet handed over a ring).
  classifier.classify(pkts, n, owner, cls, meta, kNoOwner, 0, routes);
  unsigned kept = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (cls[i] == RxClass::kMalformed || cls[i] == RxClass::kNotUdp) {
      rte_pktmbuf_free(pkts[i]);
      continue;
    }
    owner[kept] = owner[i];
    pkts[kept++] = pkts[i];
  }
  if (kept != n) unclassifiable.add(n - kept);
  return kept;
}

// The pool and the started ports of the profile.
struct Devices {
  rte_mempool* pool = nullptr;
  std::vector<std::uint16_t> port_ids;  // by profile port index
  std::vector<PolledQueue> rx_queues;   // every RX queue of every port: the first lcore polls them all (but see rx_queues_of)
  std::uint16_t tx_port = 0;            // action.tx_port's DPDK port id
};

inline Devices start_devices(const Profile& profile, const char* pool_name) {
  Devices d;
  d.pool = rte_pktmbuf_pool_create(pool_name, profile.mempool.mbufs, profile.mempool.cache, 0,
                                   profile.mempool.data_room, int(rte_socket_id()));
  if (d.pool == nullptr) throw std::runtime_error(std::string("cannot create the mbuf pool: ") + rte_strerror(rte_errno));
  for (const auto& port : profile.ports) d.port_ids.push_back(find_or_probe_port(port));
  for (std::size_t i = 0; i < profile.ports.size(); ++i) configure_and_start_port(d.port_ids[i], profile.ports[i], d.pool);
  for (std::size_t p = 0; p < profile.ports.size(); ++p)
    for (std::uint16_t q = 0; q < profile.ports[p].rx_queues; ++q) d.rx_queues.push_back({d.port_ids[p], q});
  d.tx_port = d.port_ids[std::size_t(profile.action.tx_port)];
  return d;
}

// The RX queues the profile gives its lcore `lcore_index` ("port:queue"
// entries, as quicsteer polls them; the profile gives each queue exactly
// one lcore), as DPDK port ids.
inline std::vector<PolledQueue> rx_queues_of(const Devices& d, const Profile& profile, std::size_t lcore_index) {
  std::vector<PolledQueue> out;
  for (const RxQueueRef& ref : profile.lcores[lcore_index].rx) out.push_back({d.port_ids[ref.port], ref.queue});
  return out;
}

// Stops and closes the ports (net_pcap's infinite_rx copy of the capture goes
// back to the pool), then returns how many mbufs are still out of the pool.
inline std::int64_t stop_devices_and_count_leaked(const Devices& d) {
  for (std::uint16_t id : d.port_ids) stop_and_close_port(id);
  return std::int64_t(d.pool->size) - std::int64_t(rte_mempool_avail_count(d.pool));
}

inline void count_unsent(rte_mbuf** unsent, std::uint16_t count, void* userdata) {
  rte_pktmbuf_free_bulk(unsent, count);
  static_cast<OwnerStats*>(userdata)->drops[std::size_t(DropReason::kTxFull)].add(count);
}

// A worker's share of the owners' work: its own connection shard and its own
// TX queue of action.tx_port (the worker's index).
struct Worker {
  unsigned lcore = 0;
  std::uint16_t tx_port = 0;
  std::uint16_t tx_queue = 0;
  rte_eth_dev_tx_buffer* tx_buffer = nullptr;
  std::unique_ptr<ConnectionTable> cids;
  std::unique_ptr<ConnectionTable> connections;
  ConnectionShard shard;
  std::uint64_t tx_flush_tsc = 0;  // a partial TX burst waits at most this long
  std::uint64_t last_flush_tsc = 0;
  OwnerStats stats;  // the owners' counters: same stage, same names

  Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() { rte_free(tx_buffer); }
};

// The worker on the profile's lcore `lcore_index`, transmitting on TX queue
// `tx_queue`; `seed` keys every worker's connection hashes alike, as
// quicsteer's owners share one.
inline void init_worker_on(Worker& w, const Profile& profile, unsigned lcore_index, std::uint16_t tx_queue,
                           std::uint16_t tx_port, std::uint64_t seed) {
  w.lcore = profile.lcores[lcore_index].id;
  w.tx_port = tx_port;
  w.tx_queue = tx_queue;
  w.cids = make_connection_table(profile.action.max_connections, profile.action.slots_per_connection, w.lcore);
  w.connections = make_connection_table(profile.action.max_connections, profile.action.slots_per_connection, w.lcore);
  w.shard = ConnectionShard{w.cids.get(), w.connections.get(), seed,
                            std::uint64_t(profile.action.idle_timeout_ms) * (rte_get_tsc_hz() / 4000)};
  w.tx_flush_tsc = std::uint64_t(profile.action.tx_drain_us) * rte_get_tsc_hz() / 1000000;
  w.tx_buffer = static_cast<rte_eth_dev_tx_buffer*>(
      rte_zmalloc("baseline_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(profile.rings.burst), RTE_CACHE_LINE_SIZE));
  if (w.tx_buffer == nullptr) throw std::runtime_error("cannot allocate a TX buffer");
  rte_eth_tx_buffer_init(w.tx_buffer, profile.rings.burst);
  rte_eth_tx_buffer_set_err_callback(w.tx_buffer, count_unsent, &w.stats);
}

// `index` counts workers from 0: the profile's lcore index + 1 (the first
// lcore takes packets in), and the worker's TX queue.
inline void init_worker(Worker& w, const Profile& profile, unsigned index, std::uint16_t tx_port, std::uint64_t seed) {
  init_worker_on(w, profile, index + 1, std::uint16_t(index), tx_port, seed);
}

// The same connection stage as a quicsteer owner's (dataplane/fastpath/connection_stage.h,
// as run_connection_stage uses it with action forward and no synthetic cost).
inline void connection_stage(Worker& w, rte_mbuf** pkts, unsigned n, std::uint64_t now) {
  run_connection_burst(w.shard, pkts, nullptr, nullptr, n, now, w.stats, [&](rte_mbuf* m, std::uint8_t*, const SteerMeta&, Tracked, std::uint32_t) {
    w.stats.tx.add(rte_eth_tx_buffer(w.tx_port, w.tx_queue, w.tx_buffer, m));
  });
}

inline void flush_tx(Worker& w) { w.stats.tx.add(rte_eth_tx_buffer_flush(w.tx_port, w.tx_queue, w.tx_buffer)); }

inline void flush_tx_if_due(Worker& w, std::uint64_t now) {
  if (now - w.last_flush_tsc <= w.tx_flush_tsc) return;
  w.last_flush_tsc = now;
  flush_tx(w);
}

struct WorkerTotals {
  std::uint64_t processed = 0, tx = 0, tx_dropped = 0;
};

template <typename W>
WorkerTotals sum_workers(const std::vector<std::unique_ptr<W>>& workers) {
  WorkerTotals t;
  for (const auto& w : workers) {
    t.processed += w->stats.processed.get();
    t.tx += w->stats.tx.get();
    t.tx_dropped += w->stats.drops[std::size_t(DropReason::kTxFull)].get();
  }
  return t;
}

// The contract of both baselines: every packet read was handed to a worker or
// dropped as unclassifiable, the workers processed every packet handed over,
// and each processed packet was sent or counted as a TX drop.
inline bool accounted(std::uint64_t rx, std::uint64_t unclassifiable, std::uint64_t handed_over, const WorkerTotals& w) {
  return handed_over == w.processed && rx == unclassifiable + handed_over && w.processed == w.tx + w.tx_dropped;
}

// A flat JSON object written field by field, in order; values are JSON text.
class JsonObject {
 public:
  template <typename T>
  JsonObject& number(const std::string& key, T value) {
    std::ostringstream o;
    o << value;
    return raw(key, o.str());
  }
  JsonObject& string(const std::string& key, const std::string& value) { return raw(key, "\"" + value + "\""); }
  JsonObject& boolean(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
  JsonObject& raw(const std::string& key, const std::string& json) {
    fields_.emplace_back(key, json);
    return *this;
  }
  // On one line: {"a": 1, "b": 2}
  std::string inline_text() const {
    std::string s = "{";
    for (std::size_t i = 0; i < fields_.size(); ++i)
      s += (i ? ", \"" : "\"") + fields_[i].first + "\": " + fields_[i].second;
    return s + "}";
  }
  // One field a line, indented by `indent` spaces.
  std::string text(unsigned indent = 0) const {
    const std::string pad(indent + 2, ' ');
    std::string s = "{\n";
    for (std::size_t i = 0; i < fields_.size(); ++i)
      s += pad + "\"" + fields_[i].first + "\": " + fields_[i].second + (i + 1 < fields_.size() ? ",\n" : "\n");
    return s + std::string(indent, ' ') + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// A JSON array of objects, one a line.
inline std::string json_array(const std::vector<JsonObject>& items, unsigned indent) {
  if (items.empty()) return "[]";
  const std::string pad(indent + 2, ' ');
  std::string s = "[\n";
  for (std::size_t i = 0; i < items.size(); ++i)
    s += pad + items[i].inline_text() + (i + 1 < items.size() ? ",\n" : "\n");
  return s + std::string(indent, ' ') + "]";
}

inline std::string json_lcores(const std::vector<unsigned>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// The per-worker fields both baselines report.
inline JsonObject worker_json(const Worker& w) {
  const OwnerStats& s = w.stats;
  JsonObject o;
  o.number("lcore", w.lcore).number("processed", s.processed.get()).number("tx", s.tx.get());
  o.number("connections", s.connections.get()).number("migrations", s.migrations.get());
  o.number("untracked", s.connections_untracked.get());
  return o;
}

// Starts `role`'s loop on its lcore; throws naming both if EAL refuses.
inline void launch(lcore_function_t* loop, void* arg, unsigned lcore, const char* role) {
  if (rte_eal_remote_launch(loop, arg, lcore) != 0)
    throw std::runtime_error(std::string("cannot launch the ") + role + " on lcore " + std::to_string(lcore));
}

inline void write_json(const std::string& path, const JsonObject& o) {
  std::ofstream f(path);
  f << o.text() << "\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

// The end of a run: the pool goes back (the workers' TX buffers must be gone
// already) and the accounting contract becomes the exit status.
inline int release_and_report(const char* program, rte_mempool* pool, bool accounted, std::int64_t leaked) {
  rte_mempool_free(pool);
  if (!accounted) {
    std::fprintf(stderr, "%s: packets unaccounted for (see the totals above)\n", program);
    return 1;
  }
  if (leaked != 0) {
    std::fprintf(stderr, "%s: %lld mbufs were not returned to the pool\n", program, static_cast<long long>(leaked));
    return 1;
  }
  return 0;
}

// Both programs' main(): EAL arguments, then --, then the application's; the
// profile is loaded (and reported on) before EAL starts. `run(profile, args)`
// returns the exit status.
// `flags`: the program's own valueless options (AppArgs::has tells run).
template <typename Run>
int main_of(const char* program, const char* roles, int argc, char** argv, Run&& run,
            const std::vector<std::string>& flags = {}) {
  const auto [eal, app, has_separator] = split_eal_args({argv + 1, argv + argc});
  if (!has_separator) usage_exit(program, roles, flags, "EAL arguments, then --, then the application's");
  const AppArgs args = parse_app_args(program, roles, flags, app);
  const auto loaded = load_profile_or_report(args.profile);
  if (!loaded) return 1;
  try {
    init_eal(program, eal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  int status = 1;
  try {
    status = run(*loaded, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  }
  rte_eal_cleanup();
  return status;
}

}  // namespace qs::baseline
