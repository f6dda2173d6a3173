// A consistent-enough copy of every counter, taken on the main lcore while
// the data path runs (or after it stopped). The live table, the JSON summary
// and the tests read snapshots, never the lcores' counters directly. What
// each counter is, and where it sits here, is listed once in counter_fields.h.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/fastpath/drop_reason.h"
#include "steering/owner_resolver.h"  // kResolveMethods

namespace qs {

using DropArray = std::array<std::uint64_t, kDropReasonCount>;

struct ReceiveTotals {
  std::uint64_t rx = 0, steered_self = 0, steered_other = 0, enqueued = 0, not_quic = 0, to_kernel = 0;
  std::uint64_t parks = 0, parked_packets = 0, parked_us = 0;
  std::array<std::uint64_t, kResolveMethods> routed{};  // by ResolveMethod
  std::uint64_t learned = 0, setups = 0, setup_evicted = 0, table_full = 0, over_budget = 0, lost_races = 0,
                retired_hits = 0, source_over_budget = 0, undersized_initials = 0;
  DropArray drops{};
  void add(const ReceiveTotals& o);
};

struct OwnerTotals {
  std::uint64_t dequeued = 0, processed = 0, connections = 0, connections_live = 0,
                connections_expired = 0, connections_untracked = 0, connections_untracked_long_dcid = 0,
                migrations = 0, tx = 0, sunk = 0, cids = 0, cids_live = 0;
  std::uint64_t tx_holds = 0, tx_held_us = 0, tx_held_now = 0;  // TX back-pressure
  DropArray drops{};
  void add(const OwnerTotals& o);
};

struct QueueSnapshot {
  std::string port;
  std::uint16_t queue = 0;
  unsigned lcore = 0;
  std::uint64_t parked_now = 0;  // 1 while a parking ticket holds the queue
  ReceiveTotals rx;
};

struct LcoreSnapshot {
  unsigned lcore = 0;
  int owner_index = -1;
  std::uint64_t busy_cycles = 0;  // TSC cycles of iterations that moved packets
  std::uint64_t idle_sleeps = 0;
  std::uint64_t doorbell_wakes = 0;
  ReceiveTotals rx;   // sum over its queues
  OwnerTotals owner;  // zero unless an owner
};

struct RingSnapshot {
  unsigned from_lcore = 0, to_lcore = 0;
  std::uint64_t capacity = 0, occupancy = 0, high_water = 0, full_events = 0;
};

struct PortSnapshot {
  std::string name;
  std::uint16_t port_id = 0;
  std::uint64_t ipackets = 0, opackets = 0, ibytes = 0, obytes = 0, imissed = 0, ierrors = 0,
                oerrors = 0, rx_nombuf = 0;  // totals across the device's counter resets
  std::uint64_t counter_resets = 0;  // times the device zeroed its counters (net_memif: peer reconnects)
  bool link_up = false;  // the device's link status when the snapshot was taken
  std::vector<std::pair<std::string, std::uint64_t>> pause_xstats;  // where the driver has them
};

// The forwarding tables, shared by the receivers.
struct ForwardingSnapshot {
  bool enabled = false;
  std::uint64_t entries = 0, slots = 0;              // established table
  std::uint64_t setup_entries = 0, setup_slots = 0;  // setup table
  std::uint64_t expired = 0;                         // idle entries removed, both tables
  // Entries removed because a reload removed the backend they named, and
  // the backend slots whose entries are still being swept (a slot is given
  // to a new backend only once its sweep is done).
  std::uint64_t retired = 0, retiring_slots = 0;
};

// The exception path of one port with a TAP, one class
// (steering/exception_class.h): its receivers' counters added up, and the
// exception thread's.
struct ExceptionSnapshot {
  std::string port;
  std::string cls;  // "arp", "nd", "bgp", "bfd", "link", "icmp", "other"
  std::uint64_t to_kernel = 0, policed = 0, ring_full = 0, tap_refused = 0, from_kernel = 0, port_refused = 0;
};

// Peer sync (dataplane/runtime/peer_sync.h): the sync thread's counters and
// the receivers' ring drops. Refusals by peer_sync::Refusal.
struct PeerSyncSnapshot {
  std::uint64_t ready = 0;  // gauge: 1 once a peer's copy is in (or none came in time)
  std::uint64_t messages_sent = 0, messages_received = 0, entries_sent = 0, entries_received = 0;
  std::uint64_t entries_added = 0, entries_refreshed = 0, entries_expired = 0, table_full = 0;
  std::uint64_t ring_full = 0, send_over_rate = 0, send_errors = 0;
  std::uint64_t resyncs_served = 0, resyncs_completed = 0, resync_timeouts = 0, resync_entries_lost = 0;
  std::uint64_t refused_malformed = 0, refused_bad_mac = 0, refused_replayed = 0, refused_stale = 0,
                refused_unknown_peer = 0, refused_table_mismatch = 0, refused_unknown_backend = 0,
                refused_over_share = 0, refused_rate_limited = 0;
};

// One backend of the fleet: its owners' counters added up (by slot).
struct BackendSnapshot {
  std::string name;
  std::uint16_t slot = 0;
  std::string state;  // active | draining | down
  unsigned owner_lcore = 0;
  std::uint64_t weight = 0;
  std::uint64_t packets = 0, bytes = 0, connections = 0, backend_down = 0, too_big = 0, icmp_sent = 0;
  // Health checks (dataplane/runtime/health_checks.h): "up", "down",
  // "unchecked", or "off" without them; the probe rounds' counts and the
  // last answered round's round-trip time.
  std::string health = "off";
  std::uint64_t probe_rounds_sent = 0, probe_rounds_answered = 0, probe_rounds_failed = 0, probe_rtt_us = 0;
};

// Health checks, in total: one with health_checks, none without.
struct HealthChecksSnapshot {
  std::uint64_t backends_up = 0, backends_down = 0, backends_unchecked = 0;  // gauges
  std::uint64_t probes_sent = 0;        // probe packets handed to the port
  std::uint64_t probes_unsent = 0;      // no mbuf, no source address, or the ring to the port full
  std::uint64_t probes_refused = 0;     // the port's TX queue did not take them
  std::uint64_t rounds_deferred = 0;    // rounds due with the budget (probes_per_s) spent: sent late
  std::uint64_t answers_received = 0;   // Version Negotiations to the probe port, from the receivers
  std::uint64_t answers_matched = 0;    // of those, echoes of a probe out from where it went
  std::uint64_t answers_unmatched = 0;  // the others: forged, misrouted or late
  std::uint64_t hash_rebuilds = 0;      // backend hashes rebuilt for a change of health
};

struct StatsSnapshot {
  double elapsed_s = 0;
  std::vector<QueueSnapshot> queues;
  std::vector<LcoreSnapshot> lcores;
  std::vector<RingSnapshot> rings;
  std::vector<PortSnapshot> ports;
  ForwardingSnapshot forwarding;
  std::vector<BackendSnapshot> backends;  // in profile order; empty without backends
  std::vector<ExceptionSnapshot> exception;  // per port with a TAP, per class; empty without
  std::vector<PeerSyncSnapshot> peer_sync;   // one with peer_sync, none without
  std::vector<HealthChecksSnapshot> health_checks;  // one with health_checks, none without
  // Whether the profile lists services (only their traffic is steered).
  bool services = false;
  ReceiveTotals rx_total;
  OwnerTotals owner_total;
  DropArray drops_total{};  // receive-side and owner-side together
  std::uint64_t busy_cycles_total = 0;
  std::uint64_t tsc_hz = 0;
  std::uint64_t steering_generation = 1;  // which steering configuration is live (1 + applied reloads)
  // Set by the control loop from SIGTERM on while a drain's grace runs
  // (drain.grace_s): the data path still forwards, but health says no.
  bool draining = false;
  // Filled in after the ports closed (Dataplane::mbufs_held_by_devices).
  std::uint64_t mbufs_held_by_devices = 0;
  // Taken by a driver at set-up and never given back (Dataplane::mbufs_kept_by_drivers).
  std::uint64_t mbufs_kept_by_drivers = 0;
  std::uint64_t drops_sum() const;
};

// A packet rate for a person: "6.652 Mpps", "4.372 kpps" or "512 pps",
// whichever keeps digits that are not all zero.
std::string format_rate(double packets_per_second);

// One table of rates since `prev` (per lcore and per port), for the live view.
void print_stats_table(std::FILE* out, const StatsSnapshot& now, const StatsSnapshot& prev);
// The end-of-run summary for a person.
void print_summary(std::FILE* out, const StatsSnapshot& s, std::int64_t mbufs_leaked);
// Every counter, per lcore, per queue, per ring, per port and in total, plus
// the leak check; the schema is in the README.
std::string stats_json(const StatsSnapshot& s, const std::string& profile_path, std::int64_t mbufs_leaked,
                       std::uint64_t mbufs_total);

}  // namespace qs
