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
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_pause.h>
#include <rte_random.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/fastpath/counter.h"
#include "dataplane/runtime/eal_init.h"
#include "dataplane/fastpath/mbuf_classifier.h"
#include "dataplane/fastpath/burst.h"
#include "dataplane/config/profile.h"
#include "dataplane/fastpath/steer_meta.h"
#include "rings/cache_line.h"
#include "tests/bench/baseline_pipeline.h"

namespace {

namespace baseline = qs::baseline;

constexpr const char* kProgram = "distributor_pipeline";
constexpr const char* kRoles = "the profile's first lcore distributes, the others are workers";

// rte_distributor takes its flow tag from mbuf->hash.usr, which is where
// quicsteer's classifier leaves the SteerMeta (dataplane/fastpath/steer_meta.h). The
// distributor lcore moves the SteerMeta aside into a dynamic field of this
// program's before tagging, and the worker puts it back before the
// connection stage: a second-line write and read per packet that the
// rte_distributor API imposes on this pipeline.
int g_set_aside_offset = -1;

void register_set_aside_meta() {
  static const rte_mbuf_dynfield desc = {"distributor_steer_meta", sizeof(qs::SteerMeta), alignof(qs::SteerMeta), 0};
  g_set_aside_offset = rte_mbuf_dynfield_register(&desc);
  if (g_set_aside_offset < 0)
    throw std::runtime_error(std::string("cannot register the mbuf dynamic field: ") + rte_strerror(rte_errno));
}

qs::SteerMeta* set_aside_meta(rte_mbuf* m) { return RTE_MBUF_DYNFIELD(m, g_set_aside_offset, qs::SteerMeta*); }

// rte_distributor_get_pkt/poll_pkt hand a worker at most one cache line of
// mbuf pointers (RTE_DIST_BURST_SIZE, not in the public header).
constexpr unsigned kDistributorLine = 8;

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
  std::vector<baseline::PolledQueue> queues;
  qs::MbufClassifier* classifier = nullptr;
  unsigned burst = 32;
  DistributorStats stats;
};

// The distributor worker id is the worker's index, hence its TX queue.
struct WorkerLcore : baseline::Worker {
  Shared* shared = nullptr;
};

int distributor_main(void* arg) {
  DistributorLcore& c = *static_cast<DistributorLcore*>(arg);
  rte_distributor* d = c.shared->dist;
  rte_mbuf* pkts[qs::kMaxBurst];
  std::uint16_t owner[qs::kMaxBurst];
  while (!c.shared->stop_rx.load(std::memory_order_relaxed)) {
    unsigned got = 0;
    for (const baseline::PolledQueue& q : c.queues) {
      unsigned n = 0;
      const unsigned kept =
          baseline::receive_classified(q, *c.classifier, c.burst, pkts, owner, c.stats.rx, c.stats.unclassifiable, n);
      if (n == 0) continue;
      got += n;
      for (unsigned i = 0; i < kept; ++i) {
        // The flow tag: packets of one owner stay on one worker at a time.
        *set_aside_meta(pkts[i]) = *qs::steer_meta(pkts[i]);
        pkts[i]->hash.usr = std::uint32_t(owner[i]) + 1;
      }
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

int worker_main(void* arg) {
  WorkerLcore& w = *static_cast<WorkerLcore*>(arg);
  rte_distributor* d = w.shared->dist;
  const unsigned id = w.tx_queue;
  rte_mbuf* pkts[kDistributorLine];
  w.last_flush_tsc = rte_rdtsc();
  rte_distributor_request_pkt(d, id, nullptr, 0);
  while (!w.shared->stop_workers.load(std::memory_order_acquire)) {
    const int n = rte_distributor_poll_pkt(d, id, pkts);
    const std::uint64_t now = rte_rdtsc();
    if (n > 0) {
      for (int i = 0; i < n; ++i) *qs::steer_meta(pkts[i]) = *set_aside_meta(pkts[i]);
      baseline::connection_stage(w, pkts, unsigned(n), now);
    }
    // Asking again only after the work is done keeps each tag on one worker
    // at a time (the distributor takes a request as "previous packets done").
    if (n >= 0) rte_distributor_request_pkt(d, id, nullptr, 0);
    baseline::flush_tx_if_due(w, now);
    if (n < 0) rte_pause();
  }
  baseline::flush_tx(w);
  w.shared->workers_done.fetch_add(1, std::memory_order_release);
  return 0;
}

struct Totals {
  std::uint64_t rx = 0, unclassifiable = 0, distributed = 0, process_cycles = 0;
  baseline::WorkerTotals workers;
};

Totals read_totals(const DistributorLcore& dl, const std::vector<std::unique_ptr<WorkerLcore>>& workers) {
  Totals t;
  t.rx = dl.stats.rx.get();
  t.unclassifiable = dl.stats.unclassifiable.get();
  t.distributed = dl.stats.distributed.get();
  t.process_cycles = dl.stats.process_cycles.get();
  t.workers = baseline::sum_workers(workers);
  return t;
}

int run(const qs::Profile& profile, const baseline::AppArgs& args) {
  baseline::check_profile(profile, "a distributor");
  register_set_aside_meta();
  const baseline::Devices devices = baseline::start_devices(profile, "dist_mbufs");

  Shared shared;
  shared.workers = unsigned(profile.lcores.size() - 1);
  shared.dist = rte_distributor_create("qs_e2e_dist", rte_socket_id(), shared.workers, RTE_DIST_ALG_BURST);
  if (shared.dist == nullptr)
    throw std::runtime_error(std::string("rte_distributor_create: ") + rte_strerror(rte_errno));

  qs::MbufClassifier classifier(profile.steering);
  auto dl = std::make_unique<DistributorLcore>();
  dl->shared = &shared;
  dl->classifier = &classifier;
  dl->burst = profile.rings.burst;
  dl->queues = devices.rx_queues;

  std::vector<std::unique_ptr<WorkerLcore>> workers;
  const std::uint64_t seed = rte_rand();
  for (unsigned i = 0; i < shared.workers; ++i) {
    auto w = std::make_unique<WorkerLcore>();
    baseline::init_worker(*w, profile, i, devices.tx_port, seed);
    w->shared = &shared;
    workers.push_back(std::move(w));
  }

  std::printf("distributor_pipeline: distributor lcore %u, %u worker lcore(s), %zu RX queue(s), burst mode\n",
              profile.lcores[0].id, shared.workers, dl->queues.size());
  const std::uint64_t start = rte_rdtsc();
  for (const auto& w : workers) baseline::launch(worker_main, w.get(), w->lcore, "worker");
  baseline::launch(distributor_main, dl.get(), profile.lcores[0].id, "distributor");
  std::this_thread::sleep_for(std::chrono::duration<double>(args.duration));
  const Totals at_end = read_totals(*dl, workers);
  const std::uint64_t end = rte_rdtsc();
  shared.stop_rx.store(true, std::memory_order_relaxed);
  rte_eal_mp_wait_lcore();
  const Totals final_totals = read_totals(*dl, workers);
  const std::int64_t leaked = baseline::stop_devices_and_count_leaked(devices);

  const double hz = double(rte_get_tsc_hz());
  const double elapsed = double(end - start) / hz;
  const double rx_mpps = double(at_end.rx) / elapsed / 1e6;
  const double tx_mpps = double(at_end.workers.tx) / elapsed / 1e6;
  const double cycles_per_pkt =
      final_totals.distributed ? double(final_totals.process_cycles) / double(final_totals.distributed) : 0;
  const baseline::WorkerTotals& fw = final_totals.workers;
  const bool accounted =
      baseline::accounted(final_totals.rx, final_totals.unclassifiable, final_totals.distributed, fw);

  std::printf("distributor_pipeline: %.3f s, rx %.3f Mpps, tx %.3f Mpps, %.1f TSC cycles/packet in "
              "rte_distributor_process (waits for workers included)\n",
              elapsed, rx_mpps, tx_mpps, cycles_per_pkt);
  std::printf("  totals: rx %llu, unclassifiable %llu, distributed %llu, processed %llu, tx %llu, "
              "tx dropped %llu; mbufs leaked %lld\n",
              (unsigned long long)final_totals.rx, (unsigned long long)final_totals.unclassifiable,
              (unsigned long long)final_totals.distributed, (unsigned long long)fw.processed,
              (unsigned long long)fw.tx, (unsigned long long)fw.tx_dropped, (long long)leaked);

  if (!args.json.empty()) {
    std::vector<unsigned> worker_lcores;
    std::vector<baseline::JsonObject> worker_objects;
    for (const auto& w : workers) {
      worker_lcores.push_back(w->lcore);
      worker_objects.push_back(baseline::worker_json(*w));
    }
    baseline::JsonObject o;
    o.string("pipeline", "rte_distributor burst").string("profile", profile.path);
    o.number("distributor_lcore", profile.lcores[0].id).raw("worker_lcores", baseline::json_lcores(worker_lcores));
    o.number("elapsed_s", elapsed).number("tsc_hz", rte_get_tsc_hz());
    o.number("rx_mpps", rx_mpps).number("tx_mpps", tx_mpps).number("distributor_cycles_per_packet", cycles_per_pkt);
    o.number("rx", final_totals.rx).number("unclassifiable", final_totals.unclassifiable);
    o.number("distributed", final_totals.distributed).number("processed", fw.processed);
    o.number("tx", fw.tx).number("tx_dropped", fw.tx_dropped);
    o.raw("workers", baseline::json_array(worker_objects, 2));
    o.boolean("accounted", accounted);
    o.raw("mbufs", baseline::JsonObject().number("total", devices.pool->size).number("leaked", leaked).inline_text());
    baseline::write_json(args.json, o);
  }

  workers.clear();  // their TX buffers, before the pool goes
  return baseline::release_and_report(kProgram, devices.pool, accounted, leaked);
}

}  // namespace

int main(int argc, char** argv) { return qs::baseline::main_of(kProgram, kRoles, argc, argv, run); }
