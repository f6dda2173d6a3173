// Frames in and out of a RingPort one at a time, for the tests that play a
// host on the port (the exception path, the health checks): the port's
// MAC, a frame put on RX queue 0 as a NIC would, and the TX rings emptied.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "dataplane/fastpath/tsan.h"
#include "tests/dataplane/scenario.h"
#include "tests/traffic/frame.h"

namespace qs::test {

inline traffic::MacAddress mac_of_port(std::uint16_t port_id) {
  rte_ether_addr a{};
  rte_eth_macaddr_get(port_id, &a);
  traffic::MacAddress m;
  std::memcpy(m.data(), a.addr_bytes, 6);
  return m;
}

// Onto RX queue 0, waiting while the ring is full (a sender honouring PAUSE).
inline void inject(Dataplane& dp, RingPort& port, const std::vector<std::uint8_t>& f) {
  bool segmented = false;
  rte_mbuf* m = frame_to_mbuf(dp.pool(), f, 0, segmented);
  ASSERT_NE(m, nullptr);
  tsan_release(m);  // the test plays the NIC (tsan.h)
  while (rte_ring_enqueue(port.rx(0), m) != 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// What the port transmitted and nobody took: the kernel sends frames of its
// own on a TAP that is up (IPv6 router solicitations, MLD), which leave on
// the TX queue after the owners' whenever they come. A ring port made by
// the test keeps them in its rings after close, where the leak check would
// count them.
inline void drain_tx(RingPort& port) {
  for (unsigned q = 0; q < port.tx_count(); ++q) {
    void* m = nullptr;
    while (rte_ring_dequeue(port.tx(q), &m) == 0) {
      tsan_acquire(m);
      rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    }
  }
}

}  // namespace qs::test
