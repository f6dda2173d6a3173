// LaneTally: a burst's packets counted by kind, in one 64-bit register.
//
// `++count[kind]` once per packet makes each increment wait for the one
// before it through memory (a store-to-load forward, some 5 cycles), and
// when most packets are of one kind those waits form a chain as long as the
// burst. A shift and an add in a register do not: the ring_loop demo's
// classification went from about 19 to 13 TSC cycles per packet in the loop
// that tallies its classes and routing rules (tests/bench/RESULTS.md).
//
// Eight lanes of eight bits: kinds below 8, and at most 255 packets per
// tally, which a burst (kMaxBurst) never exceeds.
#pragma once

#include <cstdint>

#include "dataplane/fastpath/burst.h"

namespace qs {

template <unsigned kKinds>
class LaneTally {
  static_assert(kKinds >= 1 && kKinds <= 8, "one 8-bit lane per kind, eight in 64 bits");
  static_assert(kMaxBurst <= 255, "a lane holds a whole burst of one kind");

 public:
  void add(unsigned kind) { lanes_ += std::uint64_t(1) << (8 * kind); }
  // add(kind) when `counted`, without a branch.
  void add_if(unsigned kind, bool counted) { lanes_ += std::uint64_t(counted) << (8 * kind); }
  unsigned operator[](unsigned kind) const { return unsigned(lanes_ >> (8 * kind)) & 0xffu; }

 private:
  std::uint64_t lanes_ = 0;
};

}  // namespace qs
