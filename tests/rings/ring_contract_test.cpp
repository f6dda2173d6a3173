// Single-threaded contract of SpscRing and MpscRing, checked against a
// std::deque model: capacity validation, wrap-around at every power-of-two
// capacity from 2 to 4096, burst = "as many as fit", bulk = all or nothing,
// and exactly-once construction/destruction of non-trivial items.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>
#include <vector>

#include "rings/mpsc_ring.h"
#include "rings/spsc_ring.h"
#include "tests/rings/stress_support.h"

namespace {

using qs::test::Tracked;

template <class Ring>
class RingContract : public ::testing::Test {};

template <template <class> class R>
struct RingKind {
  template <class T>
  using Ring = R<T>;
};
using RingKinds = ::testing::Types<RingKind<qs::SpscRing>, RingKind<qs::MpscRing>>;

class KindNames {
 public:
  template <class Kind>
  static std::string GetName(int index) {
    return index == 0 ? "Spsc" : "Mpsc";
  }
};
TYPED_TEST_SUITE(RingContract, RingKinds, KindNames);

std::uint64_t value_of(std::uint64_t v) { return v; }
std::uint64_t value_of(const Tracked& t) { return t.value; }

enum class Op { kEnqueueBurst, kEnqueueBulk, kDequeueBurst, kDequeueBulk };

// Runs a random mix of the four operations with request sizes from 0 to
// capacity + 2 (half of them small, so the copy crosses the end of the slot
// array at every offset), checking every result against the model. Moves at
// least 40 ring-fulls of items, so the indices wrap around many times.
template <class Ring>
void run_against_model(Ring& ring, std::uint64_t seed) {
  using T = typename Ring::value_type;
  const std::size_t cap = ring.capacity();
  std::mt19937_64 rng(seed);
  std::deque<std::uint64_t> model;
  std::uint64_t next = 1;
  std::vector<T> in;
  std::vector<T> out(cap + 3, T{});
  const std::uint64_t target = 40 * cap + 2000;

  while (next < target) {
    const auto op = static_cast<Op>(rng() % 4);
    const std::size_t limit = (rng() % 2 == 0) ? std::min<std::size_t>(cap + 2, 9) : cap + 2;
    const auto n = static_cast<unsigned>(rng() % (limit + 1));
    const std::size_t used = model.size();
    switch (op) {
      case Op::kEnqueueBurst:
      case Op::kEnqueueBulk: {
        in.clear();
        for (unsigned i = 0; i < n; ++i) in.emplace_back(next + i);
        const bool bulk = op == Op::kEnqueueBulk;
        const unsigned got = bulk ? ring.enqueue_bulk(in.data(), n) : ring.enqueue_burst(in.data(), n);
        const std::size_t room = cap - used;
        const std::size_t want = bulk ? (n <= room ? n : 0) : std::min<std::size_t>(n, room);
        ASSERT_EQ(got, want) << (bulk ? "enqueue_bulk" : "enqueue_burst") << " n=" << n
                             << " used=" << used << " cap=" << cap;
        for (unsigned i = 0; i < got; ++i) model.push_back(next + i);
        next += got;
        break;
      }
      case Op::kDequeueBurst:
      case Op::kDequeueBulk: {
        const bool bulk = op == Op::kDequeueBulk;
        const unsigned got = bulk ? ring.dequeue_bulk(out.data(), n) : ring.dequeue_burst(out.data(), n);
        const std::size_t want = bulk ? (n <= used ? n : 0) : std::min<std::size_t>(n, used);
        ASSERT_EQ(got, want) << (bulk ? "dequeue_bulk" : "dequeue_burst") << " n=" << n
                             << " used=" << used << " cap=" << cap;
        for (unsigned i = 0; i < got; ++i) {
          ASSERT_EQ(value_of(out[i]), model.front()) << "FIFO order broken, cap=" << cap;
          model.pop_front();
        }
        break;
      }
    }
    ASSERT_EQ(ring.size(), model.size());
    ASSERT_EQ(ring.free_count(), cap - model.size());
    ASSERT_EQ(ring.empty(), model.empty());
  }
}

TYPED_TEST(RingContract, RejectsCapacityThatIsNotAPowerOfTwoAtLeastTwo) {
  using Ring = typename TypeParam::template Ring<std::uint64_t>;
  for (std::size_t bad : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{6},
                          std::size_t{100}, std::size_t{4097}, std::size_t{1} << 32}) {
    EXPECT_THROW(Ring ring(bad), std::invalid_argument) << "capacity " << bad;
  }
  Ring two(2);
  EXPECT_EQ(two.capacity(), 2u);
  EXPECT_TRUE(two.empty());
}

TYPED_TEST(RingContract, WrapsAroundAtEveryPowerOfTwoCapacity) {
  using Ring = typename TypeParam::template Ring<std::uint64_t>;
  for (std::size_t cap = 2; cap <= 4096; cap *= 2) {
    SCOPED_TRACE(cap);
    Ring ring(cap);
    run_against_model(ring, cap);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TYPED_TEST(RingContract, BulkIsAllOrNothing) {
  using Ring = typename TypeParam::template Ring<std::uint64_t>;
  Ring ring(8);
  const std::uint64_t in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::uint64_t out[9] = {};
  EXPECT_EQ(ring.enqueue_bulk(in, 9), 0u) << "more than capacity";
  EXPECT_EQ(ring.size(), 0u);
  EXPECT_EQ(ring.enqueue_bulk(in, 5), 5u);
  EXPECT_EQ(ring.enqueue_bulk(in + 5, 4), 0u) << "4 items, 3 free";
  EXPECT_EQ(ring.size(), 5u);
  EXPECT_EQ(ring.enqueue_bulk(in + 5, 3), 3u);
  EXPECT_EQ(ring.enqueue_bulk(in, 1), 0u) << "full";
  EXPECT_EQ(ring.dequeue_bulk(out, 9), 0u) << "more than stored";
  EXPECT_EQ(ring.size(), 8u);
  EXPECT_EQ(ring.dequeue_bulk(out, 6), 6u);
  EXPECT_EQ(ring.dequeue_bulk(out + 6, 3), 0u) << "3 wanted, 2 stored";
  EXPECT_EQ(ring.dequeue_bulk(out + 6, 2), 2u);
  for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(out[i], i + 1);
  EXPECT_EQ(ring.dequeue_bulk(out, 1), 0u) << "empty";
  EXPECT_EQ(ring.enqueue_bulk(in, 0), 0u);
  EXPECT_EQ(ring.dequeue_bulk(out, 0), 0u);
}

TYPED_TEST(RingContract, BurstReturnsExactlyWhatFit) {
  using Ring = typename TypeParam::template Ring<std::uint64_t>;
  Ring ring(8);
  const std::uint64_t in[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::uint64_t out[12] = {};
  EXPECT_EQ(ring.enqueue_burst(in, 5), 5u);
  EXPECT_EQ(ring.enqueue_burst(in + 5, 7), 3u) << "3 free";
  EXPECT_EQ(ring.enqueue_burst(in + 8, 4), 0u) << "full";
  EXPECT_EQ(ring.dequeue_burst(out, 3), 3u);
  EXPECT_EQ(ring.enqueue_burst(in + 8, 4), 3u) << "3 freed, wraps past the end";
  EXPECT_EQ(ring.dequeue_burst(out + 3, 12), 8u) << "only 8 stored";
  EXPECT_EQ(ring.dequeue_burst(out, 1), 0u) << "empty";
  const std::uint64_t expect[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  for (int i = 0; i < 11; ++i) EXPECT_EQ(out[i], expect[i]) << i;
}

TYPED_TEST(RingContract, NonTrivialItemsAreConstructedAndDestroyedExactlyOnce) {
  using Ring = typename TypeParam::template Ring<Tracked>;
  const std::int64_t live_before = Tracked::live.load();
  const std::int64_t errors_before = Tracked::errors.load();
  for (std::size_t cap = 2; cap <= 64; cap *= 2) {
    SCOPED_TRACE(cap);
    Ring ring(cap);
    run_against_model(ring, 100 + cap);
    if (::testing::Test::HasFatalFailure()) return;
    // Leave items in the ring so the destructor has to destroy them.
    const Tracked leftover[2] = {Tracked(1), Tracked(2)};
    ring.enqueue_burst(leftover, 2);
  }
  EXPECT_EQ(Tracked::live.load(), live_before) << "items leaked or destroyed twice";
  EXPECT_EQ(Tracked::errors.load(), errors_before) << "an item was used or destroyed while dead";
}

// 5000 rounds of a random burst in or out of a 16-slot ring, single-threaded;
// after each, check(ring, occupancy, rng).
template <typename Check>
void random_rounds(std::uint64_t seed, Check&& check) {
  qs::SpscRing<std::uint64_t> ring(16);
  std::uint64_t items[16] = {};
  std::uint64_t out[16];
  std::mt19937_64 rng(seed);
  std::size_t used = 0;
  for (int round = 0; round < 5000; ++round) {
    if (rng() % 2 == 0) {
      used += ring.enqueue_burst(items, static_cast<unsigned>(rng() % 9));
    } else {
      used -= ring.dequeue_burst(out, static_cast<unsigned>(rng() % 9));
    }
    check(ring, used, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The producer's cached occupancy never understates the true one, and below
// `reread_at` it is exactly what the producer last knew: whenever it says
// "at or above reread_at" it has reread the consumer's index, so then it is
// the true occupancy. A hand-off that fits below its mark therefore never
// refuses packets the ring has room for.
TEST(SpscRingContract, ProducerOccupancyRereadsOnlyAtTheMark) {
  random_rounds(9, [](qs::SpscRing<std::uint64_t>& ring, std::size_t used, std::mt19937_64& rng) {
    const std::size_t reread_at = rng() % 18;
    const std::size_t seen = ring.producer_occupancy(reread_at);
    ASSERT_GE(seen, used);
    ASSERT_LE(seen, ring.capacity());
    if (seen >= reread_at) {
      ASSERT_EQ(seen, used) << "reread_at " << reread_at;
    }
  });
  std::uint64_t items[16] = {};
  // With the consumer idle, the view is exact and needs no reread.
  qs::SpscRing<std::uint64_t> idle(16);
  idle.enqueue_burst(items, 5);
  EXPECT_EQ(idle.producer_occupancy(~std::size_t(0)), 5u);
}

}  // namespace
