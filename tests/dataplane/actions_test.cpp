// The owner's actions through the live data path: reflect sends each packet
// back with MACs, IP addresses and UDP ports swapped and every checksum still
// valid (IPv4 and IPv6); sink consumes everything and transmits nothing. The
// frames are checked with this file's own header walk and DPDK's checksum
// routines, not with the code under test.
// rte_ipv{4,6}_udptcp_cksum_verify are still experimental in DPDK 22.11.
#define ALLOW_EXPERIMENTAL_API 1

#include <gtest/gtest.h>

#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>
#include <vector>

#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs::test {
namespace {

std::string profile(const std::string& action) {
  return "ports:\n"
         "  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rx_descriptors: 256, rss: false}\n"
         "mempool: {mbufs: 8191, cache: 32}\n"
         "lcores:\n"
         "  - {id: 1, rx: [\"wire:0\"], owner: true}\n"
         "  - {id: 2, rx: [\"wire:1\"], owner: true}\n"
         "rings: {size: 512, burst: 32}\n" +
         steering_yaml({1, 2}) +
         "backpressure: {policy: park, park_timeout_us: 10000000}\n"
         "action: {type: " + action + "}\n"
         "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
         "stats: {period_ms: 0}\n";
}

PreparedTraffic traffic_for(const std::string& yaml) {
  auto o = traffic_options(300, 2, 31);
  o.malformed = 0;
  o.non_quic = 0;
  o.version_negotiation = 0;
  o.ipv6 = 0.5;
  o.vlan = 0.2;
  o.qinq = 0.1;
  return prepare(o, 2, parse_test_profile(yaml).steering);
}

// Where the IP header starts and which family, walking Ethernet and any
// 802.1Q / 802.1ad tags; 0 when the frame is not IP.
struct L3 {
  std::size_t offset = 0;
  int version = 0;
};
L3 find_l3(const std::uint8_t* f, std::size_t len) {
  std::size_t off = 12;
  while (off + 2 <= len) {
    const unsigned type = unsigned(f[off]) << 8 | f[off + 1];
    if (type == 0x8100 || type == 0x88a8) {
      off += 4;
      continue;
    }
    if (type == 0x0800) return {off + 2, 4};
    if (type == 0x86dd) return {off + 2, 6};
    return {};
  }
  return {};
}

void swap_bytes(std::vector<std::uint8_t>& f, std::size_t a, std::size_t b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) std::swap(f[a + i], f[b + i]);
}

TEST(Actions, ReflectSwapsEndpointsAndKeepsEveryChecksumValid) {
  const std::string yaml = profile("reflect");
  const PreparedTraffic t = traffic_for(yaml);
  RingPort port(2, 256, 2, 1 << 16);
  Scenario s(yaml, port);
  unsigned checked_v4 = 0, checked_v6 = 0, mismatched = 0, bad_checksum = 0;
  RunOptions inspect;
  inspect.inspect_tx = [&](const rte_mbuf* m, unsigned) {
    const auto* out = rte_pktmbuf_mtod(m, const std::uint8_t*);
    std::vector<std::uint8_t> expected = *t.frames[test_seq(const_cast<rte_mbuf*>(m))];
    const L3 l3 = find_l3(expected.data(), expected.size());
    ASSERT_NE(l3.version, 0);
    swap_bytes(expected, 0, 6, 6);  // MACs
    std::size_t l4;
    if (l3.version == 4) {
      swap_bytes(expected, l3.offset + 12, l3.offset + 16, 4);
      l4 = l3.offset + (expected[l3.offset] & 0x0f) * 4u;
    } else {
      swap_bytes(expected, l3.offset + 8, l3.offset + 24, 16);
      l4 = l3.offset + 40;  // quicgen writes no IPv6 extension headers
    }
    swap_bytes(expected, l4, l4 + 2, 2);  // UDP ports
    if (m->data_len != expected.size() || std::memcmp(out, expected.data(), expected.size()) != 0) {
      if (mismatched++ == 0) {
        std::size_t at = 0;
        while (at < expected.size() && at < m->data_len && out[at] == expected[at]) ++at;
        ADD_FAILURE() << "first mismatch: frame of " << expected.size() << " octets (mbuf " << m->data_len
                      << "), IPv" << l3.version << " at " << l3.offset << ", first differing octet " << at;
      }
    }
    if (l3.version == 4) {
      const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(out + l3.offset);
      if (rte_ipv4_cksum(ip) != 0 ||  // summed with its checksum field, a valid header gives 0
          rte_ipv4_udptcp_cksum_verify(ip, out + l4) != 0)
        ++bad_checksum;
      ++checked_v4;
    } else {
      const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(out + l3.offset);
      if (rte_ipv6_udptcp_cksum_verify(ip, out + l4) != 0) ++bad_checksum;
      ++checked_v6;
    }
  };
  const ScenarioResult r = s.run(t.frames, t.queue_of, inspect);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.sent);
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(bad_checksum, 0u);
  EXPECT_GT(checked_v4, 500u);
  EXPECT_GT(checked_v6, 500u);
  EXPECT_EQ(r.stats.owner_total.tx, r.sent);
  EXPECT_EQ(r.stats.rx_total.rx, r.stats.owner_total.processed + r.stats.drops_sum());
}

TEST(Actions, SinkConsumesEverythingAndTransmitsNothing) {
  const std::string yaml = profile("sink");
  const PreparedTraffic t = traffic_for(yaml);
  RingPort port(2, 256, 2, 1 << 16);
  Scenario s(yaml, port);
  const ScenarioResult r = s.run(t.frames, t.queue_of);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_TRUE(r.delivered.empty());
  EXPECT_EQ(r.left_in_tx, 0u);
  EXPECT_EQ(r.stats.owner_total.sunk, r.sent);
  EXPECT_EQ(r.stats.owner_total.tx, 0u);
  EXPECT_EQ(r.stats.rx_total.rx, r.sent);
}

}  // namespace
}  // namespace qs::test
