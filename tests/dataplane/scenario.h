// Integration-test harness: a quicsteer Dataplane on a port made of rte_rings.
//
// RingPort's RX rings stand for the NIC's RX descriptor rings: nobody but the
// data path dequeues from them, so when quicsteer stops polling a queue its ring
// fills and the sender sees it (rte_ring_enqueue fails), exactly as a NIC
// runs out of descriptors. The TX rings, one per owner (an owner transmits on
// TX queue = its owner index), are large and emptied by the test, so what
// each owner sent can be checked packet by packet.
//
// Scenario::send() plays a lossless sender: on a full RX ring it waits and
// retries, which is what a sender honouring PAUSE frames does. Every frame
// gets a sequence number in an mbuf dynamic field so its way out can be told.
// A frame larger than one mbuf's room (or than RunOptions::segment_size)
// arrives as a chain of segments, as a NIC's scattered RX delivers it.
//
// Every run ends with the accounting checked (ScenarioResult::accounting):
// received = processed + drops, processed = transmitted + sunk, and the
// port's own counters agree (ipackets = received, opackets = transmitted,
// and oerrors = the owners' tx_full where the driver counts oerrors).
#pragma once

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>
#include <rte_eth_ring.h>
#include <rte_errno.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/runtime/dataplane.h"
#include "dataplane/config/profile.h"
#include "dataplane/fastpath/tsan.h"

namespace qs::test {

inline int test_seq_offset() {
  static const int offset = [] {
    static const rte_mbuf_dynfield desc = {"quicsteer_test_seq", sizeof(std::uint64_t), alignof(std::uint64_t), 0};
    const int o = rte_mbuf_dynfield_register(&desc);
    if (o < 0) throw std::runtime_error("cannot register the test sequence field");
    return o;
  }();
  return offset;
}
inline std::uint64_t& test_seq(rte_mbuf* m) { return *RTE_MBUF_DYNFIELD(m, test_seq_offset(), std::uint64_t*); }

class RingPort {
 public:
  RingPort(unsigned rx_queues, unsigned rx_ring_size, unsigned tx_queues, unsigned tx_ring_size) {
    static std::atomic<unsigned> next{0};
    name_ = "t";
    name_ += std::to_string(next.fetch_add(1));
    for (unsigned q = 0; q < rx_queues; ++q) rx_.push_back(make_ring("rx", q, rx_ring_size));
    for (unsigned q = 0; q < tx_queues; ++q) tx_.push_back(make_ring("tx", q, tx_ring_size));
    if (rte_eth_from_rings(name_.c_str(), rx_.data(), rx_queues, tx_.data(), tx_queues, 0) < 0)
      throw std::runtime_error(std::string("rte_eth_from_rings: ") + rte_strerror(rte_errno));
  }
  ~RingPort() {
    for (auto* r : rx_) free_ring(r);
    for (auto* r : tx_) free_ring(r);
  }
  RingPort(const RingPort&) = delete;
  RingPort& operator=(const RingPort&) = delete;

  std::string device() const { return "net_ring_" + name_; }
  rte_ring* rx(unsigned q) const { return rx_.at(q); }
  rte_ring* tx(unsigned q) const { return tx_.at(q); }
  unsigned tx_count() const { return unsigned(tx_.size()); }

 private:
  rte_ring* make_ring(const char* dir, unsigned q, unsigned size) {
    std::string n = name_;
    n += dir;
    n += std::to_string(q);
    rte_ring* r = rte_ring_create(n.c_str(), size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
    if (r == nullptr) throw std::runtime_error("rte_ring_create " + n + ": " + rte_strerror(rte_errno));
    return r;
  }
  static void free_ring(rte_ring* r) {
    void* m;
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
  std::string name_;
  std::vector<rte_ring*> rx_, tx_;
};

struct DeliveredPacket {
  std::uint64_t seq;
  unsigned tx_queue;  // = owner index
};

struct ScenarioResult {
  std::uint64_t sent = 0;                 // frames the RX rings accepted
  std::uint64_t sender_saw_full = 0;      // times an RX ring refused a frame
  std::vector<DeliveredPacket> delivered; // in the order each owner sent them
  StatsSnapshot stats;                    // after stop
  std::int64_t mbufs_leaked = -1;
  bool stalled = false;                   // no progress for the stall limit
  std::uint64_t never_received = 0;       // left in RX rings when the run ended
  std::uint64_t left_in_tx = 0;           // transmitted but not taken by the test when the run ended
  std::uint64_t segmented = 0;            // frames sent as more than one segment
  // What does not add up, one line each; empty when every identity holds.
  std::string accounting;
};

// The identities every run must satisfy once the lcores stopped (the ports
// still open, so their counters are there to compare).
inline std::string check_accounting(const ScenarioResult& r) {
  std::string problems;
  const auto expect = [&](const char* what, std::uint64_t left, std::uint64_t right) {
    if (left != right)
      problems += std::string(what) + ": " + std::to_string(left) + " != " + std::to_string(right) + "\n";
  };
  const StatsSnapshot& s = r.stats;
  const std::uint64_t received = s.rx_total.rx;
  const std::uint64_t tx_full = s.owner_total.drops[std::size_t(DropReason::kTxFull)];
  expect("received = processed + drops", received, s.owner_total.processed + s.drops_sum());
  expect("processed = transmitted + sunk", s.owner_total.processed, s.owner_total.tx + s.owner_total.sunk);
  expect("sent = received + never received", r.sent, received + r.never_received);
  std::uint64_t ipackets = 0, opackets = 0, oerrors = 0;
  for (const auto& p : s.ports) ipackets += p.ipackets, opackets += p.opackets, oerrors += p.oerrors;
  if (s.ports.empty()) problems += "no port counters in the snapshot\n";
  expect("port ipackets = received", ipackets, received);
  // ICMP too-big replies are quicsteer's own packets, sent besides.
  std::uint64_t icmp_sent = 0;
  for (const auto& b : s.backends) icmp_sent += b.icmp_sent;
  expect("port opackets = transmitted + ICMP sent", opackets, s.owner_total.tx + icmp_sent);
  // (net_ring counts no oerrors: what its TX refused is only in tx_full.)
  if (oerrors != 0) expect("port oerrors = tx_full", oerrors, tx_full);
  return problems;
}

// `frame` in one mbuf, or a chain of segments of at most `segment_size`
// bytes (0: as much as a segment holds). nullptr when the pool is empty.
inline rte_mbuf* frame_to_mbuf(rte_mempool* pool, const std::vector<std::uint8_t>& f, unsigned segment_size,
                               bool& segmented) {
  rte_mbuf* head = nullptr;
  std::size_t at = 0;
  segmented = false;
  do {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) {
      rte_pktmbuf_free(head);
      return nullptr;
    }
    std::size_t n = std::min<std::size_t>(f.size() - at, rte_pktmbuf_tailroom(m));
    if (segment_size != 0) n = std::min<std::size_t>(n, segment_size);
    if (n != 0) std::memcpy(rte_pktmbuf_append(m, std::uint16_t(n)), f.data() + at, n);
    at += n;
    if (head == nullptr) {
      head = m;
    } else {
      segmented = true;
      if (rte_pktmbuf_chain(head, m) != 0) {
        rte_pktmbuf_free(m);
        rte_pktmbuf_free(head);
        throw std::runtime_error("frame needs more segments than an mbuf chain may have");
      }
    }
  } while (at < f.size());
  return head;
}

// A test profile with {DEVICE} filled in; for tests that only need its
// steering section (no device is touched).
inline Profile parse_test_profile(std::string yaml, const std::string& device = "net_ring_unused") {
  const auto at = yaml.find("{DEVICE}");
  if (at != std::string::npos) yaml.replace(at, 8, device);
  return parse_profile(yaml, "test-profile");
}

struct RunOptions {
  // Ends the run as soon as it returns true, without waiting for delivery:
  // the clean-stop test stops under load that way.
  std::function<bool(const ScenarioResult&)> stop_early;
  // Called after each frame is sent, e.g. to pause so that owners go idle.
  std::function<void(std::size_t)> after_send;
  // After everything was delivered, the data path keeps running until this
  // holds for its statistics (e.g. idle connections expired); the stall limit
  // bounds the wait.
  std::function<bool(const StatsSnapshot&)> keep_running_until;
  // No frame moved for this long ends the run with result.stalled: a hang
  // detector, not a performance bound.
  std::chrono::seconds stall_limit{60};
  // Packets the test takes from each TX ring per look: a slow TX queue (a
  // descheduled peer, a slower link downstream). 0: nobody reads the TX rings
  // while the data path runs (a peer that takes nothing), so TX refuses once
  // they are full. They are emptied after the stop, before the leak check.
  unsigned tx_take_per_look = ~0u;
  // Each frame in segments of at most this many bytes (0: one segment where
  // it fits).
  unsigned segment_size = 0;
  // Called with each transmitted packet (and its TX queue) before it is
  // freed, to check what it carries.
  std::function<void(const rte_mbuf*, unsigned)> inspect_tx;
};

class Scenario {
 public:
  // `profile_yaml` may use {DEVICE} for the ring port's device name.
  Scenario(const std::string& profile_yaml, RingPort& port)
      : port_(port), profile_(parse_test_profile(profile_yaml, port.device())) {
    dp_ = std::make_unique<Dataplane>(profile_);
  }

  Dataplane& dataplane() { return *dp_; }

  // Waits (from RunOptions::after_send) until the owners are done with the
  // first `n` frames sent: each transmitted, sunk or dropped. Frames sent
  // after it returns can then overtake none of them, whichever RX queue and
  // ring they take: what a test needs before a step that must come after
  // those frames (a NAT rebinding, a steering reload).
  // Throws when nothing moves for a minute (a hang, not a slow machine).
  void wait_until_through(std::uint64_t n) {
    std::uint64_t last = 0;
    auto last_progress = std::chrono::steady_clock::now();
    for (;;) {
      const StatsSnapshot s = dp_->snapshot();
      const std::uint64_t through = s.owner_total.tx + s.owner_total.sunk + s.drops_sum();
      if (through >= n) return;
      if (through != last) {
        last = through;
        last_progress = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(60)) {
        throw std::runtime_error("wait_until_through(" + std::to_string(n) + "): stuck at " + std::to_string(through));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // Sends frames[i] to RX queue queue_of[i], in order, waiting on full rings;
  // then waits until every frame sent was delivered or counted as dropped.
  ScenarioResult run(const std::vector<const std::vector<std::uint8_t>*>& frames,
                     const std::vector<unsigned>& queue_of, const RunOptions& options = {}) {
    inspect_tx_ = options.inspect_tx;
    const auto& stop_early = options.stop_early;
    const auto stall_limit = options.stall_limit;
    ScenarioResult r;
    dp_->launch();
    auto last_progress = std::chrono::steady_clock::now();
    auto progressed = [&] { last_progress = std::chrono::steady_clock::now(); };
    auto stalled = [&] { return std::chrono::steady_clock::now() - last_progress > stall_limit; };
    bool early = false;
    for (std::size_t i = 0; i < frames.size() && !early; ++i) {
      rte_mbuf* m = nullptr;
      bool segmented = false;
      while (m == nullptr) {
        m = frame_to_mbuf(dp_->pool(), *frames[i], options.segment_size, segmented);
        if (m == nullptr) {
          if (collect(r, options.tx_take_per_look)) progressed();
          if (stalled()) return finish(r, true);
          std::this_thread::yield();
        }
      }
      r.segmented += segmented;
      test_seq(m) = i;
      rte_ring* rx = port_.rx(queue_of[i]);
      tsan_release(m);  // the data path takes it in net_ring's uninstrumented RX (dataplane/fastpath/tsan.h)
      while (rte_ring_enqueue(rx, m) != 0) {
        ++r.sender_saw_full;
        if (collect(r, options.tx_take_per_look)) progressed();
        if (stalled()) {
          rte_pktmbuf_free(m);
          return finish(r, true);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      ++r.sent;
      progressed();
      if ((i & 63) == 0 && collect(r, options.tx_take_per_look)) progressed();
      if (options.after_send) options.after_send(i);
      if (stop_early && stop_early(r)) early = true;
    }
    while (!early) {
      if (collect(r, options.tx_take_per_look)) progressed();
      const StatsSnapshot s = dp_->snapshot();
      // Transmitted (taken by the test or still in a TX ring), sunk or dropped.
      if (s.owner_total.tx + s.owner_total.sunk + s.drops_sum() >= r.sent) break;
      if (stalled()) return finish(r, true);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (options.keep_running_until) {
      progressed();
      while (!options.keep_running_until(dp_->snapshot())) {
        if (stalled()) return finish(r, true);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return finish(r, false);
  }

 private:
  std::uint64_t in_tx_rings() const {
    std::uint64_t n = 0;
    for (unsigned q = 0; q < port_.tx_count(); ++q) n += rte_ring_count(port_.tx(q));
    return n;
  }

  // Takes up to `limit` packets from each TX ring.
  bool collect(ScenarioResult& r, unsigned limit = ~0u) {
    bool any = false;
    void* burst[64];
    for (unsigned q = 0; q < port_.tx_count(); ++q) {
      unsigned n;
      for (unsigned left = limit;
           left != 0 && (n = rte_ring_dequeue_burst(port_.tx(q), burst, std::min(64u, left), nullptr)) != 0;
           left -= n) {
        any = true;
        for (unsigned k = 0; k < n; ++k) {
          auto* m = static_cast<rte_mbuf*>(burst[k]);
          tsan_acquire(m);  // an owner sent it through net_ring's uninstrumented TX
          if (inspect_tx_) inspect_tx_(m, q);
          r.delivered.push_back({test_seq(m), q});
          rte_pktmbuf_free(m);
        }
      }
    }
    return any;
  }

  ScenarioResult& finish(ScenarioResult& r, bool stalled) {
    r.stalled = stalled;
    dp_->stop();
    r.left_in_tx = in_tx_rings();
    collect(r);
    // Frames still in an RX ring were never taken by the data path: they are
    // the sender's, not quicsteer's, so they go back before the leak check.
    for (unsigned q = 0; q < profile_.ports[0].rx_queues; ++q) {
      void* m;
      while (rte_ring_dequeue(port_.rx(q), &m) == 0) {
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        ++r.never_received;
      }
    }
    r.stats = dp_->snapshot();
    r.accounting = check_accounting(r);
    r.mbufs_leaked = dp_->close_ports_and_count_leaks();
    return r;
  }

  RingPort& port_;
  std::function<void(const rte_mbuf*, unsigned)> inspect_tx_;
  Profile profile_;
  std::unique_ptr<Dataplane> dp_;
};

}  // namespace qs::test
