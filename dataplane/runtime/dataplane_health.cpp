// Dataplane::health_sample: what the control loop's HealthMonitor judges.
#include <rte_ethdev.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "dataplane/runtime/dataplane.h"
#include "dataplane/runtime/port.h"

namespace qs {

HealthSample Dataplane::health_sample() const {
  HealthSample h;
  for (const auto& c : lcores_) {
    h.lcores.push_back({c->lcore_id, c->loop_stats.heartbeats.get()});
    for (const auto& t : c->tx) {
      const auto port = std::find(port_ids_.begin(), port_ids_.end(), t->port_id);
      h.tx_queues.push_back({port == port_ids_.end() ? std::to_string(t->port_id)
                                                     : profile_.ports[std::size_t(port - port_ids_.begin())].name,
                             t->queue, t->timed_out.load(std::memory_order_relaxed), t->timeout_drops.get()});
    }
  }
  for (std::size_t i = 0; i < port_ids_.size(); ++i) {
    rte_eth_link link{};
    // A driver that cannot tell (-ENOTSUP) has no link to lose.
    const int rc = ports_open_ ? rte_eth_link_get_nowait(port_ids_[i], &link) : -ENODEV;
    bool up = rc == -ENOTSUP || (rc == 0 && link.link_status == RTE_ETH_LINK_UP);
    // A driver on a kernel interface may report its link up whatever the
    // interface does (net_af_packet): the kernel has the last word.
    if (up && i < kernel_interfaces_.size() && !kernel_interfaces_[i].empty())
      up = kernel_link_up(kernel_interfaces_[i]);
    h.ports.push_back({profile_.ports[i].name, up});
  }
  if (peer_sync_) h.peer_sync_ready = peer_sync_->ready();
  if (health_) h.backends_answer = health_->view().any_answering;
  return h;
}

}  // namespace qs
