// Per-lcore and per-RX-queue counters. Each block is written by one lcore
// only and sits on its own cache lines; the reporter on the main lcore sums
// them off the data path.
#pragma once

#include <array>
#include <cstdint>

#include "dataplane/fastpath/counter.h"
#include "dataplane/fastpath/drop_reason.h"
#include "rings/cache_line.h"
#include "steering/owner_resolver.h"  // kResolveMethods

namespace qs {

using DropCounters = std::array<Counter, kDropReasonCount>;

// The receiving side, one per polled RX queue.
struct alignas(kCacheLine) RxQueueStats {
  Counter rx;             // packets taken from the queue
  Counter steered_self;   // handled by this lcore's own connection stage
  Counter steered_other;  // bound for another owner
  Counter enqueued;       // handed over on a ring (directly or from the ticket)
  Counter not_quic;       // UDP that is not QUIC (steered by 4-tuple hash)
  Counter to_kernel;      // for the appliance's own host: on a ring to the exception path (exception_path.h)
  Counter parks;          // tickets issued: times the queue stopped being polled
  Counter parked_packets; // packets that went into a ticket
  Counter parked_cycles;  // TSC cycles the queue spent unpolled behind a ticket
  Counter parked_now;     // gauge: 1 while a ticket is held (the reporter reads this, not the ticket)
  std::array<Counter, kResolveMethods> routed;  // packets kept, by the rule that routed them (ResolveMethod)
  Counter learned;        // entries this queue's packets added to the forwarding table
  Counter setups;         // (4-tuple, SCID) entries added for first Initials
  Counter setup_evicted;  // of which replaced an older entry (the setup table is full)
  Counter table_full;     // entries the full forwarding table refused (those packets were hashed)
  Counter over_budget;    // DCIDs not learned: their connection had taught its share
  Counter lost_races;     // entries not written: other lcores changed the buckets meanwhile
  Counter retired_hits;   // entries found naming a backend a reload removed (read as misses)
  Counter source_over_budget;   // entries not learned: their source had taught its share
  Counter undersized_initials;  // first Initials under 1,200 octets of UDP payload: no setup entry
  DropCounters drops;
};

// The owning side, one per lcore that owns connections.
struct alignas(kCacheLine) OwnerStats {
  Counter dequeued;             // taken from inbound rings
  Counter processed;            // went through the connection stage (ring or self), less what TX then refused (tx_full)
  Counter connections;          // connections seen: CIDs the owner could tie together count once (connection_stage.h)
  Counter connections_live;     // gauge: connection entries in the shard now
  Counter connections_expired;  // idle connections removed
  Counter cids;                 // CIDs seen (a connection has one per DCID it used)
  Counter cids_live;            // gauge: CID entries in the shard now
  Counter connections_untracked;// packets whose connection found the shard full
  Counter connections_untracked_long_dcid;  // packets whose DCID is longer than a table key (20 octets: not v1/v2)
  Counter migrations;           // a known connection arrived from a new 4-tuple, whichever its CID
  Counter tx;                   // packets the TX queue accepted
  Counter tx_holds;             // times a full TX queue made this owner stop taking work
  Counter tx_held_cycles;       // TSC cycles spent so
  Counter tx_held_now;          // gauge: packets waiting in this owner's TX stages
  Counter sunk;                 // packets consumed by the sink action
  DropCounters drops;
};

// One owner's counters for one backend (by slot), kept by that owner alone.
// A backend is served by one owner, but a reload may move it, so each
// owner has a row for every slot and a backend's figures are the sum.
struct BackendCounters {
  Counter packets;       // delivered towards the backend (handed to the TX stage)
  Counter bytes;         // their frame bytes as received (before any encapsulation)
  Counter connections;   // new connections the owner saw for it
  Counter backend_down;  // dropped: the backend was down or gone
  Counter too_big;       // dropped: did not fit the TX port's MTU once encapsulated
  Counter icmp_sent;     // ICMP too-big / packet-too-big sent back for it
};

// The loop itself, one per lcore: where its cycles went.
struct alignas(kCacheLine) LoopStats {
  Counter busy_cycles;  // TSC cycles of iterations that moved at least one packet
  Counter idle_sleeps;  // times the idle back-off slept
  Counter doorbell_wakes;  // sleeps a producer's doorbell ended early
  Counter doorbell_timeouts;  // doorbell sleeps that ran to LcoreContext::doorbell_sleep_limit
  Counter heartbeats;  // housekeeping ticks: the loop is iterating (health_monitor.h), whatever the traffic
};

// One per producer->owner ring: the producer records the deepest occupancy it
// saw, from its cached view of the consumer's index (the view the enqueue
// works from: it may exceed the true peak by what the consumer took since the
// producer last read that index, never the ring's capacity).
struct alignas(kCacheLine) RingStats {
  Counter occupancy_high_water;
  Counter full_events;  // hand-offs that found the ring at its high watermark
};

}  // namespace qs
