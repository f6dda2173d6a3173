// ParkingTicket: the packets of one RX burst that could not be handed over.
//
// One ticket per RX queue, preallocated. While a ticket is held its queue is
// not polled, so the NIC's RX descriptors fill up behind it: that is the
// back-pressure (imissed, or PAUSE frames with 802.3x on). Because the queue
// is not polled, nothing from it can overtake the parked packets, and one
// burst is the structural bound on the work an lcore holds back.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>

#include "dataplane/fastpath/burst.h"

namespace qs {

template <class Packet>
class ParkingTicket {
 public:
  bool held() const { return count_ != 0; }
  unsigned count() const { return count_; }
  // When the ticket was issued, or last made progress (restart_clock).
  std::uint64_t issued_tsc() const { return issued_tsc_; }
  // The owners (by index, below 64) that have packets parked here.
  std::uint64_t owner_mask() const { return owner_mask_; }
  // Some packets went back: the wait for the rest counts from now.
  void restart_clock(std::uint64_t now_tsc) { issued_tsc_ = now_tsc; }

  void park(Packet p, std::uint16_t owner, std::uint64_t now_tsc) {
    assert(count_ < kMaxBurst);
    if (count_ == 0) issued_tsc_ = now_tsc;
    packets_[count_] = p;
    owners_[count_] = owner;
    owner_mask_ |= std::uint64_t(1) << (owner & 63);
    ++count_;
  }

  // Offers the parked packets to their owners, owner by owner and in arrival
  // order: offer(owner, packets, n) returns how many of them (a prefix) the
  // owner took. What is not taken stays parked, still in order. Returns the
  // number of packets released.
  template <class Offer>
  unsigned release(Offer&& offer) {
    std::array<Packet, kMaxBurst> group;
    std::array<bool, kMaxBurst> taken{};
    unsigned released = 0;
    for (unsigned first = 0; first < count_; ++first) {
      if (taken[first]) continue;
      const std::uint16_t owner = owners_[first];
      bool seen_before = false;  // this owner's group was already offered
      for (unsigned j = 0; j < first && !seen_before; ++j) seen_before = owners_[j] == owner;
      if (seen_before) continue;
      std::array<std::uint8_t, kMaxBurst> index;
      unsigned n = 0;
      for (unsigned j = first; j < count_; ++j) {
        if (owners_[j] == owner) {
          index[n] = std::uint8_t(j);
          group[n++] = packets_[j];
        }
      }
      const unsigned took = offer(owner, group.data(), n);
      for (unsigned k = 0; k < took; ++k) taken[index[k]] = true;
      released += took;
    }
    if (released != 0) compact(taken);
    return released;
  }

  // Gives every parked packet to `sink` in arrival order and empties the
  // ticket (timeout, shutdown: the sink frees them).
  template <class Sink>
  unsigned discard(Sink&& sink) {
    const unsigned n = count_;
    for (unsigned i = 0; i < n; ++i) sink(packets_[i], owners_[i]);
    count_ = 0;
    owner_mask_ = 0;
    return n;
  }

 private:
  void compact(const std::array<bool, kMaxBurst>& taken) {
    unsigned out = 0;
    owner_mask_ = 0;
    for (unsigned i = 0; i < count_; ++i) {
      if (taken[i]) continue;
      packets_[out] = packets_[i];
      owners_[out] = owners_[i];
      owner_mask_ |= std::uint64_t(1) << (owners_[i] & 63);
      ++out;
    }
    count_ = std::uint16_t(out);
  }

  std::array<Packet, kMaxBurst> packets_{};
  std::array<std::uint16_t, kMaxBurst> owners_{};
  std::uint16_t count_ = 0;
  std::uint64_t owner_mask_ = 0;
  std::uint64_t issued_tsc_ = 0;
};

}  // namespace qs
