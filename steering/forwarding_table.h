// ForwardingTable: what the load balancer learned, key -> target, shared by
// every receiving lcore (draft-ietf-quic-load-balancers-21, "Load Balancer
// Forwarding": the tables a load balancer keeps for CIDs it cannot decode).
//
// Keys are 64-bit keyed hashes (ForwardingTables in forwarding_rules.h) of a
// CID, a 4-tuple, or a 4-tuple with a client's SCID. A slot is one 64-bit
// word: 48 bits of the hash (the fingerprint), which of the key's two
// buckets holds it, a learn credit (3 bits, below) and the target (12 bits:
// an owner index or a backend slot, OwnerResolver), so that a reader gets a
// whole entry or none with one atomic load: lookups take no lock and no
// retry.
//
// An entry matches a lookup only if its fingerprint and its bucket (first
// or second, and so the key's first bucket index) agree: the second bucket
// is the first one moved by a function of the fingerprint, so a key is
// told apart from the others in either bucket by its fingerprint plus its
// first bucket index, 48 + log2(buckets) bits, all 64 bits of the hash from
// 65,536 buckets (262,144 entries, the default) on. The fingerprint is taken
// above the first bucket's bits (up to bit 16), so no bit goes unused. A
// lookup compares up to ten entries that share its buckets: two keys are
// confused with probability about 10 / 2^48 per lookup (10 / 2^(64 -
// log2(buckets)) above 65,536 buckets: 10 / 2^38 at the largest size); the
// hash is keyed, so a client cannot aim at one. Such a collision routes a
// packet to another connection's target, never drops it.
//
// Every receiving lcore may insert (compare-and-swap of an empty slot: no
// lock); an entry's target never changes once written. Each slot has a
// last-seen time (milliseconds, wrapping) refreshed by lookups that hit, and
// expire() removes entries idle for longer than the connection idle timeout.
// Readers refresh it only once it is refresh_ms old, so a busy entry dirties
// its line (which every receiving lcore may read) that rarely, not on every
// packet. Another lcore may stamp a time later than the `now` a caller took
// a moment earlier: a last-seen time ahead of now counts as seen now
// (age()), never as 49 days ago.
//
// The learn credit is how many more keys this entry may teach the caller
// (ForwardingTables: how many DCIDs one connection's setup entry or 4-tuple
// may add to the established table); spend() takes one with a
// compare-and-swap of the word, which a sweeper's or an evicting inserter's
// compare-and-swap of the same word excludes.
//
// Buckets of five slots fill one cache line; a key may live in either of two
// buckets (inserted into the emptier, looked up in the first and then the
// second), which lets the table fill to about 90 % before an insert finds no
// room. What happens then
// is the table's policy: kKeep (an established table: the insert fails and
// the caller falls back to the hash, counted, so a flood of new flows can
// never push out the entries of live connections before their idle timeout)
// or kEvictOldest (a table of connections being set up: the bucket's least
// recently seen entry makes room). Every change of a slot (insert, evict,
// expire, spend) is a compare-and-swap, so size() counts the occupied slots
// exactly; an insert that loses four rounds of them to other lcores gives up
// (kLost: the caller learns nothing this time, and the table is not full).
//
// Memory is allocated once, at construction, from SlotMemory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <utility>

#include "steering/siphash.h"
#include "steering/slot_memory.h"

namespace qs {

class ForwardingTable {
 public:
  enum class Policy : std::uint8_t { kKeep, kEvictOldest };
  // kLost: other lcores changed the buckets under four rounds of
  // compare-and-swap; nothing was written (not the same as kFull).
  // kRefused: the caller's admission check said no (insert's `admit`).
  enum class Insert : std::uint8_t { kInserted, kPresent, kEvicted, kFull, kLost, kRefused };
  static constexpr std::uint16_t kNone = 0xffff;
  static constexpr unsigned kSlotsPerBucket = 5;
  static constexpr unsigned kTargetBits = 12;
  static constexpr std::uint16_t kMaxTarget = (1u << kTargetBits) - 1;
  static constexpr unsigned kMaxCredit = 7;

  // What a lookup found: the slot and the word read from it (no slot: none).
  struct Entry {
    std::atomic<std::uint64_t>* slot = nullptr;
    std::uint64_t word = 0;
    bool found() const { return slot != nullptr; }
    std::uint16_t target() const { return std::uint16_t(word & kMaxTarget); }
    unsigned credit() const { return unsigned(word >> kTargetBits) & kMaxCredit; }
  };

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
    unsigned bits = 1;
    while (buckets < wanted) {
      buckets <<= 1;
      ++bits;
    }
    mask_ = std::uint32_t(buckets - 1);
    fp_shift_ = bits < 16 ? bits : 16;
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

  // The target learned for `hash`, or kNone. Refreshes the entry's last-seen
  // time to now_ms.
  std::uint16_t find(std::uint64_t hash, std::uint32_t now_ms) {
    const Entry e = find_entry(hash, now_ms);
    return e.found() ? e.target() : kNone;
  }
  // The same, with the slot, for spend().
  Entry find_entry(std::uint64_t hash, std::uint32_t now_ms) {
    const std::uint64_t fp = fingerprint(hash);
    const std::uint32_t first = std::uint32_t(hash) & mask_;
    Entry e = find_in(buckets_[first], fp << 1, now_ms);
    if (e.found()) return e;
    return find_in(buckets_[second_bucket(first, fp)], fp << 1 | 1, now_ms);
  }

  // Takes one learn credit from the entry find_entry() returned; false when
  // it has none left or is no longer there. Lcores spending from one entry
  // at once each take their own.
  bool spend(Entry& e) {
    std::uint64_t w = e.word;
    while ((w >> kTargetBits & kMaxCredit) != 0) {
      if (e.slot->compare_exchange_weak(w, w - (std::uint64_t(1) << kTargetBits), std::memory_order_release,
                                        std::memory_order_relaxed)) {
        e.word = w - (std::uint64_t(1) << kTargetBits);
        return true;
      }
      if (w >> kKeyShift != e.word >> kKeyShift) return false;  // expired, evicted or replaced
    }
    return false;
  }

  // Starts loading both buckets a lookup of `hash` may read (an insert puts
  // a key in the emptier of the two, so about half live in the second).
  void prefetch(std::uint64_t hash) const {
    const std::uint32_t first = std::uint32_t(hash) & mask_;
    __builtin_prefetch(&buckets_[first]);
    __builtin_prefetch(&buckets_[second_bucket(first, fingerprint(hash))]);
  }

  // Records hash -> target (at most kMaxTarget) with `credit` learn credits
  // (at most kMaxCredit) unless the hash is already there (kPresent: the
  // existing target stays). `admit` is asked once, only when the hash is
  // not there and a slot is free, whether to add it (false: kRefused), so
  // that an admission check costs nothing on the common present case.
  Insert insert(std::uint64_t hash, std::uint16_t target, std::uint32_t now_ms, unsigned credit = 0) {
    return insert(hash, target, now_ms, credit, [] { return true; });
  }
  template <typename Admit>
  Insert insert(std::uint64_t hash, std::uint16_t target, std::uint32_t now_ms, unsigned credit, Admit&& admit) {
    const std::uint64_t fp = fingerprint(hash);
    const std::uint32_t first = std::uint32_t(hash) & mask_;
    const std::uint64_t low =
        std::uint64_t(credit < kMaxCredit ? credit : kMaxCredit) << kTargetBits | (target & kMaxTarget);
    const std::uint64_t word[2] = {fp << 16 | low, fp << 16 | kSecondBit | low};
    Bucket* both[2] = {&buckets_[first], &buckets_[second_bucket(first, fp)]};
    // A few rounds: a compare-and-swap lost to another lcore's insert looks
    // again (the winner may have written this very key).
    bool full = false;
    for (int round = 0; round < 4 && !full; ++round) {
      unsigned empty[2] = {0, 0};
      for (unsigned b = 0; b < 2; ++b) {
        for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
          const std::uint64_t w = both[b]->word[i].load(std::memory_order_relaxed);
          if (w == 0) ++empty[b];
          else if (w >> kKeyShift == word[b] >> kKeyShift) return Insert::kPresent;
        }
      }
      full = empty[0] + empty[1] == 0;
      if (full) break;
      if (round == 0 && !admit()) return Insert::kRefused;
      // The emptier of the two buckets (two choices keep the load even, so
      // that the table fills before a bucket pair does).
      const unsigned pick = empty[1] > empty[0] ? 1 : 0;
      Bucket& b = *both[pick];
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
        std::uint64_t expected = 0;
        if (b.word[i].load(std::memory_order_relaxed) != 0) continue;
        // last-seen first: a reader that finds the word finds a fresh time
        // and does not see the entry as idle.
        b.seen_ms[i].store(now_ms, std::memory_order_relaxed);
        if (b.word[i].compare_exchange_strong(expected, word[pick], std::memory_order_release,
                                              std::memory_order_relaxed)) {
          size_.fetch_add(1, std::memory_order_relaxed);
          return Insert::kInserted;
        }
        break;
      }
    }
    if (!full) return Insert::kLost;
    if (policy_ == Policy::kKeep) return Insert::kFull;
    // Evict the least recently seen entry of the first bucket: a
    // compare-and-swap of the word read, so that a sweeper that removed it
    // meanwhile (the slot is empty: this is an insert) or another evicting
    // lcore is not overwritten. Writing last-seen first may give a slot
    // another lcore won a fresh time: that entry then lives a little longer.
    Bucket& b = *both[0];
    for (int round = 0; round < 4; ++round) {
      unsigned oldest = 0;
      std::uint32_t oldest_age = 0;
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
        const std::uint32_t a = age(now_ms, b.seen_ms[i].load(std::memory_order_relaxed));
        if (a >= oldest_age) {
          oldest_age = a;
          oldest = i;
        }
      }
      std::uint64_t old = b.word[oldest].load(std::memory_order_relaxed);
      b.seen_ms[oldest].store(now_ms, std::memory_order_relaxed);
      if (b.word[oldest].compare_exchange_strong(old, word[0], std::memory_order_release,
                                                 std::memory_order_relaxed)) {
        if (old != 0) return Insert::kEvicted;
        size_.fetch_add(1, std::memory_order_relaxed);
        return Insert::kInserted;
      }
    }
    return Insert::kLost;
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
        // Acquire: the last-seen time read next is at least the one its
        // inserter wrote before publishing this word, not an earlier
        // occupant's.
        std::uint64_t word = b.word[i].load(std::memory_order_acquire);
        if (word == 0) continue;
        if (age(now_ms, b.seen_ms[i].load(std::memory_order_relaxed)) <= idle_ms) continue;
        if (b.word[i].compare_exchange_strong(word, 0, std::memory_order_relaxed)) {
          size_.fetch_sub(1, std::memory_order_relaxed);
          ++removed;
        }
      }
    }
    return removed;
  }

  // A set of targets, one bit each, that the control path writes and a
  // sweeper reads (ForwardingTables: the backend slots a reload removed).
  struct TargetSet {
    std::atomic<std::uint64_t> words[(kMaxTarget + 1) / 64] = {};
    bool contains(std::uint16_t target) const {
      return (words[target >> 6].load(std::memory_order_relaxed) >> (target & 63) & 1) != 0;
    }
    void add(std::uint16_t target) {
      words[target >> 6].fetch_or(std::uint64_t(1) << (target & 63), std::memory_order_relaxed);
    }
    void remove(std::uint16_t target) {
      words[target >> 6].fetch_and(~(std::uint64_t(1) << (target & 63)), std::memory_order_relaxed);
    }
  };

  // Removes the entries whose target is in `targets` from buckets [first,
  // first + n) (as far as the table has them). Returns the number removed.
  // The same one caller as expire(), with a cursor of its own.
  unsigned remove_targets(const TargetSet& targets, std::uint32_t first, unsigned n) {
    unsigned removed = 0;
    const std::uint64_t end = std::uint64_t(first) + n < bucket_count() ? std::uint64_t(first) + n : bucket_count();
    for (std::uint64_t at = first; at < end; ++at) {
      Bucket& b = buckets_[at];
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
        std::uint64_t word = b.word[i].load(std::memory_order_acquire);
        // A compare-and-swap of the word read; a failed one reads the slot
        // again (an entry expired, evicted or replaced meanwhile may name
        // another target), so that none naming a target of the set is left.
        while (word != 0 && targets.contains(std::uint16_t(word & kMaxTarget))) {
          if (b.word[i].compare_exchange_weak(word, 0, std::memory_order_acquire, std::memory_order_acquire)) {
            size_.fetch_sub(1, std::memory_order_relaxed);
            ++removed;
            break;
          }
        }
      }
    }
    return removed;
  }

  // Peers (peer sync) exchange entries as the key this table files them
  // under: the fingerprint above the first bucket's index. For a table of
  // 65,536 buckets or more that is the whole 64-bit hash; for a smaller one
  // its low 48 + log2(buckets) bits, which a table of the same size files
  // in the same place, so peers must have tables of one size
  // (bucket_count(), which their messages carry).
  //
  // visit(): calls fn(key, target, credit, age_ms) for each entry of
  // buckets [first, first + n) (as far as the table has them), with its
  // age at now_ms. Reads only; inserts and lookups may run meanwhile (an
  // entry that changes may be seen before or after the change).
  template <typename Fn>
  void visit(std::uint32_t first, unsigned n, std::uint32_t now_ms, Fn&& fn) const {
    const std::uint64_t end = std::uint64_t(first) + n < bucket_count() ? std::uint64_t(first) + n : bucket_count();
    for (std::uint64_t at = first; at < end; ++at) {
      const Bucket& b = buckets_[at];
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
        const std::uint64_t word = b.word[i].load(std::memory_order_acquire);
        if (word == 0) continue;
        const std::uint64_t fp = word >> 16;
        // A second-bucket entry's first bucket: the move is an XOR.
        const std::uint32_t first_bucket =
            (word & kSecondBit) != 0 ? second_bucket(std::uint32_t(at), fp) : std::uint32_t(at);
        fn(fp << fp_shift_ | first_bucket, std::uint16_t(word & kMaxTarget), unsigned(word >> kTargetBits) & kMaxCredit,
           age(now_ms, b.seen_ms[i].load(std::memory_order_relaxed)));
      }
    }
  }

  // What a peer sent: an entry last seen at seen_ms (by this table's
  // clock). If the key is here, its last-seen time moves on to seen_ms when
  // that is later (kPresent; the target stays, as for any insert); if not,
  // it is inserted as last seen at seen_ms, `admit` asked first as insert()
  // does.
  template <typename Admit>
  Insert absorb(std::uint64_t key, std::uint16_t target, unsigned credit, std::uint32_t seen_ms, Admit&& admit) {
    if (find_entry(key, seen_ms).found()) return Insert::kPresent;
    return insert(key, target, seen_ms, credit, std::forward<Admit>(admit));
  }

  std::uint32_t bucket_count() const { return mask_ + 1; }
  std::uint32_t slot_count() const { return (mask_ + 1) * kSlotsPerBucket; }
  // Entries now (evictions replace one in place, so they do not change it).
  std::uint32_t size() const { return size_.load(std::memory_order_relaxed); }
  // The slots holding an entry, counted one by one (size() without
  // concurrent changes; for checks, not for the data path).
  std::uint32_t occupied_slots() const {
    std::uint32_t n = 0;
    for (std::uint32_t b = 0; b <= mask_; ++b)
      for (unsigned i = 0; i < kSlotsPerBucket; ++i) n += buckets_[b].word[i].load(std::memory_order_relaxed) != 0;
    return n;
  }

 private:
  struct alignas(64) Bucket {
    // fingerprint << 16 | second bucket << 15 | credit << 12 | target; 0: empty
    std::atomic<std::uint64_t> word[kSlotsPerBucket] = {};
    std::atomic<std::uint32_t> seen_ms[kSlotsPerBucket] = {};
  };
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
  static constexpr std::uint64_t kSecondBit = std::uint64_t(1) << 15;
  static constexpr unsigned kKeyShift = 15;  // word >> kKeyShift: fingerprint and bucket, what a lookup compares

  static std::size_t bytes_for(std::uint64_t buckets) { return std::size_t(buckets) * sizeof(Bucket); }
  // 48 bits from above the first bucket's index, never 0 (0 marks an empty
  // slot).
  std::uint64_t fingerprint(std::uint64_t hash) const {
    const std::uint64_t fp = hash >> fp_shift_ & ((std::uint64_t(1) << 48) - 1);
    return fp != 0 ? fp : 1;
  }
  // The first bucket moved by a function of the fingerprint (never by 0):
  // a key's first bucket and fingerprint give both its buckets, so an entry
  // found in its second bucket has the lookup's first bucket index too.
  std::uint32_t second_bucket(std::uint32_t first, std::uint64_t fp) const {
    return (first ^ (std::uint32_t((fp * 0x9e3779b97f4a7c15ull) >> 32) | 1)) & mask_;
  }
  // now - seen, and 0 for a time ahead of now (stamped by another lcore
  // after this caller read its clock).
  static std::uint32_t age(std::uint32_t now_ms, std::uint32_t seen_ms) {
    const std::int32_t d = std::int32_t(now_ms - seen_ms);
    return d < 0 ? 0 : std::uint32_t(d);
  }

  Entry find_in(Bucket& b, std::uint64_t key, std::uint32_t now_ms) {
    for (unsigned i = 0; i < kSlotsPerBucket; ++i) {
      const std::uint64_t word = b.word[i].load(std::memory_order_acquire);
      if (word >> kKeyShift != key) continue;
      if (age(now_ms, b.seen_ms[i].load(std::memory_order_relaxed)) >= refresh_ms_)
        b.seen_ms[i].store(now_ms, std::memory_order_relaxed);
      return {&b.word[i], word};
    }
    return {};
  }

  SlotMemory memory_;
  Bucket* buckets_ = nullptr;
  std::uint32_t mask_ = 0;
  unsigned fp_shift_ = 16;
  Policy policy_;
  std::uint32_t refresh_ms_;
  std::uint32_t sweep_ = 0;
  std::atomic<std::uint32_t> size_{0};
};

}  // namespace qs
