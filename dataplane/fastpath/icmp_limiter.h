// IcmpLimiter: how often an owner may answer with an ICMP "too big"
// (backend delivery), off the per-packet path: only frames that do not fit
// ask.
//
// Two bounds. A token bucket of `per_second` replies (a burst of a tenth of
// a second's worth, at least one), so that the replies a second allows are
// spread over it rather than spent in its first instant. And one reply per
// destination (the client's address) per 1 / per_destination seconds, kept
// in a small direct-mapped table by a hash of the address: a client needs
// one reply per round trip to learn its path MTU, and one sender of
// oversized frames must not take every other client's share (destinations
// that share a slot replace each other there, and so are bounded less; the
// table is the owner's own, never shared).
#pragma once

#include <array>
#include <cstdint>

namespace qs {

class IcmpLimiter {
 public:
  static constexpr unsigned kDestinations = 256;

  // per_destination: replies per second to one destination (0: no bound
  // per destination); tsc_hz: the clock `now` counts in.
  void configure(std::uint32_t per_second, std::uint32_t per_destination, std::uint64_t tsc_hz) {
    per_second_ = per_second;
    per_destination_ = per_destination;
    tsc_hz_ = tsc_hz == 0 ? 1 : tsc_hz;
    interval_ = per_destination == 0 ? 0 : tsc_hz_ / per_destination;
    burst_ = per_second / 10 > 0 ? per_second / 10 : 1;
    if (tokens_ > burst_ * tsc_hz_) tokens_ = burst_ * tsc_hz_;
  }

  bool configured_for(std::uint32_t per_second, std::uint32_t per_destination) const {
    return per_second_ == per_second && per_destination_ == per_destination;
  }

  // Whether a reply to `destination` (a hash of its address) may go at
  // `now`. Nothing is taken until spend(): a frame that turns out to need
  // no reply costs no one a reply.
  bool permits(std::uint64_t now, std::uint64_t destination) {
    if (per_second_ == 0) return false;
    // Tokens in units of 1/tsc_hz of a reply: refilled by per_second per
    // cycle elapsed, so that no division runs here.
    const std::uint64_t cap = burst_ * tsc_hz_;
    const std::uint64_t elapsed = now - last_;
    last_ = now;
    tokens_ = elapsed >= cap / per_second_ ? cap : tokens_ + elapsed * per_second_;
    if (tokens_ > cap) tokens_ = cap;
    if (tokens_ < tsc_hz_) return false;
    const Slot& s = slot(destination);
    return interval_ == 0 || s.destination != destination || now - s.sent >= interval_;
  }
  // Takes a reply to `destination` at `now` (after permits()).
  void spend(std::uint64_t now, std::uint64_t destination) {
    slot(destination) = {destination, now};
    tokens_ = tokens_ >= tsc_hz_ ? tokens_ - tsc_hz_ : 0;
  }

 private:
  struct Slot {
    std::uint64_t destination = 0;
    std::uint64_t sent = 0;
  };
  Slot& slot(std::uint64_t destination) { return destinations_[(destination ^ destination >> 32) % kDestinations]; }
  std::uint32_t per_second_ = 0;
  std::uint32_t per_destination_ = 0;
  std::uint64_t interval_ = 0;  // TSC cycles between two replies to one destination (0: no bound)
  std::uint64_t tsc_hz_ = 1;
  std::uint64_t burst_ = 1;
  std::uint64_t tokens_ = 0;  // full at the first call, whose elapsed time is all of `now`
  std::uint64_t last_ = 0;
  std::array<Slot, kDestinations> destinations_{};
};

}  // namespace qs
