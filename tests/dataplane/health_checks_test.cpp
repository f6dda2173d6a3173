// Health checks (issue 39) in-process: a ring port whose TX queue after the
// owner's carries the probes, a real TAP whose address is their source, and
// this test as the fleet: it reads each probe off the ring, checks that it
// went by its backend's delivery (l2: the backend's MAC) to the service
// address, and answers it with Version Negotiation as a QUIC server would,
// for the backends it keeps alive. Checked: a backend that stops answering
// is down after `fall` rounds and new connections avoid it; it comes back
// after `rise`; forged answers mark nothing; with no backend answering
// /healthz's sample says so and the hash fails open; the counters add up.
//
// The test moves into a network namespace of its own (the TAP and its
// addresses live there). Needs root and /dev/net/tun; skipped without.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "dataplane/fastpath/health_probe.h"
#include "dataplane/fastpath/tsan.h"
#include "tests/dataplane/ring_port_frames.h"
#include "tests/dataplane/scenario.h"
#include "tests/traffic/frame.h"

namespace qs::test {
namespace {

using traffic::IpAddress;
using traffic::L2Header;
using traffic::MacAddress;
using Frame = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr unsigned kBackends = 4;
const MacAddress kRouter = {0x02, 0, 0, 0x99, 0, 1};
const std::array<std::uint8_t, 4> kTapV4 = {10, 99, 0, 2};
const std::array<std::uint8_t, 16> kTapV6 = {0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
const std::array<std::uint8_t, 4> kVip = {10, 99, 1, 1};
const std::array<std::uint8_t, 16> kVip6 = {0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

MacAddress backend_mac(unsigned i) { return {0x02, 0, 0, 0x99, 0x02, std::uint8_t(0x10 + i)}; }

// Into a network namespace of this thread's own, where the TAP and the
// addresses the test gives it stay.
bool private_namespace() {
  if (geteuid() != 0) return false;
  const int fd = open("/dev/net/tun", O_RDWR);
  if (fd < 0) return false;
  close(fd);
  return unshare(CLONE_NEWNET) == 0;
}

std::string profile(const std::string& tap, unsigned n = kBackends,
                    const std::string& health = "{interval_ms: 100, timeout_ms: 60, rise: 2, fall: 3}") {
  std::string backends;
  for (unsigned i = 0; i < n; ++i) {
    const MacAddress m = i < kBackends ? backend_mac(i) : MacAddress{0x02, 0, 0, 0x98, std::uint8_t(i >> 8), std::uint8_t(i)};
    char line[160];
    std::snprintf(line, sizeof line, "  - {name: b%u, mac: \"%02x:%02x:%02x:%02x:%02x:%02x\"}\n", i, m[0], m[1],
                  m[2], m[3], m[4], m[5]);
    backends += line;
  }
  return "ports:\n  - {name: wire, device: \"{DEVICE}\", rx_queues: 1, tx_queues: 2, rx_descriptors: 512, rss: false, "
         "tap: " + tap + "}\n"
         "mempool: {mbufs: 8191, cache: 64}\n"
         "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n"
         "steering: {quic_ports: [443]}\n"
         "services:\n  - {name: web, addresses: [10.99.1.1, \"fd99::1\"], udp_ports: [443]}\n"
         "backends:\n" + backends +
         "health_checks: " + health + "\n"
         "action: {type: forward, tx_port: wire, delivery: {mode: l2}}\n"
         "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
         "stats: {period_ms: 0}\n";
}



IpAddress address(bool v6, const std::uint8_t* bytes) {
  IpAddress a;
  a.v6 = v6;
  std::memcpy(a.bytes.data(), bytes, v6 ? 16 : 4);
  return a;
}

// A probe as this test found it on the wire.
struct SeenProbe {
  unsigned backend = 0;
  bool ipv6 = false;
  std::array<std::uint8_t, 8> dcid{}, scid{};
};

// The fleet: a thread of its own reads the TX rings, answers the probes of
// the backends alive and notes where new connections went, whatever the
// test's own thread (the control path: health rebuilds, reloads, which take
// long under ThreadSanitizer) is doing. What both threads touch is under
// mu_ (with()); the RX ring has one producer at a time.
class Fleet {
 public:
  Fleet(Dataplane& dp, RingPort& port) : dp_(dp), port_(port), port_mac_(mac_of_port(dp.port_id("wire"))) {
    for (auto& a : alive) a = true;
  }
  ~Fleet() { stop(); }

  std::array<std::atomic<bool>, kBackends> alive;
  std::array<std::uint64_t, kBackends> probes_v4{}, probes_v6{};
  std::uint64_t malformed_probes = 0;
  std::map<unsigned, std::uint64_t> connections;  // backend -> Initials delivered to its MAC
  std::vector<SeenProbe> last_probes;

  template <typename F>
  auto with(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    return f();
  }
  std::uint64_t delivered() {
    return with([&] {
      std::uint64_t n = 0;
      for (const auto& [b, k] : connections) n += k;
      return n;
    });
  }
  void start() {
    responder_ = std::thread([this] {
      while (!stop_.load()) {
        with([&] { poll_locked(); });
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
  }
  void stop() {
    stop_.store(true);
    if (responder_.joinable()) responder_.join();
  }
  void poll() {
    with([&] { poll_locked(); });
  }

  // One look at both TX rings.
  void poll_locked() {
    void* obj = nullptr;
    while (rte_ring_dequeue(port_.tx(1), &obj) == 0) {
      auto* m = static_cast<rte_mbuf*>(obj);
      tsan_acquire(m);
      const auto* f = rte_pktmbuf_mtod(m, const std::uint8_t*);
      probe(f, rte_pktmbuf_data_len(m));
      rte_pktmbuf_free(m);
    }
    while (rte_ring_dequeue(port_.tx(0), &obj) == 0) {
      auto* m = static_cast<rte_mbuf*>(obj);
      tsan_acquire(m);
      const auto* f = rte_pktmbuf_mtod(m, const std::uint8_t*);
      for (unsigned i = 0; i < kBackends; ++i)
        if (std::equal(f, f + 6, backend_mac(i).begin())) ++connections[i];
      rte_pktmbuf_free(m);
    }
  }

  // The control path's turns (the responder answers meanwhile).
  void run_for(std::chrono::milliseconds d, const std::function<bool()>& until = nullptr) {
    const auto end = Clock::now() + d;
    while (Clock::now() < end) {
      if (auto change = dp_.follow_health()) std::printf("  %s\n", change->c_str());
      if (until && until()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  void probe(const std::uint8_t* f, std::uint32_t len) {
    if (len < 14) return;
    const std::uint16_t type = std::uint16_t(f[12] << 8 | f[13]);
    if (type != 0x0800 && type != 0x86dd) return;  // the kernel's ARP, ND
    const bool v6 = type == 0x86dd;
    const std::uint8_t* ip = f + 14;
    const std::uint32_t ip_header = v6 ? 40 : 20;
    if (len < 14 + ip_header + 8 || ip[v6 ? 6 : 9] != 17) return;
    const std::uint8_t* udp = ip + ip_header;
    if ((udp[2] << 8 | udp[3]) != 443) return;  // the kernel's own UDP (none expected)
    unsigned backend = kBackends;
    for (unsigned i = 0; i < kBackends; ++i)
      if (std::equal(f, f + 6, backend_mac(i).begin())) backend = i;
    const std::uint8_t* q = udp + 8;
    const bool ok = backend < kBackends && std::equal(f + 6, f + 12, port_mac_.begin()) &&
                    len == 14 + ip_header + 8 + kProbeUdpPayload &&
                    std::memcmp(ip + (v6 ? 24 : 16), v6 ? kVip6.data() : kVip.data(), v6 ? 16 : 4) == 0 &&
                    std::memcmp(ip + (v6 ? 8 : 12), v6 ? kTapV6.data() : kTapV4.data(), v6 ? 16 : 4) == 0 &&
                    (udp[0] << 8 | udp[1]) == 61000 && (q[0] & 0xc0) == 0xc0 && q[1] == 0x1a && q[2] == 0x2a &&
                    q[3] == 0x3a && q[4] == 0x4a && q[5] == 8 && q[14] == 8;
    if (!ok) {
      ++malformed_probes;
      return;
    }
    SeenProbe p;
    p.backend = backend;
    p.ipv6 = v6;
    std::memcpy(p.dcid.data(), q + 6, 8);
    std::memcpy(p.scid.data(), q + 15, 8);
    ++(v6 ? probes_v6 : probes_v4)[backend];
    last_probes.push_back(p);
    if (last_probes.size() > 64) last_probes.erase(last_probes.begin());
    if (alive[backend]) answer(p);
  }

 public:
  // The Version Negotiation a QUIC server sends back: from the service
  // address to the probe's source, CIDs swapped.
  Frame version_negotiation(const SeenProbe& p) const {
    std::vector<std::uint8_t> q = {0x80 | 0x2a, 0, 0, 0, 0, 8};
    q.insert(q.end(), p.scid.begin(), p.scid.end());
    q.push_back(8);
    q.insert(q.end(), p.dcid.begin(), p.dcid.end());
    q.insert(q.end(), {0, 0, 0, 1});
    return traffic::build_udp_frame(L2Header{port_mac_, kRouter}, address(p.ipv6, p.ipv6 ? kVip6.data() : kVip.data()),
                                    443, address(p.ipv6, p.ipv6 ? kTapV6.data() : kTapV4.data()), 61000, q, 1, 0);
  }
  void answer(const SeenProbe& p) { inject(dp_, port_, version_negotiation(p)); }

  // New connections: Initials to the service address from `n` client ports.
  void connect(unsigned n, std::uint16_t first_port) {
    for (unsigned i = 0; i < n; ++i) {
      std::vector<std::uint8_t> q = {0xc3, 0, 0, 0, 1, 8};
      for (unsigned k = 0; k < 8; ++k) q.push_back(std::uint8_t(first_port + i + k * 31));
      q.insert(q.end(), {0, 0, 0x44, 0xa0});
      q.resize(1200, 0);
      const Frame f = traffic::build_udp_frame(L2Header{port_mac_, kRouter}, IpAddress::v4(10, 99, 7, 7),
                                               std::uint16_t(first_port + i), address(false, kVip.data()), 443, q, 1, 0);
      with([&] { inject(dp_, port_, f); });
    }
  }

 private:
  Dataplane& dp_;
  RingPort& port_;
  MacAddress port_mac_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread responder_;
};

std::string health_of(Dataplane& dp, unsigned i) {
  for (const auto& b : dp.snapshot().backends)
    if (b.name == std::string("b").append(std::to_string(i))) return b.health;
  return "?";
}

void run_ip(const std::string& args) {
  const std::string cmd = "ip " + args + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(HealthChecks, ADeadBackendLeavesTheHashAndComesBackAndForgeriesMarkNothing) {
  if (!private_namespace()) GTEST_SKIP() << "needs root, /dev/net/tun and a network namespace";
  RingPort port(1, 4096, 2, 4096);
  const std::string tap = "qshc" + std::to_string(getpid() % 100000);
  Scenario sc(profile(tap), port);
  Dataplane& dp = sc.dataplane();
  run_ip("link set lo up");
  run_ip("link set " + tap + " up");
  Fleet fleet(dp, port);
  dp.launch();
  fleet.start();

  // Until the TAP has an address of each target's family no round starts:
  // a probe that cannot leave says nothing of the backends.
  run_ip("addr add 10.99.0.2/24 dev " + tap);
  fleet.run_for(std::chrono::milliseconds(800));
  for (unsigned i = 0; i < kBackends; ++i) {
    EXPECT_EQ(health_of(dp, i), "unchecked") << "b" << i;
    EXPECT_EQ(fleet.with([&] { return fleet.probes_v4[i] + fleet.probes_v6[i]; }), 0u) << "b" << i;
  }
  EXPECT_TRUE(dp.health_down().empty());
  run_ip("-6 addr add fd99::2/64 dev " + tap + " nodad");

  // Every backend answers: all up, over both targets, with an RTT.
  const auto all_up = [&] {
    for (unsigned i = 0; i < kBackends; ++i)
      if (health_of(dp, i) != "up") return false;
    return true;
  };
  fleet.run_for(std::chrono::seconds(20), all_up);
  ASSERT_TRUE(all_up()) << "every backend answers its probes";
  EXPECT_EQ(fleet.with([&] { return fleet.malformed_probes; }), 0u) << "every probe went by l2 to its backend, to the service address";
  for (unsigned i = 0; i < kBackends; ++i) {
    EXPECT_GT(fleet.with([&] { return fleet.probes_v4[i]; }), 0u) << "b" << i << " probed at the IPv4 service address";
    EXPECT_GT(fleet.with([&] { return fleet.probes_v6[i]; }), 0u) << "b" << i << " probed at the IPv6 service address";
  }
  StatsSnapshot s = dp.snapshot();
  for (const auto& b : s.backends) EXPECT_GT(b.probe_rtt_us, 0u) << b.name;
  EXPECT_TRUE(dp.health_sample().backends_answer);

  // b2 stops answering: down after `fall` failed rounds, and new
  // connections go to the other three.
  fleet.alive[2] = false;
  fleet.run_for(std::chrono::seconds(20), [&] { return dp.health_down() == std::vector<std::string>{"b2"}; });
  ASSERT_EQ(dp.health_down(), std::vector<std::string>{"b2"}) << "b2 left the hash";
  s = dp.snapshot();
  EXPECT_EQ(s.backends[2].health, "down");
  EXPECT_GE(s.backends[2].probe_rounds_failed, 3u);
  EXPECT_EQ(s.backends[2].state, "active") << "the operator's state stays as the profile says";
  fleet.with([&] { fleet.connections.clear(); });
  fleet.connect(200, 20000);
  fleet.run_for(std::chrono::seconds(20), [&] { return fleet.delivered() >= 200u; });
  EXPECT_EQ(fleet.with([&] { return fleet.connections[2]; }), 0u) << "no new connection went to the dead backend";
  EXPECT_GT(fleet.with([&] { return fleet.connections[0]; }) + fleet.with([&] { return fleet.connections[1]; }) + fleet.with([&] { return fleet.connections[3]; }), 150u);

  // An operator's reload while b2 is down (b3 set draining): the hash
  // takes both, health and the operator's state, and b2's health stays.
  {
    Profile next = dp.profile();
    next.steering.backends[3].state = BackendState::kDraining;
    const Dataplane::SteeringReload r = dp.reload_steering(next);
    ASSERT_TRUE(r.applied) << r.message;
    EXPECT_EQ(dp.health_down(), std::vector<std::string>{"b2"});
    fleet.with([&] { fleet.connections.clear(); });
    fleet.connect(200, 25000);
    fleet.run_for(std::chrono::seconds(20), [&] { return fleet.delivered() >= 200u; });
    EXPECT_EQ(fleet.with([&] { return fleet.connections[2]; }), 0u) << "still no new connection to the dead backend after a reload";
    EXPECT_EQ(fleet.with([&] { return fleet.connections[3]; }), 0u) << "nor to the draining one";
    EXPECT_EQ(fleet.with([&] { return fleet.connections[0]; }) + fleet.with([&] { return fleet.connections[1]; }), 200u);
    // The operator's down wins over health: b1 answers its probes (up)
    // and takes nothing.
    next.steering.backends[3].state = BackendState::kActive;
    next.steering.backends[1].state = BackendState::kDown;
    ASSERT_TRUE(dp.reload_steering(next).applied);
    fleet.with([&] { fleet.connections.clear(); });
    fleet.connect(200, 26000);
    fleet.run_for(std::chrono::seconds(20), [&] { return fleet.delivered() >= 200u; });
    EXPECT_EQ(health_of(dp, 1), "up") << "still probed, and it answers";
    EXPECT_EQ(fleet.with([&] { return fleet.connections[1]; }), 0u) << "down by the operator: no new connection, whatever its health";
    EXPECT_EQ(fleet.with([&] { return fleet.connections[2]; }), 0u);
    next.steering.backends[1].state = BackendState::kActive;
    ASSERT_TRUE(dp.reload_steering(next).applied);
  }

  // Forgeries for b2: answers from another address, to its probes; and
  // answers from the service address with guessed CIDs. b2 stays down.
  const std::uint64_t unmatched_before = dp.snapshot().health_checks[0].answers_unmatched;
  unsigned forged = 0;
  for (int round = 0; round < 8; ++round) {
    fleet.run_for(std::chrono::milliseconds(100));
    fleet.with([&] {
      for (const SeenProbe& p : fleet.last_probes) {
        if (p.backend != 2) continue;
        Frame other = fleet.version_negotiation(p);
        other[14 + 12 + 3] ^= 0x40;  // IPv4 source, or an IPv6 source's 4th octet
        if (p.ipv6) other[14 + 8 + 15] ^= 0x40;
        inject(dp, port, other);
        SeenProbe guessed = p;
        guessed.scid[7] ^= 1;
        inject(dp, port, fleet.version_negotiation(guessed));
        forged += 2;
      }
      fleet.last_probes.clear();
    });
  }
  fleet.run_for(std::chrono::seconds(20), [&] {
    return dp.snapshot().health_checks[0].answers_unmatched - unmatched_before >= forged;
  });
  EXPECT_GT(forged, 0u);
  EXPECT_EQ(health_of(dp, 2), "down") << "forged answers marked nothing up";
  EXPECT_GE(dp.snapshot().health_checks[0].answers_unmatched - unmatched_before, forged);

  // b2 answers again: up after `rise` rounds, and takes new connections.
  fleet.alive[2] = true;
  fleet.run_for(std::chrono::seconds(20), [&] { return dp.health_down().empty(); });
  ASSERT_TRUE(dp.health_down().empty());
  EXPECT_EQ(health_of(dp, 2), "up");
  fleet.with([&] { fleet.connections.clear(); });
  fleet.connect(200, 30000);
  fleet.run_for(std::chrono::seconds(20), [&] { return fleet.delivered() >= 200u; });
  EXPECT_GT(fleet.with([&] { return fleet.connections[2]; }), 0u) << "the returned backend takes new connections again";

  // Nobody answers: /healthz's sample says so, and the hash fails open
  // (the operator's active set stands, new connections still go).
  for (auto& a : fleet.alive) a = false;
  fleet.run_for(std::chrono::seconds(20), [&] { return !dp.health_sample().backends_answer; });
  EXPECT_FALSE(dp.health_sample().backends_answer) << "no backend answers: /healthz unhealthy";
  fleet.run_for(std::chrono::seconds(20), [&] { return dp.health_down().size() == kBackends; });
  fleet.with([&] { fleet.connections.clear(); });
  fleet.connect(100, 40000);
  fleet.run_for(std::chrono::seconds(20), [&] { return fleet.delivered() >= 100u; });
  const std::uint64_t delivered = fleet.delivered();
  EXPECT_EQ(delivered, 100u) << "with every backend down by health, the hash fails open";

  dp.stop();
  s = dp.snapshot();
  ASSERT_EQ(s.health_checks.size(), 1u);
  const HealthChecksSnapshot& h = s.health_checks[0];
  EXPECT_GT(h.probes_sent, 0u);
  EXPECT_EQ(h.answers_received, h.answers_matched + h.answers_unmatched)
      << "every answer the receivers passed was matched or counted unmatched";
  EXPECT_GE(h.hash_rebuilds, 3u) << "down, up, and the rest down";
  EXPECT_EQ(s.drops_total[std::size_t(DropReason::kProbeRingFull)], 0u);
  fleet.stop();
  fleet.poll();
  drain_tx(port);
  EXPECT_EQ(dp.close_ports_and_count_leaks(), 0);
}

// 4,096 backends, two targets, a round a second: 8,192 probes a second
// wanted, 2,000 allowed. The probes that leave stay within the budget
// (and its burst of a tenth of a second), and every backend gets its turns.
TEST(HealthChecks, FourThousandBackendsStayWithinTheProbeBudget) {
  if (!private_namespace()) GTEST_SKIP() << "needs root, /dev/net/tun and a network namespace";
  RingPort port(1, 4096, 2, 16384);
  const std::string tap = "qshb" + std::to_string(getpid() % 100000);
  Scenario sc(profile(tap, 4096, "{interval_ms: 1000, timeout_ms: 500, probes_per_s: 2000}"), port);
  Dataplane& dp = sc.dataplane();
  run_ip("link set " + tap + " up");
  run_ip("addr add 10.99.0.2/24 dev " + tap);
  run_ip("-6 addr add fd99::2/64 dev " + tap + " nodad");
  dp.launch();
  std::uint64_t probes = 0;
  std::set<std::uint16_t> probed;  // by the last two octets of the backend's MAC
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(2)) {
    void* obj = nullptr;
    while (rte_ring_dequeue(port.tx(1), &obj) == 0) {
      auto* m = static_cast<rte_mbuf*>(obj);
      tsan_acquire(m);
      const auto* f = rte_pktmbuf_mtod(m, const std::uint8_t*);
      if (rte_pktmbuf_data_len(m) == 14 + 20 + 8 + kProbeUdpPayload || rte_pktmbuf_data_len(m) == 14 + 40 + 8 + kProbeUdpPayload) {
        ++probes;
        probed.insert(std::uint16_t(f[4] << 8 | f[5]));
      }
      rte_pktmbuf_free(m);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  dp.stop();
  const StatsSnapshot s = dp.snapshot();
  std::printf("  %llu probes in %.2f s (%.0f a second; budget 2000), %zu backends probed, %llu rounds deferred\n",
              static_cast<unsigned long long>(probes), elapsed, double(probes) / elapsed, probed.size(),
              static_cast<unsigned long long>(s.health_checks[0].rounds_deferred));
  EXPECT_LE(double(probes), 2000.0 * elapsed + 200 + 2) << "within probes_per_s and its burst";
  EXPECT_GE(probes, 2000u) << "the budget is used";
  EXPECT_GT(s.health_checks[0].rounds_deferred, 0u) << "over budget: rounds go late, counted";
  EXPECT_GE(probed.size(), 1000u) << "rounds go round the backends";
  drain_tx(port);
  EXPECT_EQ(dp.close_ports_and_count_leaks(), 0);
}

}  // namespace
}  // namespace qs::test
