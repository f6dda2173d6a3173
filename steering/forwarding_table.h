// ForwardingTable: what the load balancer learned, key -> owner, shared by
// every receiving lcore (draft-ietf-quic-load-balancers-21, "Load Balancer
// Forwarding": the tables a load balancer keeps for CIDs it cannot decode).
//
// Keys are 64-bit keyed hashes (ForwardingKeys below) of a CID, a 4-tuple,
// or a 4-tuple with a client's SCID; the table stores 48 bits of the hash
// (the fingerprint) and the owner index in one 64-bit word per slot, so that
// a reader gets a whole entry or none with one atomic load: lookups take no
// lock and no retry. Two different keys share a fingerprint with probability
// about entries / 2^48 per lookup; the hash is keyed, so a client cannot
// aim at one. Such a collision routes a packet to another connection's owner,
// never drops it.
//
// Every receiving lcore may insert (compare-and-swap of an empty slot: no
// lock); an entry's owner never changes once written. Each slot has a
// last-seen time (milliseconds, wrapping) refreshed by lookups that hit, and
// expire() removes entries idle for longer than the connection idle timeout.
// Readers refresh it only once it is refresh_ms old, so a busy entry dirties
// its line (which every receiving lcore may read) that rarely, not on every
// packet.
//
// Buckets of five slots fill one cache line; a key may live in either of two
// buckets (inserted into the emptier, looked up in the first and then the
// second), which lets the table fill to about 90 % before an insert finds no
// room. What happens then
// is the table's policy: kKeep (an established table: the insert fails and
// the caller falls back to the hash, counted, so a flood of new flows can
// never push out the entries of live connections before their idle timeout)
// or kEvictOldest (a table of connections being set up: the bucket's least
// recently seen entry makes room).
//
// Memory is allocated once, at construction, from SlotMemory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "steering/siphash.h"
#include "steering/slot_memory.h"

namespace qs {

class ForwardingTable {
 public:
  enum class Policy : std::uint8_t { kKeep, kEvictOldest };
  enum class Insert : std::uint8_t { kInserted, kPresent, kEvicted, kFull };
  static constexpr std::uint16_t kNone = 0xffff;
  static constexpr unsigned kSlotsPerBucket = 5;

  // max_entries: what the table must be able to hold (it gets buckets for
  // about 1.25 times as many). Throws std::invalid_argument on 0 or more
  // than 2^28, std::bad_alloc when `memory` has no room.
  // refresh_ms: how stale a last-seen time may get before a lookup renews it
  // (an entry then looks idle up to that much early).
  ForwardingTable(std::uint32_t max_entries, Policy policy, SlotMemory memory = heap_slot_memory(),
                  std::uint32_t refresh_ms = 1)
      : memory_(memory), policy_(policy), refresh_ms_(refresh_ms == 0 ? 1 : refresh_ms) {
    if (max_entries == 0 || max_entries > (1u << 28))
      throw std::invalid_argument("forwarding table size must be 1..268435456 entries");
    const std::uint64_t wanted = (std::uint64_t(max_entries) * 5 / 4 + kSlotsPerBucket - 1) / kSlotsPerBucket;
    std::uint64_t buckets = 2;
    while (buckets < wanted) buckets <<= 1;
    mask_ = std::uint32_t(buckets - 1);
    buckets_ = static_cast<Bucket*>(memory_.allocate(bytes_for(buckets), memory_.context));
    if (buckets_ == nullptr) throw std::bad_alloc();
    for (std::uint64_t b = 0; b < buckets; ++b) new (&buckets_[b]) Bucket();
  }
  ~ForwardingTable() {
    if (buckets_ != nullptr) memory_.release(buckets_, memory_.context);
  }
  ForwardingTable(const ForwardingTable&) = delete;
  ForwardingTable& operator=(const ForwardingTable&) = delete;

  // Bytes of slot memory a table for max_entries takes.
  static std::size_t memory_bytes(std::uint32_t max_entries) {
    const std::uint64_t wanted = (std::uint64_t(max_entries) * 5 / 4 + kSlotsPerBucket - 1) / kSlotsPerBucket;
    std::uint64_t buckets = 2;
    while (buckets < wanted) buckets <<= 1;
    return bytes_for(buckets);
  }

  // The owner learned for `hash`, or kNone. Refreshes the entry's last-seen
  // time to now_ms.
  std::uint16_t find(std::uint64_t hash, std::uint32_t now_ms) {
    const std::uint64_t fp = fingerprint(hash);
    Bucket& b1 = buckets_[hash & mask_];
    std::uint16_t owner = find_in(b1, fp, now_ms);
    if (owner != kNone) return owner;
    return find_in(buckets_[second_bucket(hash)], fp, now_ms);
  }

  // Starts loading both buckets a lookup of `hash` may read (an insert puts
  // a key in the emptier of the two, so about half live in the second).
  void prefetch(std::uint64_t hash) const {
    __builtin_prefetch(&buckets_[hash & mask_]);
    __builtin_prefetch(&buckets_[second_bucket(hash)]);
  }

  // Records hash -> owner unless the hash is already there (kPresent: the
  // existing owner stays).
  Insert insert(std::uint64_t hash, std::uint16_t owner, std::uint32_t now_ms) {
    const std::uint64_t fp = fingerprint(hash);
    const std::uint64_t word = fp << 16 | owner;
    Bucket* both[2] = {&buckets_[hash & mask_], &buckets_[second_bucket(hash)]};
    // A few rounds: a compare-and-swap lost to another lcore's insert looks
    // again (the winner may have written this very key).
    for (int round = 0; round < 4; ++round) {
      unsigned empty[2] = {0, 0};
      for (unsigned b = 0; b < 2; ++b) {
        for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
          const std::uint64_t w = both[b]->word[i].load(std::memory_order_relaxed);
          if (w == 0) ++empty[b];
          else if (w >> 16 == fp) return Insert::kPresent;
        }
      }
      if (empty[0] + empty[1] == 0) break;
      // The emptier of the two buckets (two choices keep the load even, so
      // that the table fills before a bucket pair does).
      Bucket& b = *both[empty[1] > empty[0] ? 1 : 0];
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
        std::uint64_t expected = 0;
        if (b.word[i].load(std::memory_order_relaxed) != 0) continue;
        // last-seen first: a reader that finds the word finds a fresh time
        // and does not see the entry as idle.
        b.seen_ms[i].store(now_ms, std::memory_order_relaxed);
        if (b.word[i].compare_exchange_strong(expected, word, std::memory_order_release,
                                              std::memory_order_relaxed)) {
          size_.fetch_add(1, std::memory_order_relaxed);
          return Insert::kInserted;
        }
        break;
      }
    }
    if (policy_ == Policy::kKeep) return Insert::kFull;
    // Evict the least recently seen entry of the first bucket.
    Bucket& b = *both[0];
    unsigned oldest = 0;
    std::uint32_t oldest_age = 0;
    for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
      const std::uint32_t age = now_ms - b.seen_ms[i].load(std::memory_order_relaxed);
      if (age >= oldest_age) {
        oldest_age = age;
        oldest = i;
      }
    }
    b.seen_ms[oldest].store(now_ms, std::memory_order_relaxed);
    b.word[oldest].store(word, std::memory_order_release);
    return Insert::kEvicted;
  }

  // Removes entries idle for longer than idle_ms, looking at up to
  // `max_buckets` buckets from where the previous call stopped. Returns the
  // number removed. Call from one lcore at a time. An entry looked up in the
  // same instant as its removal may go although it was just used: it had
  // been idle for the whole timeout by then.
  unsigned expire(std::uint32_t now_ms, std::uint32_t idle_ms, unsigned max_buckets) {
    unsigned removed = 0;
    for (unsigned n = 0; n < max_buckets; ++n) {
      Bucket& b = buckets_[sweep_];
      sweep_ = (sweep_ + 1) & mask_;
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
        std::uint64_t word = b.word[i].load(std::memory_order_relaxed);
        if (word == 0) continue;
        if (std::uint32_t(now_ms - b.seen_ms[i].load(std::memory_order_relaxed)) <= idle_ms) continue;
        if (b.word[i].compare_exchange_strong(word, 0, std::memory_order_relaxed)) {
          size_.fetch_sub(1, std::memory_order_relaxed);
          ++removed;
        }
      }
    }
    return removed;
  }

  std::uint32_t bucket_count() const { return mask_ + 1; }
  std::uint32_t slot_count() const { return (mask_ + 1) * kSlotsPerBucket; }
  // Entries now (evictions replace one in place, so they do not change it).
  std::uint32_t size() const { return size_.load(std::memory_order_relaxed); }
  Policy policy() const { return policy_; }

 private:
  struct alignas(64) Bucket {
    std::atomic<std::uint64_t> word[kSlotsPerBucket] = {};  // fingerprint << 16 | owner; 0: empty
    std::atomic<std::uint32_t> seen_ms[kSlotsPerBucket] = {};
  };
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

  static std::size_t bytes_for(std::uint64_t buckets) { return std::size_t(buckets) * sizeof(Bucket); }
  // 48 bits, never 0 (0 marks an empty slot).
  static std::uint64_t fingerprint(std::uint64_t hash) {
    const std::uint64_t fp = hash >> 16;
    return fp != 0 ? fp : 1;
  }
  std::uint32_t second_bucket(std::uint64_t hash) const {
    // Bits the first bucket's index does not use, so that keys sharing a
    // first bucket spread over different second ones.
    return std::uint32_t((hash >> 32) ^ (hash >> 48)) & mask_;
  }

  std::uint16_t find_in(Bucket& b, std::uint64_t fp, std::uint32_t now_ms) {
    for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
      const std::uint64_t word = b.word[i].load(std::memory_order_acquire);
      if (word >> 16 != fp) continue;
      if (std::uint32_t(now_ms - b.seen_ms[i].load(std::memory_order_relaxed)) >= refresh_ms_)
        b.seen_ms[i].store(now_ms, std::memory_order_relaxed);
      return std::uint16_t(word);
    }
    return kNone;
  }

  SlotMemory memory_;
  Bucket* buckets_ = nullptr;
  std::uint32_t mask_ = 0;
  Policy policy_;
  std::uint32_t refresh_ms_;
  std::uint32_t sweep_ = 0;
  std::atomic<std::uint32_t> size_{0};
};

}  // namespace qs
