// Weighted Maglev hashing (Eisenbud et al., "Maglev: A Fast and Reliable
// Software Network Load Balancer", NSDI'16, section 3.4) of 64-bit keyed
// hashes onto the backends of a fleet.
//
// Why Maglev rather than the owners' hash ring (steering/consistent_hash.h):
// a lookup is one multiply and one load from a table of 16-bit entries, and
// each member's share is its weight's to within W/M of it (W the total weight
// in lowest terms, M the table size: under 1/64 with the chosen sizes), where
// 128 points per owner on a ring leave about +-10%. The price is disruption:
// removing one of N members moves its own keys and, because the others then
// claim their preferred slots in another order, some of theirs too; fewer
// slots per member, more of them. Measured with the chosen sizes (65537
// slots for up to 1024 members of equal weight), removing one of 10 members
// moves 1.02/N of the keys, one of 100 1.5-1.6/N, one of 1000 6.5-7/N (at
// 1048583 slots, 3/N): a profile that cares passes a larger table_size.
// The chosen size grows when the total weight crosses a step of
// kMaglevTableSizes, and then nearly every key moves.
//
// The table depends only on the members' names, weights and targets and on
// the key, never on the order the profile lists them in, so appliances
// sharing a profile build identical tables and send a connection to the same
// server whichever of them sees it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "steering/siphash.h"

namespace qs {

struct MaglevMember {
  std::string_view name;  // unique; places the member in the table
  std::uint32_t weight;   // 1..1000, relative share of the table
  std::uint16_t target;   // what lookups return for it (a backend slot)
};

// The table sizes chosen when the caller gives none: primes just above
// successive powers of two (131071 is 2^17 - 1, itself prime), up to 16 Mi
// entries (32 MiB). A given size may be any prime up to the last.
inline constexpr std::uint32_t kMaglevTableSizes[] = {
    65537, 131071, 262147, 524309, 1048583, 2097169, 4194319, 8388617, 16777259};
inline constexpr std::uint32_t kMaglevMaxTableSize = 16777259;

class MaglevTable {
 public:
  // Throws std::invalid_argument when `members` is empty or longer than
  // kMaxBackends, when a weight is 0 or above 1000, when two names are equal,
  // and when a given table_size is not a prime in members.size()..
  // kMaglevMaxTableSize. table_size 0 chooses the first of kMaglevTableSizes
  // with at least 64 entries per unit of the weights' total (the weights
  // divided by their greatest common divisor), or the last.
  MaglevTable(std::vector<MaglevMember> members, const SipHashKey& key,
              std::uint32_t table_size = 0);

  // Scales the hash's top 32 bits onto 0..size-1 (multiply, keep the high
  // half) rather than taking a remainder: no division on the per-packet path.
  std::uint16_t target_for(std::uint64_t hash) const {
    return table_[std::size_t((hash >> 32) * size_ >> 32)];
  }

  std::uint32_t size() const { return std::uint32_t(size_); }
  // The table itself, for tests and diagnostics.
  std::uint16_t entry(std::uint32_t i) const { return table_[i]; }

 private:
  std::vector<std::uint16_t> table_;
  std::uint64_t size_ = 0;
};

}  // namespace qs
