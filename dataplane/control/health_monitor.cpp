#include "dataplane/control/health_monitor.h"

namespace qs {

Health HealthMonitor::judge(const HealthSample& sample, Clock::time_point now) {
  std::string reason;
  const auto add = [&](const std::string& what) {
    if (!reason.empty()) reason += "; ";
    reason += what;
  };
  for (const auto& l : sample.lcores) {
    auto [it, first] = beats_.try_emplace(l.lcore, Beat{l.heartbeats, now, false});
    Beat& b = it->second;
    if (!first && l.heartbeats != b.heartbeats) {
      b.heartbeats = l.heartbeats;
      b.changed = now;
      b.moved = true;
      continue;
    }
    const auto still = std::chrono::duration_cast<std::chrono::milliseconds>(now - b.changed);
    if (still > stall_after_)
      add("lcore " + std::to_string(l.lcore) + " made no progress for " + std::to_string(still.count()) + " ms");
    else if (!b.moved)
      add("lcore " + std::to_string(l.lcore) + " has not started yet");
  }
  const bool progressing = reason.empty();
  if (!sample.peer_sync_ready) add("peer_sync: taking a copy of the forwarding tables from a peer");
  if (!sample.backends_answer) add("health_checks: no backend answers its probes");
  for (const auto& p : sample.ports)
    if (!p.link_up) add("port " + p.name + " link down");
  for (const auto& t : sample.tx_queues) {
    auto [it, first] = tx_drops_.try_emplace({t.port, t.queue}, Drops{t.timeout_drops, now});
    Drops& d = it->second;
    if (!first && t.timeout_drops != d.count) {
      d.count = t.timeout_drops;
      d.changed = now;
    }
    if (t.timed_out && !first && now - d.changed <= stall_after_)
      add("port " + t.port + " TX queue " + std::to_string(t.queue) + " takes nothing (tx_timeout)");
  }
  return Health{reason.empty(), reason, progressing};
}

std::chrono::milliseconds stall_threshold(std::uint32_t tick_us, std::uint32_t nap_us) {
  return std::chrono::milliseconds(1000) + std::chrono::milliseconds((std::uint64_t(tick_us) + nap_us + 999) / 1000);
}

}  // namespace qs
