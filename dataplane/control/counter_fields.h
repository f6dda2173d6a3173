// Every counter quicsteer reports, written once per scope: its name (the
// key in the JSON and in telemetry, the word in the summary), its Prometheus
// family, what it counts, whether it only grows (counter) or goes up and
// down (gauge), its unit, where its value lives in the snapshot and, for
// those the lcores keep in Counters, where it lives there. The snapshot
// (Dataplane::snapshot), the summary, the JSON, telemetry, Prometheus, the
// live table and `quicsteer --list-counters` all read these tables; none
// keeps a list of its own. Drop reasons (drop_reason.h) and routing rules
// (ResolveMethod) are lists of their own, shown wherever receive counters are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/control/stats_snapshot.h"
#include "dataplane/fastpath/lcore_stats.h"

namespace qs {

enum class CounterKind : std::uint8_t { kCounter, kGauge };
// kMicroseconds: kept by the lcores as TSC cycles, converted by the
// snapshot; Prometheus shows it in seconds (its base unit).
enum class CounterUnit : std::uint8_t { kCount, kPackets, kBytes, kCycles, kMicroseconds };

// For the scopes whose values the lcores do not keep as Counters.
struct NoCounterSource {};

template <typename Snapshot, typename Source = NoCounterSource>
struct CounterField {
  const char* name;
  // The Prometheus family, without the "quicsteer_" prefix; counters end in
  // _total. Fields that share a family stand next to each other in the
  // table and differ by `label` (key="value"; "" when the family has one).
  const char* metric;
  const char* label;
  CounterKind kind;
  CounterUnit unit;
  const char* help;
  std::uint64_t Snapshot::*value;
  Counter Source::*source = nullptr;  // where the lcore keeps it (nullptr: filled otherwise)
};

// Receive counters: per RX queue, summed per lcore and in total.
using ReceiveField = CounterField<ReceiveTotals, RxQueueStats>;
inline constexpr ReceiveField kReceiveFields[] = {
    {"rx", "rx_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets, "Packets received from an RX queue.",
     &ReceiveTotals::rx, &RxQueueStats::rx},
    {"steered_self", "steered_packets_total", "to=\"self\"", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets steered from an RX queue: to the receiving lcore itself or handed over on a ring.",
     &ReceiveTotals::steered_self, &RxQueueStats::steered_self},
    {"steered_other", "steered_packets_total", "to=\"other\"", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets steered from an RX queue: to the receiving lcore itself or handed over on a ring.",
     &ReceiveTotals::steered_other, &RxQueueStats::steered_other},
    {"enqueued", "enqueued_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets handed over on receiver->owner rings.", &ReceiveTotals::enqueued, &RxQueueStats::enqueued},
    {"not_quic", "not_quic_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets that were not QUIC (steered by their 4-tuple).", &ReceiveTotals::not_quic, &RxQueueStats::not_quic},
    {"to_kernel", "to_kernel_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets for the appliance's own host, handed to the exception path (its TAP).", &ReceiveTotals::to_kernel,
     &RxQueueStats::to_kernel},
    {"parks", "parks_total", "", CounterKind::kCounter, CounterUnit::kCount, "Times an RX queue was parked (back-pressure).",
     &ReceiveTotals::parks, &RxQueueStats::parks},
    {"parked_packets", "parked_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets held in an RX queue's parking ticket.", &ReceiveTotals::parked_packets, &RxQueueStats::parked_packets},
    {"parked_us", "parked_seconds_total", "", CounterKind::kCounter, CounterUnit::kMicroseconds,
     "Time an RX queue spent parked (not polled, behind a parking ticket).", &ReceiveTotals::parked_us,
     &RxQueueStats::parked_cycles},
    {"learned", "forwarding_learned_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Entries an RX queue's packets added to the forwarding table.", &ReceiveTotals::learned, &RxQueueStats::learned},
    {"setups", "forwarding_setups_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Connection set-ups (first Initials) recorded in the setup table.", &ReceiveTotals::setups, &RxQueueStats::setups},
    {"setup_evicted", "forwarding_setup_evicted_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Setup entries replaced by newer ones (the setup table was full).", &ReceiveTotals::setup_evicted,
     &RxQueueStats::setup_evicted},
    {"table_full", "forwarding_table_full_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Entries the full forwarding table refused (those packets were routed by the hash).", &ReceiveTotals::table_full,
     &RxQueueStats::table_full},
    {"over_budget", "forwarding_over_budget_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "DCIDs not learned because their connection had already taught the table its share.",
     &ReceiveTotals::over_budget, &RxQueueStats::over_budget},
    {"lost_races", "forwarding_lost_races_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Forwarding-table entries not written because other lcores changed their buckets meanwhile.",
     &ReceiveTotals::lost_races, &RxQueueStats::lost_races},
    {"retired_hits", "forwarding_retired_hits_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Forwarding-table lookups that found an entry of a backend a reload removed (routed on as misses).",
     &ReceiveTotals::retired_hits, &RxQueueStats::retired_hits},
    {"source_over_budget", "forwarding_source_over_budget_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Entries not learned because their source (an IPv4 address, an IPv6 /64) had taught its share "
     "(steering.forwarding.max_entries_per_source).",
     &ReceiveTotals::source_over_budget, &RxQueueStats::source_over_budget},
    {"undersized_initials", "forwarding_undersized_initials_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "First Initials in datagrams of less than 1200 octets of UDP payload: no setup entry (RFC 9000 14.1).",
     &ReceiveTotals::undersized_initials, &RxQueueStats::undersized_initials},
};

// Per RX queue only.
using QueueField = CounterField<QueueSnapshot, RxQueueStats>;
inline constexpr QueueField kQueueFields[] = {
    {"parked_now", "queue_parked", "", CounterKind::kGauge, CounterUnit::kCount, "1 while the RX queue is parked.",
     &QueueSnapshot::parked_now, &RxQueueStats::parked_now},
};

// Owner counters: per owner lcore and in total.
using OwnerField = CounterField<OwnerTotals, OwnerStats>;
inline constexpr OwnerField kOwnerFields[] = {
    {"dequeued", "owner_dequeued_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets an owner took from its inbound rings.", &OwnerTotals::dequeued, &OwnerStats::dequeued},
    {"processed", "owner_processed_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets an owner's connection stage processed.", &OwnerTotals::processed, &OwnerStats::processed},
    {"connections", "connections_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Connections an owner started tracking (the CIDs it could tie together count once).", &OwnerTotals::connections,
     &OwnerStats::connections},
    {"connections_live", "connections_live", "", CounterKind::kGauge, CounterUnit::kCount, "Connections in an owner's table.",
     &OwnerTotals::connections_live, &OwnerStats::connections_live},
    {"connections_expired", "connections_expired_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Connections an owner expired after idle_timeout_ms.", &OwnerTotals::connections_expired,
     &OwnerStats::connections_expired},
    {"cids", "cids_total", "", CounterKind::kCounter, CounterUnit::kCount, "CIDs an owner started tracking.", &OwnerTotals::cids,
     &OwnerStats::cids},
    {"cids_live", "cids_live", "", CounterKind::kGauge, CounterUnit::kCount, "CIDs in an owner's table.", &OwnerTotals::cids_live,
     &OwnerStats::cids_live},
    {"connections_untracked", "connections_untracked_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets whose connection an owner could not track: its table shard was full.",
     &OwnerTotals::connections_untracked, &OwnerStats::connections_untracked},
    {"connections_untracked_long_dcid", "connections_untracked_long_dcid_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets an owner could not track: their DCID is longer than a table key (20 octets).",
     &OwnerTotals::connections_untracked_long_dcid, &OwnerStats::connections_untracked_long_dcid},
    {"migrations", "migrations_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Times a known connection arrived from a new 4-tuple, whichever its CID (migrations, NAT rebinding).",
     &OwnerTotals::migrations, &OwnerStats::migrations},
    {"tx", "owner_tx_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets, "Packets an owner transmitted.",
     &OwnerTotals::tx, &OwnerStats::tx},
    {"tx_holds", "tx_holds_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Times an owner was held by a TX queue that took nothing more.", &OwnerTotals::tx_holds, &OwnerStats::tx_holds},
    {"tx_held_us", "tx_held_seconds_total", "", CounterKind::kCounter, CounterUnit::kMicroseconds,
     "Time an owner spent held by a TX queue that took nothing more.", &OwnerTotals::tx_held_us,
     &OwnerStats::tx_held_cycles},
    {"tx_held_now", "tx_held_packets", "", CounterKind::kGauge, CounterUnit::kPackets, "Packets waiting in an owner's TX stages.",
     &OwnerTotals::tx_held_now, &OwnerStats::tx_held_now},
    {"sunk", "owner_sunk_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets an owner counted and freed (action sink).", &OwnerTotals::sunk, &OwnerStats::sunk},
};

// Each lcore's loop.
using LcoreField = CounterField<LcoreSnapshot, LoopStats>;
inline constexpr LcoreField kLcoreFields[] = {
    {"busy_cycles", "lcore_busy_cycles_total", "", CounterKind::kCounter, CounterUnit::kCycles,
     "TSC cycles of loop iterations that moved packets.", &LcoreSnapshot::busy_cycles, &LoopStats::busy_cycles},
    {"idle_sleeps", "lcore_idle_sleeps_total", "", CounterKind::kCounter, CounterUnit::kCount, "Idle naps of an lcore's loop.",
     &LcoreSnapshot::idle_sleeps, &LoopStats::idle_sleeps},
    {"doorbell_wakes", "lcore_doorbell_wakes_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Idle naps a producer's doorbell ended early.", &LcoreSnapshot::doorbell_wakes, &LoopStats::doorbell_wakes},
};

// Each receiver->owner ring.
using RingField = CounterField<RingSnapshot>;
inline constexpr RingField kRingFields[] = {
    {"capacity", "ring_capacity", "", CounterKind::kGauge, CounterUnit::kPackets, "Slots of a receiver->owner ring.",
     &RingSnapshot::capacity},
    {"occupancy", "ring_occupancy", "", CounterKind::kGauge, CounterUnit::kPackets, "Packets in a receiver->owner ring.",
     &RingSnapshot::occupancy},
    {"high_water", "ring_high_water", "", CounterKind::kGauge, CounterUnit::kPackets,
     "The deepest occupancy a ring's producer saw (from its cached view of the consumer; never above the capacity).",
     &RingSnapshot::high_water},
    {"full_events", "ring_full_events_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Times a receiver->owner ring refused packets.", &RingSnapshot::full_events},
};

// Each port: the device's counters, totals across its counter resets.
using PortField = CounterField<PortSnapshot>;
inline constexpr PortField kPortFields[] = {
    {"ipackets", "port_rx_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets, "Packets the port received (ipackets).",
     &PortSnapshot::ipackets},
    {"opackets", "port_tx_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets, "Packets the port sent (opackets).",
     &PortSnapshot::opackets},
    {"ibytes", "port_rx_bytes_total", "", CounterKind::kCounter, CounterUnit::kBytes, "Bytes received (ibytes).", &PortSnapshot::ibytes},
    {"obytes", "port_tx_bytes_total", "", CounterKind::kCounter, CounterUnit::kBytes, "Bytes sent (obytes).", &PortSnapshot::obytes},
    {"imissed", "port_rx_missed_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Packets the NIC dropped for want of RX descriptors (imissed).", &PortSnapshot::imissed},
    {"ierrors", "port_rx_errors_total", "", CounterKind::kCounter, CounterUnit::kPackets, "Erroneous received packets (ierrors).",
     &PortSnapshot::ierrors},
    {"oerrors", "port_tx_errors_total", "", CounterKind::kCounter, CounterUnit::kPackets, "Failed transmissions (oerrors).",
     &PortSnapshot::oerrors},
    {"rx_nombuf", "port_rx_nombuf_total", "", CounterKind::kCounter, CounterUnit::kCount, "RX mbuf allocation failures (rx_nombuf).",
     &PortSnapshot::rx_nombuf},
    {"counter_resets", "port_counter_resets_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Times the device zeroed its own counters (the totals above carry across).", &PortSnapshot::counter_resets},
};

// The forwarding tables (when enabled).
using ForwardingField = CounterField<ForwardingSnapshot>;
inline constexpr ForwardingField kForwardingFields[] = {
    {"entries", "forwarding_entries", "table=\"established\"", CounterKind::kGauge, CounterUnit::kCount,
     "Entries in a forwarding table.", &ForwardingSnapshot::entries},
    {"setup_entries", "forwarding_entries", "table=\"setup\"", CounterKind::kGauge, CounterUnit::kCount,
     "Entries in a forwarding table.", &ForwardingSnapshot::setup_entries},
    {"slots", "forwarding_slots", "table=\"established\"", CounterKind::kGauge, CounterUnit::kCount,
     "Slots of a forwarding table.", &ForwardingSnapshot::slots},
    {"setup_slots", "forwarding_slots", "table=\"setup\"", CounterKind::kGauge, CounterUnit::kCount,
     "Slots of a forwarding table.", &ForwardingSnapshot::setup_slots},
    {"expired", "forwarding_expired_total", "", CounterKind::kCounter, CounterUnit::kCount, "Idle forwarding-table entries removed.",
     &ForwardingSnapshot::expired},
    {"retired", "forwarding_retired_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Forwarding-table entries removed because a reload removed the backend they named.",
     &ForwardingSnapshot::retired},
    {"retiring_slots", "forwarding_retiring_slots", "", CounterKind::kGauge, CounterUnit::kCount,
     "Backend slots a reload freed whose forwarding-table entries are still being swept.",
     &ForwardingSnapshot::retiring_slots},
};

// The exception path, per port with a TAP and per class.
using ExceptionField = CounterField<ExceptionSnapshot>;
inline constexpr ExceptionField kExceptionFields[] = {
    {"to_kernel", "exception_packets_total", "direction=\"to_kernel\"", CounterKind::kCounter, CounterUnit::kPackets,
     "Frames through the exception path: to the port's TAP, or from it out of the port.", &ExceptionSnapshot::to_kernel},
    {"from_kernel", "exception_packets_total", "direction=\"from_kernel\"", CounterKind::kCounter, CounterUnit::kPackets,
     "Frames through the exception path: to the port's TAP, or from it out of the port.",
     &ExceptionSnapshot::from_kernel},
    {"policed", "exception_policed_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Frames for the host dropped over their class's rate (exception_path.police).", &ExceptionSnapshot::policed},
    {"ring_full", "exception_ring_full_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Frames for the host dropped because the ring to the exception thread was full.", &ExceptionSnapshot::ring_full},
    {"tap_refused", "exception_refused_total", "by=\"tap\"", CounterKind::kCounter, CounterUnit::kPackets,
     "Frames dropped because the TAP (the kernel) or the port's TX queue did not take them.",
     &ExceptionSnapshot::tap_refused},
    {"port_refused", "exception_refused_total", "by=\"port\"", CounterKind::kCounter, CounterUnit::kPackets,
     "Frames dropped because the TAP (the kernel) or the port's TX queue did not take them.",
     &ExceptionSnapshot::port_refused},
};

// Backend health (dataplane/runtime/health_checks.h), per backend, beside
// its `health` word.
using BackendHealthField = CounterField<BackendSnapshot>;
inline constexpr const char* kProbeRoundsHelp =
    "Health probe rounds (a probe to every target) by outcome: sent, answered by every target, failed (timeout).";
inline constexpr BackendHealthField kBackendHealthFields[] = {
    {"probe_rounds_sent", "backend_probe_rounds_total", "outcome=\"sent\"", CounterKind::kCounter, CounterUnit::kCount,
     kProbeRoundsHelp, &BackendSnapshot::probe_rounds_sent},
    {"probe_rounds_answered", "backend_probe_rounds_total", "outcome=\"answered\"", CounterKind::kCounter,
     CounterUnit::kCount, kProbeRoundsHelp, &BackendSnapshot::probe_rounds_answered},
    {"probe_rounds_failed", "backend_probe_rounds_total", "outcome=\"failed\"", CounterKind::kCounter,
     CounterUnit::kCount, kProbeRoundsHelp, &BackendSnapshot::probe_rounds_failed},
    {"probe_rtt_us", "backend_probe_rtt_seconds", "", CounterKind::kGauge, CounterUnit::kMicroseconds,
     "The last answered probe round's round-trip time (its slowest target's), in microseconds.",
     &BackendSnapshot::probe_rtt_us},
};

// Health checks in total.
using HealthChecksField = CounterField<HealthChecksSnapshot>;
inline constexpr const char* kHealthBackendsHelp = "Backends by what the health checks find (up, down, unchecked).";
inline constexpr const char* kHealthAnswersHelp =
    "Version Negotiations to the probe port: received from the receivers, matched to a probe out, unmatched "
    "(forged, misrouted or late).";
inline constexpr HealthChecksField kHealthChecksFields[] = {
    {"backends_up", "health_backends", "health=\"up\"", CounterKind::kGauge, CounterUnit::kCount, kHealthBackendsHelp,
     &HealthChecksSnapshot::backends_up},
    {"backends_down", "health_backends", "health=\"down\"", CounterKind::kGauge, CounterUnit::kCount,
     kHealthBackendsHelp, &HealthChecksSnapshot::backends_down},
    {"backends_unchecked", "health_backends", "health=\"unchecked\"", CounterKind::kGauge, CounterUnit::kCount,
     kHealthBackendsHelp, &HealthChecksSnapshot::backends_unchecked},
    {"probes_sent", "health_probes_sent_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Health probes handed to the TX port's kernel queue.", &HealthChecksSnapshot::probes_sent},
    {"probes_unsent", "health_probes_unsent_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Health probes not sent: no mbuf, no TAP address of the target's family yet, too big, or the ring to the port full.",
     &HealthChecksSnapshot::probes_unsent},
    {"probes_refused", "health_probes_refused_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "Health probes the TX port's queue did not take (dropped; the round fails).", &HealthChecksSnapshot::probes_refused},
    {"rounds_deferred", "health_rounds_deferred_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Probe rounds that came due with health_checks.probes_per_s spent: sent late.",
     &HealthChecksSnapshot::rounds_deferred},
    {"answers_received", "health_answers_total", "outcome=\"received\"", CounterKind::kCounter, CounterUnit::kPackets,
     kHealthAnswersHelp, &HealthChecksSnapshot::answers_received},
    {"answers_matched", "health_answers_total", "outcome=\"matched\"", CounterKind::kCounter, CounterUnit::kPackets,
     kHealthAnswersHelp, &HealthChecksSnapshot::answers_matched},
    {"answers_unmatched", "health_answers_total", "outcome=\"unmatched\"", CounterKind::kCounter,
     CounterUnit::kPackets, kHealthAnswersHelp, &HealthChecksSnapshot::answers_unmatched},
    {"hash_rebuilds", "health_hash_rebuilds_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Backend hashes rebuilt because a backend went down or came back.", &HealthChecksSnapshot::hash_rebuilds},
};

// Peer sync (dataplane/runtime/peer_sync.h): the sync thread's counters and
// the receivers' ring drops.
using PeerSyncField = CounterField<PeerSyncSnapshot>;
// One help text per family (its samples differ by label).
inline constexpr const char* kPeerSyncMessagesHelp = "Peer sync datagrams sent to peers and received from them.";
inline constexpr const char* kPeerSyncEntriesHelp =
    "Forwarding-table entries sent to peers, received from them, and what the received ones did here (added, "
    "refreshed an entry present, expired on the way, found the table full).";
inline constexpr const char* kPeerSyncDroppedHelp =
    "Learned entries not sent: the receivers' ring to the sync thread was full, or a peer's send budget "
    "(peer_sync.entries_per_s) was spent; the refresh walk sends live ones later.";
inline constexpr const char* kPeerSyncResyncsHelp =
    "Full copies of the forwarding tables sent to a starting peer, taken from one, or given up waiting for.";
#define QS_REFUSED(reason, field)                                                                                  \
  {"refused_" reason, "peer_sync_refused_total", "reason=\"" reason "\"", CounterKind::kCounter,                  \
   CounterUnit::kCount,                                                                                             \
   "Messages (malformed, bad_mac, replayed, stale, unknown_peer, table_mismatch) or entries (unknown_backend, "    \
   "over_share, rate_limited) from peers that were not taken, by reason.",                                         \
   &PeerSyncSnapshot::field}
inline constexpr PeerSyncField kPeerSyncFields[] = {
    {"ready", "peer_sync_ready", "", CounterKind::kGauge, CounterUnit::kCount,
     "1 once a peer's copy of the forwarding tables is in (or none came within peer_sync.resync_timeout_ms).",
     &PeerSyncSnapshot::ready},
    {"messages_sent", "peer_sync_messages_total", "direction=\"sent\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncMessagesHelp, &PeerSyncSnapshot::messages_sent},
    {"messages_received", "peer_sync_messages_total", "direction=\"received\"", CounterKind::kCounter,
     CounterUnit::kCount, kPeerSyncMessagesHelp,
     &PeerSyncSnapshot::messages_received},
    {"entries_sent", "peer_sync_entries_total", "outcome=\"sent\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncEntriesHelp,
     &PeerSyncSnapshot::entries_sent},
    {"entries_received", "peer_sync_entries_total", "outcome=\"received\"", CounterKind::kCounter,
     CounterUnit::kCount,
     kPeerSyncEntriesHelp,
     &PeerSyncSnapshot::entries_received},
    {"entries_added", "peer_sync_entries_total", "outcome=\"added\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncEntriesHelp,
     &PeerSyncSnapshot::entries_added},
    {"entries_refreshed", "peer_sync_entries_total", "outcome=\"refreshed\"", CounterKind::kCounter,
     CounterUnit::kCount,
     kPeerSyncEntriesHelp,
     &PeerSyncSnapshot::entries_refreshed},
    {"entries_expired", "peer_sync_entries_total", "outcome=\"expired\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncEntriesHelp,
     &PeerSyncSnapshot::entries_expired},
    {"table_full", "peer_sync_entries_total", "outcome=\"table_full\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncEntriesHelp,
     &PeerSyncSnapshot::table_full},
    {"ring_full", "peer_sync_dropped_total", "at=\"ring\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncDroppedHelp,
     &PeerSyncSnapshot::ring_full},
    {"send_over_rate", "peer_sync_dropped_total", "at=\"rate\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncDroppedHelp,
     &PeerSyncSnapshot::send_over_rate},
    {"send_errors", "peer_sync_send_errors_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Peer sync datagrams the kernel did not take (no route yet, a full socket buffer).",
     &PeerSyncSnapshot::send_errors},
    {"resyncs_served", "peer_sync_resyncs_total", "role=\"served\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncResyncsHelp,
     &PeerSyncSnapshot::resyncs_served},
    {"resyncs_completed", "peer_sync_resyncs_total", "role=\"taken\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncResyncsHelp,
     &PeerSyncSnapshot::resyncs_completed},
    {"resync_timeouts", "peer_sync_resyncs_total", "role=\"timed_out\"", CounterKind::kCounter, CounterUnit::kCount,
     kPeerSyncResyncsHelp,
     &PeerSyncSnapshot::resync_timeouts},
    {"resync_entries_lost", "peer_sync_resync_entries_lost_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "Entries of a peer's full copy that did not arrive (its kResyncDone said more); the refresh walk repairs them.",
     &PeerSyncSnapshot::resync_entries_lost},
    QS_REFUSED("malformed", refused_malformed),
    QS_REFUSED("bad_mac", refused_bad_mac),
    QS_REFUSED("replayed", refused_replayed),
    QS_REFUSED("stale", refused_stale),
    QS_REFUSED("unknown_peer", refused_unknown_peer),
    QS_REFUSED("table_mismatch", refused_table_mismatch),
    QS_REFUSED("unknown_backend", refused_unknown_backend),
    QS_REFUSED("over_share", refused_over_share),
    QS_REFUSED("rate_limited", refused_rate_limited),
};
#undef QS_REFUSED

// Each backend of the fleet: its owners' counters added up.
using BackendCounterField = CounterField<BackendSnapshot, BackendCounters>;
inline constexpr BackendCounterField kBackendCounterFields[] = {
    {"packets", "backend_packets_total", "", CounterKind::kCounter, CounterUnit::kPackets, "packets delivered towards the backend",
     &BackendSnapshot::packets, &BackendCounters::packets},
    {"bytes", "backend_bytes_total", "", CounterKind::kCounter, CounterUnit::kBytes,
     "bytes of those packets as received (before encapsulation)", &BackendSnapshot::bytes, &BackendCounters::bytes},
    {"connections", "backend_connections_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "new connections steered to the backend (their handshake; a migrated connection counts once)", &BackendSnapshot::connections, &BackendCounters::connections},
    {"backend_down", "backend_backend_down_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "packets dropped because the backend was down", &BackendSnapshot::backend_down, &BackendCounters::backend_down},
    {"too_big", "backend_too_big_total", "", CounterKind::kCounter, CounterUnit::kPackets,
     "packets dropped as larger than the TX port's MTU once encapsulated", &BackendSnapshot::too_big,
     &BackendCounters::too_big},
    {"icmp_sent", "backend_icmp_sent_total", "", CounterKind::kCounter, CounterUnit::kCount,
     "ICMP too-big replies sent to clients for the backend's packets", &BackendSnapshot::icmp_sent,
     &BackendCounters::icmp_sent},
};

// A field by its name, at compile time: a view that shows a chosen few (the
// live table) names them here, and a name not in the table does not compile.
template <typename Field, std::size_t N>
consteval const Field& counter_field(const Field (&table)[N], std::string_view name) {
  for (const Field& f : table)
    if (std::string_view(f.name) == name) return f;
  throw "no such counter in the table";  // not a constant expression: a compile error
}

const char* to_string(CounterKind kind);
const char* to_string(CounterUnit unit);

// Every table above, one line per counter: scope, name, Prometheus sample
// name (with its label), kind, unit, help; tab-separated
// (quicsteer --list-counters).
void print_counter_list(std::FILE* out);

}  // namespace qs
