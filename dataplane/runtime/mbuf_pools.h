// Which NUMA socket each RX queue takes its mbufs from, and so which sockets
// need an mbuf pool. As DPDK's l3fwd does: one pool per socket that has RX
// queues, each queue filled from the pool of its port's socket, so that the
// NIC's DMA and every header read stay on the NIC's socket. Pure functions
// (no EAL), so that a one-socket machine can test the choice for two.
#pragma once

#include <algorithm>
#include <vector>

namespace qs {

// DPDK's SOCKET_ID_ANY (a virtual device, or an lcore whose CPUs span
// sockets); dataplane.cpp checks that they agree.
inline constexpr int kAnySocket = -1;

// The socket an RX queue's pool lives on: its port's; for a port on no
// socket (virtual devices), that of the lcore that polls the queue; for an
// lcore on no socket either, `fallback_socket` (the main lcore's).
inline int rx_pool_socket(int port_socket, int polling_lcore_socket, int fallback_socket) {
  if (port_socket != kAnySocket) return port_socket;
  if (polling_lcore_socket != kAnySocket) return polling_lcore_socket;
  return fallback_socket;
}

// One pool per distinct socket, in ascending order.
inline std::vector<int> pool_sockets(std::vector<int> rx_queue_sockets) {
  std::sort(rx_queue_sockets.begin(), rx_queue_sockets.end());
  rx_queue_sockets.erase(std::unique(rx_queue_sockets.begin(), rx_queue_sockets.end()), rx_queue_sockets.end());
  return rx_queue_sockets;
}

}  // namespace qs
