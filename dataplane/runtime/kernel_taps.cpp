#include "dataplane/runtime/kernel_taps.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "dataplane/fastpath/tsan.h"
#include "dataplane/runtime/port.h"

namespace qs {
namespace {

constexpr unsigned kBurst = 32;
// Idle, the thread sleeps this long between polls: BFD's 10 ms intervals
// and ARP's retries wait at most this, and an idle appliance costs a wake-up
// every so often, not a core.
constexpr auto kIdleSleep = std::chrono::microseconds(200);
constexpr auto kAddressPeriod = std::chrono::seconds(1);

std::string mac_text(const std::array<std::uint8_t, 6>& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

ExceptionClass class_of(rte_mbuf* m) {
  return exception_class(rte_pktmbuf_mtod(m, const std::uint8_t*), rte_pktmbuf_data_len(m));
}

}  // namespace

KernelTaps::KernelTaps(const Profile& profile, const std::vector<std::uint16_t>& port_ids, rte_mempool* pool,
                       std::uint16_t tx_queue)
    : tap_by_port_(RTE_MAX_ETHPORTS, nullptr), tx_queue_(tx_queue), ring_size_(profile.exception_path.ring_size) {
  // Unique vdev names across the data paths one process builds (tests).
  static std::atomic<unsigned> instance{0};
  try {
    for (std::size_t i = 0; i < profile.ports.size(); ++i) {
      const PortConfig& port = profile.ports[i];
      if (port.tap.empty()) continue;
      rte_ether_addr mac{};
      if (rte_eth_macaddr_get(port_ids[i], &mac) != 0)
        throw PortError("port '" + port.name + "': cannot read its MAC address for its tap");
      std::array<std::uint8_t, 6> m;
      std::memcpy(m.data(), mac.addr_bytes, 6);
      PortConfig tap;
      tap.name = port.name + " tap";
      tap.device = "net_tap_qs" + std::to_string(instance.fetch_add(1)) + ",iface=" + port.tap + ",mac=" + mac_text(m);
      tap.rx_queues = 1;
      tap.tx_queues = 1;
      tap.rx_descriptors = 512;
      tap.tx_descriptors = 512;
      tap.rss = false;
      tap.mtu = port.mtu;
      auto t = std::make_unique<Tap>();
      t->profile_port = i;
      t->port_id = port_ids[i];
      t->iface = port.tap;
      t->tap_id = find_or_probe_port(tap);
      open_ = true;
      taps_.push_back(std::move(t));
      configure_and_start_port(taps_.back()->tap_id, tap, pool);
      tap_by_port_[port_ids[i]] = taps_.back().get();
      std::printf("port %s: exception path through kernel interface %s (MAC %s, MTU %u)\n", port.name.c_str(),
                  port.tap.c_str(), mac_text(m).c_str(), unsigned(port.mtu));
    }
  } catch (...) {
    close();
    throw;
  }
}

KernelTaps::~KernelTaps() {
  stop();
  close();
}

std::array<MbufRing*, 2> KernelTaps::rings_for_lcore() {
  control_.push_back(std::make_unique<MbufRing>(ring_size_));
  bulk_.push_back(std::make_unique<MbufRing>(ring_size_));
  return {control_.back().get(), bulk_.back().get()};
}

MbufRing* KernelTaps::probe_ring(std::uint32_t size) {
  if (!probes_) probes_ = std::make_unique<MbufRing>(size);
  return probes_.get();
}

// The health checker's probes, out of their ports on the kernel's queue.
unsigned KernelTaps::send_probes() {
  if (!probes_) return 0;
  rte_mbuf* pkts[kBurst];
  const unsigned n = probes_->dequeue_burst(pkts, kBurst);
  for (unsigned k = 0; k < n; ++k) tsan_acquire(pkts[k]);
  for (unsigned i = 0; i < n;) {
    const std::uint16_t port = pkts[i]->port;
    unsigned j = i + 1;
    while (j < n && pkts[j]->port == port) ++j;
    // Nothing of these mbufs is read after this: the port's side (the
    // driver, a test reading a ring port) takes them from here.
    for (unsigned k = i; k < j; ++k) tsan_release(pkts[k]);
    const unsigned sent = rte_eth_tx_burst(port, tx_queue_, pkts + i, std::uint16_t(j - i));
    if (sent < j - i) {
      probes_refused_.add(j - i - sent);
      rte_pktmbuf_free_bulk(pkts + i + sent, j - i - sent);
    }
    i = j;
  }
  return n;
}

const KernelTaps::Tap* KernelTaps::tap_of(std::uint16_t port_id) const {
  return port_id < tap_by_port_.size() ? tap_by_port_[port_id] : nullptr;
}

void KernelTaps::start() {
  if (thread_.joinable() || taps_.empty()) return;
  stopping_.store(false, std::memory_order_relaxed);
  read_addresses();
  thread_ = std::thread([this] { run(); });
}

void KernelTaps::stop() {
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    thread_.join();
  }
  if (!open_) return;
  for (auto& r : control_) while (drain(*r) != 0) {}
  for (auto& r : bulk_) while (drain(*r) != 0) {}
}

void KernelTaps::close() {
  if (!open_) return;
  for (auto& t : taps_) stop_and_close_port(t->tap_id);
  for (auto& r : control_) {
    rte_mbuf* pkts[kBurst];
    while (unsigned n = r->dequeue_burst(pkts, kBurst)) rte_pktmbuf_free_bulk(pkts, n);
  }
  for (auto& r : bulk_) {
    rte_mbuf* pkts[kBurst];
    while (unsigned n = r->dequeue_burst(pkts, kBurst)) rte_pktmbuf_free_bulk(pkts, n);
  }
  if (probes_) {
    rte_mbuf* pkts[kBurst];
    while (unsigned n = probes_->dequeue_burst(pkts, kBurst)) rte_pktmbuf_free_bulk(pkts, n);
  }
  open_ = false;
}

// One burst from a receiver's ring into the TAPs, consecutive frames of one
// port in one write burst.
unsigned KernelTaps::drain(MbufRing& ring) {
  rte_mbuf* pkts[kBurst];
  const unsigned n = ring.dequeue_burst(pkts, kBurst);
  for (unsigned i = 0; i < n;) {
    Tap* t = tap_by_port_[pkts[i]->port];
    unsigned j = i + 1;
    while (j < n && pkts[j]->port == pkts[i]->port) ++j;
    if (t == nullptr) {  // never: receivers put only their TAP ports' frames here
      rte_pktmbuf_free_bulk(pkts + i, j - i);
      i = j;
      continue;
    }
    for (unsigned k = i; k < j; ++k) tsan_release(pkts[k]);
    const unsigned sent = rte_eth_tx_burst(t->tap_id, 0, pkts + i, std::uint16_t(j - i));
    for (unsigned k = i + sent; k < j; ++k) {
      t->counters.tap_refused[unsigned(class_of(pkts[k]))].add();
      rte_pktmbuf_free(pkts[k]);
    }
    i = j;
  }
  return n;
}

unsigned KernelTaps::from_kernel(Tap& t) {
  rte_mbuf* pkts[kBurst];
  const unsigned n = rte_eth_rx_burst(t.tap_id, 0, pkts, kBurst);
  if (n == 0) return 0;
  ExceptionClass cls[kBurst];
  for (unsigned i = 0; i < n; ++i) {
    tsan_acquire(pkts[i]);
    cls[i] = class_of(pkts[i]);
    tsan_release(pkts[i]);
  }
  const unsigned sent = rte_eth_tx_burst(t.port_id, tx_queue_, pkts, std::uint16_t(n));
  for (unsigned i = 0; i < sent; ++i) t.counters.from_kernel[unsigned(cls[i])].add();
  for (unsigned i = sent; i < n; ++i) {
    t.counters.port_refused[unsigned(cls[i])].add();
    rte_pktmbuf_free(pkts[i]);
  }
  return n;
}

// The first IPv4 address and the first IPv6 address that is not
// link-local of each TAP, as the kernel has them now.
void KernelTaps::read_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  for (auto& t : taps_) {
    const std::uint8_t* v4 = nullptr;
    const std::uint8_t* v6 = nullptr;
    for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || t->iface != a->ifa_name) continue;
      if (a->ifa_addr->sa_family == AF_INET && v4 == nullptr) {
        v4 = reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr);
      } else if (a->ifa_addr->sa_family == AF_INET6 && v6 == nullptr) {
        const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
        if (!IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) v6 = reinterpret_cast<const std::uint8_t*>(&s6->sin6_addr);
      }
    }
    t->host.publish(v4, v6);
  }
  freeifaddrs(list);
}

void KernelTaps::run() {
  auto next_addresses = std::chrono::steady_clock::now() + kAddressPeriod;
  while (!stopping_.load(std::memory_order_acquire)) {
    unsigned work = 0;
    // Routing's frames first: every control ring, then the bulk ones; a
    // flood in bulk waits behind ARP, ND, BGP and BFD, never the other way.
    for (auto& r : control_) work += drain(*r);
    for (auto& r : bulk_) work += drain(*r);
    for (auto& t : taps_) work += from_kernel(*t);
    work += send_probes();
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_addresses) {
      read_addresses();
      next_addresses = now + kAddressPeriod;
    }
    if (work == 0) std::this_thread::sleep_for(kIdleSleep);
  }
}

}  // namespace qs
