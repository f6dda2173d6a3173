#include "steering/maglev.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "steering/steering_config.h"

namespace qs {

namespace {

// Keyed hash of a domain tag and the member's name. The two tags give the
// offset and the skip independent values (the paper's two hash functions h1
// and h2), and keep both apart from every other use of the same key.
std::uint64_t name_hash(const SipHashKey& key, std::string_view tag, std::string_view name) {
  std::string input;
  input.reserve(tag.size() + name.size());
  input.append(tag).append(name);
  return siphash13(key, reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

}  // namespace

MaglevTable::MaglevTable(std::vector<MaglevMember> members, const SipHashKey& key,
                         std::uint32_t table_size) {
  if (members.empty()) throw std::invalid_argument("maglev: no members");
  if (members.size() > kMaxBackends)
    throw std::invalid_argument("maglev: " + std::to_string(members.size()) +
                                " members, at most " + std::to_string(kMaxBackends));
  for (const MaglevMember& m : members)
    if (m.weight < 1 || m.weight > 1000)
      throw std::invalid_argument("maglev: weight of '" + std::string(m.name) +
                                  "' must be 1..1000, got " + std::to_string(m.weight));
  // Name order, not the caller's: the population loop below visits members in
  // this order, and which member wins a contested slot depends on it.
  std::sort(members.begin(), members.end(),
            [](const MaglevMember& a, const MaglevMember& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < members.size(); ++i)
    if (members[i].name == members[i - 1].name)
      throw std::invalid_argument("maglev: member '" + std::string(members[i].name) +
                                  "' listed twice");

  // Weights in lowest terms: 100 members of weight 100 need the table (and
  // the cache footprint) of 100 members of weight 1, not 100 times it.
  std::uint32_t divisor = 0;
  for (const MaglevMember& m : members) divisor = std::gcd(divisor, m.weight);
  std::uint64_t turns_per_round = 0;
  for (MaglevMember& m : members) {
    m.weight /= divisor;
    turns_per_round += m.weight;
  }

  if (table_size == 0) {
    // Each full round of the loop below gives every member exactly its
    // weight's turns, each turn fills one slot, and only the last round is
    // cut short: a member's share is off by at most one round's worth of its
    // turns. 64 rounds keep that under 1/64 of its share (and the default
    // size has many more, for a low disruption: maglev.h).
    table_size = maglev_default_table_size(turns_per_round);
  } else if (table_size < members.size() || table_size > kMaglevMaxTableSize ||
             !maglev_is_prime(table_size)) {
    // A prime size makes every skip in 1..size-1 coprime with it, so each
    // member's sequence below is a permutation of all the slots (section
    // 3.4); fewer slots than members would leave some member none.
    throw std::invalid_argument("maglev: table size must be a prime in " +
                                std::to_string(members.size()) + ".." +
                                std::to_string(kMaglevMaxTableSize) + ", got " +
                                std::to_string(table_size));
  }
  size_ = table_size;

  // Section 3.4: member i prefers the slots offset_i, offset_i + skip_i,
  // offset_i + 2 skip_i, ... (mod M), from two hashes of its name; the table
  // is filled by letting members in turn take their next preferred slot that
  // is still free. `next` is where each member stands in its sequence, kept
  // below M by subtracting rather than by a remainder per step.
  struct Cursor {
    std::uint32_t next;
    std::uint32_t skip;
  };
  std::vector<Cursor> cursors;
  cursors.reserve(members.size());
  for (const MaglevMember& m : members) {
    cursors.push_back({std::uint32_t(name_hash(key, "maglev offset:", m.name) % table_size),
                       std::uint32_t(name_hash(key, "maglev skip:", m.name) % (table_size - 1) + 1)});
  }
  table_.assign(table_size, 0);
  std::vector<bool> taken(table_size, false);
  std::uint32_t filled = 0;
  // Weights: a member of weight w takes w turns in every round, so the slots
  // it ends with follow its weight; the paper's loop is every weight 1.
  // (Katran's MaglevHash gives the extra turns in the first round only, after
  // which every member takes one: with many rounds, shares end near equal.)
  while (true) {
    for (std::size_t i = 0; i < members.size(); ++i) {
      Cursor& c = cursors[i];
      for (std::uint32_t turn = 0; turn < members[i].weight; ++turn) {
        while (taken[c.next]) {
          c.next += c.skip;
          if (c.next >= table_size) c.next -= table_size;
        }
        taken[c.next] = true;
        table_[c.next] = members[i].target;
        c.next += c.skip;
        if (c.next >= table_size) c.next -= table_size;
        if (++filled == table_size) return;
      }
    }
  }
}

}  // namespace qs
