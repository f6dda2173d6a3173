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
// claim their preferred slots in another order, some of theirs too; the fewer
// slots per unit of weight (M/W, the population's rounds), the more of them.
// Measured (slots changed / M, divided by the removed member's share, mean of
// three removals; equal weights, where that is slots changed x N / M):
//     N     M=65537  262147  1048583  4194319  16777259
//     10     1.02     1.01    1.006    1.002    1.001
//     100    1.55     1.24    1.10     1.05     1.02
//     1000   6.7      6.0     3.1      1.86     1.36
//     4096   8.3      8.3     8.0      7.1      3.2
// with weights 1,2,3,5,8 repeated (W = 3.8 N; removing members of weight 1,
// 2 and 8) 10: 1.03 at 65537; 100: 1.21 at 1048583, 1.08 at 4194319; 1000:
// 4.5 at 4194319, 1.9 at 16777259.
// The default size (maglev_default_table_size) is one size for every fleet,
// 1048583 slots (2 MiB; a reload holds two tables, and builds one in about
// 0.02 s on one core): 1.01/N for 10 equal members, 1.10/N for 100, 3.1/N
// for 1000. One size, because a size that followed the fleet would step as
// backends are added, drained or removed, and at a step nearly every hashed
// key moves: sized at 10000 slots per member, the 7th, 14th, 27th, 53rd,
// 105th and 210th backends would each have moved almost every hashed
// connection. Only a
// total weight past 16384 units in lowest terms (64 slots per unit, which
// keeps each share within 1/64 of its weight's) takes the next size up. A
// large fleet that wants less disruption sets a larger size (a profile's
// steering.backend_table_size, steering/steering_config.h): 4194319 (8 MiB,
// 0.1 s to build) gives 1000 members 1.86/N, 16777259 (32 MiB, 0.45 s)
// 1.36/N. The price of a larger table is its cache footprint: a hashed
// lookup of a connection not seen recently loads one random entry of it.
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
// The size chosen for every fleet whose weights allow it (see above).
inline constexpr std::uint32_t kMaglevDefaultTableSize = 1048583;

// Trial division: run once per table (and per profile check), on at most
// kMaglevMaxTableSize (4096 divisions).
constexpr bool maglev_is_prime(std::uint32_t n) {
  if (n < 2) return false;
  for (std::uint32_t d = 2; std::uint64_t(d) * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// The size MaglevTable chooses when given none, for members whose weights,
// divided by their greatest common divisor, sum to `turns_per_round` (N for
// N members of equal weight): kMaglevDefaultTableSize, or when that has
// fewer than 64 slots per unit of the sum, the first of kMaglevTableSizes
// with 64 (each member's share is then within 1/64 of its weight's, see the
// constructor), or the last.
constexpr std::uint32_t maglev_default_table_size(std::uint64_t turns_per_round) {
  for (std::uint32_t size : kMaglevTableSizes)
    if (size >= kMaglevDefaultTableSize && size >= 64 * turns_per_round) return size;
  return kMaglevMaxTableSize;
}

class MaglevTable {
 public:
  // Throws std::invalid_argument when `members` is empty or longer than
  // kMaxBackends, when a weight is 0 or above 1000, when two names are equal,
  // and when a given table_size is not a prime in members.size()..
  // kMaglevMaxTableSize. table_size 0 chooses maglev_default_table_size().
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
