// Dataplane: builds the whole data path from a validated profile once EAL is
// up (mbuf pools, ports, rings, per-lcore contexts), launches the lcores, stops
// them, and accounts for every mbuf at the end. Used by the quicsteer binary
// and, in-process, by the integration tests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/fastpath/backend_delivery.h"
#include "dataplane/runtime/backend_slots.h"
#include "dataplane/fastpath/lcore_context.h"
#include "dataplane/control/port_counters.h"
#include "dataplane/config/profile.h"
#include "dataplane/control/health_monitor.h"
#include "dataplane/runtime/health_checks.h"
#include "dataplane/runtime/kernel_taps.h"
#include "dataplane/runtime/peer_sync.h"
#include "dataplane/control/stats_snapshot.h"

struct rte_mempool;
struct rte_rcu_qsbr;

namespace qs {

// An owner's connection shard in EAL memory on that lcore's NUMA socket.
// Throws std::runtime_error naming the size and socket when EAL has no room.
std::unique_ptr<ConnectionTable> make_connection_table(std::uint32_t max_connections, unsigned slots_per_connection,
                                                       unsigned lcore);
// The shared forwarding tables in EAL memory. Throws std::runtime_error
// naming the size when EAL has no room.
std::unique_ptr<ForwardingTables> make_forwarding_tables(const ForwardingConfig& config,
                                                         const std::array<std::uint8_t, 16>& key);

class Dataplane {
 public:
  // Throws (PortError, std::runtime_error) with a message for the operator.
  explicit Dataplane(const Profile& profile);
  ~Dataplane();
  Dataplane(const Dataplane&) = delete;
  Dataplane& operator=(const Dataplane&) = delete;

  void launch();
  // Stops in two steps: first the lcores quiesce: they stop polling RX queues while parked
  // and queued packets still reach their owners (at most kQuiesceLimit;
  // rings and tickets are trusted to be empty only once every lcore has
  // acknowledged that it polls no more);
  // then they stop, and whatever is still parked, queued or buffered is freed
  // and counted as shutdown drops. Idempotent. ("Quiesce" is this first
  // step only; the TX flush timer is action.tx_drain_us, a profile key kept
  // as it is.)
  void stop();
  static constexpr std::chrono::milliseconds kQuiesceLimit{200};
  bool running() const { return running_; }

  // Call from one thread (the control loop). Port counters carry across a
  // device's resets only if snapshots come often enough to see each reset
  // (a few tens of milliseconds apart).
  StatsSnapshot snapshot() const;
  // Reads the ports' counters between snapshots, so that a reset is seen.
  void sample_port_counters() const;
  // What HealthMonitor judges: each lcore's heartbeat counter, each port's
  // link (rte_eth_link_get_nowait, and the kernel interface's state for a
  // port that is one; a link is down while the ports are closed) and each
  // owner's TX queues' timed-out state. Cheap enough for every control-loop
  // turn; same thread as snapshot(). (dataplane_health.cpp)
  HealthSample health_sample() const;

  // Stops and closes the ports (a device may hold mbufs until then) and
  // returns how many mbufs are not back in their pools. Call after stop().
  std::int64_t close_ports_and_count_leaks();
  // Mbufs that were not in the pool after the lcores stopped but came back
  // when the ports closed: they sat in the devices (RX descriptors, TX
  // queues, a net_ring's rings), which is not a leak.
  std::uint64_t mbufs_held_by_devices() const { return held_by_devices_; }
  // Mbufs a driver took at set-up and never gives back, even at close
  // (net_af_xdp's fill rings): not counted as leaked.
  std::uint64_t mbufs_kept_by_drivers() const { return kept_by_drivers_; }

  // Hot reload of the steering section (QUIC-LB configurations and keys,
  // server IDs -> owners) while the lcores run. `next` must be a validated
  // profile; a change the running data path cannot take is refused
  // (reload_refusal names the key) and changes nothing. Otherwise the new
  // classifier goes live between bursts and the old one is freed once every
  // lcore has passed a quiescent point (RCU QSBR): this returns after that.
  // Control path, the same thread as snapshot().
  struct SteeringReload {
    bool applied = false;
    std::string message;     // what changed, or why nothing did
    std::uint64_t generation = 0;  // the steering generation live afterwards
  };
  SteeringReload reload_steering(const Profile& next);

  // The same reload in two halves, so that the slow half can run off the
  // control loop (a profile of 100,000 servers takes seconds to read and
  // turn into a classifier). prepare_steering() checks `next` against the
  // running profile and builds the new classifier and delivery plan; it
  // reads the data path's configuration and changes nothing, so it may run on
  // any thread while the control loop goes on, provided no other reload is
  // prepared or applied meanwhile. apply_steering() puts a prepared reload
  // live (or reports its refusal): control path, microseconds plus the grace
  // period.
  class PreparedSteering {
   public:
    PreparedSteering() = default;
    PreparedSteering(PreparedSteering&&) noexcept;
    PreparedSteering& operator=(PreparedSteering&&) noexcept;
    ~PreparedSteering();
    bool refused() const { return !refusal_.empty(); }
    // The whole profile as it will be once applied (the running one's
    // other sections, next's steering); empty when refused.
    const Profile& profile() const { return profile_; }

   private:
    friend class Dataplane;
    std::string refusal_;
    std::uint64_t base_generation_ = 0;  // what it was prepared against
    Profile profile_;
    std::unique_ptr<MbufClassifier> classifier_;
    std::unique_ptr<DeliveryPlan> delivery_;
    BackendSlots slots_;
    std::vector<std::string> health_down_;  // left out of the hash for their health
    bool health_only_ = false;              // the backends are the running ones: the checker keeps its rounds
  };
  PreparedSteering prepare_steering(const Profile& next) const;
  // The same against the running profile with `health_down` (backend
  // names) left out of the hash: a change of health.
  PreparedSteering prepare_health(const std::vector<std::string>& health_down) const;
  SteeringReload apply_steering(PreparedSteering prepared);
  // Health checks (health_checks.h): when the checker's view of which
  // backends are down differs from what the live hash leaves out, rebuilds
  // the hash as a reload does and returns what changed; nothing otherwise
  // or without health checks. Control path, never while a reload is being
  // prepared (prepare_steering reads what this writes).
  std::optional<std::string> follow_health();
  // The backends the live hash leaves out for their health, sorted.
  const std::vector<std::string>& health_down() const { return health_down_; }
  // 1 for the profile the data path was built from, +1 per applied reload.
  std::uint64_t steering_generation() const { return generation_; }

  // One mbuf pool per NUMA socket that has RX queues (mbuf_pools.h), each of
  // mempool.mbufs; pool() is the lowest socket's (the only one on a
  // one-socket machine), for a test or benchmark that makes its own mbufs.
  rte_mempool* pool() const { return pools_.empty() ? nullptr : pools_.front(); }
  const std::vector<rte_mempool*>& pools() const { return pools_; }
  std::uint64_t pool_size() const;  // mbufs in every pool together
  const Profile& profile() const { return profile_; }
  std::uint16_t port_id(const std::string& profile_port_name) const;
  const std::vector<std::unique_ptr<LcoreContext>>& lcores() const { return lcores_; }

 private:
  PortCounters sample_port_counters(std::size_t profile_port) const;
  bool quiesced() const;  // no ticket held, every ring empty, no TX stage holding packets
  void build_lcores();   // contexts, rings, doorbells, shards, TX stages
  void release();        // closes the ports and frees the pools
  void create_pools();   // and the pool of each RX queue, by profile port
  std::int64_t mbufs_in_use() const;  // across every pool

  Profile profile_;
  std::vector<rte_mempool*> pools_;  // by ascending socket
  // By profile port index, then RX queue: the pool that queue fills from.
  std::vector<std::vector<rte_mempool*>> rx_queue_pools_;
  std::vector<std::uint16_t> port_ids_;  // by profile port index
  // By profile port index: the kernel interface the port works through
  // (kernel_interface), or "".
  std::vector<std::string> kernel_interfaces_;
  // Totals across device counter resets, by profile port index; snapshot()
  // folds each reading in.
  mutable std::vector<MonotonicPortCounters> port_counters_;
  bool ports_open_ = false;
  // The exception path's TAPs and their thread (null without a tap).
  std::unique_ptr<KernelTaps> taps_;
  // Health checks' thread (null without health_checks), declared after
  // taps_, whose ring and addresses it uses: it stops and goes first.
  std::unique_ptr<HealthChecker> health_;
  std::vector<std::string> health_down_;
  std::uint64_t health_epoch_seen_ = 0;
  std::uint64_t health_rebuilds_ = 0;
  PreparedSteering prepare(const Profile& next, std::vector<std::string> health_down) const;
  // Peer sync: the receivers' rings of learned entries (empty without
  // peer_sync); the thread that drains them is peer_sync_, declared after
  // forwarding_ so that it stops before the tables and rings go.
  std::vector<std::unique_ptr<LearnedRing>> learned_rings_;
  // Shared by every classifier, across reloads (they keep owner indices,
  // which a reload cannot change); null when steering.forwarding.enabled is
  // false. Declared first: it outlives the classifiers that point at it.
  std::unique_ptr<ForwardingTables> forwarding_;
  std::unique_ptr<PeerSync> peer_sync_;
  // The classifier in force (what live_classifier_ points at) and what the
  // lcores wait on for a reload's grace period.
  std::unique_ptr<MbufClassifier> classifier_;
  std::atomic<MbufClassifier*> live_classifier_{nullptr};
  // Forward with backends: the delivery plan in force, swapped with the
  // classifier by a reload; null without backends.
  std::unique_ptr<DeliveryPlan> delivery_;
  std::atomic<const DeliveryPlan*> live_delivery_{nullptr};
  std::unique_ptr<DeliveryPlan> make_delivery_plan(const Profile& profile) const;
  // Whether the profile's delivery answers frames too big for it (ICMP):
  // receivers then record each packet's RX port.
  static bool sends_icmp_replies(const Profile& profile);
  BackendSlots backend_slots_;
  // Whether the forwarding tables hold no entry of a retiring slot's
  // generation (true without tables).
  bool swept(std::uint64_t generation) const;
  // Per backend slot: its owners' counters when a new backend took it (the
  // snapshot shows each backend what came after).
  std::vector<BackendSnapshot> counter_base_;
  BackendSnapshot backend_counter_sums(std::uint16_t slot) const;
  rte_rcu_qsbr* rcu_ = nullptr;
  std::uint64_t generation_ = 1;
  std::vector<std::unique_ptr<MbufRing>> rings_;
  struct RingInfo {
    unsigned from_lcore, to_lcore;
    MbufRing* ring;
    std::unique_ptr<RingStats> stats;
  };
  std::vector<RingInfo> ring_info_;
  std::vector<std::unique_ptr<Doorbell>> doorbells_;
  std::vector<std::unique_ptr<LcoreContext>> lcores_;
  std::atomic<RunState> state_{RunState::kRun};
  bool running_ = false;
  std::size_t launched_ = 0;  // lcores_[0, launched_) were launched and not yet waited for
  std::uint64_t start_tsc_ = 0;
  std::uint64_t stop_tsc_ = 0;
  std::uint64_t held_by_devices_ = 0;
  std::uint64_t kept_by_drivers_ = 0;
};

}  // namespace qs
