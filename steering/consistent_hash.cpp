#include "steering/consistent_hash.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace qs {

ConsistentHashRing::ConsistentHashRing(const std::vector<unsigned>& owner_ids,
                                       const SipHashKey& key, unsigned vnodes) {
  if (owner_ids.empty()) throw std::invalid_argument("consistent hash: no owners");
  if (owner_ids.size() > 0xfffe)
    throw std::invalid_argument("consistent hash: too many owners");
  if (vnodes < 1 || vnodes > 4096)
    throw std::invalid_argument("steering.fallback_vnodes must be 1..4096, got " +
                                std::to_string(vnodes));
  std::vector<unsigned> sorted = owner_ids;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument("consistent hash: owner listed twice");

  owner_count_ = owner_ids.size();
  points_.reserve(owner_ids.size() * vnodes);
  for (std::size_t owner = 0; owner < owner_ids.size(); ++owner) {
    for (unsigned v = 0; v < vnodes; ++v) {
      // Position = keyed hash of "ring" || lcore id || point number.
      const std::uint32_t id = owner_ids[owner];
      const std::uint8_t input[12] = {'r', 'i', 'n', 'g',
                                      std::uint8_t(id), std::uint8_t(id >> 8),
                                      std::uint8_t(id >> 16), std::uint8_t(id >> 24),
                                      std::uint8_t(v), std::uint8_t(v >> 8), 0, 0};
      points_.push_back({siphash13(key, input, sizeof input), std::uint16_t(owner)});
    }
  }
  // Ties (astronomically rare) break by lcore id, so every appliance orders
  // the ring the same way whatever the profile's owner order.
  std::sort(points_.begin(), points_.end(), [&](const Point& a, const Point& b) {
    if (a.position != b.position) return a.position < b.position;
    return owner_ids[a.owner] < owner_ids[b.owner];
  });
  point_count_ = std::uint32_t(points_.size());
  // No hash is above the sentinel; one equal to it wraps to the first point
  // as any hash past the last point does (a real point at the very top
  // sorts before it and is found first).
  points_.push_back({~std::uint64_t(0), points_.front().owner});

  unsigned bits = 1;
  while ((std::size_t(1) << bits) < 2 * points_.size()) ++bits;
  bucket_shift_ = 64 - bits;
  bucket_first_.resize(std::size_t(1) << bits);
  std::uint32_t i = 0;
  for (std::size_t b = 0; b < bucket_first_.size(); ++b) {
    const std::uint64_t start = std::uint64_t(b) << bucket_shift_;
    while (i < point_count_ && points_[i].position < start) ++i;
    bucket_first_[b] = i;
  }
}

}  // namespace qs
