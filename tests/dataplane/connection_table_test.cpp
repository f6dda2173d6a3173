// ConnectionTable: one owner's shard. Insert, find, fill to the limit,
// expire, and deletion that keeps every remaining entry reachable.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "dataplane/fastpath/connection_table.h"

namespace qs {
namespace {

std::vector<std::uint8_t> cid_of(std::uint32_t i, unsigned len = 8) {
  std::vector<std::uint8_t> c(len, 0);
  for (unsigned k = 0; k < len && k < 4; ++k) c[k] = std::uint8_t(i >> (8 * k));
  return c;
}

TEST(ConnectionTable, InsertsOnceAndFindsAgain) {
  ConnectionTable t(100);
  const auto c = cid_of(42);
  const std::uint32_t h = ConnectionTable::hash_cid(c.data(), 8, 1);
  bool created = false;
  Connection* a = t.find_or_insert(h, c.data(), 8, 10, created);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(created);
  Connection* b = t.find_or_insert(h, c.data(), 8, 20, created);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(created);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(a->last_seen_tsc, 10u) << "an entry is created seen";
  // Same octets, different length: a different CID.
  EXPECT_EQ(t.find(ConnectionTable::hash_cid(c.data(), 7, 1), c.data(), 7), nullptr);
}

TEST(ConnectionTable, RefusesPastItsLimitAndOverlongCids) {
  ConnectionTable t(10);
  bool created;
  for (std::uint32_t i = 0; i < 10; ++i) {
    const auto c = cid_of(i);
    ASSERT_NE(t.find_or_insert(ConnectionTable::hash_cid(c.data(), 8, 3), c.data(), 8, 0, created), nullptr);
  }
  const auto extra = cid_of(99);
  EXPECT_EQ(t.find_or_insert(ConnectionTable::hash_cid(extra.data(), 8, 3), extra.data(), 8, 0, created), nullptr);
  const std::vector<std::uint8_t> longer(21, 1);
  EXPECT_EQ(t.find_or_insert(5, longer.data(), 21, 0, created), nullptr);
  EXPECT_EQ(t.size(), 10u);
}

// Every colliding entry stays findable while others around it expire: the
// backward-shift deletion must move run members into the holes correctly,
// including across the end of the table.
TEST(ConnectionTable, ExpiryKeepsSurvivorsReachable) {
  ConnectionTable t(512);
  std::mt19937 rng(5);
  std::vector<std::vector<std::uint8_t>> cids;
  std::vector<std::uint32_t> hashes;
  bool created;
  for (std::uint32_t i = 0; i < 512; ++i) {
    cids.push_back(cid_of(i, 12));
    // Few distinct hashes force long probe runs, some wrapping around.
    const std::uint32_t h = (t.slot_count() - 3 + rng() % 8) % t.slot_count();
    hashes.push_back(h);
    Connection* c = t.find_or_insert(h, cids[i].data(), 12, /*now=*/i % 2 ? 1000 : 0, created);
    ASSERT_NE(c, nullptr);
  }
  // At now=1500 with idle 1000, the entries last seen at 0 expire.
  unsigned removed = 0;
  for (int pass = 0; pass < 4; ++pass) removed += t.expire(1500, 1000, t.slot_count());
  EXPECT_EQ(removed, 256u);
  EXPECT_EQ(t.size(), 256u);
  for (std::uint32_t i = 0; i < 512; ++i) {
    Connection* c = t.find(hashes[i], cids[i].data(), 12);
    if (i % 2) {
      ASSERT_NE(c, nullptr) << "entry " << i << " lost";
    } else {
      EXPECT_EQ(c, nullptr) << "entry " << i << " should have expired";
    }
  }
}

TEST(ConnectionTable, HashIsKeyedAndSpreads) {
  const auto c = cid_of(7, 20);
  EXPECT_NE(ConnectionTable::hash_cid(c.data(), 20, 1), ConnectionTable::hash_cid(c.data(), 20, 2));
  std::set<std::uint32_t> buckets;
  for (std::uint32_t i = 0; i < 4096; ++i) {
    const auto k = cid_of(i, 8);
    buckets.insert(ConnectionTable::hash_cid(k.data(), 8, 9) & 1023);
  }
  EXPECT_GT(buckets.size(), 950u);  // 4096 keys over 1024 buckets leave ~18 empty
}

// hash_mix is a MUL written out on x86-64: it must fold both halves of the
// 128-bit product, as the portable form does.
TEST(ConnectionTable, HashMixFoldsTheWholeProduct) {
  std::mt19937_64 rng(11);
  for (unsigned i = 0; i < 10000; ++i) {
    const std::uint64_t a = rng(), b = i < 2 ? 0 : rng();
    const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
    ASSERT_EQ(qs::connection_table_detail::hash_mix(a, b), std::uint64_t(r) ^ std::uint64_t(r >> 64)) << a << " * " << b;
  }
  const std::uint64_t max = ~std::uint64_t(0);
  EXPECT_EQ(qs::connection_table_detail::hash_mix(max, max), (max - 1) ^ 1);  // (2^64-1)^2 = 2^128 - 2^65 + 1
}

// Every octet of a CID of every length counts, in the hash and in the
// compare, including the ones the overlapping word loads read twice. The
// hash goes on past kMaxCidLen: it is taken before that length is checked,
// and an unknown version's DCID may be as long as 255 octets (its branch-free
// form covers up to 24, a loop the rest).
TEST(ConnectionTable, EveryOctetOfEveryLengthCounts) {
  constexpr unsigned kLongest = 40;
  for (unsigned len = 1; len <= kLongest; ++len) {
    const bool key = len <= qs::kMaxCidLen;  // a length same_cid is asked about
    std::vector<std::uint8_t> a(kLongest + 8, 0x5a);
    for (unsigned i = 0; i < len; ++i) a[i] = std::uint8_t(0x11 * i + len);
    std::vector<std::uint8_t> b = a;
    if (key) {
      EXPECT_TRUE(qs::same_cid(a.data(), b.data(), len)) << len;
    }
    b[len] ^= 0xff;  // past the CID: not part of it
    if (key) {
      EXPECT_TRUE(qs::same_cid(a.data(), b.data(), len)) << len;
    }
    EXPECT_EQ(ConnectionTable::hash_cid(a.data(), len, 5), ConnectionTable::hash_cid(b.data(), len, 5)) << len;
    for (unsigned i = 0; i < len; ++i) {
      for (std::uint8_t flip : {std::uint8_t(0x01), std::uint8_t(0x80)}) {
        std::vector<std::uint8_t> c = a;
        c[i] ^= flip;
        if (key) {
          EXPECT_FALSE(qs::same_cid(a.data(), c.data(), len)) << "length " << len << " octet " << i;
        }
        EXPECT_NE(ConnectionTable::hash_cid(a.data(), len, 5), ConnectionTable::hash_cid(c.data(), len, 5))
            << "length " << len << " octet " << i;
      }
    }
    // The same octets at another length are another CID.
    if (len > 1) {
      EXPECT_NE(ConnectionTable::hash_cid(a.data(), len, 5), ConnectionTable::hash_cid(a.data(), len - 1, 5));
    }
  }
}

// The slots come from the memory the owner of the table says, all of it at
// construction, and go back once; no room is std::bad_alloc, never a table
// that fails later.
struct CountingMemory {
  std::size_t allocated_bytes = 0;
  void* block = nullptr;
  int releases = 0;
  bool refuse = false;
  SlotMemory memory() {
    return SlotMemory{[](std::size_t bytes, void* ctx) -> void* {
                        auto& m = *static_cast<CountingMemory*>(ctx);
                        if (m.refuse) return nullptr;
                        m.allocated_bytes = bytes;
                        m.block = std::aligned_alloc(64, bytes);
                        return m.block;
                      },
                      [](void* p, void* ctx) {
                        auto& m = *static_cast<CountingMemory*>(ctx);
                        EXPECT_EQ(p, m.block);
                        ++m.releases;
                        std::free(p);
                      },
                      this};
  }
};

// More slots per connection: a table as many times the connections, rounded
// up to a power of two, that still holds exactly max_connections, each
// findable (and refuses a count it does not support).
TEST(ConnectionTable, SlotsPerConnectionSizeTheTable) {
  EXPECT_EQ(ConnectionTable::memory_bytes(1000, 2), 2048u * 64u);
  EXPECT_EQ(ConnectionTable::memory_bytes(1000, 4), 4096u * 64u);
  EXPECT_EQ(ConnectionTable::memory_bytes(1000, 8), 8192u * 64u);
  EXPECT_EQ(ConnectionTable::memory_bytes(1024, 4), 4096u * 64u);
  for (unsigned bad : {0u, 1u, 3u, 16u}) EXPECT_THROW(ConnectionTable(1000, heap_slot_memory(), bad), std::invalid_argument) << bad;
  for (unsigned spc : {2u, 4u, 8u}) {
    ConnectionTable t(1000, heap_slot_memory(), spc);
    EXPECT_EQ(t.slot_count(), spc == 2 ? 2048u : spc == 4 ? 4096u : 8192u);
    bool created = false;
    for (std::uint32_t i = 0; i < 1000; ++i) {
      const auto c = cid_of(i);
      ASSERT_NE(t.find_or_insert(ConnectionTable::hash_cid(c.data(), 8, 7), c.data(), 8, 0, created), nullptr);
      ASSERT_TRUE(created);
    }
    const auto extra = cid_of(5000);
    EXPECT_EQ(t.find_or_insert(ConnectionTable::hash_cid(extra.data(), 8, 7), extra.data(), 8, 0, created), nullptr)
        << "max_connections is the limit, whatever the slots";
    for (std::uint32_t i = 0; i < 1000; ++i) {
      const auto c = cid_of(i);
      ASSERT_NE(t.find(ConnectionTable::hash_cid(c.data(), 8, 7), c.data(), 8), nullptr) << spc << " " << i;
    }
  }
}

TEST(ConnectionTable, TakesItsSlotsFromTheMemoryItIsGiven) {
  CountingMemory m;
  {
    ConnectionTable t(1000, m.memory());
    EXPECT_EQ(m.allocated_bytes, ConnectionTable::memory_bytes(1000));
    // The default slots per connection x 1000, rounded up to a power of
    // two, one cache line each.
    EXPECT_EQ(m.allocated_bytes, std::bit_ceil(ConnectionTable::kDefaultSlotsPerConnection * 1000u) * 64u);
    const auto c = cid_of(5);
    bool created = false;
    ASSERT_NE(t.find_or_insert(ConnectionTable::hash_cid(c.data(), 8, 1), c.data(), 8, 1, created), nullptr);
    EXPECT_TRUE(created);
    EXPECT_EQ(m.releases, 0);
  }
  EXPECT_EQ(m.releases, 1);
}

TEST(ConnectionTable, NoRoomIsBadAlloc) {
  CountingMemory m;
  m.refuse = true;
  EXPECT_THROW(ConnectionTable(1000, m.memory()), std::bad_alloc);
  EXPECT_EQ(m.releases, 0);
}

// Expiry pacing: one whole sweep per period, whatever the tick pattern.
TEST(SweepPacer, SweepsTheShardOncePerPeriodWhateverTheTicks) {
  constexpr std::uint32_t kSlots = 131072;
  constexpr std::uint64_t kPeriod = 7'500'000;  // e.g. a 30 s idle timeout / 4 at 1 MHz
  for (std::uint64_t tick : {1ull, 100ull, 999ull, 25'000ull}) {
    SweepPacer pacer(kSlots, kPeriod);
    std::uint64_t swept = 0;
    for (std::uint64_t t = 0; t + tick <= kPeriod; t += tick) swept += pacer.due(tick);
    const std::uint64_t leftover_time = kPeriod % tick;
    swept += pacer.due(leftover_time);
    EXPECT_NEAR(double(swept), double(kSlots), 1.0) << "tick " << tick;
  }
}

TEST(SweepPacer, IrregularTicksAddUp) {
  SweepPacer pacer(1000, 1'000'000);
  std::mt19937_64 rng(3);
  std::uint64_t t = 0, swept = 0;
  while (t < 10'000'000) {
    const std::uint64_t dt = rng() % 5000;
    t += dt;
    swept += pacer.due(dt);
  }
  EXPECT_NEAR(double(swept), double(t) / 1'000'000 * 1000, 1.0);
}

TEST(SweepPacer, ALongStallNeitherFloodsOneTickNorLosesTheSweep) {
  SweepPacer pacer(1u << 25, 1000);
  // Stalled for ten periods: owed one sweep at most, paid kMaxSlotsPerCall at a time.
  EXPECT_EQ(pacer.due(10'000), SweepPacer::kMaxSlotsPerCall);
  std::uint64_t paid = SweepPacer::kMaxSlotsPerCall;
  while (unsigned n = pacer.due(0)) paid += n;
  EXPECT_EQ(paid, 1u << 25);
  // Huge values do not overflow: a day of 3 GHz TSC over 2^25 slots.
  SweepPacer big(1u << 25, 86400ull * 3'000'000'000ull / 4);
  EXPECT_EQ(big.due(3'000'000'000ull), SweepPacer::kMaxSlotsPerCall);
}

}  // namespace
}  // namespace qs
