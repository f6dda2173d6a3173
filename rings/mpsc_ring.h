// MpscRing<T>: bounded multi-producer single-consumer ring, for topologies in
// which several RX lcores hand packets to one owner inbox.
//
// Design
// - Producers claim a contiguous batch of slots [start, end) with one CAS on
//   the shared tail, copy their items in, then publish the batch through the
//   per-slot sequence word of its first slot (Vyukov style): sequence[start]
//   = end, a release store. No producer waits for another to commit (unlike
//   rte_ring's in-order tail update): a producer that claimed a batch but has
//   not finished writing simply holds the consumer at that batch.
// - The consumer knows every index below its private `ready_end` is
//   published. Only when that cannot satisfy a request does it read the
//   sequence word at ready_end: a value in (ready_end, ready_end + capacity]
//   means "the batch starting here is published and ends there"; anything
//   else is a previous lap's stamp (always <= ready_end). So it touches one
//   sequence word per producer batch, not one per item.
// - Free space is checked against the consumer's head index, which the
//   consumer publishes once per dequeue. Producers keep a shared cached copy
//   of it on their own line (next to tail, which they write anyway) and
//   reread the consumer's line only when that copy says the claim would not
//   fit. The consumer never reads the producers' line on the data path.
// - Items and sequence words live in two separate, line-aligned arrays, so
//   an item line carries 128/sizeof(T) items and no sequence words, and only
//   batch starts cost a sequence-word line. Slots are not padded to a line
//   each: that would make every item its own cross-core transfer. Adjacent
//   batches of different producers can share a boundary line; that costs one
//   extra transfer per batch, far less than per-item padding would.
//
// Thread rules: any number of producer threads call enqueue_*; exactly one
// consumer thread calls dequeue_*. size()/free_count() from any thread.
// T's copy constructor, move assignment and destructor must not throw.
#pragma once

#include <algorithm>
#include <atomic>
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
  using Sequence = std::atomic<std::size_t>;
  static_assert(Sequence::is_always_lock_free);

 public:
  using value_type = T;

  // Throws std::invalid_argument unless capacity is a power of two >= 2.
  explicit MpscRing(std::size_t capacity)
      : shared_{ring_detail::checked_capacity(capacity, "MpscRing"), capacity - 1} {
    static_assert(std::is_standard_layout_v<MpscRing>, "offsetof checks below need standard layout");
    static_assert(offsetof(MpscRing, producers_) - offsetof(MpscRing, shared_) >= kCacheLine);
    static_assert(offsetof(MpscRing, consumer_) - offsetof(MpscRing, producers_) >= kCacheLine,
                  "producer and consumer indices must not share a (prefetch-paired) line");
    // 0 is below every lap-0 batch end, so every slot starts unpublished.
    for (std::size_t i = 0; i < capacity; ++i) ::new (static_cast<void*>(&sequence(i))) Sequence(0);
  }

  ~MpscRing() {
    // No producer or consumer may be running now. Destroy what was published
    // and not yet taken.
    if constexpr (!kTrivial) {
      // head may sit inside a batch; ready_end is always a batch boundary.
      const std::size_t head = consumer_.head.load(std::memory_order_relaxed);
      const std::size_t end = published_end(consumer_.ready_end, shared_.capacity);
      for (std::size_t i = head; i != end; ++i) item(i)->~T();
    }
    static_assert(std::is_trivially_destructible_v<Sequence>);
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
    const auto count = static_cast<unsigned>(std::min<std::size_t>(n, ready_from(head, n)));
    if (count != 0) consume(out, head, count);
    return count;
  }

  // Consumer. Moves n items out if the next n are all published, else none.
  unsigned dequeue_bulk(T* out, unsigned n) noexcept {
    const std::size_t head = consumer_.head.load(std::memory_order_relaxed);
    if (n == 0 || ready_from(head, n) < n) return 0;
    consume(out, head, n);
    return n;
  }

  std::size_t capacity() const noexcept { return shared_.capacity; }

  // Occupancy including claimed-but-unpublished slots; a snapshot under
  // concurrency. Reads the producers' and the consumer's lines (one transfer
  // each if they changed since this core last read them).
  std::size_t size() const noexcept {
    // head before tail: the tail read afterwards is at least every tail the
    // consumer had seen before publishing this head, so tail - head >= 0.
    const std::size_t head = consumer_.head.load(std::memory_order_acquire);
    const std::size_t tail = producers_.tail.load(std::memory_order_acquire);
    return std::min(tail - head, shared_.capacity);
  }

  bool empty() const noexcept { return size() == 0; }

  std::size_t free_count() const noexcept { return shared_.capacity - size(); }

 private:
  static constexpr bool kTrivial =
      std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>;

  T* item(std::size_t index) const noexcept {
    return std::launder(reinterpret_cast<T*>(shared_.items.get()) + (index & shared_.mask));
  }
  Sequence& sequence(std::size_t index) const noexcept {
    return shared_.sequences.get()[index & shared_.mask];
  }

  // Consumer. Walks published batches from `from` until at least `wanted`
  // items past it are known or an unpublished batch is reached.
  std::size_t published_end(std::size_t from, std::size_t wanted) const noexcept {
    std::size_t end = from;
    while (end - from < wanted) {
      // Pairs with the release store of the batch's sequence in enqueue():
      // its items are written before the sequence names this lap.
      const std::size_t batch_end = sequence(end).load(std::memory_order_acquire);
      if (batch_end - end - 1 >= shared_.capacity) break;  // not (yet) published
      end = batch_end;
    }
    return end;
  }

  std::size_t ready_from(std::size_t head, std::size_t wanted) noexcept {
    if (consumer_.ready_end - head < wanted) {
      consumer_.ready_end = published_end(consumer_.ready_end, wanted - (consumer_.ready_end - head));
    }
    return consumer_.ready_end - head;
  }

  void consume(T* out, std::size_t head, unsigned n) noexcept {
    const std::size_t first = std::min<std::size_t>(n, shared_.capacity - (head & shared_.mask));
    if constexpr (kTrivial) {
      ring_detail::copy_items(out, item(head), first);
      if (first != n) ring_detail::copy_items(out + first, item(0), n - first);
    } else {
      for (unsigned i = 0; i < n; ++i) {
        T* p = item(head + i);
        out[i] = std::move(*p);
        p->~T();
      }
    }
    prefetch_next(head + n, n);
    // Pairs with the producers' acquire load of head in enqueue(): the items
    // below head + n have been moved out, so their slots may be rewritten.
    consumer_.head.store(head + n, std::memory_order_release);
  }

  // Consumer. Starts pulling the item lines of the next burst (published, so
  // no producer writes them any more) while the caller works on this one;
  // see SpscRing::prefetch_next. The hardware line is half the kCacheLine pair.
  void prefetch_next(std::size_t from, unsigned n) const noexcept {
    constexpr std::size_t kStride = std::max<std::size_t>(1, kCacheLine / 2 / sizeof(T));
    const std::size_t end = std::min(consumer_.ready_end, from + std::max<std::size_t>(n, kStride));
    for (std::size_t i = from; i < end; i += kStride) __builtin_prefetch(item(i), 0, 3);
  }

  unsigned enqueue(const T* items, unsigned n, bool all_or_nothing) noexcept {
    if (n == 0) return 0;
    const std::size_t cap = shared_.capacity;
    std::size_t tail = producers_.tail.load(std::memory_order_relaxed);
    unsigned count;
    for (;;) {
      // Pairs with the release store of head_cache below (by whichever
      // producer refreshed it after an acquire of the consumer's head): the
      // consumer's reads of every slot below that head happen before this
      // producer's writes to them.
      std::size_t head = producers_.head_cache.load(std::memory_order_acquire);
      std::size_t room = head + cap - tail;  // "negative" (huge) if tail is stale
      if (room < n || room > cap) {
        // Pairs with the consumer's release store of head in consume().
        head = consumer_.head.load(std::memory_order_acquire);
        // Pairs with the acquire load of head_cache above, in other producers.
        producers_.head_cache.store(head, std::memory_order_release);
        room = head + cap - tail;
      }
      if (room > cap) {  // another producer moved tail since we read it
        tail = producers_.tail.load(std::memory_order_relaxed);
        continue;
      }
      count = static_cast<unsigned>(std::min<std::size_t>(n, room));
      if (count == 0 || (all_or_nothing && count < n)) return 0;
      // Relaxed: the claim orders nothing by itself; slot reuse is ordered by
      // head (above) and publication by the sequence store (below).
      if (producers_.tail.compare_exchange_weak(tail, tail + count, std::memory_order_relaxed,
                                                std::memory_order_relaxed)) {
        break;
      }
    }
    const std::size_t first = std::min<std::size_t>(count, cap - (tail & shared_.mask));
    if constexpr (kTrivial) {
      ring_detail::copy_items(item(tail), items, first);
      if (first != count) ring_detail::copy_items(item(0), items + first, count - first);
    } else {
      for (unsigned i = 0; i < count; ++i) ::new (static_cast<void*>(item(tail + i))) T(items[i]);
    }
    // Pairs with the consumer's acquire load in published_end().
    sequence(tail).store(tail + count, std::memory_order_release);
    return count;
  }

  struct alignas(kCacheLine) ReadOnly {
    ReadOnly(std::size_t cap, std::size_t m) : capacity(cap), mask(m), items(cap), sequences(cap) {}
    std::size_t capacity;
    std::size_t mask;
    ring_detail::SlotStorage<T> items;
    ring_detail::SlotStorage<Sequence> sequences;  // batch end, stamped on the batch's first slot
  };
  struct alignas(kCacheLine) ProducerLine {
    std::atomic<std::size_t> tail{0};        // next index to claim (CAS by producers)
    std::atomic<std::size_t> head_cache{0};  // a recent consumer head, <= the real one
  };
  struct alignas(kCacheLine) ConsumerLine {
    std::atomic<std::size_t> head{0};  // written by the consumer only
    std::size_t ready_end{0};          // consumer-private: indices below are published
  };
  static_assert(sizeof(ProducerLine) == kCacheLine && sizeof(ConsumerLine) == kCacheLine);

  ReadOnly shared_;
  ProducerLine producers_;
  ConsumerLine consumer_;
};

}  // namespace qs
