#include "dataplane/runtime/health_book.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace qs {

const char* backend_health_name(BackendHealth h) {
  switch (h) {
    case BackendHealth::kUnchecked: return "unchecked";
    case BackendHealth::kUp: return "up";
    case BackendHealth::kDown: return "down";
  }
  return "?";
}

HealthBook::HealthBook(const HealthChecksConfig& config, std::uint64_t seed) : config_(config), random_(seed) {
  // A tenth of a second's probes at once, and never fewer than one round of
  // every target: a round always fits.
  const std::uint64_t burst = std::max<std::uint64_t>(config_.probes_per_s / 10, config_.targets.size());
  tokens_cap_ = burst * 1000000ull;
  tokens_ = tokens_cap_;
}

void HealthBook::set_backends(const std::vector<BackendConfig>& backends, std::uint64_t now_us) {
  std::map<std::string, std::size_t> known;
  for (std::size_t i = 0; i < rows_.size(); ++i) known[rows_[i].name] = i;
  std::vector<Row> rows(backends.size());
  std::vector<Round> rounds(backends.size());
  std::vector<Schedule> schedule(backends.size());
  const std::uint64_t interval_us = config_.interval_ms * 1000ull;
  for (std::size_t i = 0; i < backends.size(); ++i) {
    const auto it = known.find(backends[i].name);
    if (it != known.end()) {
      rows[i] = rows_[it->second];
      schedule[i] = schedule_[it->second];
      // A round out keeps going: its probes name the old index, so its
      // answers would not find it; it is judged failed by none and simply
      // dropped (the next round comes on its schedule).
    } else {
      rows[i].name = backends[i].name;
      schedule[i].due_us = now_us + interval_us * i / backends.size();
    }
    rows[i].slot = backends[i].slot;
    rows[i].operator_down = backends[i].state == BackendState::kDown;
  }
  rows_ = std::move(rows);
  rounds_ = std::move(rounds);
  schedule_ = std::move(schedule);
}

bool HealthBook::take_tokens(std::uint64_t now_us, std::uint32_t n) {
  const std::uint64_t elapsed = now_us - tokens_at_us_;
  tokens_at_us_ = now_us;
  const std::uint64_t room = tokens_cap_ - tokens_;
  tokens_ += elapsed >= room / std::max<std::uint64_t>(config_.probes_per_s, 1) ? room : elapsed * config_.probes_per_s;
  const std::uint64_t need = std::uint64_t(n) * 1000000ull;
  if (tokens_ < need) return false;
  tokens_ -= need;
  return true;
}

bool HealthBook::answer(const ProbeAnswer& a, std::uint64_t now_us) {
  if (a.dcid_len != kProbeCidLen || a.scid_len != kProbeCidLen) {
    ++totals_.answers_unmatched;
    return false;
  }
  const std::size_t i = std::size_t(a.dcid[0]) << 8 | a.dcid[1];
  const std::size_t t = a.dcid[2];
  if (i >= rounds_.size() || !rounds_[i].out || t >= rounds_[i].probes.size() ||
      (rounds_[i].answered >> t & 1u)) {
    ++totals_.answers_unmatched;
    return false;
  }
  const Probe& p = rounds_[i].probes[t];
  const HealthTarget& target = config_.targets[t];
  const std::size_t alen = target.ipv6 ? 16 : 4;
  if (std::memcmp(a.dcid.data(), p.scid.data(), kProbeCidLen) != 0 ||
      std::memcmp(a.scid.data(), p.dcid.data(), kProbeCidLen) != 0 || a.ipv6 != target.ipv6 ||
      std::memcmp(a.source.data(), target.address.data(), alen) != 0 || a.source_port != target.udp_port) {
    ++totals_.answers_unmatched;
    return false;
  }
  ++totals_.answers;
  Round& r = rounds_[i];
  r.answered |= 1u << t;
  if (r.answered == (1u << r.probes.size()) - 1) {
    rows_[i].rtt_us = std::uint32_t(std::min<std::uint64_t>(now_us - r.sent_us, ~0u));
    judge(i, true, now_us);
  }
  return true;
}

void HealthBook::expire(std::uint64_t now_us) {
  const std::uint64_t timeout_us = config_.timeout_ms * 1000ull;
  for (std::size_t i = 0; i < rounds_.size(); ++i)
    if (rounds_[i].out && now_us - rounds_[i].sent_us >= timeout_us) judge(i, false, now_us);
}

void HealthBook::judge(std::size_t i, bool answered, std::uint64_t) {
  Round& r = rounds_[i];
  r.out = false;
  Row& row = rows_[i];
  const BackendHealth before = row.health;
  if (answered) {
    ++row.rounds_answered;
    ++row.ok_in_row;
    row.failed_in_row = 0;
    if (row.health == BackendHealth::kUnchecked || (row.health == BackendHealth::kDown && row.ok_in_row >= config_.rise))
      row.health = BackendHealth::kUp;
  } else {
    ++row.rounds_failed;
    ++row.failed_in_row;
    row.ok_in_row = 0;
    if (row.health != BackendHealth::kDown && row.failed_in_row >= config_.fall) row.health = BackendHealth::kDown;
  }
  if (row.health == before) return;
  if (before == BackendHealth::kDown || row.health == BackendHealth::kDown) ++epoch_;
  changes_.push_back({row.name, row.health, answered ? row.ok_in_row : row.failed_in_row, row.rtt_us});
}

std::vector<HealthBook::Change> HealthBook::take_changes() {
  std::vector<Change> out;
  out.swap(changes_);
  return out;
}

bool HealthBook::any_answering() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return !r.operator_down && r.health != BackendHealth::kDown; });
}

}  // namespace qs
