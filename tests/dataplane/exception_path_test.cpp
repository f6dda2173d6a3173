// The exception path (issue 36) in-process, on a ring port with a real TAP:
// with services, only UDP to a service is steered; a frame for another MAC
// is dropped (foreign_mac), the rest of a service address's traffic too
// (not_service); the appliance's own frames reach the kernel through the
// port's TAP, classed and policed, and what the kernel sends on the TAP
// leaves through the port on the queue after the owners'. The kernel's side
// is read and written here with a packet socket on the TAP.
//
// Needs root and /dev/net/tun (net_tap); skipped without them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

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

bool can_make_taps() {
  if (geteuid() != 0) return false;
  const int fd = open("/dev/net/tun", O_RDWR);
  if (fd < 0) return false;
  close(fd);
  return true;
}

std::string tap_name() { return "qsxt" + std::to_string(getpid() % 100000); }

// ports: one ring port, one owner; the TAP's frames leave on TX queue 1.
std::string profile(const std::string& extra_port_keys, const std::string& police) {
  return "ports:\n  - {name: wire, device: \"{DEVICE}\", rx_queues: 1, tx_queues: 2, rx_descriptors: 512, rss: false" +
         extra_port_keys +
         "}\n"
         "mempool: {mbufs: 8191, cache: 64}\n"
         "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n"
         "steering: {quic_ports: [443]}\n"
         "services:\n  - {name: web, addresses: [10.99.1.1, \"fd99::1\"], udp_ports: [443]}\n" +
         police +
         "action: {type: sink}\n"
         "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
         "stats: {period_ms: 0}\n";
}


const MacAddress kRouter = {0x02, 0, 0, 0x99, 0, 1};
const MacAddress kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

Frame ethernet(const MacAddress& dst, const MacAddress& src, std::uint16_t type) {
  Frame f(dst.begin(), dst.end());
  f.insert(f.end(), src.begin(), src.end());
  f.push_back(std::uint8_t(type >> 8));
  f.push_back(std::uint8_t(type));
  return f;
}

Frame arp_request(const MacAddress& src, std::uint8_t target_last) {
  Frame f = ethernet(kBroadcast, src, 0x0806);
  const std::uint8_t body[] = {0, 1, 8, 0, 6, 4, 0, 1};
  f.insert(f.end(), std::begin(body), std::end(body));
  f.insert(f.end(), src.begin(), src.end());
  const std::uint8_t sender_ip[] = {10, 99, 0, 1}, target_ip[] = {10, 99, 0, target_last};
  f.insert(f.end(), std::begin(sender_ip), std::end(sender_ip));
  f.insert(f.end(), 6, 0);
  f.insert(f.end(), std::begin(target_ip), std::end(target_ip));
  f.resize(60, 0);
  return f;
}

// IPv4 TCP from the router to the appliance, ports as given (179: BGP).
Frame tcp_frame(const MacAddress& dst, std::uint16_t sport, std::uint16_t dport) {
  Frame f = ethernet(dst, kRouter, 0x0800);
  const std::uint8_t ip[20] = {0x45, 0, 0, 40, 0, 1, 0x40, 0, 1, 6, 0, 0, 10, 99, 0, 1, 10, 99, 0, 2};
  f.insert(f.end(), std::begin(ip), std::end(ip));
  Frame tcp(20, 0);
  tcp[0] = std::uint8_t(sport >> 8), tcp[1] = std::uint8_t(sport);
  tcp[2] = std::uint8_t(dport >> 8), tcp[3] = std::uint8_t(dport);
  tcp[12] = 0x50, tcp[13] = 0x02;  // SYN
  f.insert(f.end(), tcp.begin(), tcp.end());
  f.resize(60, 0);
  return f;
}

Frame udp_to(const MacAddress& dst, const IpAddress& to, std::uint16_t port, std::uint8_t marker = 0) {
  const bool v6 = to.v6;
  IpAddress from = v6 ? IpAddress{} : IpAddress::v4(10, 99, 0, 1);
  if (v6) {
    from.v6 = true;
    from.bytes = {0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
  }
  std::vector<std::uint8_t> payload(1200, marker);
  payload[0] = 0x40;  // a short header, not that it matters to a non-QUIC port
  return traffic::build_udp_frame(L2Header{dst, kRouter}, from, 40000, to, port, payload, 1, 0);
}

// A packet socket on the TAP: what the kernel receives there, and a way to
// make the kernel send a frame out of it.
class KernelSide {
 public:
  explicit KernelSide(const std::string& iface) {
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (fd_ < 0) throw std::runtime_error("packet socket: " + std::string(strerror(errno)));
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = int(if_nametoindex(iface.c_str()));
    if (a.sll_ifindex == 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("bind to " + iface + ": " + strerror(errno));
    ifindex_ = a.sll_ifindex;
  }
  ~KernelSide() { close(fd_); }

  // Frames the kernel received on the TAP (not its own outgoing ones) within `wait`.
  std::vector<Frame> received(std::chrono::milliseconds wait) {
    std::vector<Frame> out;
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      for (;;) {
        Frame f(2048);
        sockaddr_ll from{};
        socklen_t len = sizeof from;
        const ssize_t n = recvfrom(fd_, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n < 0) break;
        if (from.sll_pkttype == PACKET_OUTGOING) continue;
        f.resize(std::size_t(n));
        out.push_back(std::move(f));
      }
    }
    return out;
  }

  void send(const Frame& f) {
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_ifindex = ifindex_;
    a.sll_halen = 6;
    std::memcpy(a.sll_addr, f.data(), 6);
    if (sendto(fd_, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a) != ssize_t(f.size()))
      throw std::runtime_error("send on the TAP: " + std::string(strerror(errno)));
  }

 private:
  int fd_ = -1;
  int ifindex_ = 0;
};


// Waits until the receivers have taken `n` frames in all.
void wait_received(Dataplane& dp, std::uint64_t n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (dp.snapshot().rx_total.rx < n && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

const ExceptionSnapshot& row(const StatsSnapshot& s, const std::string& cls) {
  for (const auto& x : s.exception)
    if (x.cls == cls) return x;
  throw std::runtime_error("no exception row for " + cls);
}

std::uint64_t drops(const StatsSnapshot& s, DropReason r) { return s.drops_total[std::size_t(r)]; }


bool contains(const std::vector<Frame>& frames, const Frame& f) {
  for (const Frame& g : frames)
    if (g.size() >= f.size() && std::equal(f.begin(), f.end(), g.begin())) return true;
  return false;
}

TEST(ExceptionPath, HostFramesReachTheKernelAndItsFramesLeaveThroughThePort) {
  if (!can_make_taps()) GTEST_SKIP() << "needs root and /dev/net/tun";
  RingPort port(1, 1024, 2, 1024);
  const std::string tap = tap_name();
  Scenario sc(profile(", tap: " + tap, ""), port);
  Dataplane& dp = sc.dataplane();
  const MacAddress mac = mac_of_port(dp.port_id("wire"));
  KernelSide kernel(tap);
  dp.launch();

  const Frame arp = arp_request(kRouter, 2);
  const Frame bgp = tcp_frame(mac, 40001, 179);
  const Frame ssh = tcp_frame(mac, 40002, 22);
  const Frame service = udp_to(mac, IpAddress::v4(10, 99, 1, 1), 443);
  const Frame vip_other_port = udp_to(mac, IpAddress::v4(10, 99, 1, 1), 80);
  IpAddress vip6;
  vip6.v6 = true;
  vip6.bytes = {0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const Frame service6 = udp_to(mac, vip6, 443);
  MacAddress other = mac;
  other[5] ^= 0x55;
  const Frame foreign = tcp_frame(other, 40003, 179);
  for (const Frame* f : {&arp, &bgp, &ssh, &service, &vip_other_port, &service6, &foreign}) inject(dp, port, *f);
  wait_received(dp, 7);
  const std::vector<Frame> got = kernel.received(std::chrono::milliseconds(500));

  EXPECT_TRUE(contains(got, arp)) << "the ARP request reached the kernel";
  EXPECT_TRUE(contains(got, bgp)) << "the BGP segment reached the kernel";
  EXPECT_TRUE(contains(got, ssh)) << "other traffic to the host reached the kernel";
  EXPECT_FALSE(contains(got, service)) << "a service's datagram is steered, not the kernel's";
  EXPECT_FALSE(contains(got, vip_other_port));
  EXPECT_FALSE(contains(got, foreign));

  // The kernel's frame leaves through the port, on the queue after the owner's.
  Frame reply = arp_request(mac, 1);
  reply[21] = 2;  // an ARP reply, from the port's MAC
  std::copy(kRouter.begin(), kRouter.end(), reply.begin());
  kernel.send(reply);
  bool left = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!left && std::chrono::steady_clock::now() < until) {
    void* obj = nullptr;
    while (rte_ring_dequeue(port.tx(1), &obj) == 0) {
      auto* m = static_cast<rte_mbuf*>(obj);
      tsan_acquire(m);
      const auto* d = rte_pktmbuf_mtod(m, const std::uint8_t*);
      left = left || (rte_pktmbuf_data_len(m) >= reply.size() && std::equal(reply.begin(), reply.end(), d));
      rte_pktmbuf_free(m);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(left) << "the kernel's ARP reply never left on TX queue 1";
  dp.stop();

  const StatsSnapshot s = dp.snapshot();
  EXPECT_EQ(row(s, "arp").to_kernel, 1u);
  EXPECT_EQ(row(s, "bgp").to_kernel, 1u);
  EXPECT_EQ(row(s, "other").to_kernel, 1u);
  EXPECT_GE(row(s, "arp").from_kernel, 1u);
  EXPECT_EQ(s.rx_total.to_kernel, 3u);
  EXPECT_EQ(drops(s, DropReason::kForeignMac), 1u);
  EXPECT_EQ(drops(s, DropReason::kNotService), 1u);
  EXPECT_EQ(s.owner_total.sunk, 2u) << "both services' datagrams, IPv4 and IPv6, were steered";
  EXPECT_EQ(s.rx_total.rx, s.owner_total.processed + s.drops_sum() + s.rx_total.to_kernel);
  drain_tx(port);
  EXPECT_EQ(dp.close_ports_and_count_leaks(), 0);
}

TEST(ExceptionPath, PoliceBoundsAFloodAndSparesTheControlClasses) {
  if (!can_make_taps()) GTEST_SKIP() << "needs root and /dev/net/tun";
  RingPort port(1, 4096, 2, 1024);
  const std::string tap = tap_name();
  Scenario sc(profile(", tap: " + tap,
                      "exception_path:\n  police:\n    other: {packets_per_s: 100, bytes_per_s: 10000000}\n"),
              port);
  Dataplane& dp = sc.dataplane();
  const MacAddress mac = mac_of_port(dp.port_id("wire"));
  dp.launch();
  // 3000 frames at the host as fast as the ring takes them, the ARP requests
  // among them: a flood of "other" for a tenth of a second or so.
  constexpr unsigned kFlood = 3000, kArps = 30;
  const Frame flood = udp_to(mac, IpAddress::v4(10, 99, 0, 2), 9);
  const Frame arp = arp_request(kRouter, 2);
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < kFlood; ++i) {
    inject(dp, port, flood);
    if (i % (kFlood / kArps) == 0) inject(dp, port, arp);
  }
  wait_received(dp, kFlood + kArps);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  dp.stop();
  const StatsSnapshot s = dp.snapshot();
  const ExceptionSnapshot& other = row(s, "other");
  EXPECT_EQ(other.to_kernel + other.policed + other.ring_full, kFlood);
  // At most the burst (a tenth of a second's worth, at least 4) and the
  // rate over the time the flood took.
  EXPECT_LE(other.to_kernel, 10 + std::uint64_t(100 * seconds) + 1) << seconds << " s";
  EXPECT_EQ(drops(s, DropReason::kPoliced), other.policed);
  EXPECT_EQ(row(s, "arp").to_kernel, kArps) << "ARP has its own police and ring: the flood took none of it";
  EXPECT_EQ(row(s, "arp").policed, 0u);
  drain_tx(port);
  EXPECT_EQ(dp.close_ports_and_count_leaks(), 0);
}

TEST(ExceptionPath, WithoutATapTheHostsFramesAreDroppedAndCounted) {
  RingPort port(1, 1024, 2, 1024);
  Scenario sc(profile("", ""), port);
  Dataplane& dp = sc.dataplane();
  const MacAddress mac = mac_of_port(dp.port_id("wire"));
  dp.launch();
  inject(dp, port, arp_request(kRouter, 2));
  inject(dp, port, tcp_frame(mac, 40001, 179));
  inject(dp, port, udp_to(mac, IpAddress::v4(10, 99, 1, 1), 443));
  wait_received(dp, 3);
  sc.wait_until_through(3);
  dp.stop();
  const StatsSnapshot s = dp.snapshot();
  EXPECT_EQ(drops(s, DropReason::kNoTap), 2u);
  EXPECT_EQ(s.owner_total.sunk, 1u);
  EXPECT_TRUE(s.exception.empty());
  EXPECT_EQ(dp.close_ports_and_count_leaks(), 0);
}

}  // namespace
}  // namespace qs::test
