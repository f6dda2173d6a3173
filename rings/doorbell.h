// Doorbell: lets an idle consumer lcore sleep on an eventfd and be woken by
// producers without ever losing a wakeup.
//
// Consumer protocol (the order matters):
//   1. dequeue from every ring it serves until empty (signals coalesce: one
//      wakeup can stand for many enqueues, so a ring left non-empty may never
//      be signalled again);
//   2. prepare_sleep()                       -- announce the intention to sleep
//   3. re-check every ring; if any is non-empty: cancel_sleep(), go to 1
//   4. sleep(timeout)                        -- then go to 1
// Producer protocol: enqueue, then ring().
//
// Why no wakeup is lost: prepare_sleep() and ring() are read-modify-writes on
// the same atomic word, so one of them comes first in its modification order.
//  - ring() first: prepare_sleep()'s acquire RMW reads (a successor of) ring()'s
//    release RMW, so the producer's enqueue happens before the consumer's
//    re-check in step 3, which therefore sees the item and does not sleep.
//  - prepare_sleep() first: ring() reads the sleeping flag, clears it and
//    writes the eventfd; the eventfd counter persists until read, so sleep()
//    returns at once even if it has not started blocking yet.
// Only the producer whose RMW actually cleared the flag writes, so concurrent
// producers coalesce into one signal; a producer finding no sleeper does a
// single uncontended-line RMW and no syscall.
//
// Shutdown: shutdown() marks the doorbell shut and wakes the consumer; later
// sleep() calls return kShutdown at once and ring() becomes a no-op. The
// eventfd is closed only by the destructor, which by C++ object rules runs
// after every thread has stopped using the Doorbell, so no thread can write to
// a closed (or reused) descriptor.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>

#include "rings/cache_line.h"

namespace qs {

class Doorbell {
 public:
  enum class Wake {
    kRung,      // a producer (or shutdown) signalled, or a signal was already pending
    kTimedOut,  // timeout elapsed (or the wait was interrupted by a signal handler)
    kShutdown,  // shutdown() has been called
  };

  Doorbell() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) {
      throw std::runtime_error(std::string("Doorbell: eventfd failed: ") + std::strerror(errno));
    }
  }
  ~Doorbell() { ::close(fd_); }
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  // Consumer: announce the intention to sleep. Must be followed by a re-check
  // of the rings and then cancel_sleep() or sleep().
  void prepare_sleep() noexcept {
    // acq_rel: the acquire half pairs with the release half of ring()'s RMW, so
    // an enqueue whose ring() preceded this is visible to the re-check.
    state_.fetch_or(kSleeping, std::memory_order_acq_rel);
  }

  // Consumer: the re-check found work; stay awake. If a producer already took
  // the flag, its eventfd write stays pending and the next sleep() returns at
  // once (one spurious wakeup, never a lost one).
  void cancel_sleep() noexcept { state_.fetch_and(~kSleeping, std::memory_order_relaxed); }

  // Consumer: block until rung, timed out or shut down. A negative timeout
  // waits without limit. Clears the sleeping announcement on return.
  Wake sleep(std::chrono::nanoseconds timeout) noexcept {
    Wake wake = Wake::kShutdown;
    if ((state_.load(std::memory_order_acquire) & kShutdown) == 0) {
      timespec ts{};
      timespec* limit = nullptr;
      if (timeout.count() >= 0) {
        ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
        limit = &ts;
      }
      pollfd pfd{fd_, POLLIN, 0};
      const int ready = ::ppoll(&pfd, 1, limit, nullptr);
      wake = ready > 0 ? Wake::kRung : Wake::kTimedOut;
      if (ready > 0) {
        // Consume the pending count (all coalesced signals at once). The fd is
        // non-blocking, so a concurrent read can never block here.
        std::uint64_t count;
        [[maybe_unused]] const ssize_t got = ::read(fd_, &count, sizeof count);
      }
    }
    // acquire pairs with ring()'s release RMW, for callers that skip the
    // re-check after waking (they must still dequeue, which re-reads the rings).
    const std::uint32_t before = state_.fetch_and(~kSleeping, std::memory_order_acq_rel);
    if ((before & kShutdown) != 0) wake = Wake::kShutdown;
    return wake;
  }

  // Any producer, after enqueueing. Signals only if the consumer announced
  // sleep; exactly one of several racing producers writes the eventfd.
  void ring() noexcept {
    // release pairs with the acquire half of prepare_sleep() (see top comment).
    const std::uint32_t before = state_.fetch_and(~kSleeping, std::memory_order_acq_rel);
    if ((before & (kSleeping | kShutdown)) == kSleeping) {
      signal();
      signals_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Any thread. Wakes a sleeping consumer and makes every later sleep() return
  // kShutdown. Idempotent.
  void shutdown() noexcept {
    const std::uint32_t before = state_.fetch_or(kShutdown, std::memory_order_acq_rel);
    if ((before & kShutdown) == 0) signal();
  }

  bool is_shutdown() const noexcept {
    return (state_.load(std::memory_order_acquire) & kShutdown) != 0;
  }

  // How many eventfd writes ring() has made (control-path statistic: shows the
  // coalescing, and that producers stay silent while the consumer is awake).
  std::uint64_t signals_sent() const noexcept { return signals_.load(std::memory_order_relaxed); }

  // For epoll-based consumers that wait on several descriptors.
  int fd() const noexcept { return fd_; }

 private:
  static constexpr std::uint32_t kSleeping = 1;
  static constexpr std::uint32_t kShutdown = 2;

  void signal() noexcept {
    const std::uint64_t one = 1;
    // Can only fail with EAGAIN once the counter nears 2^64 - 1, which cannot
    // happen: at most one write per sleep, and every wake reads it back to zero.
    [[maybe_unused]] const ssize_t put = ::write(fd_, &one, sizeof one);
  }

  // The word producers RMW on every ring(); on its own line so the consumer's
  // other state and the producers' ring indices do not bounce with it.
  alignas(kCacheLine) std::atomic<std::uint32_t> state_{0};
  alignas(kCacheLine) int fd_;
  std::atomic<std::uint64_t> signals_{0};
};

}  // namespace qs
