// distributor_pipeline: the DPDK-native baseline of scripts/bench.sh e2e.
//
//   distributor_pipeline [EAL args] -- --profile FILE [--duration SECONDS] [--json FILE]
//
// The same profile, capture, devices and lcores as a quicsteer run, but the
// hand-off is DPDK's rte_distributor (burst mode) instead of quicsteer's
// per-owner SPSC rings:
//   - the profile's first lcore is the distributor: it polls every RX queue,
//     classifies each burst with quicsteer's own MbufClassifier (parse, QUIC-LB
//     decode, owner resolution: the per-packet work a quicsteer receiver does),
//     tags each packet with the owner steering resolved (QUIC-LB server ID,
//     else the keyed hash of the DCID), and calls rte_distributor_process();
//   - the profile's other lcores are workers: each takes up to 8 packets at a
//     time and runs the connection stage quicsteer's owners run (the
//     connection table, the 4-tuple check) before transmitting on its own TX
//     queue of action.tx_port, as quicsteer's forward action does.
// Rates are taken over [launch, end of --duration]; the totals after the
// stop. Exits 1 unless every packet read was sent, dropped as unclassifiable
// or counted as a TX drop, and every mbuf is back in the pool.
#include <rte_cycles.h>
#include <rte_distributor.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_random.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/eal_init.h"
#include "dataplane/connection_stage.h"
#include "dataplane/connection_table.h"
#include "dataplane/dataplane.h"  // make_connection_table
#include "dataplane/counter.h"
#include "dataplane/lcore_stats.h"
#include "dataplane/mbuf_classifier.h"
#include "dataplane/parking_ticket.h"  // kMaxBurst
#include "dataplane/port.h"
#include "dataplane/profile.h"
#include "dataplane/steer_meta.h"
#include "rings/cache_line.h"

namespace {

// rte_distributor_get_pkt/poll_pkt hand a worker at most one cache line of
// mbuf pointers (RTE_DIST_BURST_SIZE, not in the public header).
constexpr unsigned kDistributorLine = 8;

struct RxQueueRef {
  std::uint16_t port;
  std::uint16_t queue;
};

struct alignas(qs::kCacheLine) DistributorStats {
  qs::Counter rx;
  qs::Counter unclassifiable;  // malformed or not UDP: freed, as quicsteer does
  qs::Counter distributed;
  qs::Counter process_cycles;  // TSC cycles inside rte_distributor_process
};


struct Shared {
  rte_distributor* dist = nullptr;
  std::atomic<bool> stop_rx{false};
  std::atomic<bool> stop_workers{false};
  std::atomic<unsigned> workers_done{0};
  unsigned workers = 0;
};

struct DistributorLcore {
  Shared* shared = nullptr;
  std::vector<RxQueueRef> queues;
  const qs::MbufClassifier* classifier = nullptr;
  unsigned burst = 32;
  DistributorStats stats;
};

struct WorkerLcore {
  Shared* shared = nullptr;
  unsigned id = 0;  // distributor worker id = TX queue
  std::uint16_t tx_port = 0;
  rte_eth_dev_tx_buffer* tx_buffer = nullptr;
  std::unique_ptr<qs::ConnectionTable> cids;
  std::unique_ptr<qs::ConnectionTable> connections;
  qs::ConnectionShard shard;
  std::uint64_t tx_flush_tsc = 0;
  qs::OwnerStats stats;  // the owners' counters: same stage, same names
};

void count_unsent(rte_mbuf** unsent, std::uint16_t count, void* userdata) {
  rte_pktmbuf_free_bulk(unsent, count);
  static_cast<qs::OwnerStats*>(userdata)->drops[std::size_t(qs::DropReason::kTxFull)].add(count);
}

int distributor_main(void* arg) {
  DistributorLcore& c = *static_cast<DistributorLcore*>(arg);
  rte_distributor* d = c.shared->dist;
  rte_mbuf* pkts[qs::kMaxBurst];
  std::uint16_t owner[qs::kMaxBurst];
  qs::RxClass cls[qs::kMaxBurst];
  while (!c.shared->stop_rx.load(std::memory_order_relaxed)) {
    unsigned got = 0;
    for (const RxQueueRef& q : c.queues) {
      const std::uint16_t n = rte_eth_rx_burst(q.port, q.queue, pkts, std::uint16_t(c.burst));
      if (n == 0) continue;
      got += n;
      c.stats.rx.add(n);
      qs::RouteCounts routes;  // this baseline routes without forwarding tables
      c.classifier->classify(pkts, n, owner, cls, 0, routes);
      unsigned kept = 0;
      for (unsigned i = 0; i < n; ++i) {
        if (cls[i] == qs::RxClass::kMalformed || cls[i] == qs::RxClass::kNotUdp) {
          rte_pktmbuf_free(pkts[i]);
          continue;
        }
        // The flow tag: packets of one owner stay on one worker at a time.
        pkts[i]->hash.usr = std::uint32_t(owner[i]) + 1;
        pkts[kept++] = pkts[i];
      }
      if (kept != n) c.stats.unclassifiable.add(n - kept);
      const std::uint64_t t0 = rte_rdtsc();
      // process() takes nothing until a worker has asked for packets.
      for (unsigned done = 0; done < kept;)
        done += unsigned(rte_distributor_process(d, pkts + done, kept - done));
      c.stats.process_cycles.add(rte_rdtsc() - t0);
      c.stats.distributed.add(kept);
    }
    // An empty call hands partly filled lines to the workers.
    if (got == 0) rte_distributor_process(d, nullptr, 0);
  }
  // Every packet handed out is taken by a worker before flush() returns; then
  // the workers may stop, and empty calls keep answering their last requests
  // (a worker spins until the distributor acknowledges them) until all left.
  rte_distributor_flush(d);
  c.shared->stop_workers.store(true, std::memory_order_release);
  while (c.shared->workers_done.load(std::memory_order_acquire) < c.shared->workers)
    rte_distributor_process(d, nullptr, 0);
  rte_distributor_clear_returns(d);
  return 0;
}

// The same connection stage as a quicsteer owner's (dataplane/connection_stage.h,
// as run_connection_stage uses it with action forward and no synthetic cost).
void connection_stage(WorkerLcore& w, rte_mbuf** pkts, unsigned n, std::uint64_t now) {
  qs::run_connection_burst(w.shard, pkts, n, now, w.stats, [&](rte_mbuf* m, const qs::SteerMeta&) {
    w.stats.tx.add(rte_eth_tx_buffer(w.tx_port, std::uint16_t(w.id), w.tx_buffer, m));
  });
}

int worker_main(void* arg) {
  WorkerLcore& w = *static_cast<WorkerLcore*>(arg);
  rte_distributor* d = w.shared->dist;
  rte_mbuf* pkts[kDistributorLine];
  std::uint64_t last_flush = rte_rdtsc();
  rte_distributor_request_pkt(d, w.id, nullptr, 0);
  while (!w.shared->stop_workers.load(std::memory_order_acquire)) {
    const int n = rte_distributor_poll_pkt(d, w.id, pkts);
    const std::uint64_t now = rte_rdtsc();
    if (n > 0) connection_stage(w, pkts, unsigned(n), now);
    // Asking again only after the work is done keeps each tag on one worker
    // at a time (the distributor takes a request as "previous packets done").
    if (n >= 0) rte_distributor_request_pkt(d, w.id, nullptr, 0);
    if (now - last_flush > w.tx_flush_tsc) {
      last_flush = now;
      w.stats.tx.add(rte_eth_tx_buffer_flush(w.tx_port, std::uint16_t(w.id), w.tx_buffer));
    }
    if (n < 0) rte_pause();
  }
  w.stats.tx.add(rte_eth_tx_buffer_flush(w.tx_port, std::uint16_t(w.id), w.tx_buffer));
  w.shared->workers_done.fetch_add(1, std::memory_order_release);
  return 0;
}

struct AppArgs {
  std::string profile;
  double duration = 5;
  std::string json;
};

[[noreturn]] void usage_exit(const std::string& why) {
  std::fprintf(stderr,
               "distributor_pipeline: %s\n"
               "usage: distributor_pipeline [EAL args] -- --profile FILE [--duration SECONDS] [--json FILE]\n"
               "  the profile's first lcore distributes, the others are workers\n",
               why.c_str());
  std::exit(2);
}

AppArgs parse_app_args(const std::vector<std::string>& a) {
  AppArgs out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i + 1 >= a.size()) usage_exit(a[i] + " needs a value");
    const std::string& v = a[++i];
    if (a[i - 1] == "--profile") {
      out.profile = v;
    } else if (a[i - 1] == "--duration") {
      char* end = nullptr;
      out.duration = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || out.duration <= 0)
        usage_exit("--duration wants seconds > 0, not '" + v + "'");
    } else if (a[i - 1] == "--json") {
      out.json = v;
    } else {
      usage_exit("unknown argument '" + a[i - 1] + "'");
    }
  }
  if (out.profile.empty()) usage_exit("--profile FILE is required");
  return out;
}

struct Totals {
  std::uint64_t rx = 0, unclassifiable = 0, distributed = 0, process_cycles = 0;
  std::uint64_t processed = 0, tx = 0, tx_dropped = 0;
};

Totals read_totals(const DistributorLcore& dl, const std::vector<std::unique_ptr<WorkerLcore>>& workers) {
  Totals t;
  t.rx = dl.stats.rx.get();
  t.unclassifiable = dl.stats.unclassifiable.get();
  t.distributed = dl.stats.distributed.get();
  t.process_cycles = dl.stats.process_cycles.get();
  for (const auto& w : workers) {
    t.processed += w->stats.processed.get();
    t.tx += w->stats.tx.get();
    t.tx_dropped += w->stats.drops[std::size_t(qs::DropReason::kTxFull)].get();
  }
  return t;
}

int run(const qs::Profile& profile, const AppArgs& args) {
  if (profile.lcores.size() < 2)
    throw std::runtime_error("the profile needs at least two lcores: a distributor and a worker");
  if (profile.action.type != qs::OwnerAction::kForward)
    throw std::runtime_error("the profile's action must be forward (the workers transmit as quicsteer's owners do)");
  for (const auto& l : profile.lcores)
    if (!rte_lcore_is_enabled(l.id) || l.id == rte_get_main_lcore())
      throw std::runtime_error("lcore " + std::to_string(l.id) + " must be an EAL worker lcore (--lcores)");

  rte_mempool* pool = rte_pktmbuf_pool_create("dist_mbufs", profile.mempool.mbufs, profile.mempool.cache, 0,
                                              profile.mempool.data_room, int(rte_socket_id()));
  if (pool == nullptr) throw std::runtime_error(std::string("cannot create the mbuf pool: ") + rte_strerror(rte_errno));

  std::vector<std::uint16_t> port_ids;
  for (const auto& port : profile.ports) port_ids.push_back(qs::find_or_probe_port(port));
  for (std::size_t i = 0; i < profile.ports.size(); ++i) qs::configure_and_start_port(port_ids[i], profile.ports[i], pool);

  Shared shared;
  shared.workers = unsigned(profile.lcores.size() - 1);
  const auto& tx_cfg = profile.ports[std::size_t(profile.action.tx_port)];
  if (tx_cfg.tx_queues < shared.workers)
    throw std::runtime_error("port " + tx_cfg.name + " has " + std::to_string(tx_cfg.tx_queues) +
                             " TX queues; the " + std::to_string(shared.workers) + " workers need one each");
  shared.dist = rte_distributor_create("qs_e2e_dist", rte_socket_id(), shared.workers, RTE_DIST_ALG_BURST);
  if (shared.dist == nullptr)
    throw std::runtime_error(std::string("rte_distributor_create: ") + rte_strerror(rte_errno));

  const qs::MbufClassifier classifier(profile.steering);
  auto dl = std::make_unique<DistributorLcore>();
  dl->shared = &shared;
  dl->classifier = &classifier;
  dl->burst = profile.rings.burst;
  for (std::size_t p = 0; p < profile.ports.size(); ++p)
    for (std::uint16_t q = 0; q < profile.ports[p].rx_queues; ++q) dl->queues.push_back({port_ids[p], q});

  std::vector<std::unique_ptr<WorkerLcore>> workers;
  const std::uint64_t seed = rte_rand();
  for (unsigned i = 0; i < shared.workers; ++i) {
    auto w = std::make_unique<WorkerLcore>();
    w->shared = &shared;
    w->id = i;
    w->tx_port = port_ids[std::size_t(profile.action.tx_port)];
    w->cids = qs::make_connection_table(profile.action.max_connections, profile.lcores[i + 1].id);
    w->connections = qs::make_connection_table(profile.action.max_connections, profile.lcores[i + 1].id);
    w->shard = qs::ConnectionShard{w->cids.get(), w->connections.get(), seed,
                                   std::uint64_t(profile.action.idle_timeout_ms) * (rte_get_tsc_hz() / 4000)};
    w->tx_flush_tsc = std::uint64_t(profile.action.tx_drain_us) * rte_get_tsc_hz() / 1000000;
    w->tx_buffer = static_cast<rte_eth_dev_tx_buffer*>(
        rte_zmalloc("dist_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(profile.rings.burst), RTE_CACHE_LINE_SIZE));
    if (w->tx_buffer == nullptr) throw std::runtime_error("cannot allocate a TX buffer");
    rte_eth_tx_buffer_init(w->tx_buffer, profile.rings.burst);
    rte_eth_tx_buffer_set_err_callback(w->tx_buffer, count_unsent, &w->stats);
    workers.push_back(std::move(w));
  }

  std::printf("distributor_pipeline: distributor lcore %u, %u worker lcore(s), %zu RX queue(s), burst mode\n",
              profile.lcores[0].id, shared.workers, dl->queues.size());
  const std::uint64_t start = rte_rdtsc();
  for (unsigned i = 0; i < shared.workers; ++i) {
    const int rc = rte_eal_remote_launch(worker_main, workers[i].get(), profile.lcores[i + 1].id);
    if (rc != 0) throw std::runtime_error("cannot launch worker lcore " + std::to_string(profile.lcores[i + 1].id));
  }
  if (rte_eal_remote_launch(distributor_main, dl.get(), profile.lcores[0].id) != 0)
    throw std::runtime_error("cannot launch the distributor lcore");
  std::this_thread::sleep_for(std::chrono::duration<double>(args.duration));
  const Totals at_end = read_totals(*dl, workers);
  const std::uint64_t end = rte_rdtsc();
  shared.stop_rx.store(true, std::memory_order_relaxed);
  rte_eal_mp_wait_lcore();
  const Totals final_totals = read_totals(*dl, workers);

  for (std::uint16_t id : port_ids) qs::stop_and_close_port(id);
  const std::int64_t leaked = std::int64_t(pool->size) - std::int64_t(rte_mempool_avail_count(pool));

  const double hz = double(rte_get_tsc_hz());
  const double elapsed = double(end - start) / hz;
  const double rx_mpps = double(at_end.rx) / elapsed / 1e6;
  const double tx_mpps = double(at_end.tx) / elapsed / 1e6;
  const double cycles_per_pkt =
      final_totals.distributed ? double(final_totals.process_cycles) / double(final_totals.distributed) : 0;
  const bool accounted = final_totals.distributed == final_totals.processed &&
                         final_totals.rx == final_totals.unclassifiable + final_totals.distributed &&
                         final_totals.processed == final_totals.tx + final_totals.tx_dropped;

  std::printf("distributor_pipeline: %.3f s, rx %.3f Mpps, tx %.3f Mpps, %.1f TSC cycles/packet in "
              "rte_distributor_process (waits for workers included)\n",
              elapsed, rx_mpps, tx_mpps, cycles_per_pkt);
  std::printf("  totals: rx %llu, unclassifiable %llu, distributed %llu, processed %llu, tx %llu, "
              "tx dropped %llu; mbufs leaked %lld\n",
              (unsigned long long)final_totals.rx, (unsigned long long)final_totals.unclassifiable,
              (unsigned long long)final_totals.distributed, (unsigned long long)final_totals.processed,
              (unsigned long long)final_totals.tx, (unsigned long long)final_totals.tx_dropped, (long long)leaked);

  if (!args.json.empty()) {
    std::ostringstream o;
    o << "{\n  \"pipeline\": \"rte_distributor burst\",\n  \"profile\": \"" << profile.path << "\",\n"
      << "  \"distributor_lcore\": " << profile.lcores[0].id << ",\n  \"worker_lcores\": [";
    for (unsigned i = 0; i < shared.workers; ++i) o << (i ? ", " : "") << profile.lcores[i + 1].id;
    o << "],\n  \"elapsed_s\": " << elapsed << ",\n  \"tsc_hz\": " << rte_get_tsc_hz()
      << ",\n  \"rx_mpps\": " << rx_mpps << ",\n  \"tx_mpps\": " << tx_mpps
      << ",\n  \"distributor_cycles_per_packet\": " << cycles_per_pkt << ",\n  \"rx\": " << final_totals.rx
      << ",\n  \"unclassifiable\": " << final_totals.unclassifiable << ",\n  \"distributed\": " << final_totals.distributed
      << ",\n  \"processed\": " << final_totals.processed << ",\n  \"tx\": " << final_totals.tx
      << ",\n  \"tx_dropped\": " << final_totals.tx_dropped << ",\n  \"workers\": [";
    for (unsigned i = 0; i < shared.workers; ++i) {
      const qs::OwnerStats& s = workers[i]->stats;
      o << (i ? ",\n" : "\n") << "    {\"lcore\": " << profile.lcores[i + 1].id << ", \"processed\": " << s.processed.get()
        << ", \"tx\": " << s.tx.get() << ", \"connections\": " << s.connections.get()
        << ", \"migrations\": " << s.migrations.get() << ", \"untracked\": " << s.connections_untracked.get() << "}";
    }
    o << "\n  ],\n  \"accounted\": " << (accounted ? "true" : "false") << ",\n  \"mbufs\": {\"total\": " << pool->size
      << ", \"leaked\": " << leaked << "}\n}\n";
    std::ofstream f(args.json);
    f << o.str();
    if (!f) throw std::runtime_error("cannot write " + args.json);
  }

  for (auto& w : workers) rte_free(w->tx_buffer);
  rte_mempool_free(pool);
  if (!accounted) {
    std::fprintf(stderr, "distributor_pipeline: packets unaccounted for (see the totals above)\n");
    return 1;
  }
  if (leaked != 0) {
    std::fprintf(stderr, "distributor_pipeline: %lld mbufs were not returned to the pool\n", (long long)leaked);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto [eal, app, has_separator] = qs::split_eal_args({argv + 1, argv + argc});
  if (!has_separator) usage_exit("EAL arguments, then --, then the application's");
  const AppArgs args = parse_app_args(app);
  const auto loaded = qs::load_profile_or_report(args.profile);
  if (!loaded) return 1;
  const qs::Profile& profile = *loaded;
  try {
    qs::init_eal("distributor_pipeline", eal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  int status = 1;
  try {
    status = run(profile, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributor_pipeline: %s\n", e.what());
  }
  rte_eal_cleanup();
  return status;
}
