// The receive loop's part of the exception path (exception_path.h): what a
// receiver does, per burst, with the frames that are not a service's.
// Inline, for lcore_loop.cpp alone.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

#include "dataplane/fastpath/health_probe.h"
#include "dataplane/fastpath/lcore_context.h"
#include "dataplane/fastpath/tsan.h"
#include "steering/exception_class.h"

namespace qs {

// A frame for the appliance's own host: classed, policed and put on the
// ring of its precedence to the exception thread, which writes it to the
// port's TAP. Dropped and counted (no_tap, policed, kernel_ring_full) when
// it cannot go; never waited for.
inline void to_kernel(LcoreContext& c, RxQueueContext& q, rte_mbuf* m, std::uint64_t now) {
  ExceptionRx* x = q.exception.get();
  if (x == nullptr || !x->has_tap) {
    rte_pktmbuf_free(m);
    q.stats.drops[std::size_t(DropReason::kNoTap)].add();
    return;
  }
  const std::uint8_t* frame = rte_pktmbuf_mtod(m, const std::uint8_t*);
  // A health probe's answer (a Version Negotiation to the probes' port)
  // goes to the health checker, not the kernel: policed on its own, so that
  // neither a flood to the port nor the kernel's classes decide whether
  // backends look alive.
  if (x->probe_udp_port != 0 && parse_probe_answer(frame, rte_pktmbuf_data_len(m), x->probe_udp_port)) [[unlikely]] {
    x->probe_answers_police.refill(now);
    if (!x->probe_answers_police.has(1)) {
      rte_pktmbuf_free(m);
      q.stats.drops[std::size_t(DropReason::kPoliced)].add();
      return;
    }
    x->probe_answers_police.spend(1);
    tsan_release(m);
    if (c.probe_answers == nullptr || c.probe_answers->enqueue_burst(&m, 1) != 1) {
      rte_pktmbuf_free(m);
      q.stats.drops[std::size_t(DropReason::kProbeRingFull)].add();
      return;
    }
    x->probe_answers.add();
    return;
  }
  const ExceptionClass k = exception_class(frame, rte_pktmbuf_data_len(m));
  const unsigned ki = unsigned(k);
  if (!x->policer.admit(k, m->pkt_len, now)) {
    rte_pktmbuf_free(m);
    x->stats.policed[ki].add();
    q.stats.drops[std::size_t(DropReason::kPoliced)].add();
    return;
  }
  m->port = q.port_id;  // the exception thread writes it to this port's TAP
  tsan_release(m);      // it goes to the exception thread from here (tsan.h)
  if (c.kernel_rings[is_control(k) ? 0 : 1]->enqueue_burst(&m, 1) != 1) {
    rte_pktmbuf_free(m);
    x->stats.ring_full[ki].add();
    q.stats.drops[std::size_t(DropReason::kKernelRingFull)].add();
    return;
  }
  x->stats.to_kernel[ki].add();
  q.stats.to_kernel.add();
}

// Frames from the port's own MAC (own_frame: a driver that shows the
// host's outgoing frames) and, with services, frames for another host's MAC
// (foreign_mac) leave the burst; the rest close up in order. Returns how
// many remain.
inline unsigned filter_macs(RxQueueContext& q, rte_mbuf** pkts, unsigned n) {
  const ExceptionRx* x = q.exception.get();
  unsigned kept = 0, own = 0, foreign = 0;
  for (unsigned i = 0; i < n; ++i) {
    const auto* frame = rte_pktmbuf_mtod(pkts[i], const std::uint8_t*);
    std::uint64_t src = 0;
    std::memcpy(&src, frame + 6, 6);
    if (q.own_source != 0 && src == q.own_source) [[unlikely]] {
      ++own;
      rte_pktmbuf_free(pkts[i]);
    } else if (x != nullptr && !x->accepts(frame)) [[unlikely]] {
      ++foreign;
      rte_pktmbuf_free(pkts[i]);
    } else {
      pkts[kept++] = pkts[i];
    }
  }
  if (own != 0) q.stats.drops[std::size_t(DropReason::kOwnFrame)].add(own);
  if (foreign != 0) q.stats.drops[std::size_t(DropReason::kForeignMac)].add(foreign);
  return kept;
}

}  // namespace qs
