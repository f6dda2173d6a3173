// ConnectionTable: one owner lcore's shard of per-connection state.
//
// Only the owning lcore touches its table, so there are no locks and no
// atomics. Open addressing with linear probing, kept at most half full, with
// backward-shift deletion (no tombstones, so probe lengths do not decay as
// connections come and go). All memory is allocated at construction, from
// where SlotMemory says: the C++ heap by default; the dataplane passes EAL
// memory on the owner's NUMA socket (hugepages on bare metal), because every
// lookup in a large shard is a cache miss and should be neither a remote-socket
// access nor a TLB miss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "steering/quic_lb.h"  // kMaxCidLen
#include "steering/slot_memory.h"

namespace qs {

// One cache line: all that a packet of a known connection reads and writes
// (the key, the 4-tuple on record, the times) lies in the line the lookup
// probes, so that in a shard far larger than the caches a lookup costs one
// line from memory, not two, and a probe past the home slot one more, not
// two (tests/bench/RESULTS.md, "One line per connection"). For that the
// 4-tuple is recorded in 13 octets (FrameTuple::record), and an entry keeps
// no counts of its own: nothing read them.
struct alignas(64) Connection {
  std::uint8_t cid_len = 0;
  bool used = false;
  std::uint8_t tuple_ipv6 = 0;        // the 4-tuple on record (the current one): its family,
  std::uint32_t hash = 0;
  std::uint8_t cid[kMaxCidLen];
  std::uint32_t tuple_ports = 0;      // its ports as on the wire (source, then destination),
  std::uint64_t tuple_addresses = 0;  // and its addresses (tuple_addresses, connection_stage.h)
  // The expiry sweep reads only `used` and this.
  std::uint64_t last_seen_tsc = 0;
  // A CID's entry: the key of its connection's entry (connection_stage.h),
  // and when it last kept that entry from expiring.
  std::uint64_t connection_key = 0;
  std::uint64_t connection_refreshed_tsc = 0;
};
static_assert(kMaxCidLen == 20 && sizeof(Connection) == 64 && alignof(Connection) == 64);

class ConnectionTable {
 public:
  // max_connections: the most entries held at once; the table has
  // slots_per_connection (2, 4 or 8) times as many slots, rounded up to a
  // power of two, so that it is at most half, a quarter or an eighth full.
  // Fuller is smaller and slower: a lookup reads 0.5 (1 + 1/(1 - load))
  // slots on average, the home slot prefetched and the others one dependent
  // miss each (1.46 at 0.48 full, 1.16 at 0.24; tests/bench/RESULTS.md,
  // "Where the 1M connections' cycles go"). The default, 4, takes 512
  // octets per connection over the two tables of a shard. Throws
  // std::bad_alloc when `memory` has no room, std::invalid_argument on a bad
  // size.
  static constexpr unsigned kDefaultSlotsPerConnection = 4;
  explicit ConnectionTable(std::uint32_t max_connections, SlotMemory memory = heap_slot_memory(),
                           unsigned slots_per_connection = kDefaultSlotsPerConnection);
  ~ConnectionTable();
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  // Bytes of slot memory a table of max_connections takes.
  static std::size_t memory_bytes(std::uint32_t max_connections,
                                  unsigned slots_per_connection = kDefaultSlotsPerConnection);

  // A keyed hash for CIDs; the seed is chosen at start-up so that a client
  // cannot precompute colliding CIDs. Inline: the owner hashes every packet.
  static std::uint32_t hash_cid(const std::uint8_t* cid, unsigned len, std::uint64_t seed);

  // The entry for this CID, created when absent. nullptr when the shard is
  // full (the caller counts the packet as untracked). `created` says which.
  Connection* find_or_insert(std::uint32_t hash, const std::uint8_t* cid, unsigned len,
                             std::uint64_t now_tsc, bool& created);
  Connection* find(std::uint32_t hash, const std::uint8_t* cid, unsigned len);

  // Starts loading the slot a lookup of `hash` begins at.
  void prefetch(std::uint32_t hash) const { __builtin_prefetch(&slots_[hash & mask_]); }

  // Removes entries idle for longer than idle_tsc, scanning at most
  // `max_slots` slots from where the previous call stopped, so that the cost
  // can be spread over housekeeping ticks. Returns the number removed.
  unsigned expire(std::uint64_t now_tsc, std::uint64_t idle_tsc, unsigned max_slots);

  std::uint32_t size() const { return size_; }
  std::uint32_t max_size() const { return max_; }
  std::uint32_t slot_count() const { return mask_ + 1; }

 private:
  void erase_slot(std::uint32_t slot);

  SlotMemory memory_;
  Connection* slots_ = nullptr;
  std::uint32_t mask_ = 0;
  std::uint32_t size_ = 0;
  std::uint32_t max_ = 0;
  std::uint32_t sweep_ = 0;
};

// Paces ConnectionTable::expire: one whole sweep of the shard per `period`
// TSC cycles, however irregularly housekeeping runs (an idle lcore naps, a
// preempted one stalls). An entry then goes at most one period after its idle
// timeout, and a large shard costs a cache miss per slot only as often as
// that needs, not on every tick.
class SweepPacer {
 public:
  static constexpr unsigned kMaxSlotsPerCall = 1024;  // bounds one tick's work

  SweepPacer(std::uint32_t slot_count, std::uint64_t period_tsc)
      : slots_(slot_count), period_(period_tsc == 0 ? 1 : period_tsc) {}

  // Slots to sweep now, `elapsed_tsc` after the previous call. Credit left
  // over by kMaxSlotsPerCall carries to the next call, up to one sweep.
  unsigned due(std::uint64_t elapsed_tsc) {
    // 128 bits: 2^25 slots times a day of TSC cycles does not fit in 64.
    const unsigned __int128 one_sweep = static_cast<unsigned __int128>(slots_) * period_;
    credit_ += static_cast<unsigned __int128>(elapsed_tsc < period_ ? elapsed_tsc : period_) * slots_;
    if (credit_ > one_sweep) credit_ = one_sweep;
    unsigned __int128 n = credit_ / period_;
    if (n > kMaxSlotsPerCall) n = kMaxSlotsPerCall;
    credit_ -= n * period_;
    return unsigned(n);
  }

 private:
  std::uint64_t slots_;
  std::uint64_t period_;
  unsigned __int128 credit_ = 0;
};

namespace connection_table_detail {
// The 128-bit product's halves folded together. On x86-64 one MUL, written
// out: from `unsigned __int128` GCC 12 passes the high half through a stack
// slot (a store and a reload in the middle of every CID's chain of
// multiplies).
inline std::uint64_t hash_mix(std::uint64_t a, std::uint64_t b) {
#if defined(__x86_64__)
  std::uint64_t high;
  asm("mulq %[b]" : "+a"(a), "=d"(high) : [b] "rm"(b) : "cc");
  return a ^ high;
#else
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return std::uint64_t(r) ^ std::uint64_t(r >> 64);
#endif
}
inline std::uint64_t hash_word(const std::uint8_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline std::uint32_t hash_finish(std::uint64_t h, std::uint64_t last) {
  h = hash_mix(h ^ last, 0xe7037ed1a0b428dbull);
  h = hash_mix(h, 0x8ebc6af09c88c6e3ull);
  return std::uint32_t(h ^ (h >> 32));
}
// hash_cid for lengths outside 8..24. Out of line: inlined, its loop made GCC
// keep the common path's running hash in a stack slot, a store and a reload
// in the middle of every packet's chain of multiplies.
[[gnu::noinline]] inline std::uint32_t hash_cid_uncommon(const std::uint8_t* cid, unsigned len, std::uint64_t h) {
  std::uint64_t last = 0;
  if (len >= 8) {
    for (unsigned i = 0; i + 8 < len; i += 8) h = hash_mix(h ^ hash_word(cid + i), 0xa0761d6478bd642full);
    last = hash_word(cid + len - 8);
  } else if (len >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, cid, 4);
    std::memcpy(&b, cid + len - 4, 4);
    last = std::uint64_t(a) << 32 | b;
  } else {
    for (unsigned i = 0; i < len; ++i) last |= std::uint64_t(cid[i]) << (8 * i);
  }
  return hash_finish(h, last);
}
}  // namespace connection_table_detail

inline std::uint32_t ConnectionTable::hash_cid(const std::uint8_t* cid, unsigned len, std::uint64_t seed) {
  // Eight octets at a time through a multiply-xorshift mixer (wyhash-style
  // folding). Keyed by `seed`; not a MAC, but enough that colliding CIDs
  // cannot be precomputed without knowing the seed. The last word is the
  // CID's last eight octets, overlapping the one before when the length is
  // not a multiple of eight (the length is mixed in first, so the overlap
  // cannot make two CIDs equal): no loop over the odd octets per packet.
  using namespace connection_table_detail;
  const std::uint64_t h = seed ^ (0x9e3779b97f4a7c15ull * (len + 1));
  if (len < 8 || len > 24) [[unlikely]] return hash_cid_uncommon(cid, len, h);
  // The usual lengths (QUIC v1 caps CIDs at 20), without a branch on the
  // length: CID lengths are as mixed as the connections in a burst, and a
  // loop whose trip count follows them mispredicts about a third of the
  // time. Three words cover any length up to 24; below 17 the middle one is
  // the first again, which costs a multiply and saves the branch.
  const unsigned mid = len > 16 ? 8 : 0;
  const std::uint64_t h1 = hash_mix(h ^ hash_word(cid), 0xa0761d6478bd642full);
  const std::uint64_t h2 = hash_mix(h1 ^ hash_word(cid + mid), 0xa0761d6478bd642full);
  return hash_finish(h2, hash_word(cid + len - 8));
}

// Whether two CIDs of `len` octets (at most kMaxCidLen) are equal, with at
// most three fixed-size loads a side, overlapping where the length is not a
// multiple of the load: a memcmp of variable length is a library call per
// packet, and its loop a branch per length.
inline bool same_cid(const std::uint8_t* a, const std::uint8_t* b, unsigned len) {
  static_assert(kMaxCidLen <= 24);
  auto word = [](const std::uint8_t* p) { std::uint64_t v; std::memcpy(&v, p, 8); return v; };
  auto half = [](const std::uint8_t* p) { std::uint32_t v; std::memcpy(&v, p, 4); return v; };
  if (len >= 8) {
    // Branch-free over the three words, for the reason hash_cid gives; below
    // 17 octets the middle word is the first one again.
    const unsigned mid = len > 16 ? 8 : 0;
    return ((word(a) ^ word(b)) | (word(a + mid) ^ word(b + mid)) | (word(a + len - 8) ^ word(b + len - 8))) == 0;
  }
  if (len >= 4) return half(a) == half(b) && half(a + len - 4) == half(b + len - 4);
  for (unsigned i = 0; i < len; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

inline Connection* ConnectionTable::find(std::uint32_t hash, const std::uint8_t* cid, unsigned len) {
  for (std::uint32_t i = hash & mask_;; i = (i + 1) & mask_) {
    Connection& c = slots_[i];
    if (!c.used) return nullptr;
    if (c.hash == hash && c.cid_len == len && same_cid(c.cid, cid, len)) return &c;
  }
}

inline Connection* ConnectionTable::find_or_insert(std::uint32_t hash, const std::uint8_t* cid,
                                                   unsigned len, std::uint64_t now_tsc,
                                                   bool& created) {
  created = false;
  if (len > kMaxCidLen) return nullptr;
  std::uint32_t i = hash & mask_;
  for (;; i = (i + 1) & mask_) {
    Connection& c = slots_[i];
    if (!c.used) break;
    if (c.hash == hash && c.cid_len == len && same_cid(c.cid, cid, len)) return &c;
  }
  if (size_ >= max_) return nullptr;
  Connection& c = slots_[i];
  c = Connection{};
  c.used = true;
  c.hash = hash;
  c.cid_len = std::uint8_t(len);
  std::memcpy(c.cid, cid, len);
  c.last_seen_tsc = now_tsc;
  ++size_;
  created = true;
  return &c;
}

}  // namespace qs
