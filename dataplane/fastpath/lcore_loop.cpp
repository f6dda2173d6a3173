// One loop for every lcore, whatever its role; it reads top to bottom:
//   1. owners: offer what a full TX queue refused again; dequeue from every inbound
//      ring whatever the RX side is doing, so no cycle of lcores can wait on
//      each other. Only the owner's own TX queues can hold it (a TX stage
//      without room for a burst), and they empty into the device, not into
//      another lcore;
//   2. for each RX queue: retry its parking ticket; poll it only when no
//      ticket is held and the TX stages have room; classify the burst, group
//      it by owner keeping order, run this lcore's own share, hand the rest
//      over;
//   3. flush partial TX bursts and do housekeeping on the TX flush timer;
//   4. back off when nothing moved.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

#include "dataplane/fastpath/backend_delivery.h"
#include "dataplane/fastpath/connection_stage.h"
#include "dataplane/fastpath/exception_rx.h"
#include "dataplane/fastpath/learned_share.h"
#include "dataplane/fastpath/lcore_context.h"
#include "dataplane/fastpath/steer_meta.h"
#include "dataplane/fastpath/tsan.h"

namespace qs {
namespace {

// Buckets of each forwarding table a housekeeping tick sweeps of removed
// backends' entries: 16 KiB of each, so that the tick stays short; the
// default tables (65,536 buckets) are swept in 256 ticks.
constexpr unsigned kRetireBucketsPerTick = 256;

inline void count_drop(DropCounters& d, DropReason r, std::uint64_t n = 1) {
  d[static_cast<std::size_t>(r)].add(n);
}

void spin_cycles(std::uint32_t cycles) {
  const std::uint64_t end = rte_rdtsc() + cycles;
  while (rte_rdtsc() < end) rte_pause();
}

// Reflect: swap MAC, IP and UDP endpoints. Swapping the two halves of a
// pseudo-header leaves both the IPv4 header and the UDP checksums valid.
void reflect(rte_mbuf* m, const SteerMeta& meta) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  rte_ether_addr tmp = eth->src_addr;
  eth->src_addr = eth->dst_addr;
  eth->dst_addr = tmp;
  auto* l3 = rte_pktmbuf_mtod_offset(m, std::uint8_t*, meta.l3_offset());
  if (meta.flags & kSteerMetaIpv6) {
    std::uint8_t a[16];
    std::memcpy(a, l3 + 8, 16);
    std::memmove(l3 + 8, l3 + 24, 16);
    std::memcpy(l3 + 24, a, 16);
  } else {
    std::uint8_t a[4];
    std::memcpy(a, l3 + 12, 4);
    std::memmove(l3 + 12, l3 + 16, 4);
    std::memcpy(l3 + 16, a, 4);
  }
  auto* udp = rte_pktmbuf_mtod_offset(m, rte_udp_hdr*, meta.l4_offset);
  const rte_be16_t port = udp->src_port;
  udp->src_port = udp->dst_port;
  udp->dst_port = port;
}

// Offers a TX stage's waiting packets to its queue. Under drop what the queue
// refuses is dropped (tx_full). Under park and shed-new it stays in the stage,
// in order; a stage whose queue has taken nothing for park_timeout drops what
// it holds (tx_timeout), so that a dead link cannot hold the chain forever,
// and from then on drops what its queue refuses at once (tx_timeout too)
// until the queue takes something again: a dead queue holds its owner once,
// for park_timeout, not once per burst, and never holds the owner's other
// TX queues for longer than that. Returns the packets that left the stage.
unsigned send_tx(LcoreContext& c, TxQueueContext& t, std::uint64_t now) {
  const unsigned took = t.stage.send(
      [&](rte_mbuf** pkts, unsigned n) { return unsigned(rte_eth_tx_burst(t.port_id, t.queue, pkts, std::uint16_t(n))); },
      now);
  c.owner_stats.tx.add(took);
  if (took != 0 && t.timed_out.load(std::memory_order_relaxed)) t.timed_out.store(false, std::memory_order_relaxed);
  unsigned dropped = 0;
  if (c.policy == BackpressurePolicy::kDrop) {
    dropped = t.stage.discard([](rte_mbuf* m) { rte_pktmbuf_free(m); });
    if (dropped) count_drop(c.owner_stats.drops, DropReason::kTxFull, dropped);
  } else if (t.timed_out.load(std::memory_order_relaxed) || t.stage.stalled_for(now) > c.park_timeout_tsc) {
    if (!t.timed_out.load(std::memory_order_relaxed)) t.timed_out.store(true, std::memory_order_relaxed);
    dropped = t.stage.discard([](rte_mbuf* m) { rte_pktmbuf_free(m); });
    if (dropped) {
      count_drop(c.owner_stats.drops, DropReason::kTxTimeout, dropped);
      t.timeout_drops.add(dropped);
    }
  }
  // What TX never took is a drop, not processed: received = processed + drops.
  if (dropped) c.owner_stats.processed.sub(dropped);
  return took + dropped;
}

// The owner's gate: it takes a burst of work (from a ring or its own RX
// queue) only while every TX stage has room for one more burst. Keeps the
// TX-hold statistics as the answer changes.
bool tx_has_room(LcoreContext& c, std::uint64_t now) {
  bool room = true;
  for (const auto& t : c.tx) room &= t->stage.has_room();
  if (room != c.tx_held) return room;
  c.tx_held = !room;
  if (c.tx_held) {
    c.tx_held_since = now;
    c.owner_stats.tx_holds.add();
  } else {
    c.owner_stats.tx_held_cycles.add(now - c.tx_held_since);
  }
  return room;
}

void count_tx_held(LcoreContext& c) {
  unsigned held = 0;
  for (const auto& t : c.tx) held += t->stage.count();
  c.owner_stats.tx_held_now.set(held);
}

// Offers the stages `which` picks to their queues, then records what the
// stages hold. Two callers: flush_tx, every stage with packets waiting
// (partial bursts included); retry_held_tx, while the owner is held, the
// stages without room.
template <class Which>
unsigned offer_tx(LcoreContext& c, std::uint64_t now, Which which) {
  unsigned moved = 0;
  for (const auto& t : c.tx)
    if (which(t->stage)) moved += send_tx(c, *t, now);
  count_tx_held(c);
  return moved;
}

unsigned flush_tx(LcoreContext& c, std::uint64_t now) {
  return offer_tx(c, now, [](const auto& stage) { return !stage.empty(); });
}

unsigned retry_held_tx(LcoreContext& c, std::uint64_t now) {
  return offer_tx(c, now, [](const auto& stage) { return !stage.has_room(); });
}

inline void stage_tx(LcoreContext& c, TxQueueContext& t, rte_mbuf* m, std::uint64_t now) {
  tsan_release(m);  // it goes into a device from here (tsan.h)
  if (t.stage.add(m)) send_tx(c, t, now);
}

// An ICMP too-big reply to m, back out of the port m came in on, within the
// plan's rate (a budget per second, refilled when a second has passed).
// Returns whether one was sent. The reply is quicsteer's own packet, not a
// received one: it goes straight to the owner's TX queue, outside the TX
// stage and its counters (a queue that refuses it costs the reply, counted
// as not sent, and holds nobody).
bool send_too_big(LcoreContext& c, const DeliveryPlan& plan, const BackendTemplate& t, rte_mbuf* m,
                  const SteerMeta& meta, std::uint64_t now) {
  if (plan.icmp_per_second() == 0) return false;
  TxQueueContext* t_out = m->port < c.tx_by_port.size() ? c.tx_by_port[m->port] : nullptr;
  if (t_out == nullptr) return false;
  // The client: the frame's IP source, whose first octets tell clients
  // apart well enough for the limiter's table.
  const std::uint8_t* src = rte_pktmbuf_mtod_offset(m, const std::uint8_t*,
                                                    meta.l3_offset() + ((meta.flags & kSteerMetaIpv6) ? 8 : 12));
  std::uint64_t client;
  std::memcpy(&client, src, sizeof client);  // IPv4: the address and the destination's first half
  if (!(meta.flags & kSteerMetaIpv6)) client &= 0xffffffffu;
  // A reload may change the rates: the limiter follows the plan in force.
  if (!c.icmp_limiter.configured_for(plan.icmp_per_second(), plan.icmp_per_client()))
    c.icmp_limiter.configure(plan.icmp_per_second(), plan.icmp_per_client(), c.tsc_hz);
  const std::uint64_t destination = client * 0x9e3779b97f4a7c15ull;
  if (!c.icmp_limiter.permits(now, destination)) return false;
  // From the appliance's own address on the port when it has a TAP (none
  // of the family yet: no reply), never from the VIP the frame was sent to.
  std::uint8_t source[16];
  if (t_out->host != nullptr && !t_out->host->read((meta.flags & kSteerMetaIpv6) != 0, source)) return false;
  rte_mbuf* reply = rte_pktmbuf_alloc(m->pool);
  if (reply == nullptr) return false;
  if (!build_too_big_reply(t, m, meta, t_out->mac, reply, t_out->host != nullptr ? source : nullptr)) {
    rte_pktmbuf_free(reply);
    return false;
  }
  c.icmp_limiter.spend(now, destination);
  tsan_release(reply);  // it goes into a device from here (tsan.h)
  if (rte_eth_tx_burst(t_out->port_id, t_out->queue, &reply, 1) != 1) {
    rte_pktmbuf_free(reply);
    return false;
  }
  return true;
}

// A burst's deliveries per backend, added to the backend's counters when
// the backend changes from one packet to the next and at the end of the
// burst, not per packet: an owner serves a few backends, so consecutive
// packets mostly share one.
struct BackendTally {
  std::uint16_t slot = kNoBackend;
  std::uint64_t packets = 0, bytes = 0, connections = 0;

  void add(std::span<BackendCounters> counters, std::uint16_t s, std::uint32_t len, bool new_connection) {
    if (s != slot) [[unlikely]] {
      flush(counters);
      slot = s;
    }
    ++packets;
    bytes += len;
    connections += new_connection;
  }
  void flush(std::span<BackendCounters> counters) {
    if (packets == 0) return;
    BackendCounters& bc = counters[slot];
    bc.packets.add(packets);
    bc.bytes.add(bytes);
    if (connections) bc.connections.add(connections);
    packets = bytes = connections = 0;
  }
};

// Forward with backends: each packet to its backend (SteerMeta::backend) by
// the plan's delivery mode, specialised at compile time. A backend that is
// down (or that a reload removed) gets nothing: backend_down. A frame that
// no longer fits the TX port's MTU once encapsulated is dropped as too_big,
// and the client is told the usable MTU (ICMP, rate-limited) so that its
// path MTU discovery adapts. Returns whether the packet goes on to TX.
//
// The plan's arrays come in as a BackendDelivery of plain pointers, copied
// once per burst: the loop writes frame octets (char stores, which may
// alias anything), and members read through `plan` would be loaded again
// after each of them.
struct BackendDelivery {
  const DeliverySlot* slots;
  const BackendTemplate* templates;
  std::size_t slot_count;
  std::span<BackendCounters> counters;
};

// kL2ChecksMtu: l2 with a receiving port whose MTU is larger than the TX
// port's (DeliveryPlan::l2_checks_mtu), decided per burst, not per packet.
template <DeliveryMode kMode, bool kL2ChecksMtu>
[[gnu::always_inline]] inline bool deliver_to_backend(LcoreContext& c, const DeliveryPlan& plan,
                                                      const BackendDelivery d, BackendTally& tally, rte_mbuf* m,
                                                      std::uint8_t* frame, const SteerMeta& meta, Tracked outcome,
                                                      std::uint32_t hash, std::uint64_t now) {
  const std::uint16_t slot = meta.backend;
  if (slot >= d.slot_count || d.slots[slot].usable == 0) [[unlikely]] {
    if (slot < d.counters.size()) d.counters[slot].backend_down.add();
    count_drop(c.owner_stats.drops, DropReason::kBackendDown);
    rte_pktmbuf_free(m);
    return false;
  }
  const std::uint32_t len = m->pkt_len;
  if constexpr (kMode == DeliveryMode::kL2 && !kL2ChecksMtu) {
    std::memcpy(frame, d.slots[slot].macs.data(), 12);
  } else if constexpr (kMode != DeliveryMode::kAsIs) {
    const BackendTemplate& t = d.templates[slot];
    const DeliveryStatus status = deliver_mbuf<kMode>(t, m, frame, meta, hash);
    if (status != DeliveryStatus::kOk) [[unlikely]] {
      if (status == DeliveryStatus::kMalformed) {
        // Its IP header's lengths disagree with the frame: nothing to send.
        count_drop(c.owner_stats.drops, DropReason::kMalformed);
      } else {
        // kTooBig, or (never with DPDK's 128-octet headroom) no room for
        // the outer headers in front of the frame: it does not fit.
        d.counters[slot].too_big.add();
        count_drop(c.owner_stats.drops, DropReason::kTooBig);
        if (send_too_big(c, plan, t, m, meta, now)) d.counters[slot].icmp_sent.add();
      }
      rte_pktmbuf_free(m);
      return false;
    }
  }
  // A backend counts the connections whose handshake it was sent. A CID
  // first seen in a short header is a new entry in the owner's shard (after
  // an active migration nothing ties it to its connection), but to the
  // backend it is a connection it already has: counted, it made 48 of 32.
  tally.add(d.counters, slot, len, outcome == Tracked::kNew && (meta.flags & kSteerMetaLongHeader) != 0);
  return true;
}

// The connection stage: this owner's shard of state, then the action,
// specialised at compile time per action and per synthetic cost, so that the
// per-packet path has no switch and no test of cost_cycles; sink counts once
// per burst. Called only while every TX stage has room for the burst
// (tx_has_room).
template <OwnerAction kAction, bool kCost>
void run_connection_stage_as(LcoreContext& c, rte_mbuf** pkts, const SteerMeta* metas, const std::uint32_t* hashes,
                             unsigned n, std::uint64_t now) {
  OwnerStats& s = c.owner_stats;
  run_connection_burst(c.shard, pkts, metas, hashes, n, now, s,
                       [&](rte_mbuf* m, std::uint8_t*, const SteerMeta& meta, Tracked, std::uint32_t) {
    if constexpr (kCost) spin_cycles(c.cost_cycles);
    if constexpr (kAction == OwnerAction::kSink) {
      rte_pktmbuf_free(m);
    } else if constexpr (kAction == OwnerAction::kForward) {
      tsan_release(m);  // it goes into a device from here (tsan.h)
    } else {
      reflect(m, meta);
      stage_tx(c, *c.tx_by_port[m->port], m, now);
    }
  });
  if constexpr (kAction == OwnerAction::kSink) s.sunk.add(n);
  // Forward sends the whole burst to one TX stage, in one copy rather than
  // an append per packet (whose count would wait on the last one's store).
  if constexpr (kAction == OwnerAction::kForward)
    if (c.forward_tx->stage.add_burst(pkts, n)) send_tx(c, *c.forward_tx, now);
}

// Forward to backends, per delivery mode: what goes to the TX stage is what
// delivery kept, in order.
template <DeliveryMode kMode, bool kL2ChecksMtu, bool kCost>
void run_backend_stage_as(LcoreContext& c, const DeliveryPlan& plan, rte_mbuf** pkts, const SteerMeta* metas,
                          const std::uint32_t* hashes, unsigned n, std::uint64_t now) {
  OwnerStats& s = c.owner_stats;
  unsigned kept = 0;
  BackendTally tally;
  const BackendDelivery d{plan.slot_table(), plan.templates(), plan.slots(), c.backend_counters};
  run_connection_burst(
      c.shard, pkts, metas, hashes, n, now, s,
      [&, d](rte_mbuf* m, std::uint8_t* frame, const SteerMeta& meta, Tracked outcome, std::uint32_t hash) {
        if constexpr (kCost) spin_cycles(c.cost_cycles);
        if (deliver_to_backend<kMode, kL2ChecksMtu>(c, plan, d, tally, m, frame, meta, outcome, hash, now)) {
          tsan_release(m);  // it goes into a device from here (tsan.h)
          pkts[kept++] = m;
        }
      });
  tally.flush(c.backend_counters);
  // Dropped packets were counted as processed when the burst went in.
  if (kept != n) s.processed.sub(n - kept);
  if (kept != 0 && c.forward_tx->stage.add_burst(pkts, kept)) send_tx(c, *c.forward_tx, now);
}

template <bool kCost>
void run_backend_stage(LcoreContext& c, rte_mbuf** pkts, const SteerMeta* metas, const std::uint32_t* hashes,
                       unsigned n, std::uint64_t now) {
  // The plan in force: a reload swaps it (its mode too) between bursts, and
  // frees the old one only after this lcore's next quiescent point (RCU, as
  // the classifier).
  const DeliveryPlan& plan = *c.delivery->load(std::memory_order_acquire);
  switch (plan.mode()) {
    case DeliveryMode::kAsIs:
      return run_backend_stage_as<DeliveryMode::kAsIs, false, kCost>(c, plan, pkts, metas, hashes, n, now);
    case DeliveryMode::kL2:
      return plan.l2_checks_mtu() ? run_backend_stage_as<DeliveryMode::kL2, true, kCost>(c, plan, pkts, metas, hashes, n, now)
                                  : run_backend_stage_as<DeliveryMode::kL2, false, kCost>(c, plan, pkts, metas, hashes, n, now);
    case DeliveryMode::kIpip:
      return run_backend_stage_as<DeliveryMode::kIpip, false, kCost>(c, plan, pkts, metas, hashes, n, now);
    case DeliveryMode::kVxlan:
      return run_backend_stage_as<DeliveryMode::kVxlan, false, kCost>(c, plan, pkts, metas, hashes, n, now);
  }
}

// metas and hashes: as run_connection_burst's (nullptr: a ring's burst, each
// SteerMeta in its mbuf; hashes nullptr: the stage hashes the DCIDs).
void run_connection_stage(LcoreContext& c, rte_mbuf** pkts, const SteerMeta* metas, const std::uint32_t* hashes,
                          unsigned n, std::uint64_t now) {
  const bool cost = c.cost_cycles != 0;
  if (c.delivery != nullptr)
    return cost ? run_backend_stage<true>(c, pkts, metas, hashes, n, now) : run_backend_stage<false>(c, pkts, metas, hashes, n, now);
  switch (c.action) {
    case OwnerAction::kSink:
      return cost ? run_connection_stage_as<OwnerAction::kSink, true>(c, pkts, metas, hashes, n, now)
                  : run_connection_stage_as<OwnerAction::kSink, false>(c, pkts, metas, hashes, n, now);
    case OwnerAction::kForward:
      return cost ? run_connection_stage_as<OwnerAction::kForward, true>(c, pkts, metas, hashes, n, now)
                  : run_connection_stage_as<OwnerAction::kForward, false>(c, pkts, metas, hashes, n, now);
    case OwnerAction::kReflect:
      return cost ? run_connection_stage_as<OwnerAction::kReflect, true>(c, pkts, metas, hashes, n, now)
                  : run_connection_stage_as<OwnerAction::kReflect, false>(c, pkts, metas, hashes, n, now);
  }
}

unsigned dequeue_inbound(LcoreContext& c, std::uint64_t now) {
  rte_mbuf* pkts[kMaxBurst];
  unsigned total = 0;
  for (MbufRing* ring : c.in_rings) {
    if (!tx_has_room(c, now)) break;  // TX back-pressure: leave it in the ring
    const unsigned n = ring->dequeue_burst(pkts, c.burst);
    if (n == 0) continue;
    run_connection_stage(c, pkts, nullptr, nullptr, n, now);
    total += n;
  }
  c.owner_stats.dequeued.add(total);
  return total;
}

// How full the owner's ring may get: park and shed-new stop at the high
// watermark; drop fills the ring to the brim, as a plain ring would.
inline std::size_t handoff_limit(const LcoreContext& c, const MbufRing& ring) {
  return c.policy == BackpressurePolicy::kDrop ? ring.capacity() : c.high_watermark;
}

// The ring's occupancy for a hand-off of n packets, from the producer's
// cached view of the consumer index: the consumer's line is read only when
// that view cannot fit all n below the limit.
inline std::size_t handoff_occupancy(const LcoreContext& c, MbufRing& ring, unsigned n) {
  const std::size_t limit = handoff_limit(c, ring);
  return ring.producer_occupancy(limit > n ? limit - n + 1 : 0);
}

// How many packets the owner's ring may take now.
inline unsigned handoff_budget(const LcoreContext& c, const MbufRing& ring, std::size_t occupancy) {
  const std::size_t limit = handoff_limit(c, ring);
  return occupancy >= limit ? 0u : unsigned(limit - occupancy);
}

// The first packet parked issues the ticket: the queue stops being polled.
inline void park(LcoreContext& c, RxQueueContext& q, rte_mbuf* m, std::uint16_t owner, std::uint64_t now) {
  if (!q.ticket.held()) {
    q.stats.parks.add();
    q.stats.parked_now.set(1);
    q.parked_since = now;
    q.next_retry_tsc = now;
  }
  q.ticket.park(m, owner, now);
  c.parked_owners |= std::uint64_t(1) << owner;
}

// Another owner's packets, each with its SteerMeta in its mbuf (the
// classifier left it there), over the ring or parked until it has room.
void hand_off(LcoreContext& c, RxQueueContext& q, std::uint16_t owner, rte_mbuf** pkts, unsigned n,
              std::uint64_t now) {
  MbufRing& ring = *c.out_rings[owner];
  RingStats& rs = *c.out_ring_stats[owner];
  const std::size_t occupancy = handoff_occupancy(c, ring, n);
  // While a sibling queue's ticket waits for this owner, this queue waits too.
  const unsigned budget = (c.parked_owners >> owner & 1) != 0 ? 0u : handoff_budget(c, ring, occupancy);
  const unsigned took = ring.enqueue_burst(pkts, std::min(n, budget));
  rs.occupancy_high_water.max_with(occupancy + took);
  q.stats.enqueued.add(took);
  if (took != 0 && c.out_doorbells[owner] != nullptr) c.out_doorbells[owner]->ring();
  if (took == n) return;
  rs.full_events.add();
  const unsigned rest = n - took;
  switch (c.policy) {
    case BackpressurePolicy::kDrop:
      rte_pktmbuf_free_bulk(pkts + took, rest);
      count_drop(q.stats.drops, DropReason::kRingFull, rest);
      return;
    case BackpressurePolicy::kPark:
      for (unsigned i = took; i < n; ++i) park(c, q, pkts[i], owner, now);
      q.stats.parked_packets.add(rest);
      return;
    case BackpressurePolicy::kShedNew: {
      unsigned parked = 0;
      for (unsigned i = took; i < n; ++i) {
        if (steer_meta(pkts[i])->flags & kSteerMetaOpensConnection) {
          rte_pktmbuf_free(pkts[i]);
          count_drop(q.stats.drops, DropReason::kShedNew);
        } else {
          park(c, q, pkts[i], owner, now);
          ++parked;
        }
      }
      q.stats.parked_packets.add(parked);
      return;
    }
  }
}

// Once per burst, not per packet.
void count_routes(RxQueueStats& s, const RouteCounts& r) {
  for (std::size_t m = 0; m < kResolveMethods; ++m)
    if (r.by_method[m] != 0) s.routed[m].add(r.by_method[m]);
  if (r.learn.learned) s.learned.add(r.learn.learned);
  if (r.learn.setups) s.setups.add(r.learn.setups);
  if (r.learn.setup_evicted) s.setup_evicted.add(r.learn.setup_evicted);
  if (r.learn.table_full) s.table_full.add(r.learn.table_full);
  if (r.learn.over_budget) s.over_budget.add(r.learn.over_budget);
  if (r.learn.lost_races) s.lost_races.add(r.learn.lost_races);
  if (r.learn.retired_hits) s.retired_hits.add(r.learn.retired_hits);
  if (r.learn.source_over_budget) s.source_over_budget.add(r.learn.source_over_budget);
  if (r.learn.undersized_initials) s.undersized_initials.add(r.learn.undersized_initials);
}

void update_parked_owners(LcoreContext& c) {
  std::uint64_t mask = 0;
  for (const auto& q : c.rx) mask |= q->ticket.owner_mask();
  c.parked_owners = mask;
}

// Returns false while the queue must stay unpolled. The parked packets are
// offered first and only then is the timeout checked, so that nothing the
// owner could take now is dropped; the timeout counts from the ticket's last
// progress, so only a ticket whose owners took none of it for park_timeout is
// dropped.
bool retry_ticket(LcoreContext& c, RxQueueContext& q, std::uint64_t now, unsigned& work) {
  if (!q.ticket.held()) return true;
  if (now < q.next_retry_tsc) return false;
  q.next_retry_tsc = now + c.ticket_retry_tsc;
  // Hysteresis: parked packets go back only once the owner's ring is at or
  // below its low watermark, so that a ring hovering at the high mark does
  // not flip the queue between parked and polled on every iteration.
  const unsigned released = q.ticket.release([&](std::uint16_t owner, rte_mbuf** pkts, unsigned n) {
    MbufRing& ring = *c.out_rings[owner];
    // The cached view first: the consumer's line is read only when that view
    // is above the low watermark.
    const std::size_t occupancy = ring.producer_occupancy(c.low_watermark + 1);
    if (occupancy > c.low_watermark) return 0u;
    const unsigned took = ring.enqueue_burst(pkts, std::min(n, handoff_budget(c, ring, occupancy)));
    c.out_ring_stats[owner]->occupancy_high_water.max_with(occupancy + took);
    if (took != 0 && c.out_doorbells[owner] != nullptr) c.out_doorbells[owner]->ring();
    return took;
  });
  if (released != 0) {
    q.ticket.restart_clock(now);
    q.stats.enqueued.add(released);
    work += released;
  }
  if (q.ticket.held()) {
    if (now - q.ticket.issued_tsc() <= c.park_timeout_tsc) {
      if (released != 0) update_parked_owners(c);
      return false;
    }
    const unsigned n = q.ticket.discard([](rte_mbuf* m, std::uint16_t) { rte_pktmbuf_free(m); });
    count_drop(q.stats.drops, DropReason::kParkTimeout, n);
    work += n;
  }
  q.stats.parked_cycles.add(now - q.parked_since);
  q.stats.parked_now.set(0);
  update_parked_owners(c);
  return true;
}

// One owner's packets of a burst: the connection stage here if this lcore
// owns them (with their SteerMetas from the classifier's array, and their
// DCID hashes when the classifier computed them), else a hand-off to the
// owner's ring.
inline void deliver(LcoreContext& c, RxQueueContext& q, std::uint16_t o, rte_mbuf** group, const SteerMeta* metas,
                    const std::uint32_t* hashes, unsigned k, std::uint64_t now) {
  if (int(o) == c.owner_index) {
    q.stats.steered_self.add(k);
    run_connection_stage(c, group, metas, hashes, k, now);
  } else {
    q.stats.steered_other.add(k);
    hand_off(c, q, o, group, k, now);
  }
}

unsigned service_rx_queue(LcoreContext& c, RxQueueContext& q, std::uint64_t now, bool poll) {
  unsigned work = 0;
  if (!retry_ticket(c, q, now, work) || !poll) return work;

  rte_mbuf* pkts[kMaxBurst];
  const std::uint16_t received = rte_eth_rx_burst(q.port_id, q.queue, pkts, std::uint16_t(c.burst));
  if (received == 0) return work;
  tsan_acquire_burst(pkts, received);
  q.stats.rx.add(received);
  work += received;
  const unsigned n = q.exception || q.own_source != 0 ? filter_macs(q, pkts, received) : received;
  if (n == 0) return work;
  // reflect sends a packet back out of m->port, which not every PMD sets
  // (net_ring leaves it invalid: an index past the TX stages).
  // So does an ICMP reply to a frame too big to encapsulate.
  if (c.action == OwnerAction::kReflect || c.icmp_replies.load(std::memory_order_relaxed))
    for (unsigned i = 0; i < n; ++i) pkts[i]->port = q.port_id;

  std::uint16_t owner[kMaxBurst];
  RxClass cls[kMaxBurst];
  SteerMeta meta[kMaxBurst];
  RouteCounts routes;
  routes.learn.log = learned_log_for(c);
  // An owner asks for its connection-table slots as soon as the burst is
  // parsed (SlotPrefetch), while this queue's bursts are mostly its own: the
  // owner of a packet is known only once it is classified, and the slot
  // asked for another owner's packet would be a line of this owner's table
  // loaded for nothing.
  std::uint32_t* const hash = c.slot_hashes;
  const bool early = c.owner_index >= 0 && q.mostly_own;
  const SlotPrefetch slots{c.shard.cids, c.shard.seed, hash};
  const bool one_owner = c.live_classifier->load(std::memory_order_acquire)
                             ->classify(pkts, n, owner, cls, meta, c.owner_index < 0 ? kNoOwner : std::uint16_t(c.owner_index),
                                       std::uint32_t(now / c.tsc_per_ms), routes, early ? &slots : nullptr);
  const std::uint32_t* own_hash = early ? hash : nullptr;
  count_routes(q.stats, routes);
  share_learned(c);
  const unsigned malformed = routes.by_class[unsigned(RxClass::kMalformed)];
  const unsigned not_udp = routes.by_class[unsigned(RxClass::kNotUdp)];
  const unsigned not_quic = routes.by_class[unsigned(RxClass::kNotQuic)];
  const unsigned not_service = routes.by_class[unsigned(RxClass::kNotService)];
  const unsigned host = routes.by_class[unsigned(RxClass::kHost)];
  const unsigned kept = n - malformed - not_udp - not_service - host;
  if (malformed) count_drop(q.stats.drops, DropReason::kMalformed, malformed);
  if (not_udp) count_drop(q.stats.drops, DropReason::kNotUdp, not_udp);
  if (not_service) count_drop(q.stats.drops, DropReason::kNotService, not_service);
  if (not_quic) q.stats.not_quic.add(not_quic);

  // A burst whose packets all go to one owner, none dropped, is that owner's
  // group as it stands: where the NIC already delivers connections to their
  // owners' queues (a flow rule on the CID's server id), nearly every burst
  // is one.
  // An owner index is checked before anything is indexed by it: the
  // classifier names one of this data path's owners for every packet it
  // keeps, and a packet without one is dropped, counted as no_owner.
  const unsigned owners = unsigned(c.out_rings.size());
  if (kept == n && one_owner && owner[0] < owners) {
    q.mostly_own = int(owner[0]) == c.owner_index;
    deliver(c, q, owner[0], pkts, meta, own_hash, n, now);
    return work;
  }

  // Stable counting sort by owner: each owner's packets stay in arrival order.
  unsigned count[kMaxOwners + 1] = {};
  unsigned unowned = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (cls[i] >= RxClass::kNotUdp || owner[i] >= owners) [[unlikely]] {
      unowned += cls[i] < RxClass::kNotUdp;
      owner[i] = kNoOwner;
      if (cls[i] == RxClass::kHost) {
        to_kernel(c, q, pkts[i], now);
      } else {
        rte_pktmbuf_free(pkts[i]);
      }
      continue;
    }
    ++count[owner[i] + 1];
  }
  if (unowned != 0) [[unlikely]]
    count_drop(q.stats.drops, DropReason::kNoOwner, unowned);
  if (kept == unowned) return work;

  unsigned start[kMaxOwners + 1];
  start[0] = 0;
  for (unsigned o = 0; o < owners; ++o) start[o + 1] = start[o] + count[o + 1];
  rte_mbuf* sorted[kMaxBurst];
  unsigned fill[kMaxOwners];
  std::copy(start, start + owners, fill);
  for (unsigned i = 0; i < n; ++i)
    if (owner[i] != kNoOwner) sorted[fill[owner[i]]++] = pkts[i];
  // This lcore's own group, in the same (arrival) order: its SteerMetas.
  // With their hashes, when the classifier computed them.
  // The hashes are moved down in place (j <= i); the entries of packets
  // that are not QUIC were not written, and are not read
  // (run_connection_burst).
  SteerMeta own_meta[kMaxBurst];
  const unsigned own = c.owner_index >= 0 ? count[c.owner_index + 1] : 0;
  if (own != 0) {
    unsigned j = 0;
    for (unsigned i = 0; i < n; ++i)
      if (int(owner[i]) == c.owner_index) {
        own_meta[j] = meta[i];
        if (early) hash[j] = hash[i];
        ++j;
      }
  }
  q.mostly_own = 2 * own >= n;

  for (unsigned o = 0; o < owners; ++o)
    if (count[o + 1] != 0) deliver(c, q, std::uint16_t(o), sorted + start[o], own_meta, own_hash, count[o + 1], now);
  return work;
}

// The doorbell protocol (rings/doorbell.h): announce, re-check, then sleep.
// The re-check covers the run state too: Dataplane::stop changes it and
// then rings, so a stop is never left waiting for the sleep limit.
void sleep_on_doorbell(LcoreContext& c, RunState seen) {
  c.doorbell->prepare_sleep();
  if (c.state->load(std::memory_order_relaxed) != seen) {
    c.doorbell->cancel_sleep();
    return;
  }
  for (const MbufRing* ring : c.in_rings) {
    if (!ring->empty()) {
      c.doorbell->cancel_sleep();
      return;
    }
  }
  switch (c.doorbell->sleep(c.doorbell_sleep_limit)) {
    case Doorbell::Wake::kRung: c.loop_stats.doorbell_wakes.add(); break;
    case Doorbell::Wake::kTimedOut: c.loop_stats.doorbell_timeouts.add(); break;
    case Doorbell::Wake::kShutdown: break;
  }
}

bool all_queues_parked(const LcoreContext& c) {
  for (const auto& q : c.rx)
    if (!q->ticket.held()) return false;
  return !c.rx.empty();
}

}  // namespace

int lcore_main(void* arg) {
  LcoreContext& c = *static_cast<LcoreContext*>(arg);
  const bool owner = c.owner_index >= 0;
  std::uint64_t last_tick = rte_rdtsc();
  std::uint64_t prev_now = last_tick;
  bool prev_busy = false;
  unsigned idle = 0;           // empty iterations in a row
  std::uint64_t idle_since = 0;
  bool napped_idle = false;    // slept, and found nothing to do since waking
  RunState state;
  rte_rcu_qsbr_thread_online(c.rcu, c.rcu_thread);
  while ((state = c.state->load(std::memory_order_relaxed)) != RunState::kStop) {
    // No classifier is held between iterations: a reload waiting to free the
    // one it replaced may go ahead as far as this lcore is concerned.
    rte_rcu_qsbr_quiescent(c.rcu, c.rcu_thread);
    const std::uint64_t now = rte_rdtsc();
    // The previous iteration's length, charged if it did work: no extra rdtsc.
    if (prev_busy) c.loop_stats.busy_cycles.add(now - prev_now);
    prev_now = now;
    unsigned work = 0;
    if (owner) {
      if (c.tx_held) work += retry_held_tx(c, now);
      work += dequeue_inbound(c, now);
    }
    // An owner held by its TX queue polls no RX queue either: its own share
    // of a burst would have nowhere to go. Tickets are still retried.
    for (auto& q : c.rx)
      work += service_rx_queue(c, *q, now, state == RunState::kRun && (!owner || tx_has_room(c, now)));
    // This iteration polled no RX queue: everything taken before is now
    // where the main lcore can see it.
    if (state == RunState::kQuiesce && !c.quiesce_acknowledged.load(std::memory_order_relaxed))
      c.quiesce_acknowledged.store(true, std::memory_order_release);

    if (now - last_tick > c.tx_flush_tsc) {
      const std::uint64_t since_tick = now - last_tick;
      last_tick = now;
      // Once per tick, not per packet: the control loop judges health by it.
      c.loop_stats.heartbeats.add();
      if (owner) {
        flush_tx(c, now);
        // Housekeeping off the per-packet path: a paced slice of the shard.
        const unsigned slots = c.sweep->due(since_tick);
        c.cids->expire(now, c.idle_timeout_tsc, slots);
        const unsigned expired = c.connections->expire(now, c.idle_timeout_tsc, slots);
        if (expired) c.owner_stats.connections_expired.add(expired);
        c.owner_stats.connections_live.set(c.connections->size());
        c.owner_stats.cids_live.set(c.cids->size());
      }
      if (c.forwarding_sweeper != nullptr) {
        const unsigned expired = c.forwarding_sweeper->expire(std::uint32_t(now / c.tsc_per_ms),
                                                              c.forwarding_sweep->due(since_tick));
        if (expired) c.forwarding_expired.add(expired);
        // A reload removed backends: their entries go in a pass of their
        // own, a bounded slice per tick, so that their slots are free again
        // within milliseconds rather than an idle timeout.
        if (c.forwarding_sweeper->retirement_pending()) {
          const unsigned retired = c.forwarding_sweeper->sweep_retired(kRetireBucketsPerTick);
          if (retired) c.forwarding_retired.add(retired);
        }
      }
    }

    prev_busy = work != 0;
    if (work != 0) {
      idle = 0;
      napped_idle = false;
      continue;
    }
    if (idle++ == 0) {
      idle_since = now;
      // Nothing arrived: a partial TX burst leaves now, not at the next tick.
      if (owner) flush_tx(c, now);
    }
    // Waking a doorbell sleeper costs the producer a syscall, so an owner
    // sleeps on it only once it has been idle for doorbell_spin_us (by
    // default as long as one nap): short gaps between bursts are spun through. A receiver whose every queue is
    // parked has nothing to poll until its owners empty their rings to the low watermark,
    // which takes far longer than a nap: it naps at once. So does an lcore that
    // woke from a nap (or a doorbell timeout) to nothing: spinning pays only
    // in the gaps of a burst, and between naps it would take the CPU, on the
    // machines that nap at all, from the processes the traffic is for.
    const bool nap = c.idle_sleep_us != 0 &&
                     (napped_idle ||
                      (idle >= c.idle_polls_before_sleep &&
                       (c.doorbell == nullptr || now - idle_since >= c.doorbell_spin_tsc)) ||
                      (!owner && all_queues_parked(c)));
    if (!nap) {
      rte_pause();
      continue;
    }
    idle = 0;
    napped_idle = true;
    if (owner) flush_tx(c, now);
    c.loop_stats.idle_sleeps.add();
    // An owner held by its TX queue has work in its rings: the doorbell would
    // not let it sleep, so it naps for the TX queue's consumer instead.
    // Offline while asleep, so that a reload does not wait for the nap.
    rte_rcu_qsbr_thread_offline(c.rcu, c.rcu_thread);
    if (c.doorbell != nullptr && !c.tx_held) {
      sleep_on_doorbell(c, state);
    } else {
      rte_delay_us_sleep(c.idle_sleep_us);
    }
    rte_rcu_qsbr_thread_online(c.rcu, c.rcu_thread);
  }
  rte_rcu_qsbr_thread_offline(c.rcu, c.rcu_thread);
  return 0;
}

void discard_after_stop(LcoreContext& c) {
  for (auto& q : c.rx) {
    const unsigned n = q->ticket.discard([](rte_mbuf* m, std::uint16_t) { rte_pktmbuf_free(m); });
    count_drop(q->stats.drops, DropReason::kShutdown, n);
    q->stats.parked_now.set(0);
  }
  c.parked_owners = 0;
  if (c.owner_index < 0) return;
  const std::uint64_t now = rte_rdtsc();
  flush_tx(c, now);
  for (const auto& t : c.tx) {
    const unsigned n = t->stage.discard([](rte_mbuf* m) { rte_pktmbuf_free(m); });
    count_drop(c.owner_stats.drops, DropReason::kShutdown, n);
    c.owner_stats.processed.sub(n);
  }
  if (c.tx_held) c.owner_stats.tx_held_cycles.add(now - c.tx_held_since);
  c.tx_held = false;
  c.owner_stats.tx_held_now.set(0);
  rte_mbuf* pkts[kMaxBurst];
  for (MbufRing* ring : c.in_rings) {
    while (unsigned n = ring->dequeue_burst(pkts, kMaxBurst)) {
      rte_pktmbuf_free_bulk(pkts, n);
      count_drop(c.owner_stats.drops, DropReason::kShutdown, n);
    }
  }
}

}  // namespace qs
