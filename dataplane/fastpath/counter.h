// A statistics counter with exactly one writer (the lcore that owns it) and
// readers elsewhere (the stats reporter on the main lcore).
//
// Relaxed load + relaxed store is a plain `add` to memory on x86: no lock
// prefix, no fence. The atomic type only makes the cross-thread read defined
// (and ThreadSanitizer-clean); a reader may see a value one increment old.
#pragma once

#include <atomic>
#include <cstdint>

namespace qs {

class Counter {
 public:
  void add(std::uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  // Takes back part of an earlier add (never more than was added).
  void sub(std::uint64_t n) { v_.store(v_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed); }
  void max_with(std::uint64_t n) {
    if (n > v_.load(std::memory_order_relaxed)) v_.store(n, std::memory_order_relaxed);
  }
  void set(std::uint64_t n) { v_.store(n, std::memory_order_relaxed); }  // gauges
  std::uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

}  // namespace qs
