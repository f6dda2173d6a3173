// The descriptor check that runs before a port is configured, against the
// limits real drivers report (no vdev here has tight ones): the count must lie
// in the driver's range and be a multiple of its alignment, and the error
// names the profile's port, the direction and the driver's numbers.
#include <gtest/gtest.h>
#include <rte_ethdev.h>

#include <string>

#include "dataplane/runtime/port.h"

namespace qs {
namespace {

rte_eth_desc_lim limits(std::uint16_t min, std::uint16_t max, std::uint16_t align) {
  rte_eth_desc_lim lim{};
  lim.nb_min = min;
  lim.nb_max = max;
  lim.nb_align = align;
  return lim;
}

struct Case {
  const char* name;
  rte_eth_desc_lim lim;
  std::uint16_t want;
  const char* error;  // nullptr: accepted
};

// Ranges as ixgbe (32..4096, multiples of 8), i40e (64..4096, multiples of
// 32) and mlx5 (0..65535, any) report them.
const Case kCases[] = {
    {"ixgbe_default", limits(32, 4096, 8), 1024, nullptr},
    {"ixgbe_min", limits(32, 4096, 8), 32, nullptr},
    {"ixgbe_max", limits(32, 4096, 8), 4096, nullptr},
    {"ixgbe_above_max", limits(32, 4096, 8), 8192, "rx_descriptors 8192 is outside the driver's range 32..4096"},
    {"ixgbe_below_min", limits(32, 4096, 8), 16, "rx_descriptors 16 is outside the driver's range 32..4096"},
    {"ixgbe_misaligned", limits(32, 4096, 8), 1020, "rx_descriptors 1020 is not a multiple of 8, which the driver requires"},
    {"i40e_misaligned", limits(64, 4096, 32), 1040, "rx_descriptors 1040 is not a multiple of 32"},
    {"i40e_aligned", limits(64, 4096, 32), 2048, nullptr},
    {"mlx5_odd", limits(0, 65535, 1), 1001, nullptr},
    {"no_alignment", limits(0, 65535, 0), 1001, nullptr},
};

class DescriptorCheck : public ::testing::TestWithParam<Case> {};

TEST_P(DescriptorCheck, AcceptsOrNamesTheLimit) {
  const Case& c = GetParam();
  PortConfig cfg;
  cfg.name = "wire";
  cfg.device = "0000:3b:00.0";
  if (c.error == nullptr) {
    EXPECT_NO_THROW(check_descriptors(cfg, "rx", c.want, c.lim));
    return;
  }
  try {
    check_descriptors(cfg, "rx", c.want, c.lim);
    FAIL() << "accepted " << c.want;
  } catch (const PortError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("port 'wire' (0000:3b:00.0): "), std::string::npos) << what;
    EXPECT_NE(what.find(c.error), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Drivers, DescriptorCheck, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DescriptorCheckDirection, TxErrorsSayTx) {
  PortConfig cfg;
  cfg.name = "sink";
  cfg.device = "net_null0";
  try {
    check_descriptors(cfg, "tx", 5000, limits(32, 4096, 8));
    FAIL() << "accepted 5000";
  } catch (const PortError& e) {
    EXPECT_NE(std::string(e.what()).find("tx_descriptors 5000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qs

namespace qs {
namespace {

// The start-up line about spreading flows: net_af_packet spreads them without
// RSS (its kernel fanout); others without RSS feed each queue on its own.
TEST(RssNote, SaysHowFlowsAreSpread) {
  PortConfig cfg;
  cfg.rx_queues = 2;
  EXPECT_EQ(rss_note(cfg, "net_ixgbe", 0x38d34), "on (IP/UDP 4-tuple)");
  EXPECT_NE(rss_note(cfg, "net_af_packet", 0).find("kernel's fanout spreads flows"), std::string::npos);
  EXPECT_EQ(rss_note(cfg, "net_af_packet", 0).find("no RSS (each queue is fed by its own source)"), std::string::npos);
  EXPECT_EQ(rss_note(cfg, "net_pcap", 0), "requested, but the driver offers no RSS (each queue is fed by its own source)");
  cfg.rx_queues = 1;
  EXPECT_EQ(rss_note(cfg, "net_af_packet", 0), "off");
  cfg.rx_queues = 2;
  cfg.rss = false;
  EXPECT_EQ(rss_note(cfg, "net_ixgbe", 0), "off");
}

}  // namespace
}  // namespace qs

namespace qs {
namespace {

// TX fast free is asked for only where the driver offers it and every mbuf a
// TX queue sees comes from one pool (one NUMA socket with RX queues): with a
// pool per socket, a queue may be handed mbufs of another socket's pool.
TEST(TxOffloads, FastFreeOnlyWithTheDriverAndOnePool) {
  const std::uint64_t capa = RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
  EXPECT_EQ(tx_offloads(capa, true), RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) << "nothing else is asked for";
  EXPECT_EQ(tx_offloads(capa, false), 0u);
  EXPECT_EQ(tx_offloads(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, true), 0u);
}

}  // namespace
}  // namespace qs
