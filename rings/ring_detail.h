// Internals shared by SpscRing and MpscRing: capacity checks, slot storage and
// the spin hint. Not part of the public API.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include "rings/cache_line.h"

namespace qs::ring_detail {

// Counts are returned as `unsigned`, so a ring never holds more than that can
// express; 2^31 slots is far beyond any inbox the dataplane sizes.
inline constexpr std::size_t kMaxCapacity = std::size_t{1} << 31;

inline std::size_t checked_capacity(std::size_t capacity, const char* ring_name) {
  if (capacity < 2 || !std::has_single_bit(capacity) || capacity > kMaxCapacity) {
    throw std::invalid_argument(std::string(ring_name) + ": capacity " +
                                std::to_string(capacity) +
                                " must be a power of two between 2 and 2^31");
  }
  return capacity;
}

// Raw, cache-line-aligned storage for `count` objects of type Slot. The byte
// size is rounded up to whole lines so no unrelated data shares the first or
// last line with the slots (that line would otherwise bounce between cores).
template <class Slot>
class SlotStorage {
 public:
  explicit SlotStorage(std::size_t count) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(Slot) - kCacheLine) {
      throw std::length_error("ring slot storage too large");
    }
    const std::size_t bytes = (count * sizeof(Slot) + kCacheLine - 1) / kCacheLine * kCacheLine;
    memory_ = ::operator new(bytes, std::align_val_t{kCacheLine});
  }
  ~SlotStorage() { ::operator delete(memory_, std::align_val_t{kCacheLine}); }
  SlotStorage(const SlotStorage&) = delete;
  SlotStorage& operator=(const SlotStorage&) = delete;

  Slot* get() const noexcept { return static_cast<Slot*>(memory_); }

 private:
  void* memory_;
};

// Copies n trivially copyable items. Fixed-size memcpy chunks compile to
// inline vector moves; a variable-size memcpy (or a plain element loop, which
// GCC and clang turn into one) would be a libc call, which costs more than the
// copy itself at the burst sizes a dataplane uses (1..32). The 0..3 remainder
// is unrolled by hand for the same reason.
//
// GCC 12 with -fsanitize=address cannot bound n after the callers' min() and
// warns (-Warray-bounds) that the 2- and 4-item chunks may overrun a
// caller's one-item array, although they only run when n says the items are
// there; the warning is silenced here, for this function only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
template <class T>
inline void copy_items(T* __restrict dst, const T* __restrict src, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) std::memcpy(static_cast<void*>(dst + i), src + i, 4 * sizeof(T));
  if ((n - i) & 2) {
    std::memcpy(static_cast<void*>(dst + i), src + i, 2 * sizeof(T));
    i += 2;
  }
  if ((n - i) & 1) std::memcpy(static_cast<void*>(dst + i), src + i, sizeof(T));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Polite spin: tells the core a spin-wait is in progress (frees pipeline
// resources for the sibling hyperthread, avoids the memory-order flush on exit).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace qs::ring_detail
