// BackendSlots: which slot each backend of the running profile has, across
// reloads. A slot is a backend's index in every per-backend array of the
// data path (the forwarding tables' targets, the delivery templates, the
// owners' counters), so a slot is never given to a new backend while
// anything may still read it as the old one's:
//   - a backend that stays (matched by name) keeps its slot, so that what
//     the tables learned for it stays right;
//   - a removed backend's slot is *retiring* until the forwarding tables
//     have swept out every entry naming it (ForwardingTables::retire and
//     swept; at once without tables), then *free* again;
//   - a new backend takes the free slot that has been free longest, slots
//     never used first, so that a reused slot has been out of use for as
//     long as the fleet allows.
// So the slots run out only when kMaxBackends backends, and those retiring,
// are there at once, not after kMaxBackends names over the process's life.
//
// A value type: a reload prepares a copy (assign) and the data path takes it
// when the reload goes live. Control path only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "steering/steering_config.h"

namespace qs {

class BackendSlots {
 public:
  // The start-up profile's backends, which the loader numbered 0..n-1.
  explicit BackendSlots(const std::vector<BackendConfig>& backends = {});

  // Gives `next` (a reload's backends) their slots, `running` being the
  // backends live now. First, retiring slots whose sweep is done
  // (swept(generation)) become free (listed by reclaimed()). Backends of
  // `running` that `next` lacks leave their slots (removed(), to retire
  // once the reload is live). False, with this unchanged, when a new
  // backend finds no free slot.
  bool assign(const std::vector<BackendConfig>& running, std::vector<BackendConfig>& next,
              const std::function<bool(std::uint64_t)>& swept);
  // The last assign()'s slots that left the tables' retiring set (the
  // tables must forget them before a resolver routes to them again).
  const std::vector<std::uint16_t>& reclaimed() const { return reclaimed_; }
  // The last assign()'s slots of removed backends.
  const std::vector<std::uint16_t>& removed() const { return removed_; }
  // The last assign()'s slots that a backend had before: their counters
  // start again from what they read now.
  const std::vector<std::uint16_t>& reused() const { return reused_; }
  // Once the reload is live: removed() wait for the sweep of `generation`
  // (0: nothing to sweep, free at the next assign).
  void retire_removed(std::uint64_t generation);

  // Slots still retiring whose sweep is not done.
  std::size_t retiring(const std::function<bool(std::uint64_t)>& swept) const;
  std::size_t free_slots() const { return free_.size(); }

 private:
  struct Retiring {
    std::uint16_t slot;
    std::uint64_t generation;
  };
  std::deque<std::uint16_t> free_;  // longest free first
  std::vector<Retiring> retiring_;
  std::vector<bool> used_;  // by slot: a backend has had it
  std::vector<std::uint16_t> reclaimed_, removed_, reused_;
};

}  // namespace qs
