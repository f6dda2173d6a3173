// eventdev_pipeline: the eventdev baseline of scripts/bench.sh e2e.
//
//   eventdev_pipeline [EAL args] -- --profile FILE [--duration SECONDS] [--json FILE] [--symmetric]
//
// The same profile, capture, devices and lcores as a quicsteer run, but the
// hand-off is DPDK's own flow-affine distribution: the software event device
// (event_sw) with one atomic queue.
//   - the profile's first lcore is the producer: it polls every RX queue,
//     classifies each burst with quicsteer's own MbufClassifier (parse,
//     QUIC-LB decode, owner resolution: the per-packet work a quicsteer
//     receiver does) and enqueues each packet as a NEW event of the atomic
//     queue whose flow_id is the owner steering resolved (QUIC-LB server ID,
//     else the keyed hash of the DCID): events tagged by owner;
//   - event_sw schedules in software, in a service. These lcores leave no
//     core spare for a service lcore, so the producer runs one scheduler
//     iteration (rte_service_run_iter_on_app_lcore) per loop, and between the
//     retries of an enqueue the device refused for want of room (the room
//     comes back only when the scheduler has moved events on);
//   - the profile's other lcores are workers, one event port each, linked to
//     the queue: each dequeues a burst of events and runs the connection stage
//     quicsteer's owners run (the connection table, the 4-tuple check) before
//     transmitting on its own TX queue of action.tx_port. It is the final
//     stage, so, as DPDK's eventdev_pipeline example does for its TX stage,
//     nothing is forwarded: the next dequeue releases the burst (implicit
//     release), which frees the flows for the scheduler.
// --symmetric: every profile lcore is both (DPDK's eventdev_pipeline example's
// "generic worker" model, where all cores are workers), with the lcores and
// RX queues of a quicsteer run of the same profile: each lcore
//   - polls the RX queues the profile gives it (lcores[].rx), classifies and
//     enqueues NEW events on its own event port, as the producer above;
//   - runs one scheduler iteration per loop, serialized: event_sw's service
//     is not MT-safe (the start-up line says what rte_service_probe_capability
//     reports), so rte_service_run_iter_on_app_lcore(id, 1) takes DPDK's own
//     per-service spinlock with a try-lock and returns -EBUSY, counted as
//     scheduler_busy, when another lcore holds it: the only lock on this data
//     path, and DPDK's;
//   - dequeues from the same port and runs the worker stage on its own TX
//     queue (its index among the profile's lcores).
// An enqueue the device refused is retried after a scheduler iteration and a
// dequeue of its own port: the lcore holds events it has not released, and
// only its next dequeue releases them, so it must keep dequeuing while it
// waits for room (no lcore can then wait on another's release forever).
// On stop every lcore stops reading; all of them keep scheduling and
// dequeuing until the events of every lcore are processed; then they stop.
//
// Atomic scheduling keeps a flow on one worker while it has events in flight,
// not for good: a flow may move to another worker once released. Each worker
// therefore reports how many distinct flow_ids it saw, as information.
//
// event_sw0 is created here (rte_dev_probe) unless EAL's --vdev made it, so
// the command line is the distributor's and e2e.sh gives both the same EAL
// arguments. On stop the producer stops reading, keeps the scheduler running
// until the workers processed every event enqueued, and only then stops them.
// Rates are taken over [launch, end of --duration]; the totals after the stop.
// Exits 1 unless every packet read was sent, dropped as unclassifiable or
// counted as a TX drop, and every mbuf is back in the pool.
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_eventdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_random.h>
#include <rte_service.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
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
#include "dataplane/fastpath/mbuf_classifier.h"  // kMaxOwners
#include "dataplane/fastpath/burst.h"
#include "dataplane/config/profile.h"
#include "rings/cache_line.h"
#include "tests/bench/baseline_pipeline.h"

namespace {

namespace baseline = qs::baseline;

constexpr const char* kProgram = "eventdev_pipeline";
constexpr const char* kRoles =
    "the profile's first lcore produces events and runs the event_sw scheduler, the others are workers;\n"
    "  --symmetric: every lcore polls its own RX queues (lcores[].rx), enqueues, schedules and works";
constexpr const char* kSymmetric = "--symmetric";
constexpr const char* kEventDevName = "event_sw0";
constexpr std::uint8_t kQueue = 0;  // the one atomic queue
// How long the producer (--symmetric: the first lcore) waits, after it
// stopped reading, for the workers to
// process what is in the device. Far more than 4096 events (event_sw's
// capacity) take; a device that stopped delivering must not hang the
// benchmark. What is left then is freed by rte_event_dev_stop's flush
// callback and counted (flushed_at_stop), which fails the accounting.
constexpr double kDrainLimitSeconds = 5;

struct alignas(qs::kCacheLine) ProducerStats {
  qs::Counter rx;
  qs::Counter unclassifiable;    // malformed or not UDP: freed, as quicsteer does
  qs::Counter enqueued;          // NEW events the device accepted
  qs::Counter enqueue_retries;   // enqueue calls that took fewer events than offered (the rest was offered again)
  qs::Counter enqueue_cycles;    // TSC cycles inside rte_event_enqueue_burst
  qs::Counter scheduler_calls;   // scheduler service iterations run on this lcore
  qs::Counter scheduler_busy;    // --symmetric: iterations refused (-EBUSY), another lcore was running it
  qs::Counter scheduler_cycles;  // TSC cycles inside both
  qs::Counter drain_timed_out;   // 1 if the workers did not empty the device within kDrainLimitSeconds
  qs::Counter abandoned;         // --symmetric: events given up (mbufs freed) when the lcores were stopped
                                 // while this one still waited for room: only after a drain that timed out
};

struct Shared {
  std::uint8_t dev = 0;
  std::uint32_t scheduler_service = 0;
  std::atomic<bool> stop_rx{false};
  std::atomic<bool> stop_workers{false};
  bool scheduler_mt_safe = false;  // rte_service_probe_capability(RTE_SERVICE_CAP_MT_SAFE)
  // --symmetric: lcores that stopped reading, whose enqueued count is final.
  std::atomic<unsigned> producers_stopped{0};
};

struct WorkerLcore : baseline::Worker {
  Shared* shared = nullptr;
  std::uint8_t event_port = 0;
  std::uint16_t burst = 32;
  // flow_ids (owner indices) this worker dequeued: its own, and counted
  // into flows_seen when it stops (the reporter reads only counters).
  std::array<bool, qs::kMaxOwners> flow_seen{};
  qs::Counter flows_seen;
};

struct ProducerLcore {
  Shared* shared = nullptr;
  std::uint8_t event_port = 0;
  std::vector<baseline::PolledQueue> queues;
  qs::MbufClassifier* classifier = nullptr;
  unsigned burst = 32;
  const std::vector<std::unique_ptr<WorkerLcore>>* workers = nullptr;  // their processed counts, for the drain
  ProducerStats stats;
};

// --symmetric: one lcore, a producer and a worker on one event port.
struct SymmetricLcore : WorkerLcore {
  ProducerLcore in;  // its RX queues and the producing half's counters; in.event_port == event_port
  // Set on the profile's first lcore: it decides when the drain is over.
  const std::vector<std::unique_ptr<SymmetricLcore>>* drain_all = nullptr;
};

// One scheduler iteration. serialize_mt_unsafe = 1: event_sw's service is not
// MT-safe; with one caller (the producer) the service's spinlock is always
// free, with several (--symmetric) a caller that finds it taken gets -EBUSY
// and goes on with its own work.
void run_scheduler(ProducerLcore& c) {
  const std::uint64_t t0 = rte_rdtsc();
  const int rc = rte_service_run_iter_on_app_lcore(c.shared->scheduler_service, 1);
  c.stats.scheduler_cycles.add(rte_rdtsc() - t0);
  if (rc == -EBUSY)
    c.stats.scheduler_busy.add();
  else
    c.stats.scheduler_calls.add();
}

// Enqueues all n events. event_sw refuses NEW events beyond the port's
// new_event_threshold (and takes at most 64 a call); room comes back only as
// the scheduler hands events to the workers and they release them, and the
// scheduler runs on this lcore: so call `on_refused` between retries (the
// producer runs the scheduler; a --symmetric lcore also dequeues, which
// releases what it holds), as the DPDK example retries, and give up on an
// event (each holds an mbuf) only when `on_refused` says so: a --symmetric
// lcore once the lcores are stopped, when nobody else will dequeue (the
// mbufs are then freed and counted as abandoned, which fails the accounting).
template <typename OnRefused>
void enqueue_all(ProducerLcore& c, rte_event* ev, unsigned n, OnRefused&& on_refused) {
  const Shared& s = *c.shared;
  unsigned done = 0;
  for (;;) {
    const std::uint64_t t0 = rte_rdtsc();
    done += rte_event_enqueue_burst(s.dev, c.event_port, ev + done, std::uint16_t(n - done));
    c.stats.enqueue_cycles.add(rte_rdtsc() - t0);
    if (done == n) break;
    c.stats.enqueue_retries.add();
    if (!on_refused()) {
      for (unsigned i = done; i < n; ++i) rte_pktmbuf_free(ev[i].mbuf);
      c.stats.abandoned.add(n - done);
      break;
    }
  }
  c.stats.enqueued.add(done);
}

std::uint64_t processed_by_workers(const ProducerLcore& c) {
  std::uint64_t sum = 0;
  for (const auto& w : *c.workers) sum += w->stats.processed.get();
  return sum;
}

// Reads a burst of queue q, classifies it and enqueues every classifiable
// packet as a NEW atomic event tagged by its owner. Returns how many were read.
template <typename OnRefused>
unsigned produce_from(ProducerLcore& c, const baseline::PolledQueue& q, OnRefused&& on_refused) {
  rte_mbuf* pkts[qs::kMaxBurst];
  std::uint16_t owner[qs::kMaxBurst];
  rte_event ev[qs::kMaxBurst];
  unsigned n = 0;
  const unsigned kept =
      baseline::receive_classified(q, *c.classifier, c.burst, pkts, owner, c.stats.rx, c.stats.unclassifiable, n);
  for (unsigned i = 0; i < kept; ++i) {
    rte_event& e = ev[i];
    e.event = 0;
    e.flow_id = owner[i];  // the flow tag: events of one owner go to one worker at a time
    e.op = RTE_EVENT_OP_NEW;
    e.event_type = RTE_EVENT_TYPE_CPU;  // a software producer (not the ethdev RX adapter)
    e.sched_type = RTE_SCHED_TYPE_ATOMIC;
    e.queue_id = kQueue;
    e.priority = RTE_EVENT_DEV_PRIORITY_NORMAL;
    e.mbuf = pkts[i];
  }
  if (kept != 0) enqueue_all(c, ev, kept, on_refused);
  return n;
}

int producer_main(void* arg) {
  ProducerLcore& c = *static_cast<ProducerLcore*>(arg);
  // The producer itself stops the workers, after its last enqueue: retry forever.
  const auto schedule = [&c] {
    run_scheduler(c);
    return true;
  };
  while (!c.shared->stop_rx.load(std::memory_order_relaxed)) {
    for (const baseline::PolledQueue& q : c.queues) produce_from(c, q, schedule);
    run_scheduler(c);
  }
  // Nothing new comes in: schedule until the workers processed every event
  // enqueued (they count a burst before transmitting it), then stop them.
  const std::uint64_t enqueued = c.stats.enqueued.get();
  const std::uint64_t give_up = rte_rdtsc() + std::uint64_t(kDrainLimitSeconds * double(rte_get_tsc_hz()));
  while (processed_by_workers(c) < enqueued) {
    run_scheduler(c);
    if (rte_rdtsc() > give_up) {
      c.stats.drain_timed_out.add();
      break;
    }
  }
  c.shared->stop_workers.store(true, std::memory_order_release);
  return 0;
}

// The worker stage, once: dequeues a burst of the worker's port (which also
// releases the previous burst: implicit release), runs the connection stage
// and TX on it, and flushes a partial TX burst that waited long enough.
// Returns how many events it dequeued.
unsigned work_once(WorkerLcore& w) {
  rte_event ev[qs::kMaxBurst];
  rte_mbuf* pkts[qs::kMaxBurst];
  const std::uint16_t n = rte_event_dequeue_burst(w.shared->dev, w.event_port, ev, w.burst, 0);
  const std::uint64_t now = rte_rdtsc();
  if (n > 0) {
    for (unsigned i = 0; i < n; ++i) {
      pkts[i] = ev[i].mbuf;
      w.flow_seen[ev[i].flow_id % qs::kMaxOwners] = true;
    }
    baseline::connection_stage(w, pkts, n, now);
  }
  baseline::flush_tx_if_due(w, now);
  return n;
}

// The last burst's release is still pending in the port: rte_event_dev_stop
// dequeues every port, which issues it, before the device is torn down.
void finish_worker(WorkerLcore& w) {
  baseline::flush_tx(w);
  w.flows_seen.set(std::uint64_t(std::count(w.flow_seen.begin(), w.flow_seen.end(), true)));
}

int worker_main(void* arg) {
  WorkerLcore& w = *static_cast<WorkerLcore*>(arg);
  w.last_flush_tsc = rte_rdtsc();
  while (!w.shared->stop_workers.load(std::memory_order_acquire))
    if (work_once(w) == 0) rte_pause();
  finish_worker(w);
  return 0;
}

// --symmetric: the drain, on the first lcore, which keeps scheduling and
// working meanwhile: wait until every lcore stopped reading (their enqueued
// counts are then final), then until every event enqueued was processed;
// then stop everyone. Bounded by kDrainLimitSeconds.
void coordinate_drain(SymmetricLcore& c) {
  Shared& s = *c.shared;
  const auto& all = *c.drain_all;
  const std::uint64_t give_up = rte_rdtsc() + std::uint64_t(kDrainLimitSeconds * double(rte_get_tsc_hz()));
  const auto step = [&]() -> bool {
    run_scheduler(c.in);
    work_once(c);
    if (rte_rdtsc() <= give_up) return true;
    c.in.stats.drain_timed_out.add();
    return false;
  };
  bool in_time = true;
  while (in_time && s.producers_stopped.load(std::memory_order_acquire) < all.size()) in_time = step();
  std::uint64_t enqueued = 0;
  for (const auto& l : all) enqueued += l->in.stats.enqueued.get();
  const auto processed = [&all] {
    std::uint64_t sum = 0;
    for (const auto& l : all) sum += l->stats.processed.get();
    return sum;
  };
  while (in_time && processed() < enqueued) in_time = step();
  s.stop_workers.store(true, std::memory_order_release);
}

int symmetric_main(void* arg) {
  SymmetricLcore& c = *static_cast<SymmetricLcore*>(arg);
  Shared& s = *c.shared;
  // A refused enqueue: schedule, and dequeue, which releases what this lcore
  // holds (room for everyone) and processes what it was given meanwhile.
  // Retry until the lcores are stopped: that happens with this lcore still
  // enqueuing only when the drain timed out waiting for it.
  const auto schedule_and_work = [&c] {
    run_scheduler(c.in);
    work_once(c);
    return !c.shared->stop_workers.load(std::memory_order_relaxed);
  };
  c.last_flush_tsc = rte_rdtsc();
  while (!s.stop_rx.load(std::memory_order_relaxed)) {
    unsigned moved = 0;
    for (const baseline::PolledQueue& q : c.in.queues) moved += produce_from(c.in, q, schedule_and_work);
    run_scheduler(c.in);
    moved += work_once(c);
    // An idle lcore (e.g. one with no RX queue and nothing scheduled to it)
    // yields its hyper-thread / time slice briefly.
    if (moved == 0) rte_pause();
  }
  // Counts this lcore's enqueued as final (release: the coordinator reads it).
  s.producers_stopped.fetch_add(1, std::memory_order_release);
  if (c.drain_all != nullptr) coordinate_drain(c);
  // The others keep scheduling and working until the coordinator is content.
  while (!s.stop_workers.load(std::memory_order_acquire)) {
    run_scheduler(c.in);
    if (work_once(c) == 0) rte_pause();
  }
  finish_worker(c);
  return 0;
}

// Events still in the device at rte_event_dev_stop (none once the workers
// drained it): their mbufs are freed and counted.
void free_flushed_event(std::uint8_t, rte_event ev, void* count) {
  rte_pktmbuf_free(ev.mbuf);
  ++*static_cast<std::uint64_t*>(count);
}

// The event device: event_sw0 with one atomic queue, a producer port (0) and
// one port per worker (1..), each linked to the queue; or, `symmetric`, one
// port per lcore (0..workers-1), each both a producer's and a worker's,
// linked to the queue. Its scheduler service set to run on application
// lcores. Returns whether this call created the device (then it is removed at
// the end).
bool set_up_event_device(Shared& shared, unsigned workers, bool symmetric, unsigned burst,
                         std::uint64_t* flushed_at_stop) {
  bool created = false;
  int dev = rte_event_dev_get_dev_id(kEventDevName);
  if (dev < 0) {
    const int rc = rte_dev_probe(kEventDevName);
    if (rc != 0)
      throw std::runtime_error(std::string("cannot create ") + kEventDevName + ": " + rte_strerror(-rc) +
                               " (is librte_event_sw loaded? EAL -d librte_event_sw.so)");
    created = true;
    dev = rte_event_dev_get_dev_id(kEventDevName);
    if (dev < 0) throw std::runtime_error(std::string(kEventDevName) + " was probed but is not an event device");
  }
  shared.dev = std::uint8_t(dev);

  rte_event_dev_info info;
  if (rte_event_dev_info_get(shared.dev, &info) != 0) throw std::runtime_error("rte_event_dev_info_get failed");
  const unsigned ports = symmetric ? workers : workers + 1;
  if (ports > info.max_event_ports)
    throw std::runtime_error(std::string(kEventDevName) + " has " + std::to_string(info.max_event_ports) + " ports; " +
                             (symmetric ? "" : "a producer and ") + std::to_string(workers) + " workers need one each");
  rte_event_dev_config config{};
  config.nb_event_queues = 1;
  config.nb_event_ports = std::uint8_t(ports);
  config.nb_events_limit = info.max_num_events;  // event_sw: 4096 events in flight
  config.nb_event_queue_flows = std::min<std::uint32_t>(1024, info.max_event_queue_flows);
  // The deepest worker queues the device has: the scheduler moves the most
  // per iteration, the baseline's best case.
  config.nb_event_port_dequeue_depth = info.max_event_port_dequeue_depth;
  config.nb_event_port_enqueue_depth = info.max_event_port_enqueue_depth;
  config.dequeue_timeout_ns = 0;  // workers poll, as quicsteer's owners and the distributor's workers do
  int rc = rte_event_dev_configure(shared.dev, &config);
  if (rc < 0) throw std::runtime_error(std::string("rte_event_dev_configure: ") + rte_strerror(-rc));

  rte_event_queue_conf queue{};
  rte_event_queue_default_conf_get(shared.dev, kQueue, &queue);
  queue.schedule_type = RTE_SCHED_TYPE_ATOMIC;
  queue.nb_atomic_flows = config.nb_event_queue_flows;
  queue.priority = RTE_EVENT_DEV_PRIORITY_NORMAL;
  rc = rte_event_queue_setup(shared.dev, kQueue, &queue);
  if (rc < 0) throw std::runtime_error(std::string("rte_event_queue_setup: ") + rte_strerror(-rc));

  rte_event_port_conf port{};
  if (!symmetric) {
    rte_event_port_default_conf_get(shared.dev, 0, &port);
    port.new_event_threshold = std::int32_t(config.nb_events_limit);  // the only port that injects: all of them
    port.enqueue_depth = std::uint16_t(std::min<std::uint32_t>(config.nb_event_port_enqueue_depth, qs::kMaxBurst));
    port.event_port_cfg = RTE_EVENT_PORT_CFG_HINT_PRODUCER;
    rc = rte_event_port_setup(shared.dev, 0, &port);
    if (rc < 0) throw std::runtime_error(std::string("rte_event_port_setup (producer): ") + rte_strerror(-rc));
  }
  for (unsigned i = 0; i < workers; ++i) {
    const std::uint8_t id = std::uint8_t(symmetric ? i : i + 1);
    rte_event_port_default_conf_get(shared.dev, id, &port);
    port.dequeue_depth = std::uint16_t(config.nb_event_port_dequeue_depth);
    if (symmetric) {
      // Each port injects, with the producer's numbers: the whole device's
      // capacity as NEW-event threshold, and the producer's enqueue depth.
      // That cannot starve the workers: they forward nothing (the final
      // stage; no FORWARD needs room), and an lcore whose NEW enqueue is
      // refused keeps dequeuing, which releases its events and gives the
      // room back (symmetric_main). No hint: the port is both producer and
      // worker; implicit release stays on.
      port.new_event_threshold = std::int32_t(config.nb_events_limit);
      port.enqueue_depth = std::uint16_t(std::min<std::uint32_t>(config.nb_event_port_enqueue_depth, qs::kMaxBurst));
      port.event_port_cfg = 0;
    } else {
      port.enqueue_depth = std::uint16_t(std::min<std::uint32_t>(config.nb_event_port_enqueue_depth, burst));
      port.event_port_cfg = RTE_EVENT_PORT_CFG_HINT_WORKER;  // implicit release stays on
    }
    rc = rte_event_port_setup(shared.dev, id, &port);
    if (rc < 0) throw std::runtime_error("rte_event_port_setup (worker " + std::to_string(i) + "): " + rte_strerror(-rc));
    const std::uint8_t queue_id = kQueue;
    if (rte_event_port_link(shared.dev, id, &queue_id, nullptr, 1) != 1)
      throw std::runtime_error("cannot link event port " + std::to_string(id) + " to the queue: " + rte_strerror(rte_errno));
  }

  rc = rte_event_dev_service_id_get(shared.dev, &shared.scheduler_service);
  if (rc != 0)
    throw std::runtime_error(std::string(kEventDevName) + " has no scheduler service: " + rte_strerror(-rc));
  // No service lcore is mapped to it (an application lcore runs it), which
  // the start-up check would otherwise refuse.
  rte_service_runstate_set(shared.scheduler_service, 1);
  shared.scheduler_mt_safe = rte_service_probe_capability(shared.scheduler_service, RTE_SERVICE_CAP_MT_SAFE) == 1;
  rte_service_set_runstate_mapped_check(shared.scheduler_service, 0);
  rc = rte_event_dev_stop_flush_callback_register(shared.dev, free_flushed_event, flushed_at_stop);
  if (rc != 0) throw std::runtime_error(std::string("cannot register the stop flush callback: ") + rte_strerror(-rc));
  rc = rte_event_dev_start(shared.dev);
  if (rc < 0) throw std::runtime_error(std::string("rte_event_dev_start: ") + rte_strerror(-rc));
  // The producer ignores the return of each iteration on the data path: check
  // once here that the service runs from an application lcore at all.
  rc = rte_service_run_iter_on_app_lcore(shared.scheduler_service, 1);
  if (rc != 0)
    throw std::runtime_error(std::string("the event_sw scheduler does not run on an application lcore: ") +
                             rte_strerror(-rc));
  return created;
}

void tear_down_event_device(const Shared& shared, bool created) {
  rte_event_dev_stop(shared.dev);  // flushes what is left to free_flushed_event
  rte_event_dev_info info;
  const bool have_info = rte_event_dev_info_get(shared.dev, &info) == 0;
  rte_event_dev_close(shared.dev);
  if (created && have_info && info.dev != nullptr) rte_dev_remove(info.dev);
}

struct Totals {
  std::uint64_t rx = 0, unclassifiable = 0, enqueued = 0, enqueue_retries = 0;
  std::uint64_t enqueue_cycles = 0, scheduler_calls = 0, scheduler_busy = 0, scheduler_cycles = 0, drain_timed_out = 0;
  std::uint64_t abandoned = 0;
  baseline::WorkerTotals workers;
};

// The producing halves (the producer, or every --symmetric lcore) and the
// workers (the other lcores, or every --symmetric lcore), as the reporter
// sees them.
struct Roles {
  std::vector<const ProducerLcore*> producers;
  std::vector<const WorkerLcore*> workers;
};

Totals read_totals(const Roles& roles) {
  Totals t;
  for (const ProducerLcore* p : roles.producers) {
    t.rx += p->stats.rx.get();
    t.unclassifiable += p->stats.unclassifiable.get();
    t.enqueued += p->stats.enqueued.get();
    t.enqueue_retries += p->stats.enqueue_retries.get();
    t.enqueue_cycles += p->stats.enqueue_cycles.get();
    t.scheduler_calls += p->stats.scheduler_calls.get();
    t.scheduler_busy += p->stats.scheduler_busy.get();
    t.scheduler_cycles += p->stats.scheduler_cycles.get();
    t.drain_timed_out += p->stats.drain_timed_out.get();
    t.abandoned += p->stats.abandoned.get();
  }
  for (const WorkerLcore* w : roles.workers) {
    t.workers.processed += w->stats.processed.get();
    t.workers.tx += w->stats.tx.get();
    t.workers.tx_dropped += w->stats.drops[std::size_t(qs::DropReason::kTxFull)].get();
  }
  return t;
}

int run(const qs::Profile& profile, const baseline::AppArgs& args) {
  const bool symmetric = args.has(kSymmetric);
  baseline::check_profile(profile, "a producer", symmetric);
  if (profile.rings.burst > qs::kMaxBurst)
    throw std::runtime_error("rings.burst " + std::to_string(profile.rings.burst) + " exceeds " +
                             std::to_string(qs::kMaxBurst));
  const baseline::Devices devices = baseline::start_devices(profile, "evdev_mbufs");
  const unsigned n_workers = unsigned(symmetric ? profile.lcores.size() : profile.lcores.size() - 1);

  Shared shared;
  std::uint64_t flushed_at_stop = 0;
  const bool created = set_up_event_device(shared, n_workers, symmetric, profile.rings.burst, &flushed_at_stop);

  qs::MbufClassifier classifier(profile.steering);
  const std::uint64_t seed = rte_rand();
  std::vector<std::unique_ptr<WorkerLcore>> workers;     // the producer's workers
  std::unique_ptr<ProducerLcore> producer;
  std::vector<std::unique_ptr<SymmetricLcore>> lcores;   // --symmetric
  Roles roles;
  if (symmetric) {
    for (unsigned i = 0; i < n_workers; ++i) {
      auto c = std::make_unique<SymmetricLcore>();
      // TX queue i: the lcore's index among the profile's lcores, as the
      // producer's workers use their index among the workers.
      baseline::init_worker_on(*c, profile, i, std::uint16_t(i), devices.tx_port, seed);
      c->shared = &shared;
      c->event_port = std::uint8_t(i);
      c->burst = profile.rings.burst;
      c->in.shared = &shared;
      c->in.event_port = std::uint8_t(i);
      c->in.queues = baseline::rx_queues_of(devices, profile, i);
      c->in.classifier = &classifier;
      c->in.burst = profile.rings.burst;
      if (i == 0) c->drain_all = &lcores;
      roles.producers.push_back(&c->in);
      roles.workers.push_back(c.get());
      lcores.push_back(std::move(c));
    }
  } else {
    for (unsigned i = 0; i < n_workers; ++i) {
      auto w = std::make_unique<WorkerLcore>();
      baseline::init_worker(*w, profile, i, devices.tx_port, seed);
      w->shared = &shared;
      w->event_port = std::uint8_t(i + 1);
      w->burst = profile.rings.burst;
      roles.workers.push_back(w.get());
      workers.push_back(std::move(w));
    }
    producer = std::make_unique<ProducerLcore>();
    producer->shared = &shared;
    producer->event_port = 0;
    producer->queues = devices.rx_queues;
    producer->classifier = &classifier;
    producer->burst = profile.rings.burst;
    producer->workers = &workers;
    roles.producers.push_back(producer.get());
  }

  const char* mt_safe = shared.scheduler_mt_safe ? "MT-safe" : "not MT-safe, runs serialized";
  if (symmetric) {
    std::printf("eventdev_pipeline: symmetric: %u lcore(s) each polling its own RX queues, enqueuing, running the "
                "event_sw scheduler (%s) and working; one atomic queue, flow_id = owner\n",
                n_workers, mt_safe);
    for (const auto& c : lcores) {
      std::string queues;
      for (const auto& q : c->in.queues)
        queues += (queues.empty() ? "" : ", ") + std::to_string(q.port) + ":" + std::to_string(q.queue);
      std::printf("  lcore %u: event port %u, RX %s, TX queue %u\n", c->lcore, unsigned(c->event_port),
                  queues.empty() ? "none" : queues.c_str(), unsigned(c->tx_queue));
    }
  } else {
    std::printf("eventdev_pipeline: producer + event_sw scheduler (%s) on lcore %u, %u worker lcore(s), %zu RX "
                "queue(s), one atomic queue, flow_id = owner\n",
                mt_safe, profile.lcores[0].id, n_workers, producer->queues.size());
  }
  const std::uint64_t start = rte_rdtsc();
  if (symmetric) {
    for (const auto& c : lcores) baseline::launch(symmetric_main, c.get(), c->lcore, "producer and worker");
  } else {
    for (const auto& w : workers) baseline::launch(worker_main, w.get(), w->lcore, "worker");
    baseline::launch(producer_main, producer.get(), profile.lcores[0].id, "producer");
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(args.duration));
  const Totals at_end = read_totals(roles);
  const std::uint64_t end = rte_rdtsc();
  shared.stop_rx.store(true, std::memory_order_relaxed);
  rte_eal_mp_wait_lcore();
  const Totals final_totals = read_totals(roles);
  tear_down_event_device(shared, created);
  const std::int64_t leaked = baseline::stop_devices_and_count_leaked(devices);

  const double hz = double(rte_get_tsc_hz());
  const double elapsed = double(end - start) / hz;
  const double rx_mpps = double(at_end.rx) / elapsed / 1e6;
  const double tx_mpps = double(at_end.workers.tx) / elapsed / 1e6;
  const double per_event = final_totals.enqueued ? 1.0 / double(final_totals.enqueued) : 0;
  const double scheduler_cycles_per_pkt = double(final_totals.scheduler_cycles) * per_event;
  const double eventdev_cycles_per_pkt = double(final_totals.scheduler_cycles + final_totals.enqueue_cycles) * per_event;
  const baseline::WorkerTotals& fw = final_totals.workers;
  const bool accounted = baseline::accounted(final_totals.rx, final_totals.unclassifiable, final_totals.enqueued, fw);

  std::printf("eventdev_pipeline: %.3f s, rx %.3f Mpps, tx %.3f Mpps, %.1f TSC cycles/packet in the %s "
              "enqueues and scheduler iterations (of which scheduler %.1f; waits for workers included)\n",
              elapsed, rx_mpps, tx_mpps, eventdev_cycles_per_pkt, symmetric ? "lcores'" : "producer's",
              scheduler_cycles_per_pkt);
  std::printf("  totals: rx %llu, unclassifiable %llu, enqueued %llu (%llu enqueue retries), processed %llu, tx %llu, "
              "tx dropped %llu, flushed at stop %llu, abandoned %llu; mbufs leaked %lld; scheduler iterations %llu "
              "(%llu refused: busy on another lcore)\n",
              (unsigned long long)final_totals.rx, (unsigned long long)final_totals.unclassifiable,
              (unsigned long long)final_totals.enqueued, (unsigned long long)final_totals.enqueue_retries,
              (unsigned long long)fw.processed, (unsigned long long)fw.tx, (unsigned long long)fw.tx_dropped,
              (unsigned long long)flushed_at_stop, (unsigned long long)final_totals.abandoned, (long long)leaked,
              (unsigned long long)final_totals.scheduler_calls, (unsigned long long)final_totals.scheduler_busy);
  for (std::size_t i = 0; i < roles.workers.size(); ++i) {
    const WorkerLcore& w = *roles.workers[i];
    std::printf("  %s %u: ", symmetric ? "lcore" : "worker lcore", w.lcore);
    if (symmetric) {
      const ProducerStats& p = roles.producers[i]->stats;
      std::printf("rx %llu, enqueued %llu, scheduler iterations %llu (%llu refused), ", (unsigned long long)p.rx.get(),
                  (unsigned long long)p.enqueued.get(), (unsigned long long)p.scheduler_calls.get(),
                  (unsigned long long)p.scheduler_busy.get());
    }
    std::printf("processed %llu, %llu distinct flow_id(s)\n", (unsigned long long)w.stats.processed.get(),
                (unsigned long long)w.flows_seen.get());
  }
  if (final_totals.drain_timed_out)
    std::fprintf(stderr, "eventdev_pipeline: the workers did not empty the device within %.0f s of the stop\n",
                 kDrainLimitSeconds);

  if (!args.json.empty()) {
    std::vector<unsigned> worker_lcores;
    std::vector<baseline::JsonObject> worker_objects;
    for (std::size_t i = 0; i < roles.workers.size(); ++i) {
      const WorkerLcore& w = *roles.workers[i];
      worker_lcores.push_back(w.lcore);
      baseline::JsonObject o = baseline::worker_json(w).number("flows_seen", w.flows_seen.get());
      if (symmetric) {
        const ProducerStats& p = roles.producers[i]->stats;
        o.number("rx", p.rx.get()).number("unclassifiable", p.unclassifiable.get());
        o.number("enqueued", p.enqueued.get()).number("enqueue_retries", p.enqueue_retries.get());
        o.number("scheduler_calls", p.scheduler_calls.get()).number("scheduler_busy", p.scheduler_busy.get());
      }
      worker_objects.push_back(o);
    }
    baseline::JsonObject o;
    o.string("pipeline", symmetric ? "event_sw atomic, symmetric" : "event_sw atomic").string("profile", profile.path);
    if (symmetric)
      o.raw("producer_lcores", baseline::json_lcores(worker_lcores));
    else
      o.number("producer_lcore", profile.lcores[0].id);
    o.raw("worker_lcores", baseline::json_lcores(worker_lcores));
    o.number("elapsed_s", elapsed).number("tsc_hz", rte_get_tsc_hz());
    o.number("rx_mpps", rx_mpps).number("tx_mpps", tx_mpps);
    o.number("eventdev_cycles_per_packet", eventdev_cycles_per_pkt);
    o.number("scheduler_cycles_per_packet", scheduler_cycles_per_pkt);
    o.boolean("scheduler_mt_safe", shared.scheduler_mt_safe);
    o.number("scheduler_calls", final_totals.scheduler_calls).number("scheduler_busy", final_totals.scheduler_busy);
    o.number("enqueue_retries", final_totals.enqueue_retries);
    o.number("rx", final_totals.rx).number("unclassifiable", final_totals.unclassifiable);
    o.number("enqueued", final_totals.enqueued).number("processed", fw.processed);
    o.number("tx", fw.tx).number("tx_dropped", fw.tx_dropped).number("flushed_at_stop", flushed_at_stop);
    o.number("abandoned", final_totals.abandoned);
    o.boolean("drain_timed_out", final_totals.drain_timed_out != 0);
    o.raw("workers", baseline::json_array(worker_objects, 2));
    o.boolean("accounted", accounted);
    o.raw("mbufs", baseline::JsonObject().number("total", devices.pool->size).number("leaked", leaked).inline_text());
    baseline::write_json(args.json, o);
  }

  roles = {};
  workers.clear();  // their TX buffers, before the pool goes
  lcores.clear();
  return baseline::release_and_report(kProgram, devices.pool, accounted, leaked);
}

}  // namespace

int main(int argc, char** argv) {
  return qs::baseline::main_of(kProgram, kRoles, argc, argv, run, {kSymmetric});
}
