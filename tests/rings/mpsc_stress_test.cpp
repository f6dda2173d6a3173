// Four-producer stress of MpscRing: per-producer FIFO, no loss, no duplicate.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "rings/mpsc_ring.h"
#include "tests/rings/stress_support.h"

namespace {

using qs::test::Backoff;
using qs::test::scaled;
using qs::test::StallWatchdog;
using qs::test::Tracked;

constexpr unsigned kProducers = 4;
constexpr unsigned kIdShift = 56;  // item = producer id << 56 | per-producer sequence
constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kIdShift) - 1;

std::uint64_t value_of(std::uint64_t v) { return v; }
std::uint64_t value_of(const Tracked& t) { return t.value; }

struct StressResult {
  std::array<std::uint64_t, kProducers> received{};
  std::uint64_t out_of_order = 0;
  std::uint64_t bad_producer_id = 0;
  std::uint64_t first_bad_value = 0;
  std::uint64_t first_bad_expected = 0;
  std::size_t left_over = 0;
  bool stalled = false;
};

template <class T>
StressResult run_mpsc_stress(std::size_t capacity, std::uint64_t per_producer, unsigned max_batch) {
  qs::MpscRing<T> ring(capacity);
  std::atomic<std::uint64_t> progress{0};
  std::atomic<bool> abort{false};
  std::atomic<unsigned> producers_done{0};
  StressResult result;
  {
    StallWatchdog watchdog("MpscRing stress", progress, [&] { abort.store(true); });

    std::vector<std::thread> producers;
    for (unsigned id = 0; id < kProducers; ++id) {
      producers.emplace_back([&, id] {
        std::mt19937 rng(id + 10);
        std::vector<T> batch;
        Backoff backoff;
        std::uint64_t next = 0;
        const std::uint64_t tag = std::uint64_t{id} << kIdShift;
        while (next < per_producer && !abort.load(std::memory_order_relaxed)) {
          const unsigned got = qs::test::offer_random_batch(ring, rng, batch, tag, next, per_producer - next, max_batch);
          if (got == 0) {
            backoff.wait();
            continue;
          }
          backoff.reset();
          next += got;
        }
        producers_done.fetch_add(1, std::memory_order_release);
      });
    }

    std::mt19937 rng(3);
    std::vector<T> out(max_batch, T{});
    Backoff backoff;
    std::uint64_t total = 0;
    const std::uint64_t want_total = per_producer * kProducers;
    while (total < want_total && !abort.load(std::memory_order_relaxed)) {
      const unsigned want = 1 + rng() % max_batch;
      const bool bulk = rng() % 4 == 0;
      unsigned got = bulk ? ring.dequeue_bulk(out.data(), want) : ring.dequeue_burst(out.data(), want);
      if (got == 0) {
        if (producers_done.load(std::memory_order_acquire) != kProducers) {
          backoff.wait();
          continue;
        }
        // Every producer's last enqueue happened before its done increment.
        got = ring.dequeue_burst(out.data(), max_batch);
        if (got == 0) break;
      }
      backoff.reset();
      for (unsigned i = 0; i < got; ++i) {
        const std::uint64_t v = value_of(out[i]);
        const std::uint64_t id = v >> kIdShift;
        const bool known = id < kProducers;
        if ((!known || (v & kSeqMask) != result.received[id]) && result.out_of_order++ == 0) {
          result.bad_producer_id = id;
          result.first_bad_value = v & kSeqMask;
          result.first_bad_expected = known ? result.received[id] : 0;
        }
        if (known) ++result.received[id];
      }
      total += got;
      progress.store(total, std::memory_order_relaxed);
    }
    for (auto& t : producers) t.join();
    result.left_over = ring.size();
    result.stalled = watchdog.stalled();
  }
  return result;
}

void expect_clean(const StressResult& r, std::uint64_t per_producer) {
  EXPECT_FALSE(r.stalled) << "no progress: items lost or a side stuck";
  for (unsigned id = 0; id < kProducers; ++id) {
    EXPECT_EQ(r.received[id], per_producer) << "producer " << id << ": items lost or duplicated";
  }
  EXPECT_EQ(r.out_of_order, 0u) << "first: producer " << r.bad_producer_id << " item "
                                << r.first_bad_value << " where " << r.first_bad_expected
                                << " was due";
  EXPECT_EQ(r.left_over, 0u) << "more items came out than went in";
}

TEST(MpscRingStress, FourProducersTenMillionItemsKeepPerProducerFifo) {
  const std::uint64_t per_producer = scaled(10'000'000) / kProducers;
  expect_clean(run_mpsc_stress<std::uint64_t>(1024, per_producer, 32), per_producer);
}

TEST(MpscRingStress, TinyRingUnderContention) {
  const std::uint64_t per_producer = scaled(1'000'000) / kProducers;
  expect_clean(run_mpsc_stress<std::uint64_t>(4, per_producer, 5), per_producer);
}

TEST(MpscRingStress, NonTrivialItemsLiveExactlyOnceAcrossThreads) {
  const std::int64_t live_before = Tracked::live.load();
  const std::int64_t errors_before = Tracked::errors.load();
  const std::uint64_t per_producer = scaled(1'000'000) / kProducers;
  expect_clean(run_mpsc_stress<Tracked>(256, per_producer, 16), per_producer);
  EXPECT_EQ(Tracked::live.load(), live_before);
  EXPECT_EQ(Tracked::errors.load(), errors_before);
}

}  // namespace
