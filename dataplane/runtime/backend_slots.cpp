#include "dataplane/runtime/backend_slots.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace qs {

BackendSlots::BackendSlots(const std::vector<BackendConfig>& backends) : used_(kMaxBackends, false) {
  for (const BackendConfig& b : backends) used_.at(b.slot) = true;
  for (unsigned s = 0; s < kMaxBackends; ++s)
    if (!used_[s]) free_.push_back(std::uint16_t(s));
}

bool BackendSlots::assign(const std::vector<BackendConfig>& running, std::vector<BackendConfig>& next,
                          const std::function<bool(std::uint64_t)>& swept) {
  std::deque<std::uint16_t> free = free_;
  std::vector<Retiring> retiring;
  std::vector<std::uint16_t> reclaimed, removed, reused;
  for (const Retiring& r : retiring_) {
    if (swept(r.generation)) {
      free.push_back(r.slot);
      reclaimed.push_back(r.slot);
    } else {
      retiring.push_back(r);
    }
  }
  std::unordered_map<std::string_view, std::uint16_t> running_slot;
  for (const BackendConfig& r : running) running_slot.emplace(r.name, r.slot);
  for (BackendConfig& b : next) {
    const auto same = running_slot.find(b.name);
    if (same != running_slot.end()) {
      b.slot = same->second;
      running_slot.erase(same);  // what is left was removed
      continue;
    }
    if (free.empty()) return false;
    b.slot = free.front();
    free.pop_front();
    if (used_[b.slot]) reused.push_back(b.slot);
  }
  for (const BackendConfig& r : running)
    if (running_slot.count(r.name)) removed.push_back(r.slot);
  free_ = std::move(free);
  retiring_ = std::move(retiring);
  for (const BackendConfig& b : next) used_[b.slot] = true;
  reclaimed_ = std::move(reclaimed);
  removed_ = std::move(removed);
  reused_ = std::move(reused);
  return true;
}

void BackendSlots::retire_removed(std::uint64_t generation) {
  for (const std::uint16_t slot : removed_) retiring_.push_back({slot, generation});
  removed_.clear();
}

std::size_t BackendSlots::retiring(const std::function<bool(std::uint64_t)>& swept) const {
  return std::size_t(std::count_if(retiring_.begin(), retiring_.end(),
                                   [&](const Retiring& r) { return !swept(r.generation); }));
}

}  // namespace qs
