// Two-thread stress of SpscRing: every item arrives once, in order.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "rings/spsc_ring.h"
#include "tests/rings/stress_support.h"

namespace {

using qs::test::Backoff;
using qs::test::scaled;
using qs::test::StallWatchdog;
using qs::test::Tracked;

std::uint64_t value_of(std::uint64_t v) { return v; }
std::uint64_t value_of(const Tracked& t) { return t.value; }

struct StressResult {
  std::uint64_t received = 0;
  std::uint64_t out_of_order = 0;
  std::uint64_t first_bad_index = 0;
  std::uint64_t first_bad_value = 0;
  std::uint64_t oversize = 0;  // size() above capacity
  std::size_t left_over = 0;   // items still in the ring after the run (duplicates)
  bool stalled = false;
};

// The producer sends 0..total-1 with random burst/bulk requests of 1..max_batch;
// the consumer dequeues with random burst/bulk requests and checks each value
// against a running sequence number. The consumer stops when it has
// everything or when the producer is done and the ring is empty (a lost item
// then shows up as a short count instead of a hang).
template <class T>
StressResult run_spsc_stress(std::size_t capacity, std::uint64_t total, unsigned max_batch) {
  qs::SpscRing<T> ring(capacity);
  std::atomic<std::uint64_t> progress{0};
  std::atomic<bool> abort{false};
  std::atomic<bool> producer_done{false};
  StressResult result;
  {
    StallWatchdog watchdog("SpscRing stress", progress, [&] { abort.store(true); });

    std::thread producer([&] {
      std::mt19937 rng(1);
      std::vector<T> batch;
      Backoff backoff;
      std::uint64_t next = 0;
      while (next < total && !abort.load(std::memory_order_relaxed)) {
        const unsigned got = qs::test::offer_random_batch(ring, rng, batch, 0, next, total - next, max_batch);
        if (got == 0) {
          backoff.wait();
          continue;
        }
        backoff.reset();
        next += got;
        if (ring.size() > capacity) ++result.oversize;
      }
      producer_done.store(true, std::memory_order_release);
    });

    std::mt19937 rng(2);
    std::vector<T> out(max_batch, T{});
    Backoff backoff;
    std::uint64_t expected = 0;
    while (expected < total && !abort.load(std::memory_order_relaxed)) {
      const unsigned want = 1 + rng() % max_batch;
      const bool bulk = rng() % 4 == 0;
      unsigned got = bulk ? ring.dequeue_bulk(out.data(), want) : ring.dequeue_burst(out.data(), want);
      if (got == 0) {
        if (!producer_done.load(std::memory_order_acquire)) {
          backoff.wait();
          continue;
        }
        // The producer's last enqueue happened before its done flag, so one
        // more poll after seeing the flag sees everything it ever sent.
        got = ring.dequeue_burst(out.data(), max_batch);
        if (got == 0) break;
      }
      backoff.reset();
      for (unsigned i = 0; i < got; ++i, ++expected) {
        if (value_of(out[i]) != expected && result.out_of_order++ == 0) {
          result.first_bad_index = expected;
          result.first_bad_value = value_of(out[i]);
        }
      }
      progress.store(expected, std::memory_order_relaxed);
    }
    result.received = expected;
    producer.join();
    result.left_over = ring.size();
    result.stalled = watchdog.stalled();
  }
  return result;
}

void expect_clean(const StressResult& r, std::uint64_t total) {
  EXPECT_FALSE(r.stalled) << "no progress: items lost or a side stuck";
  EXPECT_EQ(r.received, total) << "items lost or duplicated";
  EXPECT_EQ(r.out_of_order, 0u) << "first at #" << r.first_bad_index << ": got " << r.first_bad_value;
  EXPECT_EQ(r.oversize, 0u) << "size() reported more than capacity";
  EXPECT_EQ(r.left_over, 0u) << "more items came out than went in";
}

TEST(SpscRingStress, TwoThreadsTenMillionItemsArriveOnceInOrder) {
  const std::uint64_t total = scaled(10'000'000);
  expect_clean(run_spsc_stress<std::uint64_t>(1024, total, 64), total);
}

TEST(SpscRingStress, TinyRingAlternatesFullAndEmpty) {
  const std::uint64_t total = scaled(1'000'000);
  expect_clean(run_spsc_stress<std::uint64_t>(4, total, 5), total);
}

TEST(SpscRingStress, NonTrivialItemsLiveExactlyOnceAcrossThreads) {
  const std::int64_t live_before = Tracked::live.load();
  const std::int64_t errors_before = Tracked::errors.load();
  const std::uint64_t total = scaled(1'000'000);
  expect_clean(run_spsc_stress<Tracked>(256, total, 32), total);
  EXPECT_EQ(Tracked::live.load(), live_before);
  EXPECT_EQ(Tracked::errors.load(), errors_before);
}

}  // namespace
