#include "dataplane/health.h"

#include <utility>

namespace qs {

namespace {

bool fail(std::string* reason, std::string why) {
  if (reason) *reason = std::move(why);
  return false;
}

}  // namespace

bool quicsteer_healthy(const StatsSnapshot& now, const StatsSnapshot& before, std::string* reason) {
  if (now.draining) return fail(reason, "draining");
  if (now.ports.empty()) return fail(reason, "no port is open");
  for (const LcoreSnapshot& l : now.lcores) {
    const LcoreSnapshot* then = nullptr;
    for (const LcoreSnapshot& b : before.lcores)
      if (b.lcore == l.lcore) then = &b;
    // An lcore the earlier snapshot does not have has not been seen moving yet.
    if (!then || (l.busy_cycles == then->busy_cycles && l.idle_sleeps == then->idle_sleeps))
      return fail(reason, "lcore " + std::to_string(l.lcore) + " made no progress");
  }
  for (const PortSnapshot& p : now.ports)
    if (!p.link_up) return fail(reason, "port " + p.name + ": link down");
  if (reason) reason->clear();
  return true;
}

}  // namespace qs
