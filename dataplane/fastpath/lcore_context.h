// Everything one lcore's loop touches, built on the control path before
// launch. The loop itself (lcore_loop.cpp) allocates nothing.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/fastpath/connection_stage.h"
#include "dataplane/fastpath/connection_table.h"
#include "dataplane/fastpath/exception_path.h"
#include "dataplane/fastpath/icmp_limiter.h"
#include "dataplane/fastpath/lcore_stats.h"
#include "dataplane/fastpath/mbuf_classifier.h"
#include "dataplane/fastpath/parking_ticket.h"
#include "dataplane/config/modes.h"
#include "dataplane/fastpath/tx_stage.h"
#include "rings/doorbell.h"
#include "rings/spsc_ring.h"

struct rte_mbuf;
struct rte_rcu_qsbr;

namespace qs {
class DeliveryPlan;
}

namespace qs {

using MbufRing = SpscRing<rte_mbuf*>;

// What the main lcore asks of the data path. kQuiesce stops taking packets from
// the RX queues but keeps everything else going, so that what is parked or
// queued still reaches its owner before kStop.
enum class RunState : int { kRun, kQuiesce, kStop };

struct alignas(kCacheLine) RxQueueContext {
  std::uint16_t port_id = 0;
  std::uint16_t queue = 0;
  std::uint16_t profile_port = 0;  // index into Profile::ports
  // Whether the last burst kept from this queue was at least half this
  // lcore's own (an owner's queue only): the receive loop then prefetches
  // the next burst's connection-table slots as soon as it is parsed
  // (SlotPrefetch). Only the polling lcore touches it. (Here, in the
  // padding before the ticket: the members below keep their offsets.)
  bool mostly_own = true;
  ParkingTicket<rte_mbuf*> ticket;
  std::uint64_t parked_since = 0;    // TSC when the ticket was issued (statistics)
  std::uint64_t next_retry_tsc = 0;  // the held ticket is offered again from then on
  // With services: the MAC filter, police and counters of the exception
  // path (nullptr without services: every frame is steered).
  std::unique_ptr<ExceptionRx> exception;
  // The port's MAC as ExceptionRx::port_mac holds one, on a driver that
  // shows what the host sends out of its interface (net_af_packet, net_pcap
  // on an interface): frames from it are dropped (own_frame). 0: no check.
  std::uint64_t own_source = 0;
  RxQueueStats stats;
};

// One TX queue an owner transmits on: its own queue (= owner index) of a port.
struct TxQueueContext {
  explicit TxQueueContext(unsigned burst) : stage(burst) {}
  std::uint16_t port_id = 0;
  std::uint16_t queue = 0;
  std::array<std::uint8_t, 6> mac{};  // the port's: the source of what the owner itself writes (ICMP)
  // The appliance's addresses on the port, the source of the ICMP errors the
  // owner sends there (nullptr: a port without a TAP, where the frame's
  // destination is the source).
  const HostAddresses* host = nullptr;
  TxStage<rte_mbuf*> stage;
  // Set when this queue took nothing for park_timeout (a dead link, a peer
  // that reads nothing): from then on what it refuses is dropped at once
  // (tx_timeout) instead of held, so that it no longer holds its owner,
  // whose other TX queues (reflect: one per RX port) go on. Cleared as soon
  // as the queue takes a packet again. Atomic (written by the owner only,
  // relaxed: a plain store) so that health (HealthSample::TxQueue) can read
  // it, with `timeout_drops`, what it dropped so.
  std::atomic<bool> timed_out{false};
  Counter timeout_drops;
};

struct LcoreContext {
  unsigned lcore_id = 0;
  int owner_index = -1;  // -1: receives only
  const std::atomic<RunState>* state = nullptr;
  // Set by the lcore once it has finished an iteration in which it saw
  // kQuiesce: whatever it had taken from an RX queue is then in a ring, a
  // ticket or a TX stage, where Dataplane::stop can see it.
  std::atomic<bool> quiesce_acknowledged{false};

  // Receiving side.
  std::vector<std::unique_ptr<RxQueueContext>> rx;
  std::vector<MbufRing*> out_rings;      // by owner index; nullptr for itself
  std::vector<RingStats*> out_ring_stats;
  std::vector<Doorbell*> out_doorbells;  // by owner index; nullptr: that owner polls, never sleeps on one
  // With services and a TAP on a port it polls: the rings to the exception
  // thread, control (ARP, ND, BGP, BFD, link) and bulk; nullptr otherwise.
  std::array<MbufRing*, 2> kernel_rings{};
  // Health checks: the ring of probe answers to the health checker
  // (exception_rx.h); nullptr without.
  MbufRing* probe_answers = nullptr;
  // The slot that holds the steering in force: loaded again before each
  // burst is classified, so that a reload (Dataplane::reload_steering) takes
  // effect between bursts, without a lock and without pausing RX. The lcore
  // reports a quiescent state to `rcu` (as thread `rcu_thread`) at the top of
  // every iteration, where it holds no classifier, and is offline while it
  // sleeps; a replaced classifier is freed only once every lcore has reported
  // one since.
  const std::atomic<MbufClassifier*>* live_classifier = nullptr;
  rte_rcu_qsbr* rcu = nullptr;
  unsigned rcu_thread = 0;
  // Owners (by index) for which a ticket of this lcore holds packets. A
  // sibling RX queue parks its packets for them too instead of handing over,
  // so that it cannot refill the owner's ring above the low watermark while
  // the parked queue waits for it (which could starve that queue until its
  // timeout).
  std::uint64_t parked_owners = 0;
  // The forwarding tables' clock: TSC cycles per millisecond.
  std::uint64_t tsc_per_ms = 1;
  // Set on the one lcore that ages the shared forwarding tables in its
  // housekeeping (the first receiving lcore); nullptr elsewhere.
  ForwardingTables* forwarding_sweeper = nullptr;
  std::unique_ptr<SweepPacer> forwarding_sweep;  // buckets of each table, per idle_timeout / 4
  Counter forwarding_expired;
  Counter forwarding_retired;  // entries of removed backends swept out (ForwardingTables::sweep_retired)
  // With peer_sync: what each burst taught the established table goes on
  // this ring to the sync thread (dataplane/runtime/peer_sync.h); a full
  // ring drops (learned_ring_full), never waits. nullptr without.
  SpscRing<LearnedEntry>* learned_ring = nullptr;
  LearnedLog learned_log;
  Counter learned_ring_full;
  // The DCID hashes of the burst being received, while its owner prefetches
  // their slots (SlotPrefetch, service_rx_queue); here rather than on the
  // receive loop's stack, where a receiver that owns nothing carried them
  // for nothing. Only this lcore touches it. (Split's +18 % at 2d6ceb3 was
  // not the stack's size or placement but classify's SlotPrefetch copy:
  // tests/bench/RESULTS.md.)
  std::uint32_t slot_hashes[kMaxBurst];

  // Owning side.
  std::vector<MbufRing*> in_rings;       // one per producer that can reach this owner
  // Owners that poll no RX queue sleep on this when idle, and the receivers
  // ring it after a hand-off, so a sleeping owner wakes as soon as work comes.
  Doorbell* doorbell = nullptr;
  // The longest sleep on the doorbell, so that housekeeping (connection
  // expiry) still runs on an idle owner; Dataplane::stop rings the doorbell,
  // so a stop never waits for it. A test lengthens it to show that the
  // doorbell, not this limit, wakes the owner for traffic.
  std::chrono::nanoseconds doorbell_sleep_limit = std::chrono::milliseconds(1);
  std::unique_ptr<ConnectionTable> cids;         // this owner's CIDs
  std::unique_ptr<ConnectionTable> connections;  // the connections they belong to
  ConnectionShard shard;                         // both, for the connection stage
  std::unique_ptr<SweepPacer> sweep;  // one sweep of each table per idle_timeout / 4
  // The TX queues this owner sends on (forward: the TX port; reflect: every
  // RX port), each its own queue (= owner index) of the port, and the same by
  // DPDK port id (nullptr where it sends nothing).
  std::vector<std::unique_ptr<TxQueueContext>> tx;
  std::vector<TxQueueContext*> tx_by_port;
  TxQueueContext* forward_tx = nullptr;
  // True while a TX stage cannot take one more burst: the owner takes no new
  // work (inbound rings, its own RX queues) until it can. TX back-pressure;
  // never under the drop policy, which drops what TX refuses.
  bool tx_held = false;
  std::uint64_t tx_held_since = 0;
  // Forward with backends (nullptr otherwise): the delivery plan in force,
  // swapped by a reload as the classifier is.
  const std::atomic<const DeliveryPlan*>* delivery = nullptr;
  // This owner's counters per backend slot (kMaxBackends of them).
  std::unique_ptr<BackendCounters[]> backend_counter_rows;
  std::span<BackendCounters> backend_counters;
  // ICMP too-big replies: receivers record each packet's RX port for them
  // (a reload turns them on or off), and an owner sends at most the plan's
  // rates (IcmpLimiter).
  std::atomic<bool> icmp_replies{false};
  IcmpLimiter icmp_limiter;
  std::uint64_t tsc_hz = 1;
  OwnerStats owner_stats;
  LoopStats loop_stats;

  // Settings, in TSC cycles where they are times.
  unsigned burst = 32;
  BackpressurePolicy policy = BackpressurePolicy::kPark;
  std::uint32_t high_watermark = 0;
  std::uint32_t low_watermark = 0;
  std::uint64_t park_timeout_tsc = 0;
  std::uint64_t ticket_retry_tsc = 0;  // how often a held ticket is offered to its owners
  OwnerAction action = OwnerAction::kForward;
  std::uint32_t cost_cycles = 0;
  std::uint64_t tx_flush_tsc = 0;  // action.tx_drain_us: a partial TX burst waits at most this long
  std::uint64_t idle_timeout_tsc = 0;
  std::uint32_t idle_sleep_us = 0;
  std::uint32_t idle_polls_before_sleep = 256;
  std::uint64_t doorbell_spin_tsc = 0;  // PollingConfig::doorbell_spin_us
};

// The lcore entry point for rte_eal_remote_launch; arg is a LcoreContext*.
int lcore_main(void* arg);

// After every lcore has returned: flushes TX stages and frees what is still
// parked or queued, counting it as DropReason::kShutdown. Control path.
void discard_after_stop(LcoreContext& ctx);

}  // namespace qs
