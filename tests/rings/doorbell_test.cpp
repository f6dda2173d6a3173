// Doorbell: deterministic protocol checks, then races between producers and a
// consumer going to sleep. A lost wakeup leaves the consumer asleep with no
// timeout; the stall watchdog notices progress stopped, shuts the doorbell
// down (which wakes it) and the test fails instead of hanging.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "rings/doorbell.h"
#include "rings/mpsc_ring.h"
#include "rings/spsc_ring.h"
#include "tests/rings/stress_support.h"

namespace {

using namespace std::chrono_literals;
using qs::Doorbell;
using qs::test::Backoff;
using qs::test::scaled;
using qs::test::StallWatchdog;
using Wake = Doorbell::Wake;

constexpr std::chrono::nanoseconds kForever{-1};
// Long enough never to expire in a passing run; a broken doorbell returns
// kTimedOut after it instead of hanging.
constexpr std::chrono::nanoseconds kSafetyTimeout = 20s;

TEST(Doorbell, RingWithoutSleeperSendsNothing) {
  Doorbell bell;
  bell.ring();
  bell.ring();
  EXPECT_EQ(bell.signals_sent(), 0u);
  bell.prepare_sleep();
  EXPECT_EQ(bell.sleep(1ms), Wake::kTimedOut) << "a ring with no sleeper left a stale signal";
}

TEST(Doorbell, RingAfterPrepareSleepWakesAndCoalesces) {
  Doorbell bell;
  bell.prepare_sleep();
  bell.ring();
  bell.ring();
  bell.ring();
  EXPECT_EQ(bell.signals_sent(), 1u) << "producers after the first found the flag cleared";
  EXPECT_EQ(bell.sleep(kSafetyTimeout), Wake::kRung);
  bell.prepare_sleep();
  EXPECT_EQ(bell.sleep(1ms), Wake::kTimedOut) << "the coalesced signal was consumed once";
}

TEST(Doorbell, CancelledSleepCostsOneSpuriousWakeupNotALostOne) {
  Doorbell bell;
  bell.prepare_sleep();
  bell.ring();          // producer takes the flag and signals
  bell.cancel_sleep();  // consumer found work in its re-check
  EXPECT_EQ(bell.signals_sent(), 1u);
  bell.prepare_sleep();
  EXPECT_EQ(bell.sleep(kSafetyTimeout), Wake::kRung) << "pending signal returns at once";
  bell.prepare_sleep();
  bell.cancel_sleep();
  bell.ring();
  EXPECT_EQ(bell.signals_sent(), 1u) << "cancel_sleep withdrew the announcement";
}

TEST(Doorbell, ShutdownWakesSleeperAndSilencesProducers) {
  Doorbell bell;
  std::atomic<int> result{-1};
  std::thread consumer([&] {
    bell.prepare_sleep();
    result.store(static_cast<int>(bell.sleep(kSafetyTimeout)));
  });
  std::this_thread::sleep_for(10ms);  // usually lets the consumer block first; either order must work
  bell.shutdown();
  consumer.join();
  EXPECT_EQ(result.load(), static_cast<int>(Wake::kShutdown));
  EXPECT_TRUE(bell.is_shutdown());
  bell.shutdown();  // idempotent
  bell.prepare_sleep();
  bell.ring();
  EXPECT_EQ(bell.signals_sent(), 0u) << "ring() after shutdown must not signal";
  EXPECT_EQ(bell.sleep(kSafetyTimeout), Wake::kShutdown);
}

TEST(Doorbell, ProducersRingingAcrossShutdownAreSafe) {
  // Producers keep ringing while the consumer sleeps and wakes and the
  // doorbell is shut down; then everything is joined and destroyed. Run under
  // ASan/TSan this checks the shutdown path touches nothing it should not.
  constexpr int kProducers = 2;
  auto bell = std::make_unique<Doorbell>();
  std::atomic<bool> stop{false};
  std::array<std::atomic<std::uint64_t>, kProducers> rings{};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!stop.load(std::memory_order_relaxed)) {
        bell->ring();
        rings[p].fetch_add(1, std::memory_order_release);
        std::this_thread::yield();
      }
    });
  }
  std::thread consumer([&] {
    for (;;) {
      bell->prepare_sleep();
      if (bell->sleep(kSafetyTimeout) == Wake::kShutdown) return;
    }
  });
  auto total = [&] { return rings[0].load() + rings[1].load(); };
  while (total() < scaled(20'000)) std::this_thread::yield();
  bell->shutdown();
  consumer.join();
  // A ring() that read the state before shutdown may still be writing; wait
  // until every producer has finished two more calls, so its latest call
  // started after shutdown, and count from there.
  std::array<std::uint64_t, kProducers> at_shutdown{};
  for (int p = 0; p < kProducers; ++p) at_shutdown[p] = rings[p].load(std::memory_order_acquire);
  for (int p = 0; p < kProducers; ++p) {
    while (rings[p].load(std::memory_order_acquire) < at_shutdown[p] + 2) std::this_thread::yield();
  }
  // Keep announcing sleep while they ring: after shutdown none may signal.
  const std::uint64_t signals = bell->signals_sent();
  const std::uint64_t rings_then = total();
  while (total() < rings_then + scaled(20'000)) {
    bell->prepare_sleep();
    std::this_thread::yield();
  }
  EXPECT_EQ(bell->signals_sent(), signals) << "ring() after shutdown signalled";
  EXPECT_EQ(bell->sleep(kSafetyTimeout), Wake::kShutdown);
  stop.store(true);
  for (auto& t : producers) t.join();
  bell.reset();
}

// One producer, one consumer, one item per round: the producer waits until
// the consumer has taken the previous item, waits a random short while (so
// its enqueue lands anywhere in the consumer's dequeue / announce / re-check /
// block sequence), enqueues and rings. The consumer sleeps with no timeout.
TEST(DoorbellRace, MillionSleepWakeRoundsLoseNoWakeup) {
  const std::uint64_t rounds = scaled(1'000'000);
  qs::SpscRing<std::uint64_t> ring(64);
  Doorbell bell;
  std::atomic<std::uint64_t> consumed{0};
  std::atomic<bool> abort{false};
  std::uint64_t sleeps = 0;
  std::uint64_t announcements = 0;
  std::uint64_t cancelled = 0;  // the re-check after prepare_sleep found the item
  std::uint64_t wrong_items = 0;
  {
    StallWatchdog watchdog("doorbell sleep/wake rounds", consumed, [&] {
      abort.store(true);
      bell.shutdown();
    });
    std::thread consumer([&] {
      std::mt19937 rng(6);
      // Random stretches between the protocol steps widen each window so the
      // producer's enqueue + ring() lands in every one of them.
      auto stall = [&rng] {
        for (unsigned spin = rng() % 32; spin > 0; --spin) qs::ring_detail::cpu_relax();
      };
      std::uint64_t expected = 1;
      std::uint64_t items[8];
      while (expected <= rounds) {
        const unsigned got = ring.dequeue_burst(items, 8);
        if (got != 0) {
          for (unsigned i = 0; i < got; ++i, ++expected) wrong_items += items[i] != expected;
          consumed.store(expected - 1, std::memory_order_release);
          stall();
          continue;
        }
        bell.prepare_sleep();
        ++announcements;
        stall();
        if (!ring.empty()) {
          bell.cancel_sleep();
          ++cancelled;
          continue;
        }
        ++sleeps;
        stall();
        if (bell.sleep(kForever) == Wake::kShutdown) return;
      }
    });

    std::mt19937 rng(5);
    for (std::uint64_t r = 1; r <= rounds && !abort.load(std::memory_order_relaxed); ++r) {
      // Spin (yielding only rarely) so the producer notices the consumer's
      // progress within nanoseconds and can land inside its short window
      // between emptying the ring and blocking.
      for (unsigned spins = 0; consumed.load(std::memory_order_acquire) < r - 1 &&
                               !abort.load(std::memory_order_relaxed);
           ++spins) {
        if (spins % 4096 == 4095) {
          std::this_thread::yield();
        } else {
          qs::ring_detail::cpu_relax();
        }
      }
      // Half the rounds wait 0..63 pause instructions (landing before, in or
      // right after the consumer's announce / re-check), the rest 0..255 (up to
      // a few microseconds: the consumer is entering or inside ppoll()).
      const unsigned delay = rng() % 2 == 0 ? rng() % 64 : rng() % 256;
      for (unsigned spin = delay; spin > 0; --spin) qs::ring_detail::cpu_relax();
      if (ring.enqueue_burst(&r, 1) != 1) {
        ADD_FAILURE() << "ring full in round " << r << ": the consumer took more than one item";
        abort.store(true);
        bell.shutdown();
        break;
      }
      bell.ring();
    }
    consumer.join();
    EXPECT_FALSE(watchdog.stalled()) << "lost wakeup: consumer slept with an item queued";
  }
  EXPECT_EQ(consumed.load(), rounds);
  EXPECT_EQ(wrong_items, 0u);
  EXPECT_GT(sleeps, 0u) << "the consumer never actually slept: the race was not exercised";
  EXPECT_LE(bell.signals_sent(), announcements) << "a signal without an announced sleep";
  RecordProperty("sleeps", std::to_string(sleeps));
  RecordProperty("signals", std::to_string(bell.signals_sent()));
  RecordProperty("cancelled", std::to_string(cancelled));
  // Rounds whose item arrived before the consumer announced = rounds + 1 -
  // announced; during the re-check window = cancelled; later = slept.
  std::printf("rounds=%llu announced=%llu cancelled=%llu slept=%llu signals=%llu\n",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(announcements),
              static_cast<unsigned long long>(cancelled), static_cast<unsigned long long>(sleeps),
              static_cast<unsigned long long>(bell.signals_sent()));
}

// Four producers share one MpscRing inbox and one doorbell; each rings after
// every enqueue. The consumer dequeues until empty, announces, re-checks, sleeps.
TEST(DoorbellRace, FourProducersOneSleepingConsumer) {
  constexpr unsigned kProducers = 4;
  const std::uint64_t per_producer = scaled(200'000);
  qs::MpscRing<std::uint64_t> ring(256);
  Doorbell bell;
  std::atomic<std::uint64_t> consumed{0};
  std::atomic<bool> abort{false};
  std::array<std::uint64_t, kProducers> received{};
  std::uint64_t out_of_order = 0;
  std::uint64_t announcements = 0;
  {
    StallWatchdog watchdog("doorbell with four producers", consumed, [&] {
      abort.store(true);
      bell.shutdown();
    });
    std::vector<std::thread> producers;
    for (unsigned id = 0; id < kProducers; ++id) {
      producers.emplace_back([&, id] {
        std::mt19937 rng(id + 20);
        Backoff backoff;
        for (std::uint64_t seq = 0; seq < per_producer && !abort.load(std::memory_order_relaxed);) {
          const std::uint64_t item = std::uint64_t{id} << 56 | seq;
          if (ring.enqueue_burst(&item, 1) == 0) {
            backoff.wait();
            continue;
          }
          backoff.reset();
          bell.ring();
          ++seq;
          // Occasional pauses let the consumer run dry and go to sleep.
          if (rng() % 64 == 0) {
            for (unsigned spin = rng() % 2048; spin > 0; --spin) qs::ring_detail::cpu_relax();
          }
        }
      });
    }
    std::uint64_t items[32];
    std::uint64_t total = 0;
    while (total < per_producer * kProducers) {
      const unsigned got = ring.dequeue_burst(items, 32);
      if (got != 0) {
        for (unsigned i = 0; i < got; ++i) {
          const std::uint64_t id = items[i] >> 56;
          const std::uint64_t seq = items[i] & ((std::uint64_t{1} << 56) - 1);
          if (id >= kProducers || seq != received[id]) {
            ++out_of_order;
          } else {
            ++received[id];
          }
        }
        total += got;
        consumed.store(total, std::memory_order_relaxed);
        continue;
      }
      bell.prepare_sleep();
      ++announcements;
      if (!ring.empty()) {
        bell.cancel_sleep();
        continue;
      }
      if (bell.sleep(kForever) == Wake::kShutdown) break;
    }
    for (auto& t : producers) t.join();
    EXPECT_FALSE(watchdog.stalled()) << "lost wakeup: consumer slept with items queued";
  }
  for (unsigned id = 0; id < kProducers; ++id) EXPECT_EQ(received[id], per_producer) << id;
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_LE(bell.signals_sent(), announcements) << "signals did not coalesce";
}

}  // namespace
