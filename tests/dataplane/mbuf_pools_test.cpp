// Which socket's mbuf pool each RX queue fills from (dataplane/runtime/mbuf_pools.h),
// for layouts this one-socket machine cannot show: a NIC on socket 1 polled
// from socket 0, virtual devices polled from two sockets, lcores on no socket.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/runtime/mbuf_pools.h"

namespace qs {
namespace {

constexpr int kMain = 0;  // the main lcore's socket, the last resort

TEST(MbufPools, AQueueFillsFromItsPortsSocketWhereverItIsPolled) {
  EXPECT_EQ(rx_pool_socket(1, 0, kMain), 1);
  EXPECT_EQ(rx_pool_socket(0, 1, kMain), 0);
  EXPECT_EQ(rx_pool_socket(1, kAnySocket, kMain), 1);
}

TEST(MbufPools, APortOnNoSocketFillsFromThePollingLcoresSocket) {
  EXPECT_EQ(rx_pool_socket(kAnySocket, 1, kMain), 1);
  EXPECT_EQ(rx_pool_socket(kAnySocket, 0, 1), 0);
}

TEST(MbufPools, NeitherOnASocketFallsBackToTheMainLcores) {
  EXPECT_EQ(rx_pool_socket(kAnySocket, kAnySocket, 1), 1);
}

TEST(MbufPools, OnePoolPerSocketThatHasRxQueues) {
  // baremetal-2port.yaml's advice: both NICs on socket 1, lcores on socket 0
  // and 1; no pool on socket 0, which may have no hugepages.
  const std::vector<int> two_nics_on_socket_1 = {rx_pool_socket(1, 0, kMain), rx_pool_socket(1, 1, kMain),
                                                 rx_pool_socket(1, 0, kMain), rx_pool_socket(1, 1, kMain)};
  EXPECT_EQ(pool_sockets(two_nics_on_socket_1), std::vector<int>({1}));
  // One NIC per socket, and a vdev polled from socket 1: two pools.
  const std::vector<int> one_per_socket = {rx_pool_socket(1, 0, kMain), rx_pool_socket(0, 0, kMain),
                                           rx_pool_socket(kAnySocket, 1, kMain)};
  EXPECT_EQ(pool_sockets(one_per_socket), std::vector<int>({0, 1}));
  EXPECT_EQ(pool_sockets({}), std::vector<int>{});
}

}  // namespace
}  // namespace qs
