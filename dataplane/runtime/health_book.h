// HealthBook: what the health checker (health_checks.h) knows of each
// backend, without DPDK or a clock of its own, so that tests drive it with
// made-up times. It decides when each backend's next probe round is due,
// within the profile's probe budget; matches answers to the probes out;
// judges rounds (answered by every target, or not within the timeout); and
// turns runs of them into up and down by rise and fall.
//
// States: a backend starts `unchecked` and counts as up (a start or a
// reload must not empty the hash before the first answers); one answered
// round makes it `up`, `fall` failed rounds in a row make it `down`, and
// `rise` answered rounds in a row bring a down backend back up. Only the
// changes between down and the other two move the backend hash (epoch()).
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dataplane/config/profile.h"
#include "dataplane/fastpath/health_probe.h"

namespace qs {

enum class BackendHealth : std::uint8_t { kUnchecked, kUp, kDown };
const char* backend_health_name(BackendHealth h);

class HealthBook {
 public:
  // A probe to send: the backend (an index into the last set_backends
  // list), the target (an index into config.targets) and its CIDs.
  struct Probe {
    std::uint32_t backend = 0;
    std::uint8_t target = 0;
    std::array<std::uint8_t, kProbeCidLen> dcid{}, scid{};
  };
  struct Row {
    std::string name;
    std::uint16_t slot = 0;
    BackendHealth health = BackendHealth::kUnchecked;
    bool operator_down = false;  // the profile's state: down (probed all the same, not counted as serving)
    std::uint32_t ok_in_row = 0, failed_in_row = 0;
    std::uint64_t rounds_sent = 0, rounds_answered = 0, rounds_failed = 0;
    std::uint32_t rtt_us = 0;  // the last answered round's (its slowest target's)
  };
  struct Totals {
    std::uint64_t probes_sent = 0;        // probe packets (one per target per round)
    std::uint64_t answers = 0;            // answers that matched a probe out
    std::uint64_t answers_unmatched = 0;  // Version Negotiations to the probe port that match none: forged, misrouted or late
    std::uint64_t rounds_deferred = 0;    // rounds that came due with the budget spent: sent late
  };
  // A backend that went down or came back, for the log.
  struct Change {
    std::string name;
    BackendHealth to = BackendHealth::kUp;
    std::uint32_t rounds = 0;  // in a row that decided it
    std::uint32_t rtt_us = 0;
  };

  HealthBook(const HealthChecksConfig& config, std::uint64_t seed);

  // The backends to probe, from now_us. A backend already known (by name)
  // keeps its health and counters; a new one starts unchecked. Rounds are
  // spread over the interval so that the probes leave at an even pace.
  void set_backends(const std::vector<BackendConfig>& backends, std::uint64_t now_us);

  // Starts every round due at now_us that the budget allows, and calls
  // emit(const Probe&) for each of its probes. Returns the probes emitted.
  template <typename Emit>
  unsigned start_due(std::uint64_t now_us, Emit&& emit);

  // An answer from the receive path: true when it echoes the CIDs of a
  // probe out, from the address and port that probe went to.
  bool answer(const ProbeAnswer& a, std::uint64_t now_us);
  // Judges the rounds whose timeout passed at now_us as failed.
  void expire(std::uint64_t now_us);

  std::vector<Change> take_changes();
  // Bumped whenever a backend goes down or comes back from down.
  std::uint64_t epoch() const { return epoch_; }
  const std::vector<Row>& rows() const { return rows_; }
  const Totals& totals() const { return totals_; }
  // Whether any backend the operator has not set down is up or unchecked.
  bool any_answering() const;

 private:
  struct Round {
    bool out = false;
    std::uint64_t sent_us = 0;
    std::uint32_t answered = 0;  // bit per target
    std::vector<Probe> probes;   // by target
  };
  struct Schedule {
    std::uint64_t due_us = 0;
    bool deferred = false;  // counted once per late round
  };
  void judge(std::size_t i, bool answered, std::uint64_t now_us);
  bool take_tokens(std::uint64_t now_us, std::uint32_t n);

  HealthChecksConfig config_;
  std::mt19937_64 random_;
  std::vector<Row> rows_;
  std::vector<Round> rounds_;
  std::vector<Schedule> schedule_;
  std::vector<Change> changes_;
  Totals totals_;
  std::uint64_t epoch_ = 0;
  std::size_t cursor_ = 0;  // where start_due's next look begins
  // The budget: probes, in millionths, refilled at probes_per_s per µs.
  std::uint64_t tokens_ = 0, tokens_cap_ = 0, tokens_at_us_ = 0;
};

template <typename Emit>
unsigned HealthBook::start_due(std::uint64_t now_us, Emit&& emit) {
  unsigned emitted = 0;
  const std::uint32_t targets = std::uint32_t(config_.targets.size());
  const std::size_t n = rows_.size();
  // From where the budget last ran out, round the backends: over budget,
  // every backend gets its turn late, instead of the first ones always.
  const std::size_t first = n == 0 ? 0 : cursor_ % n;
  bool ran_out = false;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    Schedule& s = schedule_[i];
    if (now_us < s.due_us || rounds_[i].out) continue;
    if (ran_out || !take_tokens(now_us, targets)) {
      if (!ran_out) cursor_ = i;
      ran_out = true;
      if (!s.deferred) ++totals_.rounds_deferred;
      s.deferred = true;
      continue;
    }
    s.deferred = false;
    // The next round a whole interval after this one's due time, or after
    // now when it is already that late: a late round does not make the
    // next ones come in a burst.
    s.due_us = std::max(s.due_us + config_.interval_ms * 1000ull, now_us + config_.interval_ms * 500ull);
    Round& r = rounds_[i];
    r.out = true;
    r.sent_us = now_us;
    r.answered = 0;
    r.probes.resize(targets);
    for (std::uint32_t t = 0; t < targets; ++t) {
      Probe& p = r.probes[t];
      p.backend = std::uint32_t(i);
      p.target = std::uint8_t(t);
      const std::uint64_t a = random_(), b = random_();
      std::memcpy(p.dcid.data(), &a, kProbeCidLen);
      std::memcpy(p.scid.data(), &b, kProbeCidLen);
      // The SCID leads with the backend and target, so that its echo (the
      // answer's DCID) finds the round without a search.
      p.scid[0] = std::uint8_t(i >> 8);
      p.scid[1] = std::uint8_t(i);
      p.scid[2] = std::uint8_t(t);
      emit(p);
      ++emitted;
    }
    ++rows_[i].rounds_sent;
    totals_.probes_sent += targets;
  }
  return emitted;
}

}  // namespace qs
