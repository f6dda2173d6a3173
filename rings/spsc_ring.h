// SpscRing<T>: bounded single-producer single-consumer ring for handing
// packets (mbuf pointers) from an RX lcore to the lcore that owns the flow.
//
// Design
// - Power-of-two capacity, free-running 64-bit indices (slot = index & mask).
//   head == tail means empty, tail - head == capacity means full, so every
//   slot is usable. At 10^9 items/s a 64-bit index wraps after ~584 years.
// - Each side caches the other side's index and rereads the shared one only
//   when its cached copy says the request cannot be met (full / empty for the
//   requested count). In steady state that is one cross-core line transfer per
//   cache refill instead of one per operation (rte_ring rereads on every call).
// - Layout, one kCacheLine each: the read-only fields; the shared tail (only
//   the producer writes it, the consumer reads it on refill); the shared head
//   (the reverse); and one private line per side with its own index and its
//   cached copy of the other's. A side therefore never *loads* from a line the
//   other side writes except on a refill, and its per-call stores go to a line
//   the other side reads only on refill.
// - Burst operations move as many items as fit and return the count; bulk
//   operations move all n or none.
//
// Thread rules: exactly one producer thread calls enqueue_* and free_count;
// exactly one consumer thread calls dequeue_*.
// size() may be called from any thread.
//
// Items are copied in and moved out; T's copy constructor, move assignment and
// destructor must not throw (the data path cannot handle exceptions).
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
class SpscRing {
  static_assert(std::is_nothrow_copy_constructible_v<T>, "enqueue copies items and must not throw");
  static_assert(std::is_nothrow_move_assignable_v<T>, "dequeue moves items out and must not throw");
  static_assert(std::is_nothrow_destructible_v<T>);
  static_assert(std::atomic<std::size_t>::is_always_lock_free);

 public:
  using value_type = T;

  // Throws std::invalid_argument unless capacity is a power of two >= 2.
  explicit SpscRing(std::size_t capacity)
      : shared_{ring_detail::checked_capacity(capacity, "SpscRing"), capacity - 1} {
    static_assert(std::is_standard_layout_v<SpscRing>, "offsetof checks below need standard layout");
    static_assert(offsetof(SpscRing, tail_) - offsetof(SpscRing, shared_) >= kCacheLine);
    static_assert(offsetof(SpscRing, head_) - offsetof(SpscRing, tail_) >= kCacheLine,
                  "head and tail must not share a (prefetch-paired) line");
    static_assert(offsetof(SpscRing, producer_) - offsetof(SpscRing, head_) >= kCacheLine);
    static_assert(offsetof(SpscRing, consumer_) - offsetof(SpscRing, producer_) >= kCacheLine);
  }

  ~SpscRing() {
    if constexpr (!kTrivial) {
      for (std::size_t i = consumer_.head; i != producer_.tail; ++i) slot(i)->~T();
    }
  }

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer. Copies up to n items in; returns how many fitted (0..n).
  unsigned enqueue_burst(const T* items, unsigned n) noexcept {
    const auto count = static_cast<unsigned>(std::min<std::size_t>(n, room_for(n)));
    if (count != 0) publish(items, count);
    return count;
  }

  // Producer. Copies all n items in, or none; returns n or 0.
  unsigned enqueue_bulk(const T* items, unsigned n) noexcept {
    if (n == 0 || room_for(n) < n) return 0;
    publish(items, n);
    return n;
  }

  // Consumer. Moves up to n items out in FIFO order; returns how many (0..n).
  unsigned dequeue_burst(T* out, unsigned n) noexcept {
    const auto count = static_cast<unsigned>(std::min<std::size_t>(n, ready_for(n)));
    if (count != 0) consume(out, count);
    return count;
  }

  // Consumer. Moves n items out, or none; returns n or 0.
  unsigned dequeue_bulk(T* out, unsigned n) noexcept {
    if (n == 0 || ready_for(n) < n) return 0;
    consume(out, n);
    return n;
  }

  std::size_t capacity() const noexcept { return shared_.capacity; }

  // Occupancy. Exact when nothing runs concurrently; otherwise a snapshot that
  // was true at some instant during the call. Reads both shared indices: from
  // the producer that costs one line transfer if the consumer has dequeued
  // since the producer last looked (and vice versa).
  std::size_t size() const noexcept {
    // head before tail: the tail read afterwards is at least the tail the
    // consumer had seen when it published this head, so tail - head >= 0.
    const std::size_t head = head_.value.load(std::memory_order_acquire);
    const std::size_t tail = tail_.value.load(std::memory_order_acquire);
    return std::min(tail - head, shared_.capacity);
  }

  bool empty() const noexcept { return size() == 0; }

  // Producer. Free slots right now (rereads the consumer's index; same cost
  // note as size()).
  std::size_t free_count() const noexcept {
    return shared_.capacity - (producer_.tail - head_.value.load(std::memory_order_acquire));
  }

  // Producer. Occupancy as the producer's cached copy of the consumer index
  // has it: never below the true occupancy, and the same as what
  // enqueue_burst works from. The shared index is reread (refreshing the copy)
  // only when the copy puts occupancy at or above `reread_at`, so a producer
  // that asks "is there room for my burst below this mark?" pays a cross-core
  // read only near the mark. rte_ring's enqueue returns its free space the
  // same way.
  std::size_t producer_occupancy(std::size_t reread_at) noexcept {
    std::size_t occupancy = producer_.tail - producer_.cached_head;
    if (occupancy >= reread_at) {
      // Pairs with the consumer's release store of head in consume().
      producer_.cached_head = head_.value.load(std::memory_order_acquire);
      occupancy = producer_.tail - producer_.cached_head;
    }
    return occupancy;
  }

 private:
  static constexpr bool kTrivial =
      std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>;

  T* slot(std::size_t index) const noexcept {
    return std::launder(reinterpret_cast<T*>(shared_.storage.get()) + (index & shared_.mask));
  }

  // Free slots seen from the producer, rereading head only if the cached copy
  // cannot satisfy `wanted`.
  std::size_t room_for(std::size_t wanted) noexcept {
    std::size_t room = shared_.capacity - (producer_.tail - producer_.cached_head);
    if (room < wanted) {
      // Pairs with the consumer's release store of head in consume(): the
      // consumer has finished moving out every slot below that head, so the
      // producer may overwrite them.
      producer_.cached_head = head_.value.load(std::memory_order_acquire);
      room = shared_.capacity - (producer_.tail - producer_.cached_head);
    }
    return room;
  }

  // Items ready for the consumer, rereading tail only if the cached copy
  // cannot satisfy `wanted`.
  std::size_t ready_for(std::size_t wanted) noexcept {
    std::size_t ready = consumer_.cached_tail - consumer_.head;
    if (ready < wanted) {
      // Pairs with the producer's release store of tail in publish(): every
      // slot below that tail has been written.
      consumer_.cached_tail = tail_.value.load(std::memory_order_acquire);
      ready = consumer_.cached_tail - consumer_.head;
    }
    return ready;
  }

  void publish(const T* items, unsigned n) noexcept {
    const std::size_t tail = producer_.tail;
    const std::size_t first = std::min<std::size_t>(n, shared_.capacity - (tail & shared_.mask));
    if constexpr (kTrivial) {
      ring_detail::copy_items(slot(tail), items, first);
      if (first != n) ring_detail::copy_items(slot(0), items + first, n - first);
    } else {
      for (unsigned i = 0; i < n; ++i) ::new (static_cast<void*>(slot(tail + i))) T(items[i]);
    }
    producer_.tail = tail + n;
    // Pairs with the consumer's acquire load of tail in ready_for() (and in
    // size()): the slot writes above are visible before the new tail is.
    tail_.value.store(tail + n, std::memory_order_release);
  }

  void consume(T* out, unsigned n) noexcept {
    const std::size_t head = consumer_.head;
    if constexpr (kTrivial) {
      const std::size_t first = std::min<std::size_t>(n, shared_.capacity - (head & shared_.mask));
      ring_detail::copy_items(out, slot(head), first);
      if (first != n) ring_detail::copy_items(out + first, slot(0), n - first);
    } else {
      for (unsigned i = 0; i < n; ++i) {
        T* item = slot(head + i);
        out[i] = std::move(*item);
        item->~T();
      }
    }
    consumer_.head = head + n;
    prefetch_next(head + n, n);
    // Pairs with the producer's acquire load of head in room_for() and
    // free_count() (and in size()): the reads above complete before the
    // producer may reuse these slots.
    head_.value.store(head + n, std::memory_order_release);
  }

  // Consumer. Starts pulling the lines of the next burst (already published,
  // so the producer is done with them) while the caller works on this one:
  // the consumer's cost is dominated by the cross-core transfer of slot lines,
  // and overlapping the next burst's transfers with this burst's processing
  // hides most of it. The hardware line is half the kCacheLine pair.
  void prefetch_next(std::size_t from, unsigned n) const noexcept {
    constexpr std::size_t kStride = std::max<std::size_t>(1, kCacheLine / 2 / sizeof(T));
    const std::size_t end = std::min(consumer_.cached_tail, from + std::max<std::size_t>(n, kStride));
    for (std::size_t i = from; i < end; i += kStride) __builtin_prefetch(slot(i), 0, 3);
  }

  // Written once in the constructor, then only read by both sides.
  struct alignas(kCacheLine) ReadOnly {
    ReadOnly(std::size_t cap, std::size_t m) : capacity(cap), mask(m), storage(cap) {}
    std::size_t capacity;
    std::size_t mask;
    ring_detail::SlotStorage<T> storage;
  };
  // One published index: written by its owner on every call, read by the
  // other side only on a refill.
  struct alignas(kCacheLine) SharedIndex {
    std::atomic<std::size_t> value{0};
  };
  struct alignas(kCacheLine) ProducerState {
    std::size_t tail{0};         // == tail_.value, without loading a shared line
    std::size_t cached_head{0};  // last head_.value the producer read
  };
  struct alignas(kCacheLine) ConsumerState {
    std::size_t head{0};         // == head_.value
    std::size_t cached_tail{0};  // last tail_.value the consumer read
  };
  static_assert(sizeof(SharedIndex) == kCacheLine && sizeof(ProducerState) == kCacheLine &&
                sizeof(ConsumerState) == kCacheLine);

  ReadOnly shared_;
  SharedIndex tail_;
  SharedIndex head_;
  ProducerState producer_;
  ConsumerState consumer_;
};

}  // namespace qs
