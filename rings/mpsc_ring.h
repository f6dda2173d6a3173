// MpscRing<T>: bounded multi-producer single-consumer ring, for topologies in
// which several RX lcores hand packets to one owner inbox.
//
// Design
// - Producers claim a contiguous range of slots with one CAS on the shared
//   tail, write their items, and publish each slot by storing its sequence
//   number (index + 1), Vyukov style. The consumer takes a slot only when its
//   sequence says it was published for exactly this lap, so a producer that
//   claimed a range but has not finished writing simply holds the consumer at
//   that slot (FIFO in claim order); no producer-side "tail commit" spin.
// - Free space is checked against the consumer's head index, which the
//   consumer publishes once per burst. Producers keep a shared cached copy of
//   it on the producers' own line (next to tail, which they write anyway) and
//   reread the consumer's line only when that copy says the claim would not
//   fit. The consumer never reads the producers' line on the data path.
// - Slots are {sequence, item}, each aligned to the next power of two of its
//   size, so one slot never straddles two lines and sequence and item arrive
//   in the same line transfer. Slots are deliberately not padded to a full
//   line each: that would make every pointer its own cross-core transfer. The
//   slot array starts and ends on line boundaries, away from the indices.
//
// Thread rules: any number of producer threads call enqueue_*; exactly one
// consumer thread calls dequeue_*. size()/free_count() from any thread.
// T's copy constructor, move assignment and destructor must not throw.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <new>
#include <type_traits>

#include "rings/cache_line.h"
#include "rings/ring_detail.h"

namespace qs {

template <class T>
class MpscRing {
  static_assert(std::is_nothrow_copy_constructible_v<T>, "enqueue copies items and must not throw");
  static_assert(std::is_nothrow_move_assignable_v<T>, "dequeue moves items out and must not throw");
  static_assert(std::is_nothrow_destructible_v<T>);

  struct SlotBody {
    std::atomic<std::size_t> sequence;  // index + 1 once the item for index is written
    alignas(T) unsigned char item[sizeof(T)];
  };
  static constexpr std::size_t kSlotAlign = std::min(std::bit_ceil(sizeof(SlotBody)), kCacheLine);
  struct alignas(kSlotAlign) Slot : SlotBody {};
  static_assert(sizeof(Slot) <= kCacheLine ? kCacheLine % sizeof(Slot) == 0 : true,
                "small slots tile a line exactly, so none straddles two lines");

 public:
  using value_type = T;

  // Throws std::invalid_argument unless capacity is a power of two >= 2.
  explicit MpscRing(std::size_t capacity)
      : shared_{ring_detail::checked_capacity(capacity, "MpscRing"), capacity - 1} {
    static_assert(std::is_standard_layout_v<MpscRing>, "offsetof checks below need standard layout");
    static_assert(offsetof(MpscRing, producers_) - offsetof(MpscRing, shared_) >= kCacheLine);
    static_assert(offsetof(MpscRing, consumer_) - offsetof(MpscRing, producers_) >= kCacheLine,
                  "producer and consumer indices must not share a (prefetch-paired) line");
    Slot* slots = shared_.storage.get();
    for (std::size_t i = 0; i < capacity; ++i) {
      // 0 never equals index + 1 for a lap-0 index, so every slot starts empty.
      ::new (static_cast<void*>(&slots[i])) Slot{};
      slots[i].sequence.store(0, std::memory_order_relaxed);
    }
  }

  ~MpscRing() {
    // No producer or consumer may be running; every claimed slot is published.
    const std::size_t tail = producers_.tail.load(std::memory_order_acquire);
    for (std::size_t i = consumer_.head.load(std::memory_order_relaxed); i != tail; ++i) {
      Slot& s = slot(i);
      if (s.sequence.load(std::memory_order_acquire) == i + 1) item(s)->~T();
    }
    for (std::size_t i = 0; i < shared_.capacity; ++i) slot(i).~Slot();
  }

  MpscRing(const MpscRing&) = delete;
  MpscRing& operator=(const MpscRing&) = delete;

  // Any producer. Copies up to n items in; returns how many fitted (0..n).
  unsigned enqueue_burst(const T* items, unsigned n) noexcept { return enqueue(items, n, false); }

  // Any producer. Copies all n items in, or none; returns n or 0.
  unsigned enqueue_bulk(const T* items, unsigned n) noexcept { return enqueue(items, n, true); }

  // Consumer. Moves up to n published items out in FIFO (claim) order.
  unsigned dequeue_burst(T* out, unsigned n) noexcept {
    const std::size_t head = consumer_.head.load(std::memory_order_relaxed);
    unsigned count = 0;
    while (count < n && published(head + count)) {
      take(slot(head + count), out[count]);
      ++count;
    }
    if (count != 0) release_to(head + count);
    return count;
  }

  // Consumer. Moves n items out if the next n are all published, else none.
  unsigned dequeue_bulk(T* out, unsigned n) noexcept {
    const std::size_t head = consumer_.head.load(std::memory_order_relaxed);
    if (n == 0) return 0;
    // Producers publish out of order, so check the whole range before taking.
    for (unsigned i = n; i-- > 0;) {
      if (!published(head + i)) return 0;
    }
    for (unsigned i = 0; i < n; ++i) take(slot(head + i), out[i]);
    release_to(head + n);
    return n;
  }

  std::size_t capacity() const noexcept { return shared_.capacity; }

  // Occupancy including claimed-but-unpublished slots; a snapshot under
  // concurrency. Reads the producers' and the consumer's lines (one transfer
  // each if they changed since this core last read them).
  std::size_t size() const noexcept {
    const std::size_t head = consumer_.head.load(std::memory_order_acquire);
    const std::size_t tail = producers_.tail.load(std::memory_order_acquire);
    // tail - head can be transiently "negative" when head was read before a
    // burst of enqueue+dequeue and tail after; clamp both ways.
    const std::size_t used = tail - head;
    return used > shared_.capacity ? (used > kNegative ? 0 : shared_.capacity) : used;
  }

  bool empty() const noexcept { return size() == 0; }

  std::size_t free_count() const noexcept { return shared_.capacity - size(); }

 private:
  static constexpr std::size_t kNegative = std::size_t{1} << 63;

  Slot& slot(std::size_t index) const noexcept {
    return shared_.storage.get()[index & shared_.mask];
  }
  static T* item(Slot& s) noexcept { return std::launder(reinterpret_cast<T*>(s.item)); }

  bool published(std::size_t index) const noexcept {
    // Pairs with the release store of sequence in enqueue(): the item bytes
    // written before it are visible once the sequence reads index + 1.
    return slot(index).sequence.load(std::memory_order_acquire) == index + 1;
  }

  static void take(Slot& s, T& out) noexcept {
    T* p = item(s);
    out = std::move(*p);
    p->~T();
  }

  void release_to(std::size_t new_head) noexcept {
    // Pairs with the producers' acquire load of head in enqueue(): the items
    // below new_head have been moved out, so their slots may be rewritten.
    consumer_.head.store(new_head, std::memory_order_release);
  }

  unsigned enqueue(const T* items, unsigned n, bool all_or_nothing) noexcept {
    if (n == 0) return 0;
    const std::size_t cap = shared_.capacity;
    std::size_t tail = producers_.tail.load(std::memory_order_relaxed);
    unsigned count;
    for (;;) {
      // Pairs with the release store of head_cache below (by whichever
      // producer refreshed it), which itself follows an acquire of the
      // consumer's head: the consumer's reads of every slot below the cached
      // head happen before this producer's writes.
      std::size_t head = producers_.head_cache.load(std::memory_order_acquire);
      std::size_t room = head + cap - tail;  // wraps "negative" if tail is stale
      if (room < n || room > cap) {
        // Pairs with the consumer's release store in release_to().
        head = consumer_.head.load(std::memory_order_acquire);
        // Pairs with the acquire load of head_cache above (other producers).
        producers_.head_cache.store(head, std::memory_order_release);
        room = head + cap - tail;
      }
      if (room > cap) {  // our tail is older than the head we just read
        tail = producers_.tail.load(std::memory_order_relaxed);
        continue;
      }
      count = static_cast<unsigned>(std::min<std::size_t>(n, room));
      if (count == 0 || (all_or_nothing && count < n)) return 0;
      // acquire on success is not needed for the slots (head covers them);
      // relaxed keeps the claim a single locked instruction.
      if (producers_.tail.compare_exchange_weak(tail, tail + count, std::memory_order_relaxed,
                                                std::memory_order_relaxed)) {
        break;
      }
    }
    for (unsigned i = 0; i < count; ++i) {
      Slot& s = slot(tail + i);
      ::new (static_cast<void*>(s.item)) T(items[i]);
      // Pairs with the consumer's acquire load in published().
      s.sequence.store(tail + i + 1, std::memory_order_release);
    }
    return count;
  }

  struct alignas(kCacheLine) ReadOnly {
    ReadOnly(std::size_t cap, std::size_t m) : capacity(cap), mask(m), storage(cap) {}
    std::size_t capacity;
    std::size_t mask;
    ring_detail::SlotStorage<Slot> storage;
  };
  struct alignas(kCacheLine) ProducerLine {
    std::atomic<std::size_t> tail{0};        // next index to claim (CAS by producers)
    std::atomic<std::size_t> head_cache{0};  // a recent consumer head, <= the real one
  };
  struct alignas(kCacheLine) ConsumerLine {
    std::atomic<std::size_t> head{0};  // written by the consumer only
  };
  static_assert(sizeof(ProducerLine) == kCacheLine && sizeof(ConsumerLine) == kCacheLine);

  ReadOnly shared_;
  ProducerLine producers_;
  ConsumerLine consumer_;
};

}  // namespace qs
