// The forwarding rules for CIDs QUIC-LB cannot route, in the order of
// draft-ietf-quic-load-balancers-21 "Load Balancer Forwarding":
//
//   1. long header: the table keyed by 4-tuple + SCID (learned_setup);
//   2. the table keyed by DCID (learned_cid);
//   3. the table keyed by 4-tuple (learned_tuple);
//   4. the fallback: the keyed hash of the DCID (fallback_dcid for a long
//      header, fallback_unknown_cid for a short one), recording the owner it
//      chose for a connection's first Initial.
//
// What is learned, from the client's own packets (the appliance sees only
// client -> server; servers answer directly):
//   - a first Initial (client-chosen DCID, hashed) records (4-tuple, client
//     SCID) -> owner in the setup table;
//   - the client's next long-header packets carry the same SCID from the
//     same 4-tuple but the DCID the server chose: they hit the setup table,
//     and their DCID and 4-tuple are recorded in the established table;
//   - from then on short headers hit their DCID (also after a NAT rebinding:
//     same DCID, new 4-tuple), and a switch to another of the server's CIDs on
//     the same 4-tuple hits the 4-tuple, whose owner the new DCID then learns.
// A connection's first Initial is routed by the hash as without tables, so
// every packet of a connection that does not migrate to a new CID lands on
// the owner of its first Initial. What the tables record is the resolver's
// target (OwnerResolver): the owner, or with backends the backend, so that a
// connection keeps its server, not only its lcore. An active migration (new CID and new
// 4-tuple at once) cannot be followed without QUIC-LB CIDs: it is routed by
// the hash and counted as fallback_unknown_cid.
//
// Under a flood of Initials with random CIDs from random 4-tuples, each
// Initial adds one setup entry (evicting that bucket's oldest); entries reach
// the established table only from a second packet with the same 4-tuple and
// SCID, and never push out established ones (a full table refuses them,
// counted as table_full, and the packet is hashed).
#pragma once

#include <cstdint>

#include "steering/forwarding_table.h"
#include "steering/owner_resolver.h"
#include "steering/packet_parser.h"
#include "steering/steering_config.h"
#include "steering/table_hash.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace qs {

// What learning did, added up by the caller per burst.
struct LearnCounts {
  std::uint32_t learned = 0;        // entries added to the established table
  std::uint32_t setups = 0;         // entries added to the setup table
  std::uint32_t setup_evicted = 0;  // setup entries replaced by newer ones (table full)
  std::uint32_t table_full = 0;     // established entries refused: the table is full
};

// The two tables a data path shares between its receiving lcores (or a tool
// replaying a capture keeps).
class ForwardingTables {
 public:
  // `key`: keys the tables' hashes (the profile's fallback key, so that the
  // data path and quicsteer-cid classify agree). Throws
  // std::invalid_argument on a size of 0, std::bad_alloc when memory has no
  // room.
  ForwardingTables(const ForwardingConfig& config, const std::array<std::uint8_t, 16>& key,
                   SlotMemory memory = heap_slot_memory())
      : established_(config.max_entries, ForwardingTable::Policy::kKeep, memory, refresh_ms(config)),
        setup_(config.max_setup_entries, ForwardingTable::Policy::kEvictOldest, memory, refresh_ms(config)),
        idle_ms_(config.idle_timeout_ms) {
    const SipHashKey k = SipHashKey::from_bytes(key);
    // Not the fallback's key itself: a table hash must tell nothing about
    // the owner the fallback picks.
    static constexpr std::uint8_t kLabel[] = "quicsteer forwarding tables";
    seed_ = siphash13(k, kLabel, sizeof kLabel);
  }

  // A sixteenth of the idle timeout, at most a second: an entry may expire
  // that much early, and a busy one is written that rarely.
  static std::uint32_t refresh_ms(const ForwardingConfig& config) {
    return std::min<std::uint32_t>(1000, std::max<std::uint32_t>(1, config.idle_timeout_ms / 16));
  }

  static std::size_t memory_bytes(const ForwardingConfig& config) {
    return ForwardingTable::memory_bytes(config.max_entries) +
           ForwardingTable::memory_bytes(config.max_setup_entries);
  }

  ForwardingTable& established() { return established_; }
  ForwardingTable& setup() { return setup_; }
  const ForwardingTable& established() const { return established_; }
  const ForwardingTable& setup() const { return setup_; }
  std::uint32_t idle_timeout_ms() const { return idle_ms_; }

  // The tables' keys: a DCID; a 4-tuple; a 4-tuple and a long header's SCID.
  std::uint64_t cid_key(const std::uint8_t* frame, const ParsedPacket& p) const {
    return table_hash(seed_, p.dcid(frame), p.dcid_len);
  }
  std::uint64_t tuple_key(const std::uint8_t* frame, const ParsedPacket& p) const {
    std::uint8_t input[38];
    return table_hash(seed_ ^ kTupleSeed, input, resolver_detail::tuple_octets(frame, p, input));
  }
  std::uint64_t setup_key(const std::uint8_t* frame, const ParsedPacket& p) const {
    std::uint8_t input[38 + 1 + 255];
    std::size_t n = resolver_detail::tuple_octets(frame, p, input);
    input[n++] = p.scid_len;
    std::memcpy(input + n, p.scid(frame), p.scid_len);
    return table_hash(seed_ ^ kSetupSeed, input, n + p.scid_len);
  }

  // Starts loading what the lookup of this DCID key reads first.
  void prefetch(std::uint64_t cid_key) const { established_.prefetch(cid_key); }

  // Removes idle entries of both tables, up to max_buckets of each. Returns
  // how many went. One caller at a time.
  unsigned expire(std::uint32_t now_ms, unsigned max_buckets) {
    return established_.expire(now_ms, idle_ms_, max_buckets) + setup_.expire(now_ms, idle_ms_, max_buckets);
  }

  // Routes a QUIC packet with a DCID that QUIC-LB did not route, learning as
  // it goes (see the top of this file).
  Resolution resolve(const OwnerResolver& r, const std::uint8_t* frame, const ParsedPacket& p,
                     std::uint32_t now_ms, LearnCounts& counts) {
    return resolve(r, frame, p, cid_key(frame, p), now_ms, counts);
  }
  // The same, with the DCID's key (cid_key) already known: a burst computes
  // its keys and prefetches their buckets first.
  Resolution resolve(const OwnerResolver& r, const std::uint8_t* frame, const ParsedPacket& p, std::uint64_t cid,
                     std::uint32_t now_ms, LearnCounts& counts) {
    if (p.form == QuicForm::kLong) {
      const std::uint64_t setup = setup_key(frame, p);
      const std::uint16_t owner = setup_.find(setup, now_ms);
      if (owner != ForwardingTable::kNone) {
        // The 4-tuple is learned with each new DCID (the rest of a
        // handshake's packets find theirs present and skip it).
        if (learn(cid, owner, now_ms, counts) == ForwardingTable::Insert::kInserted)
          learn(tuple_key(frame, p), owner, now_ms, counts);
        return r.resolution(owner, ResolveMethod::kLearnedSetup);
      }
      const Resolution known = resolve_known(r, frame, p, cid, now_ms, counts);
      if (known.routed()) return known;
      const std::uint16_t hashed = r.fallback_target_for_dcid(p.dcid(frame), p.dcid_len);
      if (p.opens_connection) {
        switch (setup_.insert(setup, hashed, now_ms)) {
          case ForwardingTable::Insert::kInserted: ++counts.setups; break;
          case ForwardingTable::Insert::kEvicted: ++counts.setups; ++counts.setup_evicted; break;
          case ForwardingTable::Insert::kPresent:
          case ForwardingTable::Insert::kFull: break;
        }
      }
      return r.resolution(hashed, ResolveMethod::kFallbackDcid);
    }
    const Resolution known = resolve_known(r, frame, p, cid, now_ms, counts);
    if (known.routed()) return known;
    return r.resolution(r.fallback_target_for_dcid(p.dcid(frame), p.dcid_len), ResolveMethod::kFallbackUnknownCid);
  }

 private:
  static constexpr std::uint64_t kTupleSeed = 0x5475706c65ull;  // keys of different kinds never meet by design
  static constexpr std::uint64_t kSetupSeed = 0x5365747570ull;

  Resolution resolve_known(const OwnerResolver& r, const std::uint8_t* frame, const ParsedPacket& p,
                           std::uint64_t cid, std::uint32_t now_ms, LearnCounts& counts) {
    std::uint16_t owner = established_.find(cid, now_ms);
    if (owner != ForwardingTable::kNone) return r.resolution(owner, ResolveMethod::kLearnedCid);
    owner = established_.find(tuple_key(frame, p), now_ms);
    if (owner != ForwardingTable::kNone) {
      learn(cid, owner, now_ms, counts);
      return r.resolution(owner, ResolveMethod::kLearnedTuple);
    }
    return {};
  }

  ForwardingTable::Insert learn(std::uint64_t key, std::uint16_t owner, std::uint32_t now_ms, LearnCounts& counts) {
    const ForwardingTable::Insert result = established_.insert(key, owner, now_ms);
    switch (result) {
      case ForwardingTable::Insert::kInserted: ++counts.learned; break;
      case ForwardingTable::Insert::kFull: ++counts.table_full; break;
      case ForwardingTable::Insert::kPresent:
      case ForwardingTable::Insert::kEvicted: break;
    }
    return result;
  }

  ForwardingTable established_;
  ForwardingTable setup_;
  std::uint32_t idle_ms_;
  std::uint64_t seed_ = 0;
};

}  // namespace qs
