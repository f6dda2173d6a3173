// SpscRing<T>: bounded single-producer single-consumer ring for handing
// packets (mbuf pointers) from an RX lcore to the lcore that owns the flow.
//
// Design
// - Power-of-two capacity, free-running 64-bit indices (slot = index & mask).
//   head == tail means empty, tail - head == capacity means full, so every
//   slot is usable. At 10^9 items/s a 64-bit index wraps after ~584 years.
// - Producer state (tail + its cached copy of head) and consumer state (head +
//   its cached copy of tail) live on separate kCacheLine-sized lines, apart from
//   the read-only line (slot pointer, mask). Each side works from its cached
//   copy of the other side's index and rereads the shared one only when that
//   copy says the request cannot be met (full / empty for the requested count).
//   In steady state that is one cross-core line transfer per cache refill
//   instead of one per operation.
// - Burst operations move as many items as fit and return the count; bulk
//   operations move all n or none.
//
// Thread rules: exactly one producer thread calls enqueue_*, free_count and
// producer_below_watermark; exactly one consumer thread calls dequeue_*.
// size() may be called from any thread.
//
// Items are copied in and moved out; T's copy constructor, move assignment and
// destructor must not throw (the data path cannot handle exceptions).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
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

 public:
  using value_type = T;

  // Throws std::invalid_argument unless capacity is a power of two >= 2.
  explicit SpscRing(std::size_t capacity)
      : shared_{ring_detail::checked_capacity(capacity, "SpscRing"), capacity - 1} {
    static_assert(std::is_standard_layout_v<SpscRing>, "offsetof checks below need standard layout");
    static_assert(offsetof(SpscRing, producer_) % kCacheLine == 0);
    static_assert(offsetof(SpscRing, consumer_) - offsetof(SpscRing, producer_) >= kCacheLine,
                  "producer and consumer indices must not share a (prefetch-paired) line");
    static_assert(offsetof(SpscRing, producer_) - offsetof(SpscRing, shared_) >= kCacheLine,
                  "read-only fields must not share a line with a written index");
  }

  ~SpscRing() {
    if constexpr (!kTrivial) {
      const std::size_t tail = producer_.tail.load(std::memory_order_acquire);
      for (std::size_t i = consumer_.head.load(std::memory_order_relaxed); i != tail; ++i) {
        slot(i)->~T();
      }
    }
  }

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer. Copies up to n items in; returns how many fitted (0..n).
  unsigned enqueue_burst(const T* items, unsigned n) noexcept {
    const std::size_t tail = producer_.tail.load(std::memory_order_relaxed);
    const unsigned count = static_cast<unsigned>(std::min<std::size_t>(n, room_for(tail, n)));
    if (count != 0) publish(items, tail, count);
    return count;
  }

  // Producer. Copies all n items in, or none; returns n or 0.
  unsigned enqueue_bulk(const T* items, unsigned n) noexcept {
    const std::size_t tail = producer_.tail.load(std::memory_order_relaxed);
    if (n == 0 || room_for(tail, n) < n) return 0;
    publish(items, tail, n);
    return n;
  }

  // Consumer. Moves up to n items out in FIFO order; returns how many (0..n).
  unsigned dequeue_burst(T* out, unsigned n) noexcept {
    const std::size_t head = consumer_.head.load(std::memory_order_relaxed);
    const unsigned count = static_cast<unsigned>(std::min<std::size_t>(n, ready_from(head, n)));
    if (count != 0) consume(out, head, count);
    return count;
  }

  // Consumer. Moves n items out, or none; returns n or 0.
  unsigned dequeue_bulk(T* out, unsigned n) noexcept {
    const std::size_t head = consumer_.head.load(std::memory_order_relaxed);
    if (n == 0 || ready_from(head, n) < n) return 0;
    consume(out, head, n);
    return n;
  }

  std::size_t capacity() const noexcept { return shared_.capacity; }

  // Occupancy. Exact when nothing runs concurrently; otherwise a snapshot that
  // was true at some instant during the call. Reads both shared indices: from
  // the producer that costs one line transfer if the consumer has dequeued
  // since the producer last looked (and vice versa). A producer checking a
  // high watermark before every burst should prefer producer_below_watermark.
  std::size_t size() const noexcept {
    // head before tail: the tail read afterwards is at least the tail the
    // consumer had seen when it published this head, so tail - head >= 0.
    const std::size_t head = consumer_.head.load(std::memory_order_acquire);
    const std::size_t tail = producer_.tail.load(std::memory_order_acquire);
    return std::min(tail - head, shared_.capacity);
  }

  bool empty() const noexcept { return size() == 0; }

  // Producer. Free slots right now (rereads the consumer's index; same cost
  // note as size()).
  std::size_t free_count() const noexcept { return shared_.capacity - size(); }

  // Producer. True when occupancy is below high_watermark. Works from the
  // producer's cached copy of the consumer index, which can only overstate
  // occupancy; only when that copy says "at or above" does it reread the
  // shared index (refreshing the cache enqueue uses too). So while the ring is
  // below the mark in steady state this costs no cross-core traffic.
  bool producer_below_watermark(std::size_t high_watermark) noexcept {
    const std::size_t tail = producer_.tail.load(std::memory_order_relaxed);
    if (tail - producer_.cached_head < high_watermark) return true;
    // Pairs with the consumer's release store of head in consume().
    producer_.cached_head = consumer_.head.load(std::memory_order_acquire);
    return tail - producer_.cached_head < high_watermark;
  }

 private:
  static constexpr bool kTrivial =
      std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>;

  T* slot(std::size_t index) const noexcept {
    return std::launder(reinterpret_cast<T*>(shared_.storage.get()) + (index & shared_.mask));
  }

  // Free slots seen from the producer, rereading head only if the cached copy
  // cannot satisfy `wanted`.
  std::size_t room_for(std::size_t tail, std::size_t wanted) noexcept {
    std::size_t room = shared_.capacity - (tail - producer_.cached_head);
    if (room < wanted) {
      // Pairs with the consumer's release store of head in consume(): the
      // consumer has finished moving out every slot below that head, so the
      // producer may overwrite them.
      producer_.cached_head = consumer_.head.load(std::memory_order_acquire);
      room = shared_.capacity - (tail - producer_.cached_head);
    }
    return room;
  }

  // Items ready for the consumer, rereading tail only if the cached copy
  // cannot satisfy `wanted`.
  std::size_t ready_from(std::size_t head, std::size_t wanted) noexcept {
    std::size_t ready = consumer_.cached_tail - head;
    if (ready < wanted) {
      // Pairs with the producer's release store of tail in publish(): every
      // slot below that tail has been written.
      consumer_.cached_tail = producer_.tail.load(std::memory_order_acquire);
      ready = consumer_.cached_tail - head;
    }
    return ready;
  }

  void publish(const T* items, std::size_t tail, unsigned n) noexcept {
    const std::size_t first = std::min<std::size_t>(n, shared_.capacity - (tail & shared_.mask));
    if constexpr (kTrivial) {
      std::memcpy(static_cast<void*>(slot(tail)), items, first * sizeof(T));
      std::memcpy(static_cast<void*>(slot(0)), items + first, (n - first) * sizeof(T));
    } else {
      for (unsigned i = 0; i < n; ++i) ::new (static_cast<void*>(slot(tail + i))) T(items[i]);
    }
    // Pairs with the consumer's acquire load of tail in ready_from() (and the
    // acquire in size()/the destructor): the slot writes above become visible
    // before the consumer can see the new tail.
    producer_.tail.store(tail + n, std::memory_order_release);
  }

  void consume(T* out, std::size_t head, unsigned n) noexcept {
    if constexpr (kTrivial) {
      const std::size_t first = std::min<std::size_t>(n, shared_.capacity - (head & shared_.mask));
      std::memcpy(static_cast<void*>(out), slot(head), first * sizeof(T));
      std::memcpy(static_cast<void*>(out + first), slot(0), (n - first) * sizeof(T));
    } else {
      for (unsigned i = 0; i < n; ++i) {
        T* item = slot(head + i);
        out[i] = std::move(*item);
        item->~T();
      }
    }
    // Pairs with the producer's acquire load of head in room_for() /
    // producer_below_watermark(): the reads above complete before the producer
    // may reuse these slots.
    consumer_.head.store(head + n, std::memory_order_release);
  }

  // Written once in the constructor, then only read by both sides.
  struct alignas(kCacheLine) ReadOnly {
    ReadOnly(std::size_t cap, std::size_t m) : capacity(cap), mask(m), storage(cap) {}
    std::size_t capacity;
    std::size_t mask;
    ring_detail::SlotStorage<T> storage;
  };
  struct alignas(kCacheLine) ProducerLine {
    std::atomic<std::size_t> tail{0};  // written by the producer only
    std::size_t cached_head{0};        // producer-private copy of consumer_.head
  };
  struct alignas(kCacheLine) ConsumerLine {
    std::atomic<std::size_t> head{0};  // written by the consumer only
    std::size_t cached_tail{0};        // consumer-private copy of producer_.tail
  };
  static_assert(sizeof(ProducerLine) == kCacheLine && sizeof(ConsumerLine) == kCacheLine);
  static_assert(std::atomic<std::size_t>::is_always_lock_free);

  ReadOnly shared_;
  ProducerLine producer_;
  ConsumerLine consumer_;
};

}  // namespace qs
