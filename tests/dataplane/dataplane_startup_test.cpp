// Start-up of the whole data path, in-process: a start that fails part way
// releases what it had built, so the same devices can be used again.
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <stdexcept>
#include <string>

#include "dataplane/runtime/dataplane.h"
#include "dataplane/config/profile.h"
#include "tests/dataplane/test_traffic.h"

namespace qs {
namespace {

// A data path that cannot be built (here: shards larger than EAL's memory)
// leaves nothing behind: its mbuf pool is freed and the device it hot-plugged
// is gone, so the same profile with a sane size builds at once afterwards.
TEST(DataplaneStartup, AFailedStartLeavesNoPoolAndNoDevice) {
  auto profile_with = [](std::uint32_t max_connections) {
    return parse_profile(
        "ports:\n  - {name: p, device: \"net_null5\", rx_queues: 1, tx_queues: 1}\n"
        "mempool: {mbufs: 2047, cache: 32}\n"
        "lcores:\n  - {id: 1, rx: [\"p:0\"], owner: true}\n" +
            test::steering_yaml({1}) + "action: {type: sink, max_connections: " + std::to_string(max_connections) +
            "}\n",
        "fail.yaml");
  };
  auto pools = [] {
    unsigned n = 0;
    rte_mempool_walk([](rte_mempool*, void* arg) { ++*static_cast<unsigned*>(arg); }, &n);
    return n;
  };
  const unsigned pools_before = pools();
  EXPECT_THROW(Dataplane dp(profile_with(1u << 24)), std::runtime_error);
  EXPECT_EQ(pools(), pools_before);
  std::uint16_t id;
  EXPECT_NE(rte_eth_dev_get_port_by_name("net_null5", &id), 0) << "the hot-plugged device stayed";
  {
    Dataplane dp(profile_with(1000));
    EXPECT_EQ(pools(), pools_before + 1);
  }
  EXPECT_EQ(pools(), pools_before);
}

}  // namespace
}  // namespace qs
