// Shared helpers for the rings tests: sanitizer-aware sizing, a polite
// back-off for spin loops, and a stall watchdog so a lost item or lost wakeup
// fails the test instead of hanging CI.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <vector>
#include <string>
#include <thread>

#include "rings/ring_detail.h"

namespace qs::test {

// Sanitizer builds run 5-20x slower on 2 shared cores; their stress counts are
// cut tenfold (10^7 -> 10^6 items, 10^6 -> 10^5 doorbell rounds) so each
// sanitizer run of the rings suite stays within a few minutes. The plain build
// runs the full counts.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

inline constexpr std::uint64_t scaled(std::uint64_t full) { return kSanitized ? full / 10 : full; }

// Spin briefly, then yield: the tests run more threads than the machine has
// cores, and a thread spinning on a full/empty ring must let its peer run.
class Backoff {
 public:
  void wait() noexcept {
    if (++spins_ < 64) {
      ring_detail::cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() noexcept { spins_ = 0; }

 private:
  unsigned spins_ = 0;
};

// Watches a progress counter; if it stops moving for `stall_limit` (a hang
// detector, deliberately generous, not a speed requirement) it marks the run
// stalled and calls on_stall, which must make the test's threads give up. If
// the test still has not finished 10 s later, the process exits with an error
// rather than hang CI.
// One producer step of the stress tests: a batch of 1..max_batch items (no
// more than `remaining`), values tag|first, tag|first+1, ..., offered with a
// bulk enqueue one time in four and a burst enqueue otherwise. Returns how
// many the ring took (0: full).
template <class Ring, class T, class Rng>
unsigned offer_random_batch(Ring& ring, Rng& rng, std::vector<T>& batch, std::uint64_t tag,
                            std::uint64_t first, std::uint64_t remaining, unsigned max_batch) {
  const auto want = static_cast<unsigned>(std::min<std::uint64_t>(1 + rng() % max_batch, remaining));
  batch.clear();
  for (unsigned i = 0; i < want; ++i) batch.emplace_back(tag | (first + i));
  const bool bulk = rng() % 4 == 0;
  return bulk ? ring.enqueue_bulk(batch.data(), want) : ring.enqueue_burst(batch.data(), want);
}

class StallWatchdog {
 public:
  StallWatchdog(std::string what, const std::atomic<std::uint64_t>& progress,
                std::function<void()> on_stall,
                std::chrono::seconds stall_limit = std::chrono::seconds(20))
      : what_(std::move(what)),
        progress_(progress),
        on_stall_(std::move(on_stall)),
        limit_(stall_limit),
        thread_([this] { run(); }) {}

  ~StallWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  bool stalled() const { return stalled_.load(std::memory_order_acquire); }

 private:
  void run() {
    using clock = std::chrono::steady_clock;
    std::uint64_t seen = progress_.load(std::memory_order_relaxed);
    auto last_change = clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_) return;
      const std::uint64_t now_seen = progress_.load(std::memory_order_relaxed);
      if (now_seen != seen) {
        seen = now_seen;
        last_change = clock::now();
      } else if (clock::now() - last_change > limit_) {
        std::fprintf(stderr, "watchdog: %s made no progress for %lld s (stuck at %llu)\n",
                     what_.c_str(), static_cast<long long>(limit_.count()),
                     static_cast<unsigned long long>(seen));
        stalled_.store(true, std::memory_order_release);
        on_stall_();
        if (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return stop_; })) {
          std::fprintf(stderr, "watchdog: %s did not stop after the stall; exiting\n",
                       what_.c_str());
          std::fflush(stderr);
          std::_Exit(1);
        }
        return;
      }
    }
  }

  std::string what_;
  const std::atomic<std::uint64_t>& progress_;
  std::function<void()> on_stall_;
  std::chrono::seconds limit_;
  std::atomic<bool> stalled_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every other member is ready
};

// A value type that checks its own lifetime: every object is constructed and
// destroyed exactly once, and never used while dead. Violations are counted
// (not asserted) so they are safe to detect from any thread.
struct Tracked {
  static constexpr std::uint32_t kAlive = 0xA11CEu;
  static constexpr std::uint32_t kDead = 0xDEADu;

  static inline std::atomic<std::int64_t> live{0};
  static inline std::atomic<std::int64_t> errors{0};

  explicit Tracked(std::uint64_t v = 0) noexcept : value(v) { live.fetch_add(1); }
  Tracked(const Tracked& other) noexcept : value(other.value) {
    other.check();
    live.fetch_add(1);
  }
  Tracked& operator=(Tracked&& other) noexcept {
    check();
    other.check();
    value = other.value;
    return *this;
  }
  Tracked& operator=(const Tracked& other) noexcept {
    check();
    other.check();
    value = other.value;
    return *this;
  }
  ~Tracked() {
    check();
    // volatile: GCC would otherwise drop this store to a dying object
    // (-flifetime-dse), hiding a double destruction.
    *static_cast<volatile std::uint32_t*>(&state) = kDead;
    live.fetch_sub(1);
  }
  void check() const noexcept {
    if (state != kAlive) errors.fetch_add(1);
  }

  std::uint64_t value;
  std::uint32_t state = kAlive;
};

}  // namespace qs::test
