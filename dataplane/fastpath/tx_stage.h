// TxStage: one owner's packets for one TX queue that the queue has not taken
// yet, in the order the owner produced them.
//
// It is the TX side's parking ticket. The owner adds packets as its connection
// stage emits them and offers a burst to the TX queue each time one is ready;
// whatever the queue refuses stays here, in order, and goes first at the next
// offer. While a stage cannot take one more burst of work (has_room() is
// false) its owner takes nothing new from its inbound rings or its own RX
// queues, so its rings fill and the receivers park: the back-pressure chain
// runs from the TX queue back to the NIC's RX descriptors. Preallocated and
// bounded: the owner checks has_room() before each burst of work and a burst
// adds at most `burst` packets, so the stage never holds more than two bursts.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "dataplane/fastpath/burst.h"

namespace qs {

template <class Packet>
class TxStage {
 public:
  static constexpr unsigned kCapacity = 2 * kMaxBurst;

  explicit TxStage(unsigned burst = kMaxBurst) : burst_(burst) { assert(burst >= 1 && burst <= kMaxBurst); }

  unsigned count() const { return count_; }
  bool empty() const { return count_ == 0; }
  unsigned burst() const { return burst_; }

  // True while one more burst of work fits: the owner's gate for taking work.
  bool has_room() const { return count_ <= burst_; }

  // Appends one packet. Returns true when a whole burst is waiting, which is
  // when the caller should offer it to the TX queue: at one burst, and at two
  // if the queue refused the first (the stage never holds more, see above).
  // Compares, not count_ % burst_: a division per packet.
  bool add(Packet p) {
    assert(count_ < kCapacity);
    packets_[count_++] = p;
    return count_ == burst_ || count_ == 2 * burst_;
  }

  // Appends a burst of packets at once (at most one burst: the owner checks
  // has_room() before taking it, see above). Returns true when at least a
  // whole burst is waiting.
  bool add_burst(const Packet* p, unsigned n) {
    assert(n <= burst_ && count_ + n <= kCapacity);
    std::memcpy(packets_.data() + count_, p, n * sizeof(Packet));
    count_ = std::uint16_t(count_ + n);
    return count_ >= burst_;
  }

  // Offers every waiting packet to tx(packets, n), which returns how many of
  // them (a prefix) the queue took. The rest stay, in order. `now` is a
  // timestamp: the stall clock restarts whenever the queue takes something.
  template <class Tx>
  unsigned send(Tx&& tx, std::uint64_t now) {
    if (count_ == 0) return 0;
    const unsigned took = tx(packets_.data(), count_);
    assert(took <= count_);
    if (took != 0) {
      count_ -= took;
      std::memmove(packets_.data(), packets_.data() + took, count_ * sizeof(Packet));
    }
    if (took != 0 || !waiting_) last_progress_ = now;
    waiting_ = count_ != 0;
    return took;
  }

  // How long the queue has taken nothing while packets waited (0 when none wait).
  std::uint64_t stalled_for(std::uint64_t now) const { return waiting_ ? now - last_progress_ : 0; }

  // Empties the stage in order (timeout, drop policy, shutdown).
  template <class Sink>
  unsigned discard(Sink&& sink) {
    const unsigned n = count_;
    for (unsigned i = 0; i < n; ++i) sink(packets_[i]);
    count_ = 0;
    waiting_ = false;
    return n;
  }

 private:
  std::array<Packet, kCapacity> packets_{};
  std::uint16_t count_ = 0;
  std::uint16_t burst_;
  bool waiting_ = false;         // packets were refused and still wait
  std::uint64_t last_progress_ = 0;
};

}  // namespace qs
