// SourceBudget: how many entries one source may add to the established
// forwarding table (ForwardingTables), so that one host cannot fill it.
//
// The per-connection credits (forwarding_rules.h) bound what one connection
// teaches; a host that opens many connections (new source ports, new SCIDs)
// is bounded only here. A source is an IPv4 address or an IPv6 /64 (what one
// host can pick from freely). Each has a token bucket of `per_source`
// entries, refilled at that many per idle timeout: a source that does not
// keep its entries alive holds at most about `per_source` of them, since
// entries go once idle for the timeout.
//
// Sources are kept in a fixed array of buckets indexed by a keyed hash of
// the source (so no one can aim at another's bucket); sources that share a
// bucket share its budget, which happens to a given pair with probability
// 1/kBuckets. Each bucket is one 64-bit word: the bucket's theoretical
// arrival time of the generic cell rate algorithm (GCRA), in 1/65536 ms
// within a 48-bit space that wraps with the tables' millisecond clock. A
// charge moves it on by one entry's share of the refill; a source may teach
// while it stays within the idle timeout ahead of now.
//
// Only teaching touches it (an insert into the established table), not
// routing: the check is one load, the charge one compare-and-swap. Lcores
// teaching for one source at once may each pass the check before the other
// charges: the overshoot is at most one entry per lcore.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "steering/slot_memory.h"

namespace qs {

class SourceBudget {
 public:
  static constexpr std::size_t kBuckets = 16384;  // 128 KiB

  // per_source: entries one source may teach per idle_ms (0: no bound).
  // Throws std::bad_alloc when `memory` has no room.
  SourceBudget(std::uint32_t per_source, std::uint32_t idle_ms, SlotMemory memory)
      : memory_(memory),
        window_(std::uint64_t(idle_ms == 0 ? 1 : idle_ms) << kFraction),
        cost_(per_source == 0 ? 0 : std::max<std::uint64_t>(1, window_ / per_source)) {
    buckets_ = static_cast<std::atomic<std::uint64_t>*>(memory_.allocate(kBuckets * sizeof *buckets_, memory_.context));
    if (buckets_ == nullptr) throw std::bad_alloc();
    for (std::size_t i = 0; i < kBuckets; ++i) new (&buckets_[i]) std::atomic<std::uint64_t>(kUnused);
  }
  ~SourceBudget() { memory_.release(buckets_, memory_.context); }
  SourceBudget(const SourceBudget&) = delete;
  SourceBudget& operator=(const SourceBudget&) = delete;

  bool bounded() const { return cost_ != 0; }

  // Whether the source (its keyed hash) may teach one more entry now.
  bool allows(std::uint64_t source, std::uint32_t now_ms) const {
    if (!bounded()) return true;
    return ahead(start(bucket(source).load(std::memory_order_relaxed), now_ms) + cost_, now_ms) <= std::int64_t(window_);
  }
  // Takes one entry from the source's budget (after it taught one).
  void charge(std::uint64_t source, std::uint32_t now_ms) {
    if (!bounded()) return;
    std::atomic<std::uint64_t>& b = bucket(source);
    std::uint64_t tat = b.load(std::memory_order_relaxed);
    // A few rounds: losing all of them to other lcores charging the same
    // bucket leaves this entry uncharged, an overshoot of one.
    for (int round = 0; round < 4; ++round)
      if (b.compare_exchange_weak(tat, (start(tat, now_ms) + cost_) & kSpace, std::memory_order_relaxed)) return;
  }

 private:
  static constexpr unsigned kFraction = 16;
  static constexpr std::uint64_t kSpace = (std::uint64_t(1) << 48) - 1;  // the ms clock's 32 bits, and 16 more
  static constexpr std::uint64_t kUnused = ~std::uint64_t(0);            // outside the space: never charged

  std::atomic<std::uint64_t>& bucket(std::uint64_t source) const { return buckets_[source & (kBuckets - 1)]; }
  static std::uint64_t fixed(std::uint32_t now_ms) { return std::uint64_t(now_ms) << kFraction; }
  // How far `at` lies ahead of now, in the wrapping space (negative: behind).
  static std::int64_t ahead(std::uint64_t at, std::uint32_t now_ms) {
    return std::int64_t((at - fixed(now_ms)) << 16) >> 16;
  }
  // Where a charge starts: the bucket's time, or now if that lies behind
  // (the budget refilled), or if it lies further ahead than any charge puts
  // it (a bucket untouched for half the clock's 49-day wrap).
  std::uint64_t start(std::uint64_t tat, std::uint32_t now_ms) const {
    if (tat == kUnused) return fixed(now_ms);
    const std::int64_t a = ahead(tat, now_ms);
    return a < 0 || a > std::int64_t(window_) ? fixed(now_ms) : tat;
  }

  SlotMemory memory_;
  std::atomic<std::uint64_t>* buckets_ = nullptr;
  std::uint64_t window_;  // the idle timeout, fixed point
  std::uint64_t cost_;    // one entry's share of it (0: unbounded)
};

}  // namespace qs
