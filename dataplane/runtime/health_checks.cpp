#include "dataplane/runtime/health_checks.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <stdexcept>

#include "dataplane/fastpath/tsan.h"
#include "dataplane/runtime/kernel_random.h"

namespace qs {
namespace {

// The thread's pace: answers wait at most this long to be read (their RTT
// is measured on reading, so this is its resolution), and a due round waits
// at most this long to leave.
constexpr auto kTick = std::chrono::microseconds(200);
constexpr unsigned kBurst = 32;

std::uint64_t now_us() {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::uint64_t random_seed() {
  std::uint64_t seed = 0;
  kernel_random(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(&seed), sizeof seed), "health probe CIDs");
  return seed;
}

}  // namespace

HealthChecker::HealthChecker(const HealthChecksConfig& config, std::uint16_t tx_port_id, const std::array<std::uint8_t, 6>& tx_mac,
                             std::uint16_t tx_mtu, const HostAddresses* source, MbufRing* to_port,
                             rte_mempool* pool)
    : config_(config),
      tx_port_id_(tx_port_id),
      tx_mac_(tx_mac),
      tx_mtu_(tx_mtu),
      source_(source),
      to_port_(to_port),
      pool_(pool),
      book_(config, random_seed()) {}

HealthChecker::~HealthChecker() { stop(); }

MbufRing* HealthChecker::answer_ring_for_lcore(std::uint32_t size) {
  answer_rings_.push_back(std::make_unique<MbufRing>(size));
  return answer_rings_.back().get();
}

void HealthChecker::set_backends(const std::vector<BackendConfig>& backends, const DeliveryConfig& delivery) {
  std::vector<BackendTemplate> templates;
  templates.reserve(backends.size());
  for (const BackendConfig& b : backends) templates.push_back(build_backend_template(delivery, b, tx_mac_, tx_mtu_));
  std::lock_guard<std::mutex> lock(mutex_);
  book_.set_backends(backends, now_us());
  templates_ = std::move(templates);
}

void HealthChecker::start() {
  if (thread_.joinable()) return;
  stopping_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this] { run(); });
}

void HealthChecker::stop() {
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    thread_.join();
  }
  // Answers still on the rings go back to their pool (the receivers have
  // stopped: Dataplane::stop stops them first).
  for (auto& r : answer_rings_) {
    rte_mbuf* pkts[kBurst];
    while (unsigned n = r->dequeue_burst(pkts, kBurst)) {
      for (unsigned i = 0; i < n; ++i) tsan_acquire(pkts[i]);
      rte_pktmbuf_free_bulk(pkts, n);
    }
  }
}

HealthChecker::View HealthChecker::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  View v;
  v.rows = book_.rows();
  v.totals = book_.totals();
  v.probes_unsent = probes_unsent_;
  v.any_answering = book_.any_answering();
  v.epoch = book_.epoch();
  return v;
}

std::vector<std::string> HealthChecker::down_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (const HealthBook::Row& r : book_.rows())
    if (r.health == BackendHealth::kDown) names.push_back(r.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::uint64_t HealthChecker::epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return book_.epoch();
}

// Builds one probe, delivers it as the backend's packets are delivered, and
// puts it on the ring to the port. Under the lock.
void HealthChecker::send(const HealthBook::Probe& p, std::uint64_t) {
  const HealthTarget& target = config_.targets[p.target];
  ProbeAddresses a;
  a.ipv6 = target.ipv6;
  a.target = target.address;
  a.source_port = config_.probe_udp_port;
  a.target_port = target.udp_port;
  if (!source_->read(target.ipv6, a.source.data())) {  // the TAP has no address of the family (yet)
    ++probes_unsent_;
    return;
  }
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) {
    ++probes_unsent_;
    return;
  }
  std::uint8_t* frame = rte_pktmbuf_mtod(m, std::uint8_t*);
  if (rte_pktmbuf_tailroom(m) < kMaxProbeFrame) {
    rte_pktmbuf_free(m);
    ++probes_unsent_;
    return;
  }
  const std::uint32_t len = build_probe_frame(a, p.dcid.data(), p.scid.data(), p.dcid[0], frame);
  const BackendTemplate& t = templates_[p.backend];
  std::uint32_t flow_hash = 0;
  std::memcpy(&flow_hash, p.dcid.data(), sizeof flow_hash);
  const DeliveryResult r = deliver(t, frame, len, rte_pktmbuf_headroom(m), kEthernetLen, target.ipv6, flow_hash);
  if (r.status != DeliveryStatus::kOk) {  // too big for the TX port's MTU once encapsulated
    rte_pktmbuf_free(m);
    ++probes_unsent_;
    return;
  }
  m->data_off = std::uint16_t(m->data_off - (frame - r.frame));
  m->data_len = std::uint16_t(r.len);
  m->pkt_len = r.len;
  m->port = tx_port_id_;
  tsan_release(m);
  if (to_port_->enqueue_burst(&m, 1) != 1) {
    rte_pktmbuf_free(m);
    ++probes_unsent_;
  }
}

bool HealthChecker::has_sources() const {
  std::array<std::uint8_t, 16> a{};
  for (const HealthTarget& t : config_.targets)
    if (!source_->read(t.ipv6, a.data())) return false;
  return true;
}

unsigned HealthChecker::drain_answers(std::uint64_t now) {
  unsigned work = 0;
  for (auto& ring : answer_rings_) {
    rte_mbuf* pkts[kBurst];
    const unsigned n = ring->dequeue_burst(pkts, kBurst);
    for (unsigned i = 0; i < n; ++i) {
      tsan_acquire(pkts[i]);
      ProbeAnswer a;
      if (parse_probe_answer(rte_pktmbuf_mtod(pkts[i], const std::uint8_t*), rte_pktmbuf_data_len(pkts[i]),
                             config_.probe_udp_port, &a)) {
        book_.answer(a, now);
      }
      rte_pktmbuf_free(pkts[i]);
    }
    work += n;
  }
  return work;
}

void HealthChecker::run() {
  while (!stopping_.load(std::memory_order_acquire)) {
    std::vector<HealthBook::Change> changes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::uint64_t now = now_us();
      // Answers first: one that came in time is not judged late.
      drain_answers(now);
      book_.expire(now);
      // No round starts before the TAP has an address of every target's
      // family (the operator or a routing daemon gives it one after the
      // start): a probe that cannot leave says nothing of the backend.
      if (has_sources()) book_.start_due(now, [&](const HealthBook::Probe& p) { send(p, now); });
      changes = book_.take_changes();
    }
    for (const HealthBook::Change& c : changes) {
      if (c.to == BackendHealth::kDown) {
        std::printf("quicsteer: health: backend %s down after %u failed probe rounds\n", c.name.c_str(), c.rounds);
      } else {
        std::printf("quicsteer: health: backend %s up after %u answered probe rounds (rtt %u us)\n", c.name.c_str(),
                    c.rounds, c.rtt_us);
      }
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(kTick);
  }
}

}  // namespace qs
