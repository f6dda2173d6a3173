// The receivers' part of peer sync (dataplane/runtime/peer_sync.h): what a
// burst taught the established forwarding table goes, once per burst, on
// the lcore's bounded ring to the sync thread. A full ring drops what does
// not fit and counts it (learned_ring_full): the peers then get those
// entries from the sync thread's refresh walk, and the lcore never waits.
#pragma once

#include "dataplane/fastpath/lcore_context.h"

namespace qs {

// Before a burst is classified: the log its learning writes to, emptied;
// nullptr without peer sync (learning then logs nothing).
inline LearnedLog* learned_log_for(LcoreContext& c) {
  if (c.learned_ring == nullptr) return nullptr;
  c.learned_log.n = 0;
  c.learned_log.overflowed = 0;
  return &c.learned_log;
}

// After it: the log onto the ring.
inline void share_learned(LcoreContext& c) {
  if (c.learned_ring == nullptr) return;
  const LearnedLog& log = c.learned_log;
  const unsigned taken = log.n != 0 ? c.learned_ring->enqueue_burst(log.entries, log.n) : 0;
  if (const unsigned lost = log.n - taken + log.overflowed; lost != 0) [[unlikely]]
    c.learned_ring_full.add(lost);
}

}  // namespace qs
