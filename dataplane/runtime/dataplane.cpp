#include "dataplane/runtime/dataplane.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "dataplane/control/counter_fields.h"
#include "dataplane/runtime/kernel_random.h"
#include "dataplane/runtime/mbuf_pools.h"
#include "dataplane/runtime/port.h"
#include "dataplane/fastpath/steer_meta.h"
#include "dataplane/fastpath/tsan.h"
#include "dataplane/fastpath/tsc.h"
#include "steering/owner_resolver.h"

namespace qs {
namespace {

// The health checker's rings: probes to the exception thread, answers from
// each receiver. 4,096 backends' rounds of two targets in a tenth of a
// second's budget fit.
constexpr std::uint32_t kProbeRingSize = 4096;

// The lcore entry point, with the hand-over EAL does in uninstrumented code
// made visible to ThreadSanitizer (see tsan.h): launch -> lcore, lcore -> wait.
int run_lcore(void* arg) {
  tsan_acquire(arg);
  const int rc = lcore_main(arg);
  tsan_release(arg);
  return rc;
}

std::uint64_t us_to_tsc(std::uint64_t us) { return qs::us_to_tsc(us, rte_get_tsc_hz()); }

// The receive loop groups a burst by owner in arrays of kMaxOwners; the
// profile allows no more owners than that.
static_assert(kMaxOwnerLcores <= kMaxOwners);

void check_lcores(const Profile& p) {
  for (const auto& l : p.lcores) {
    if (l.id >= RTE_MAX_LCORE || !rte_lcore_is_enabled(l.id))
      throw std::runtime_error("lcore " + std::to_string(l.id) +
                               " is in the profile but not enabled by EAL: add it to -l/--lcores");
    if (l.id == rte_get_main_lcore())
      throw std::runtime_error("lcore " + std::to_string(l.id) +
                               " is EAL's main lcore, which runs the control loop and stats; give the "
                               "data path other lcores (EAL -l/--lcores, or --main-lcore)");
  }
}

// An mbuf pool whose objects lie back to back in one chunk of memory, for
// DPDK 22.11's net_af_xdp. Its zero-copy path registers the pool as the
// socket's UMEM from the first object on, sized as if every object were
// back to back: populated objects x object size. A pool created the usual way
// keeps each object inside one page (IOVA-contiguous objects, which DMA
// needs), so on 4 KB pages (--no-huge) an object of about 2.4 KB takes a page
// of its own and the UMEM covers little more than the first half of the pool;
// on 2 MB pages the objects of the last pages fall out. The kernel skips
// every fill-ring address outside the UMEM without a trace, so each such mbuf
// handed to the fill ring is lost, and once the ring holds no valid address
// the socket receives nothing again and every frame counts as rx_dropped
// (imissed).
// RTE_MEMPOOL_F_NO_IOVA_CONTIG packs the objects; AF_XDP needs only virtual
// addresses, but no device may DMA into such a pool (create_pools refuses a
// PCI port beside an AF_XDP port).
rte_mempool* create_packed_pktmbuf_pool(const std::string& name, unsigned n, unsigned cache, std::uint16_t data_room,
                                        int socket) {
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n, sizeof(rte_mbuf) + data_room, cache,
                                             sizeof(rte_pktmbuf_pool_private), socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
  if (mp == nullptr) return nullptr;
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = data_room;
  int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr);
  if (rc == 0) {
    rte_pktmbuf_pool_init(mp, &priv);
    rc = rte_mempool_populate_default(mp);
  }
  if (rc < 0 || mp->populated_size != n || mp->nb_mem_chunks != 1) {
    rte_mempool_free(mp);
    rte_errno = rc < 0 ? -rc : ENOMEM;  // several chunks: not one UMEM
    return nullptr;
  }
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  return mp;
}

void warn_if_pool_small(const Profile& p, unsigned producers, unsigned owners) {
  std::uint64_t need = 0;
  for (const auto& port : p.ports)
    need += std::uint64_t(port.rx_queues) * port.rx_descriptors + std::uint64_t(port.tx_queues) * port.tx_descriptors;
  need += std::uint64_t(producers) * owners * p.rings.size;
  need += std::uint64_t(p.lcores.size()) * (p.mempool.cache + 4 * kMaxBurst);
  if (p.mempool.mbufs < need)
    std::printf("warning: mempool.mbufs %u is below the %llu that descriptors, rings and caches can "
                "hold at once; expect rx_nombuf under load\n",
                p.mempool.mbufs, static_cast<unsigned long long>(need));
}

// A port's MAC address; throws std::runtime_error naming the port.
std::array<std::uint8_t, 6> port_mac(std::uint16_t port_id, const std::string& name) {
  rte_ether_addr mac{};
  if (const int rc = rte_eth_macaddr_get(port_id, &mac); rc != 0)
    throw std::runtime_error("cannot read the MAC address of port '" + name + "': " + rte_strerror(-rc));
  std::array<std::uint8_t, 6> out;
  std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), out.begin());
  return out;
}

}  // namespace

// Bytes in MB, rounded up: how start-up lines and allocation errors print sizes.
std::size_t megabytes(std::size_t bytes) { return (bytes + (std::size_t(1) << 20) - 1) >> 20; }

// Zeroed EAL memory on `socket` for a steering table (steering/slot_memory.h).
// The socket travels in the context pointer: no state to keep alive.
SlotMemory eal_slot_memory(int socket) {
  return SlotMemory{
      [](std::size_t bytes, void* context) {
        return rte_zmalloc_socket("qs_table", bytes, RTE_CACHE_LINE_SIZE, int(reinterpret_cast<std::intptr_t>(context)));
      },
      [](void* memory, void*) { rte_free(memory); }, reinterpret_cast<void*>(std::intptr_t(socket))};
}

// A table built in EAL memory, or an error naming it, its size and what to
// change when EAL has too little.
// `where`: the socket, when it matters (" on socket 0").
template <class Table, class... Args>
std::unique_ptr<Table> make_in_eal(const std::string& what, std::size_t bytes, const std::string& where,
                                   const char* remedy, Args&&... args) {
  try {
    return std::make_unique<Table>(std::forward<Args>(args)...);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error("cannot allocate " + what + " (" + std::to_string(megabytes(bytes)) + " MB" + where +
                             "): raise EAL -m / --socket-mem or lower " + remedy);
  }
}

static_assert(ActionConfig{}.slots_per_connection == ConnectionTable::kDefaultSlotsPerConnection);

std::unique_ptr<ConnectionTable> make_connection_table(std::uint32_t max_connections, unsigned slots_per_connection,
                                                       unsigned lcore) {
  const unsigned socket = rte_lcore_to_socket_id(lcore);
  // An lcore whose CPUs span sockets has no socket of its own.
  const std::string where =
      int(socket) == SOCKET_ID_ANY ? std::string(" on any socket") : " on socket " + std::to_string(socket);
  return make_in_eal<ConnectionTable>("the connection table of lcore " + std::to_string(lcore),
                                      ConnectionTable::memory_bytes(max_connections, slots_per_connection), where,
                                      slots_per_connection == ConnectionTable::kDefaultSlotsPerConnection
                                          ? "action.max_connections"
                                          : "action.max_connections or action.slots_per_connection",
                                      max_connections, eal_slot_memory(int(socket)), slots_per_connection);
}

std::unique_ptr<ForwardingTables> make_forwarding_tables(const ForwardingConfig& config,
                                                         const std::array<std::uint8_t, 16>& key) {
  // Every receiving lcore reads them, whatever its socket: the main lcore's.
  const std::size_t bytes = ForwardingTables::memory_bytes(config);
  auto tables = make_in_eal<ForwardingTables>("the forwarding tables", bytes, "", "steering.forwarding.max_entries",
                                              config, key, eal_slot_memory(int(rte_socket_id())));
  std::printf("forwarding tables: %u entries + %u setup entries (%zu MB of EAL memory)\n", config.max_entries,
              config.max_setup_entries, megabytes(bytes));
  return tables;
}

Dataplane::Dataplane(const Profile& profile) : profile_(profile) {
  check_lcores(profile_);
  if (profile_.steering.owner_lcores.size() > kMaxOwners)
    throw std::runtime_error("at most " + std::to_string(kMaxOwners) + " owner lcores, the profile has " +
                             std::to_string(profile_.steering.owner_lcores.size()));

  // Whatever fails from here on, nothing stays behind: a test process (or a
  // caller that retries) can build a data path on the same devices again.
  try {
    for (const auto& port : profile_.ports) {
      port_ids_.push_back(find_or_probe_port(port));
      ports_open_ = true;
    }
    create_pools();
    for (std::size_t i = 0; i < profile_.ports.size(); ++i) {
      const std::int64_t before = mbufs_in_use();
      configure_and_start_port(port_ids_[i], profile_.ports[i], rx_queue_pools_[i], pools_.size() == 1);
      // DPDK 22.11's net_af_xdp fills each queue's fill ring with 2048 mbufs
      // at set-up, keeps it at that level (every mbuf it receives is replaced
      // in the ring) and drops the ring at close without returning its mbufs
      // to the pool. What its set-up took is therefore never coming back,
      // which is not a leak of quicsteer's.
      if (port_driver_name(port_ids_[i]) == "net_af_xdp")
        kept_by_drivers_ += std::uint64_t(std::max<std::int64_t>(0, mbufs_in_use() - before));
    }
    if (std::any_of(profile_.ports.begin(), profile_.ports.end(), [](const PortConfig& p) { return !p.tap.empty(); }))
      taps_ = std::make_unique<KernelTaps>(profile_, port_ids_, pools_.front(),
                                           std::uint16_t(profile_.steering.owner_lcores.size()));
    port_counters_.assign(port_ids_.size(), MonotonicPortCounters{});
    for (const std::uint16_t id : port_ids_) kernel_interfaces_.push_back(kernel_interface(id));
    build_lcores();
  } catch (...) {
    release();
    throw;
  }
}

void Dataplane::build_lcores() {
  const auto& owners = profile_.steering.owner_lcores;
  classifier_ = std::make_unique<MbufClassifier>(profile_.steering);
  // The connection shards' hash seed and the forwarding tables' key come
  // from the kernel (kernel_random.h: rte_rand() can be predicted).
  std::uint64_t cid_seed = 0;
  kernel_random({reinterpret_cast<std::uint8_t*>(&cid_seed), sizeof cid_seed}, "the connection tables' hash seed");
  if (profile_.steering.forwarding.enabled && profile_.steering.mode == SteeringMode::kCid) {
    // The tables' hash key is drawn at each start, not taken from the
    // profile: nobody, not even one who knows the fallback key (all zeros
    // by default), can aim DCIDs at one bucket, and a reload that rekeys the
    // fallback leaves what the tables learned in place.
    // With peer sync, every peer keys them alike from the shared secret
    // (a key is then the same connection everywhere; the secret is no
    // less secret than a random key).
    std::array<std::uint8_t, 16> table_key;
    if (profile_.peer_sync.enabled)
      table_key = PeerSync::table_key(profile_.peer_sync);
    else
      kernel_random(table_key, "the forwarding tables' hash key");
    forwarding_ = make_forwarding_tables(profile_.steering.forwarding, table_key);
    classifier_->use_tables(forwarding_.get());
  }
  live_classifier_.store(classifier_.get(), std::memory_order_release);
  const std::uint64_t tsc_per_ms = std::max<std::uint64_t>(1, rte_get_tsc_hz() / 1000);
  bool sweeper_chosen = false;
  // One QSBR thread per lcore (its index in the profile), for reloads.
  const auto rcu_threads = std::uint32_t(profile_.lcores.size());
  rcu_ = static_cast<rte_rcu_qsbr*>(
      rte_zmalloc("quicsteer_rcu", rte_rcu_qsbr_get_memsize(rcu_threads), RTE_CACHE_LINE_SIZE));
  if (rcu_ == nullptr || rte_rcu_qsbr_init(rcu_, rcu_threads) != 0)
    throw std::runtime_error("cannot set up RCU for steering reloads: " + std::string(rte_strerror(rte_errno)));

  if (profile_.health_checks.enabled) {
    // The decoder made sure of a TAP on tap_port and a queue on the TX port
    // after the owners' (the one the exception thread sends on).
    const HealthChecksConfig& hc = profile_.health_checks;
    const std::size_t tx = std::size_t(profile_.action.tx_port);
    const KernelTaps::Tap* tap = taps_->tap_of(port_ids_[std::size_t(hc.tap_port)]);
    health_ = std::make_unique<HealthChecker>(hc, port_ids_[tx], port_mac(port_ids_[tx], profile_.ports[tx].name),
                                              profile_.ports[tx].mtu, &tap->host, taps_->probe_ring(kProbeRingSize),
                                              pools_.front());
    health_->set_backends(profile_.steering.backends, profile_.action.delivery);
  }

  unsigned producers = 0;
  for (const auto& l : profile_.lcores) {
    auto ctx = std::make_unique<LcoreContext>();
    ctx->lcore_id = l.id;
    ctx->state = &state_;
    const auto it = std::find(owners.begin(), owners.end(), l.id);
    ctx->owner_index = it == owners.end() ? -1 : int(it - owners.begin());
    ctx->live_classifier = &live_classifier_;
    ctx->rcu = rcu_;
    ctx->rcu_thread = unsigned(lcores_.size());
    // An lcore that is not registered would not be waited for: a reload
    // would free a classifier it may still be reading.
    if (rte_rcu_qsbr_thread_register(rcu_, ctx->rcu_thread) != 0)
      throw std::runtime_error("cannot register lcore " + std::to_string(l.id) +
                               " with RCU for steering reloads: " + rte_strerror(rte_errno));
    ctx->burst = profile_.rings.burst;
    ctx->policy = profile_.backpressure.policy;
    ctx->high_watermark = profile_.backpressure.high_watermark;
    ctx->low_watermark = profile_.backpressure.low_watermark;
    ctx->park_timeout_tsc = us_to_tsc(profile_.backpressure.park_timeout_us);
    // A held ticket is offered to its owners once a microsecond, not on every
    // iteration: each offer reads the owner's ring index, a line the owner
    // writes. An owner empties a ring down to its low watermark in far longer.
    ctx->ticket_retry_tsc = us_to_tsc(1);
    ctx->action = profile_.action.type;
    ctx->cost_cycles = l.cost_cycles.value_or(profile_.action.cost_cycles);
    ctx->tx_flush_tsc = us_to_tsc(profile_.action.tx_drain_us);
    ctx->idle_timeout_tsc = us_to_tsc(std::uint64_t(profile_.action.idle_timeout_ms) * 1000);
    ctx->idle_sleep_us = profile_.polling.idle_sleep_us;
    ctx->idle_polls_before_sleep = profile_.polling.idle_polls_before_sleep;
    ctx->doorbell_spin_tsc = us_to_tsc(profile_.polling.doorbell_spin_us);
    ctx->tsc_per_ms = tsc_per_ms;
    if (forwarding_ && !l.rx.empty() && !sweeper_chosen) {
      // One lcore ages the shared tables (expire() has one caller at a time).
      sweeper_chosen = true;
      ctx->forwarding_sweeper = forwarding_.get();
      const std::uint32_t buckets =
          std::max(forwarding_->established().bucket_count(), forwarding_->setup().bucket_count());
      ctx->forwarding_sweep = std::make_unique<SweepPacer>(buckets, ctx->idle_timeout_tsc / 4);
    }
    bool polls_a_tap_port = false;
    for (const auto& ref : l.rx) {
      auto q = std::make_unique<RxQueueContext>();
      q->port_id = port_ids_[ref.port];
      q->queue = ref.queue;
      q->profile_port = ref.port;
      // With services, every RX queue filters MACs and sends the host's
      // frames to the port's TAP (or drops them: no_tap).
      if (!profile_.steering.services.empty()) {
        const PortConfig& port = profile_.ports[ref.port];
        q->exception = std::make_unique<ExceptionRx>();
        q->exception->port_mac = mac_to_u64(port_mac(q->port_id, port.name));
        q->exception->has_tap = !port.tap.empty();
        q->exception->policer.configure(profile_.exception_path.police, port.rx_queues, rte_get_tsc_hz());
        if (health_) {
          q->exception->probe_udp_port = profile_.health_checks.probe_udp_port;
          const std::uint64_t per_s = 2ull * profile_.health_checks.probes_per_s / port.rx_queues + 1;
          q->exception->probe_answers_police.configure(per_s, per_s / 10 > 8 ? per_s / 10 : 8, rte_get_tsc_hz());
        }
        polls_a_tap_port = polls_a_tap_port || !port.tap.empty();
      }
      // net_af_packet and net_pcap on an interface also read what the host
      // sends out of it (a host process's UDP to a QUIC port would be steered).
      const std::string driver = port_driver_name(q->port_id);
      const std::string& device = profile_.ports[ref.port].device;
      if (driver == "net_af_packet" ||
          (driver == "net_pcap" && (device.find("rx_iface=") != std::string::npos ||
                                    device.find(",iface=") != std::string::npos)))
        q->own_source = mac_to_u64(port_mac(q->port_id, profile_.ports[ref.port].name));
      ctx->rx.push_back(std::move(q));
    }
    if (polls_a_tap_port) ctx->kernel_rings = taps_->rings_for_lcore();
    if (polls_a_tap_port && health_) ctx->probe_answers = health_->answer_ring_for_lcore(kProbeRingSize);
    if (!l.rx.empty() && profile_.peer_sync.enabled && forwarding_) {
      learned_rings_.push_back(std::make_unique<LearnedRing>(profile_.peer_sync.ring_size));
      ctx->learned_ring = learned_rings_.back().get();
    }
    if (!l.rx.empty()) ++producers;
    lcores_.push_back(std::move(ctx));
  }
  warn_if_pool_small(profile_, producers, unsigned(owners.size()));
  if (!learned_rings_.empty()) {
    std::vector<LearnedRing*> rings;
    for (const auto& r : learned_rings_) rings.push_back(r.get());
    peer_sync_ = std::make_unique<PeerSync>(profile_.peer_sync, profile_.steering.forwarding, *forwarding_,
                                            std::move(rings), tsc_per_ms);
    peer_sync_->set_backends(profile_.steering.backends);
  }

  // An owner that polls no RX queue has nothing to do until a receiver hands
  // it packets: when idle it sleeps on a doorbell instead of a fixed nap.
  if (profile_.polling.idle_sleep_us != 0) {
    for (auto& c : lcores_) {
      if (c->owner_index < 0 || !c->rx.empty()) continue;
      doorbells_.push_back(std::make_unique<Doorbell>());
      c->doorbell = doorbells_.back().get();
    }
  }

  // One ring per receiving lcore -> owner pair, except an lcore to itself.
  auto context_of = [&](unsigned lcore) -> LcoreContext& {
    for (auto& c : lcores_)
      if (c->lcore_id == lcore) return *c;
    throw std::logic_error("owner lcore missing from the lcore list");
  };
  for (auto& c : lcores_) {
    if (c->rx.empty()) continue;
    c->out_rings.assign(owners.size(), nullptr);
    c->out_ring_stats.assign(owners.size(), nullptr);
    c->out_doorbells.assign(owners.size(), nullptr);
    for (std::size_t o = 0; o < owners.size(); ++o) {
      if (int(o) == c->owner_index) continue;
      rings_.push_back(std::make_unique<MbufRing>(profile_.rings.size));
      MbufRing* ring = rings_.back().get();
      auto stats = std::make_unique<RingStats>();
      c->out_rings[o] = ring;
      c->out_ring_stats[o] = stats.get();
      c->out_doorbells[o] = context_of(owners[o]).doorbell;
      context_of(owners[o]).in_rings.push_back(ring);
      ring_info_.push_back(RingInfo{c->lcore_id, owners[o], ring, std::move(stats)});
    }
  }

  // Owners: connection shard and a TX stage for their own queue of each TX port.
  std::printf("%s\n", services_summary(profile_).c_str());
  const ActionConfig& action = profile_.action;
  std::printf("owners: %zu, each with tables of %u connections and %u CIDs, %u slots each (%zu MB of EAL memory on "
              "its socket)\n",
              owners.size(), action.max_connections, action.max_connections, action.slots_per_connection,
              megabytes(2 * ConnectionTable::memory_bytes(action.max_connections, action.slots_per_connection)));
  for (auto& c : lcores_) {
    if (c->owner_index < 0) continue;
    c->cids = make_connection_table(action.max_connections, action.slots_per_connection, c->lcore_id);
    c->connections = make_connection_table(action.max_connections, action.slots_per_connection, c->lcore_id);
    c->shard = ConnectionShard{c->cids.get(), c->connections.get(), cid_seed, std::max<std::uint64_t>(1, c->idle_timeout_tsc / 4)};
    // Expiry may run up to a quarter of the idle timeout late (both tables
    // have as many slots).
    c->sweep = std::make_unique<SweepPacer>(c->cids->slot_count(), c->idle_timeout_tsc / 4);
    c->tx_by_port.assign(RTE_MAX_ETHPORTS, nullptr);
    std::vector<std::uint16_t> tx_profile_ports;
    if (profile_.action.type == OwnerAction::kForward) {
      tx_profile_ports.push_back(std::uint16_t(profile_.action.tx_port));
    } else if (profile_.action.type == OwnerAction::kReflect) {
      for (std::size_t i = 0; i < profile_.ports.size(); ++i)
        if (profile_.ports[i].rx_queues > 0) tx_profile_ports.push_back(std::uint16_t(i));
    }
    for (std::uint16_t pi : tx_profile_ports) {
      auto t = std::make_unique<TxQueueContext>(profile_.rings.burst);
      t->port_id = port_ids_[pi];
      t->mac = port_mac(t->port_id, profile_.ports[pi].name);
      t->queue = std::uint16_t(c->owner_index);
      if (taps_ && taps_->tap_of(t->port_id) != nullptr) t->host = &taps_->tap_of(t->port_id)->host;
      c->tx_by_port[t->port_id] = t.get();
      c->tx.push_back(std::move(t));
    }
    if (profile_.action.type == OwnerAction::kForward) c->forward_tx = c->tx.front().get();
  }

  // Forward with backends: the delivery plan, each owner's counters per
  // backend slot, and for encapsulation the ICMP too-big replies, which an
  // owner sends back out of the RX port on its own TX queue there.
  backend_slots_ = BackendSlots(profile_.steering.backends);
  if (!profile_.steering.backends.empty()) {
    const std::uint32_t slots = backend_hash_table_size(profile_.steering);
    std::printf("backends: %zu, hashed over a Maglev table of %u slots (%zu MB, %s)\n",
                profile_.steering.backends.size(), slots, megabytes(std::size_t(slots) * 2),
                profile_.steering.backend_table_size == 0 ? "automatic" : "steering.backend_table_size");
  }
  delivery_ = make_delivery_plan(profile_);
  if (!delivery_) return;
  live_delivery_.store(delivery_.get(), std::memory_order_release);
  // Each owner's queue on every receiving port, whether the profile sends
  // ICMP replies now or not: a reload may turn them on.
  for (auto& c : lcores_) {
    c->icmp_replies.store(sends_icmp_replies(profile_), std::memory_order_relaxed);
    c->tsc_hz = rte_get_tsc_hz();
    if (c->owner_index < 0) continue;
    c->delivery = &live_delivery_;
    c->backend_counter_rows = std::make_unique<BackendCounters[]>(kMaxBackends);
    c->backend_counters = std::span<BackendCounters>(c->backend_counter_rows.get(), kMaxBackends);
    for (std::size_t i = 0; i < profile_.ports.size(); ++i) {
      const PortConfig& port = profile_.ports[i];
      if (port.rx_queues == 0 || int(i) == profile_.action.tx_port) continue;
      if (unsigned(c->owner_index) >= port.tx_queues) continue;  // no queue of its own there: counted, not sent
      auto t = std::make_unique<TxQueueContext>(profile_.rings.burst);
      t->port_id = port_ids_[i];
      t->mac = port_mac(t->port_id, profile_.ports[i].name);
      t->queue = std::uint16_t(c->owner_index);
      if (taps_ && taps_->tap_of(t->port_id) != nullptr) t->host = &taps_->tap_of(t->port_id)->host;
      c->tx_by_port[t->port_id] = t.get();
      c->tx.push_back(std::move(t));
    }
  }
}

bool Dataplane::sends_icmp_replies(const Profile& profile) {
  const DeliveryMode mode = profile.action.delivery.mode;
  return (mode == DeliveryMode::kIpip || mode == DeliveryMode::kVxlan) && profile.action.delivery.icmp_too_big_per_s != 0;
}

std::unique_ptr<DeliveryPlan> Dataplane::make_delivery_plan(const Profile& profile) const {
  if (profile.action.type != OwnerAction::kForward || profile.steering.backends.empty()) return nullptr;
  const std::array<std::uint8_t, 6> tx_mac = port_mac(port_ids_[std::size_t(profile.action.tx_port)],
                                                      profile.ports[std::size_t(profile.action.tx_port)].name);
  std::uint16_t rx_mtu = 0;
  for (const PortConfig& p : profile.ports)
    if (p.rx_queues > 0) rx_mtu = std::max(rx_mtu, p.mtu);
  return std::make_unique<DeliveryPlan>(profile.action.delivery, profile.steering.backends, tx_mac,
                                        profile.ports[std::size_t(profile.action.tx_port)].mtu, rx_mtu);
}

void Dataplane::create_pools() {
  static_assert(kAnySocket == SOCKET_ID_ANY);
  // The lcore polling each RX queue (the profile gives each exactly one).
  std::vector<std::vector<int>> poller_socket(profile_.ports.size());
  for (std::size_t i = 0; i < profile_.ports.size(); ++i)
    poller_socket[i].assign(profile_.ports[i].rx_queues, kAnySocket);
  for (const auto& l : profile_.lcores)
    for (const auto& ref : l.rx) poller_socket[ref.port][ref.queue] = int(rte_lcore_to_socket_id(l.id));

  const int main_socket = int(rte_socket_id());
  std::vector<std::vector<int>> queue_socket(profile_.ports.size());
  std::vector<int> all;
  for (std::size_t i = 0; i < profile_.ports.size(); ++i) {
    const int port_socket = rte_eth_dev_socket_id(port_ids_[i]);
    for (int lcore_socket : poller_socket[i]) {
      queue_socket[i].push_back(rx_pool_socket(port_socket, lcore_socket, main_socket));
      all.push_back(queue_socket[i].back());
    }
  }
  std::vector<int> sockets = pool_sockets(all);
  if (sockets.empty()) sockets.push_back(main_socket);  // no RX queue: keep one pool, for pool()

  // AF_XDP ports take their buffers from a packed pool (see
  // create_packed_pktmbuf_pool), which a PCI device must not DMA into.
  bool af_xdp = false;
  for (std::size_t i = 0; i < profile_.ports.size(); ++i)
    af_xdp = af_xdp || port_driver_name(port_ids_[i]) == "net_af_xdp";
  for (const auto& port : profile_.ports)
    if (af_xdp && !port.is_vdev())
      throw std::runtime_error("port '" + port.name +
                               "' is a PCI device beside an AF_XDP port: net_af_xdp needs its mbufs packed in a way "
                               "no device may DMA into; run the two in separate processes");
  static std::atomic<unsigned> instance{0};
  const unsigned this_instance = instance.fetch_add(1);
  for (int socket : sockets) {
    const std::string name = "qs_mbufs_" + std::to_string(this_instance) + "_s" + std::to_string(socket);
    rte_mempool* pool =
        af_xdp ? create_packed_pktmbuf_pool(name, profile_.mempool.mbufs, profile_.mempool.cache,
                                            profile_.mempool.data_room, socket)
               : rte_pktmbuf_pool_create(name.c_str(), profile_.mempool.mbufs, profile_.mempool.cache, 0,
                                         profile_.mempool.data_room, socket);
    if (pool == nullptr)
      throw std::runtime_error("cannot create the mbuf pool on socket " + std::to_string(socket) + " (" +
                               std::to_string(profile_.mempool.mbufs) + " mbufs of " +
                               std::to_string(profile_.mempool.data_room) + " bytes): " + rte_strerror(rte_errno) +
                               "; raise EAL -m / --socket-mem for that socket or lower mempool.mbufs");
    pools_.push_back(pool);
  }
  if (sockets.size() > 1) {
    std::printf("mbuf pools: one per socket with RX queues, %u mbufs each, on sockets", profile_.mempool.mbufs);
    for (int socket : sockets) std::printf(" %d", socket);
    std::printf("\n");
  }
  rx_queue_pools_.assign(profile_.ports.size(), {});
  for (std::size_t i = 0; i < profile_.ports.size(); ++i)
    for (int socket : queue_socket[i])
      rx_queue_pools_[i].push_back(pools_[std::size_t(std::find(sockets.begin(), sockets.end(), socket) - sockets.begin())]);
}

Dataplane::~Dataplane() {
  stop();
  release();
}

void Dataplane::release() {
  close_ports_and_count_leaks();
  for (rte_mempool* pool : pools_) rte_mempool_free(pool);
  pools_.clear();
  rx_queue_pools_.clear();
  rte_free(rcu_);
  rcu_ = nullptr;
}

void Dataplane::launch() {
  if (running_) return;
  state_.store(RunState::kRun, std::memory_order_relaxed);
  for (auto& c : lcores_) c->quiesce_acknowledged.store(false, std::memory_order_relaxed);
  start_tsc_ = rte_rdtsc();
  // Running from the first launch on: if a later lcore cannot be launched,
  // stop() then quiesces and stops those already running and frees what they
  // took (RX bursts handed to rings, parked, staged for TX), as after any run.
  running_ = true;
  if (taps_) taps_->start();
  if (health_) health_->start();
  if (peer_sync_) peer_sync_->start();
  for (std::size_t i = 0; i < lcores_.size(); ++i) {
    LcoreContext& c = *lcores_[i];
    tsan_release(&c);
    const int rc = rte_eal_remote_launch(run_lcore, &c, c.lcore_id);
    if (rc == 0) {
      launched_ = i + 1;
      continue;
    }
    // Those never launched have nothing to acknowledge: the quiesce waits
    // only for those that run.
    for (std::size_t j = i; j < lcores_.size(); ++j)
      lcores_[j]->quiesce_acknowledged.store(true, std::memory_order_relaxed);
    stop();
    throw std::runtime_error("cannot launch lcore " + std::to_string(c.lcore_id) + ": " + rte_strerror(-rc));
  }
}

bool Dataplane::quiesced() const {
  for (const auto& c : lcores_) {
    if (c->owner_stats.tx_held_now.get() != 0) return false;
    for (const auto& q : c->rx)
      if (q->stats.parked_now.get() != 0) return false;
  }
  for (const auto& r : rings_)
    if (!r->empty()) return false;
  return true;
}

void Dataplane::stop() {
  // An owner asleep on its doorbell sees a new state only once woken.
  auto wake_sleepers = [&] {
    for (auto& d : doorbells_) d->ring();
  };
  if (running_) {
    state_.store(RunState::kQuiesce, std::memory_order_relaxed);
    wake_sleepers();
    const auto give_up = std::chrono::steady_clock::now() + kQuiesceLimit;
    // quiesced() is trusted only once every lcore has acknowledged the quiesce:
    // an lcore between rte_eth_rx_burst and its hand-off holds packets that
    // no ring or ticket shows yet.
    auto all_acknowledged = [&] {
      for (const auto& c : lcores_)
        if (!c->quiesce_acknowledged.load(std::memory_order_acquire)) return false;
      return true;
    };
    while (!(all_acknowledged() && quiesced()) && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  state_.store(RunState::kStop, std::memory_order_relaxed);
  wake_sleepers();
  // Only the lcores this data path launched: one that refused the launch
  // may be running someone else's function.
  for (std::size_t i = 0; i < launched_; ++i) {
    rte_eal_wait_lcore(lcores_[i]->lcore_id);
    tsan_acquire(lcores_[i].get());
  }
  launched_ = 0;
  if (!running_) return;
  running_ = false;
  stop_tsc_ = rte_rdtsc();
  for (auto& c : lcores_) discard_after_stop(*c);
  // The checker before the exception thread: no probe comes after it.
  if (health_) health_->stop();
  // What the receivers put on their rings to the kernel still goes there.
  if (taps_) taps_->stop();
  if (peer_sync_) peer_sync_->stop();
}

std::uint64_t Dataplane::pool_size() const {
  std::uint64_t size = 0;
  for (const rte_mempool* pool : pools_) size += pool->size;
  return size;
}

std::int64_t Dataplane::mbufs_in_use() const {
  std::int64_t in_use = 0;
  for (const rte_mempool* pool : pools_) in_use += std::int64_t(pool->size) - std::int64_t(rte_mempool_avail_count(pool));
  return in_use;
}

std::uint16_t Dataplane::port_id(const std::string& name) const {
  const int i = profile_.port_index(name);
  if (i < 0) throw std::invalid_argument("no port named " + name);
  return port_ids_[std::size_t(i)];
}

std::int64_t Dataplane::close_ports_and_count_leaks() {
  if (ports_open_) {
    // The lcores have stopped and freed what they held: what is still out
    // now is in the devices (RX descriptors, TX queues, a net_ring's rings)
    // or leaked. Closing a port gives back what its device held, except
    // net_ring, whose close frees its rings with the mbufs still in them:
    // those are taken out first.
    //
    // net_af_xdp drops at close what its TX completion ring still holds (the
    // frames it sent last: port.h, reap_tx_completions): those are reaped
    // first. Its ports close last, so that what the open ones hold then is
    // what their fill rings took at set-up (kept_by_drivers_) plus the sent
    // frames not reaped yet, some of which the kernel may complete only a
    // little later. Reaping stops when no more than the fill rings' share is
    // out, or after kAfXdpTxDrain: a completion that never comes is counted
    // as a leak below, not waited for.
    const std::int64_t before = mbufs_in_use();
    std::vector<std::size_t> af_xdp;
    for (std::size_t i = 0; i < port_ids_.size(); ++i) {
      if (port_driver_name(port_ids_[i]) == "net_af_xdp") {
        af_xdp.push_back(i);
        continue;
      }
      free_mbufs_in_net_ring(port_ids_[i]);
      stop_and_close_port(port_ids_[i]);
    }
    if (!af_xdp.empty()) {
      constexpr auto kAfXdpTxDrain = std::chrono::milliseconds(500);
      const auto give_up = std::chrono::steady_clock::now() + kAfXdpTxDrain;
      for (;;) {
        for (std::size_t i : af_xdp) reap_tx_completions(port_ids_[i], profile_.ports[i].tx_queues);
        if (mbufs_in_use() <= std::int64_t(kept_by_drivers_) || std::chrono::steady_clock::now() >= give_up) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      for (std::size_t i : af_xdp) stop_and_close_port(port_ids_[i]);
    }
    if (taps_) taps_->close();
    ports_open_ = false;
    held_by_devices_ += std::uint64_t(std::max<std::int64_t>(0, before - mbufs_in_use()));
  }
  // A fill ring that could not be topped up (the pool ran dry: rx_nombuf)
  // holds fewer than it took at set-up; never credit more than is out.
  const std::int64_t in_use = mbufs_in_use();
  return in_use - std::min(in_use, std::int64_t(kept_by_drivers_));
}

PortCounters Dataplane::sample_port_counters(std::size_t i) const {
  rte_eth_stats es{};
  PortCounters raw;
  if (rte_eth_stats_get(port_ids_[i], &es) != 0) return port_counters_[i].totals();
  raw[PortCounters::kIpackets] = es.ipackets;
  raw[PortCounters::kOpackets] = es.opackets;
  raw[PortCounters::kIbytes] = es.ibytes;
  raw[PortCounters::kObytes] = es.obytes;
  raw[PortCounters::kImissed] = es.imissed;
  raw[PortCounters::kIerrors] = es.ierrors;
  raw[PortCounters::kOerrors] = es.oerrors;
  raw[PortCounters::kRxNombuf] = es.rx_nombuf;
  return port_counters_[i].update(raw);
}

void Dataplane::sample_port_counters() const {
  if (!ports_open_) return;
  for (std::size_t i = 0; i < port_ids_.size(); ++i) sample_port_counters(i);
}

StatsSnapshot Dataplane::snapshot() const {
  StatsSnapshot s;
  s.steering_generation = generation_;
  const std::uint64_t end = running_ || stop_tsc_ == 0 ? rte_rdtsc() : stop_tsc_;
  s.elapsed_s = start_tsc_ == 0 ? 0 : double(end - start_tsc_) / double(rte_get_tsc_hz());
  const double tsc_per_us = double(rte_get_tsc_hz()) / 1e6;
  s.tsc_hz = rte_get_tsc_hz();
  // A counter the lcores keep, from where counter_fields.h says it lives;
  // times are kept in TSC cycles and reported in microseconds.
  const auto counter_value = [tsc_per_us](const auto& stats, const auto& field) -> std::uint64_t {
    const std::uint64_t v = (stats.*field.source).get();
    return field.unit == CounterUnit::kMicroseconds ? std::uint64_t(double(v) / tsc_per_us) : v;
  };
  for (const auto& c : lcores_) {
    LcoreSnapshot l;
    l.lcore = c->lcore_id;
    l.owner_index = c->owner_index;
    for (const auto& f : kLcoreFields) l.*f.value = counter_value(c->loop_stats, f);
    s.busy_cycles_total += l.busy_cycles;
    for (const auto& q : c->rx) {
      QueueSnapshot qs;
      qs.port = profile_.ports[q->profile_port].name;
      qs.queue = q->queue;
      qs.lcore = c->lcore_id;
      const RxQueueStats& st = q->stats;
      for (const auto& f : kReceiveFields) qs.rx.*f.value = counter_value(st, f);
      for (std::size_t m = 0; m < kResolveMethods; ++m) qs.rx.routed[m] = st.routed[m].get();
      for (std::size_t r = 0; r < kDropReasonCount; ++r) qs.rx.drops[r] = st.drops[r].get();
      for (const auto& f : kQueueFields) qs.*f.value = counter_value(st, f);
      l.rx.add(qs.rx);
      s.queues.push_back(std::move(qs));
    }
    if (c->owner_index >= 0) {
      const OwnerStats& o = c->owner_stats;
      for (const auto& f : kOwnerFields) l.owner.*f.value = counter_value(o, f);
      for (std::size_t r = 0; r < kDropReasonCount; ++r) l.owner.drops[r] = o.drops[r].get();
    }
    s.rx_total.add(l.rx);
    s.owner_total.add(l.owner);
    s.lcores.push_back(std::move(l));
  }
  for (std::size_t r = 0; r < kDropReasonCount; ++r)
    s.drops_total[r] = s.rx_total.drops[r] + s.owner_total.drops[r];
  if (forwarding_) {
    s.forwarding.enabled = true;
    s.forwarding.entries = forwarding_->established().size();
    s.forwarding.slots = forwarding_->established().slot_count();
    s.forwarding.setup_entries = forwarding_->setup().size();
    s.forwarding.setup_slots = forwarding_->setup().slot_count();
    for (const auto& c : lcores_) {
      s.forwarding.expired += c->forwarding_expired.get();
      s.forwarding.retired += c->forwarding_retired.get();
    }
    s.forwarding.retiring_slots = backend_slots_.retiring([this](std::uint64_t g) { return swept(g); });
  }
  for (const BackendConfig& b : profile_.steering.backends) {
    BackendSnapshot bs;
    bs.name = b.name;
    bs.slot = b.slot;
    bs.state = backend_state_name(b.state);
    bs.owner_lcore = b.owner_lcore;
    bs.weight = b.weight;
    const BackendSnapshot sums = backend_counter_sums(b.slot);
    const BackendSnapshot* base = b.slot < counter_base_.size() ? &counter_base_[b.slot] : nullptr;
    for (const auto& f : kBackendCounterFields) bs.*f.value = sums.*f.value - (base ? base->*f.value : 0);
    s.backends.push_back(std::move(bs));
  }
  s.services = !profile_.steering.services.empty();
  if (peer_sync_) {
    PeerSyncSnapshot x = peer_sync_->snapshot();
    for (const auto& c : lcores_) x.ring_full += c->learned_ring_full.get();
    s.peer_sync.push_back(x);
  }
  if (health_) {
    const HealthChecker::View v = health_->view();
    HealthChecksSnapshot x;
    for (BackendSnapshot& bs : s.backends) {
      for (const HealthBook::Row& r : v.rows) {
        if (r.name != bs.name) continue;
        bs.health = backend_health_name(r.health);
        bs.probe_rounds_sent = r.rounds_sent;
        bs.probe_rounds_answered = r.rounds_answered;
        bs.probe_rounds_failed = r.rounds_failed;
        bs.probe_rtt_us = r.rtt_us;
      }
    }
    for (const HealthBook::Row& r : v.rows) {
      x.backends_up += r.health == BackendHealth::kUp;
      x.backends_down += r.health == BackendHealth::kDown;
      x.backends_unchecked += r.health == BackendHealth::kUnchecked;
    }
    x.probes_sent = v.totals.probes_sent - std::min(v.totals.probes_sent, v.probes_unsent);
    x.probes_unsent = v.probes_unsent;
    x.probes_refused = taps_->probes_refused();
    x.rounds_deferred = v.totals.rounds_deferred;
    for (const auto& c : lcores_)
      for (const auto& q : c->rx)
        if (q->exception) x.answers_received += q->exception->probe_answers.get();
    x.answers_matched = v.totals.answers;
    x.answers_unmatched = v.totals.answers_unmatched;
    x.hash_rebuilds = health_rebuilds_;
    s.health_checks.push_back(x);
  }
  if (taps_) {
    for (const auto& t : taps_->taps()) {
      for (unsigned k = 0; k < kExceptionClasses; ++k) {
        ExceptionSnapshot x;
        x.port = profile_.ports[t->profile_port].name;
        x.cls = std::string(exception_class_name(ExceptionClass(k)));
        for (const auto& c : lcores_) {
          for (const auto& q : c->rx) {
            if (q->profile_port != t->profile_port || !q->exception) continue;
            x.to_kernel += q->exception->stats.to_kernel[k].get();
            x.policed += q->exception->stats.policed[k].get();
            x.ring_full += q->exception->stats.ring_full[k].get();
          }
        }
        x.from_kernel = t->counters.from_kernel[k].get();
        x.port_refused = t->counters.port_refused[k].get();
        x.tap_refused = t->counters.tap_refused[k].get();
        s.exception.push_back(std::move(x));
      }
    }
  }
  for (const auto& ri : ring_info_) {
    RingSnapshot r;
    r.from_lcore = ri.from_lcore;
    r.to_lcore = ri.to_lcore;
    r.capacity = ri.ring->capacity();
    r.occupancy = ri.ring->size();
    r.high_water = ri.stats->occupancy_high_water.get();
    r.full_events = ri.stats->full_events.get();
    s.rings.push_back(r);
  }
  if (ports_open_) {
    for (std::size_t i = 0; i < port_ids_.size(); ++i) {
      PortSnapshot p;
      p.name = profile_.ports[i].name;
      p.port_id = port_ids_[i];
      const PortCounters t = sample_port_counters(i);
      p.ipackets = t[PortCounters::kIpackets];
      p.opackets = t[PortCounters::kOpackets];
      p.ibytes = t[PortCounters::kIbytes];
      p.obytes = t[PortCounters::kObytes];
      p.imissed = t[PortCounters::kImissed];
      p.ierrors = t[PortCounters::kIerrors];
      p.oerrors = t[PortCounters::kOerrors];
      p.rx_nombuf = t[PortCounters::kRxNombuf];
      p.counter_resets = port_counters_[i].resets();
      rte_eth_link link {};
      p.link_up = rte_eth_link_get_nowait(p.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
      const int n = rte_eth_xstats_get_names(p.port_id, nullptr, 0);
      if (n > 0) {
        std::vector<rte_eth_xstat_name> names(static_cast<std::size_t>(n));
        std::vector<rte_eth_xstat> values(static_cast<std::size_t>(n));
        if (rte_eth_xstats_get_names(p.port_id, names.data(), unsigned(n)) == n &&
            rte_eth_xstats_get(p.port_id, values.data(), unsigned(n)) == n) {
          for (int k = 0; k < n; ++k) {
            const std::string name = names[std::size_t(values[std::size_t(k)].id)].name;
            if (name.find("pause") != std::string::npos || name.find("xon") != std::string::npos ||
                name.find("xoff") != std::string::npos)
              p.pause_xstats.emplace_back(name, values[std::size_t(k)].value);
          }
        }
      }
      s.ports.push_back(std::move(p));
    }
  }
  return s;
}

}  // namespace qs
