// Consistent hashing of 64-bit keyed hashes onto owners.
//
// A hash ring: each owner places `vnodes` points on the 64-bit circle, a hash
// belongs to the first point at or after it (wrapping). Points derive from the
// owner's lcore id (not its position in the profile) and the fallback key, so
// appliances with the same key and owners agree, and adding or removing one
// owner moves only the keys that owner gains or loses, about 1/(N+1) of them.
// With 128 points per owner the owners' shares vary by roughly +-10%.
//
// Lookup is O(1): a bucket table indexed by the hash's top bits gives the
// first point at or after the bucket's start; with at least two buckets per
// point the linear walk from there is under one step on average. Points come
// from a keyed hash, so nobody can crowd them into one bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "steering/siphash.h"

namespace qs {

class ConsistentHashRing {
 public:
  // owner_ids: a stable identity per owner (the lcore id); lookups return the
  // index into this vector. Throws std::invalid_argument when empty, with
  // duplicates, or vnodes outside 1..4096.
  ConsistentHashRing(const std::vector<unsigned>& owner_ids, const SipHashKey& key,
                     unsigned vnodes);

  std::uint16_t owner_for(std::uint64_t hash) const {
    // From the bucket's first point the walk is zero or one step for most
    // hashes, and which one no predictor can guess (the hash is random): that
    // step is an add, not a branch. A longer walk is rare, so its loop is
    // predicted not taken. The sentinel past the last point (the top of the
    // circle, with the first point's owner: the wrap) ends every walk, so
    // there is no bounds test.
    const Point* p = &points_[bucket_first_[hash >> bucket_shift_]];
    p += p->position < hash;
    while (p->position < hash) ++p;
    return p->owner;
  }

  std::size_t owner_count() const { return owner_count_; }
  std::size_t point_count() const { return point_count_; }
  // The sorted points, for tests and diagnostics.
  std::uint64_t point_position(std::size_t i) const { return points_[i].position; }
  std::uint16_t point_owner(std::size_t i) const { return points_[i].owner; }

 private:
  struct Point {
    std::uint64_t position;
    std::uint16_t owner;
  };
  std::vector<Point> points_;                // sorted by position, then the sentinel
  std::vector<std::uint32_t> bucket_first_;  // first point >= bucket start
  std::uint32_t point_count_ = 0;
  unsigned bucket_shift_ = 63;
  std::size_t owner_count_ = 0;
};

}  // namespace qs
