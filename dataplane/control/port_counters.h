// Port counters that never go backwards.
//
// Some drivers zero their counters while the port runs: net_memif does when
// its peer disconnects. A rate computed across that would wrap (an unsigned
// subtraction) and an end-of-run total would forget everything before it.
// MonotonicPortCounters folds each reading of the device's counters into
// totals that carry across such resets, and counts the resets it saw.
// Control path only (one reader, the main lcore).
#pragma once

#include <array>
#include <cstdint>

namespace qs {

// The rte_eth_stats fields quicsteer reports, in one array so that a reset is
// handled the same way for each.
struct PortCounters {
  enum Field : unsigned { kIpackets, kOpackets, kIbytes, kObytes, kImissed, kIerrors, kOerrors, kRxNombuf, kCount };
  std::array<std::uint64_t, kCount> v{};
  std::uint64_t operator[](Field f) const { return v[f]; }
  std::uint64_t& operator[](Field f) { return v[f]; }
};

class MonotonicPortCounters {
 public:
  // One reading of the device's counters; returns the totals since the port
  // started. Any counter smaller than at the previous reading means the
  // device zeroed them all: what was counted until then is kept as a base.
  PortCounters update(const PortCounters& raw) {
    bool reset = false;
    for (unsigned f = 0; f < PortCounters::kCount; ++f) reset |= raw.v[f] < last_.v[f];
    if (reset) {
      for (unsigned f = 0; f < PortCounters::kCount; ++f) base_.v[f] += last_.v[f];
      ++resets_;
    }
    last_ = raw;
    return totals();
  }
  // The totals as of the last reading (when the device cannot be read now).
  PortCounters totals() const {
    PortCounters total;
    for (unsigned f = 0; f < PortCounters::kCount; ++f) total.v[f] = base_.v[f] + last_.v[f];
    return total;
  }
  // Resets seen so far. What a device counted between the last reading and
  // a reset is not seen, so readings should be frequent (the control loop
  // takes one every few tens of milliseconds).
  unsigned resets() const { return resets_; }

 private:
  PortCounters base_{};
  PortCounters last_{};
  unsigned resets_ = 0;
};

}  // namespace qs
