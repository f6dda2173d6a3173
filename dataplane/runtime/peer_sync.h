// PeerSync: the thread that shares what this instance's forwarding tables
// learn with its peers, the other instances behind the same routers, and
// writes what they learn into its own (issue 37, profile key peer_sync).
//
// Why: the keyed hash of the 4-tuple (steering.fallback.hash) lets every
// instance route a connection whose 4-tuple has not changed without shared
// state; a connection that rebinds its NAT is followed only by the DCID the
// tables learned, and only the instance that saw its handshake learned it.
// Once the routers move such a connection (a crash, a drain, ECMP hashing
// its new port elsewhere), another instance must know that DCID.
//
// What travels: established-table entries (a keyed hash of a DCID or a
// 4-tuple -> a backend, with its age and learn credit), in authenticated
// UDP datagrams (steering/peer_sync.h: the format, MAC, replay window and
// per-peer budget). The tables of every peer are keyed from the shared
// secret, so a key means the same connection everywhere; backends travel as
// keyed ids of their names, since each instance numbers its slots its own
// way.
//
// How, as the IPVS sync daemon and conntrackd do it, without acknowledgements:
//   - new entries: receivers put what a burst taught the established table
//     on a bounded SPSC ring per lcore (a full ring drops and counts, never
//     stalls the lcore); this thread drains the rings into messages to every
//     peer;
//   - loss: a walk over the table sends, once per refresh period (a third of
//     the idle timeout, at most 10 s), every entry used within that period,
//     so an entry lost on the way arrives again while its connection lives,
//     and a peer's copy does not expire while this instance sees it used;
//   - restarts: a starting instance asks every peer for its whole table
//     (kResyncRequest); a peer walks it, sends the live entries and ends with
//     kResyncDone. /healthz reports unhealthy until one peer's copy is in, or
//     resync_timeout_ms has passed (no peer answered: the first instance), so
//     that the routers send nothing here before it knows what its peers know;
//   - bounds: each peer may add at most max_peer_share of the established
//     table per idle timeout and send at most entries_per_s (PeerBudget); this
//     instance sends each peer at most entries_per_s, the ring's new entries
//     first, then a resync, then the refresh walk.
//
// Everything here runs on its own thread: nothing on the lcores' per-packet
// path but the ring. The socket binds with IP_FREEBIND, so the listen
// address may be one the exception path's TAP gets after start-up.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dataplane/config/profile.h"
#include "dataplane/control/stats_snapshot.h"
#include "rings/spsc_ring.h"
#include "steering/forwarding_rules.h"
#include "steering/peer_sync.h"

namespace qs {

using LearnedRing = SpscRing<LearnedEntry>;

class PeerSync {
 public:
  // `tables` and the rings must outlive this object; tsc_per_ms is the
  // lcores' clock for the tables' milliseconds. Throws std::runtime_error
  // (with the reason) when the socket cannot be opened or bound.
  PeerSync(const PeerSyncConfig& config, const ForwardingConfig& forwarding, ForwardingTables& tables,
           std::vector<LearnedRing*> rings, std::uint64_t tsc_per_ms);
  ~PeerSync();
  PeerSync(const PeerSync&) = delete;
  PeerSync& operator=(const PeerSync&) = delete;

  // The key the forwarding tables must be built with, alike on every peer.
  static std::array<std::uint8_t, 16> table_key(const PeerSyncConfig& config);

  // Which backend each wire id names here. At start and on every reload
  // before removed slots are retired: entries for a backend this instance
  // no longer has are refused from then on (unknown_backend). Also refuses
  // (std::invalid_argument) a set in which two names share an id.
  void set_backends(const std::vector<BackendConfig>& backends);
  static void check_backend_ids(const PeerSyncConfig& config, const std::vector<BackendConfig>& backends);

  void start();
  void stop();

  // Whether a peer's copy is in (or none came within resync_timeout_ms).
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  PeerSyncSnapshot snapshot() const;

 private:
  struct Peer;
  void run();
  std::uint32_t now_ms() const;  // the tables' clock
  void receive(std::uint64_t wall_ms);
  void handle(Peer& peer, const std::uint8_t* data, std::size_t len, std::uint64_t wall_ms);
  void absorb(Peer& peer, const peer_sync::Entry* entries, std::size_t n, std::uint64_t wall_ms);
  // Queues an entry for a peer within its send budget (false: over it,
  // counted) and sends a message once one is full.
  bool queue_for(Peer& peer, const peer_sync::Entry& e);
  void flush(Peer& peer, peer_sync::MessageType type = peer_sync::MessageType::kEntries, std::uint32_t total = 0);
  bool send(Peer& peer, const std::uint8_t* data, std::size_t len);  // false: the kernel refused it (counted)
  void drain_rings();
  void walk_refresh(std::uint64_t elapsed_ms);
  void serve_resyncs();
  void ask_for_copies(std::uint64_t wall_ms);
  peer_sync::Entry wire_entry(std::uint64_t key, std::uint16_t target, unsigned credit, std::uint32_t age) const;
  bool wire_ok(std::uint16_t target) const;

  PeerSyncConfig config_;
  ForwardingConfig forwarding_;
  ForwardingTables& tables_;
  std::vector<LearnedRing*> rings_;
  std::uint64_t tsc_per_ms_;
  peer_sync::Keys keys_;
  int fd_ = -1;
  std::uint64_t boot_id_ = 0;
  std::uint64_t sequence_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;

  // Backends: wire id -> slot here, and slot -> wire id (0 and absent: none).
  mutable std::mutex backends_mutex_;
  std::unordered_map<std::uint32_t, std::uint16_t> slot_of_id_;
  std::vector<std::uint32_t> id_of_slot_;
  std::vector<bool> slot_known_;

  // The refresh walk's cursor (buckets) and its carry of fractional buckets.
  std::uint32_t refresh_cursor_ = 0;
  double refresh_carry_ = 0;
  std::uint64_t started_wall_ms_ = 0;
  std::uint64_t last_request_ms_ = 0;

  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  // Counters, written by the thread, read by snapshot().
  struct Counters {
    std::atomic<std::uint64_t> messages_sent{0}, messages_received{0}, entries_sent{0}, entries_received{0},
        entries_added{0}, entries_refreshed{0}, entries_expired{0}, table_full{0}, send_over_rate{0}, send_errors{0},
        resyncs_served{0}, resyncs_completed{0}, resync_timeouts{0}, resync_entries_lost{0};
    std::array<std::atomic<std::uint64_t>, peer_sync::kRefusals> refused{};
  };
  Counters counters_;
};

}  // namespace qs
