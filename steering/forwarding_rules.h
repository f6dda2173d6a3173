// The forwarding rules for CIDs QUIC-LB cannot route, in the order of
// draft-ietf-quic-load-balancers-21 "Load Balancer Forwarding":
//
//   1. long header: the table keyed by 4-tuple + SCID (learned_setup);
//   2. the table keyed by DCID (learned_cid);
//   3. the table keyed by 4-tuple (learned_tuple);
//   4. the fallback: the keyed hash of the 4-tuple or of the DCID
//      (SteeringConfig::fallback_hash; fallback_tuple or fallback_dcid for a
//      long header, fallback_unknown_cid for a short one), recording the
//      target it chose for a connection's first Initial.
//
// With the 4-tuple hash (the default with backends), an appliance that
// never saw a connection (after a crash, a return or a drain moved it
// there) routes its packets where the one that saw its first Initial did,
// as long as the 4-tuple has not changed: the tables are needed only for
// what the 4-tuple cannot follow, a NAT rebinding (the DCID learned) and a
// switch to another of the server's CIDs (the 4-tuple learned). With the
// DCID hash, a random-CID server's DCIDs hash elsewhere than the client's
// first one, and only the tables of the appliance that saw the handshake
// know where the connection went.
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
//
// Learning is bounded per connection: a setup entry may teach kSetupCredit
// DCIDs (a handshake needs the server's CID, and with a Retry or 0-RTT one
// or two more), a learned 4-tuple kTupleCredit (the CIDs a client switches
// to on one path). The credit lives in the entry's own word
// (ForwardingTable::spend), so the packets of a connection that has taught
// its share cost no extra cache line: they are still routed by that setup
// entry or 4-tuple, only not learned (counted as over_budget). Without the
// bound one client, with one Initial, could fill the established table by
// sending long headers with its SCID, or short headers from its 4-tuple,
// with a new DCID each, and once the table is full other clients' new
// connections would be hashed and split. What stays: a client that opens
// many connections (new SCIDs or ports) teaches a few entries for each, as
// that many real connections would, up to what one source may teach: an
// IPv4 address or IPv6 /64 adds at most max_entries_per_source entries per
// idle timeout (SourceBudget, counted as source_over_budget past that), so
// that one host opening connection after connection cannot fill the table
// either. A first Initial opens a setup entry only in a datagram of at
// least 1,200 octets of UDP payload, as RFC 9000 14.1 requires of clients
// (counted as undersized_initials otherwise).
//
// A reload that removes a backend leaves entries naming its slot, which the
// new resolver maps to no owner. A lookup that finds one treats it as a miss
// (counted as retired_hits) and goes on to the next rule, and never learns
// from it; the control path then has the slot's entries swept out
// (retire(): a pass over both tables on the sweeping lcore, counted as
// retired) and gives the slot to a new backend only once that pass is done
// (swept()), so that no entry of a removed backend is ever read as the new
// one's.
#pragma once

#include <cstdint>

#include "steering/forwarding_table.h"
#include "steering/owner_resolver.h"
#include "steering/packet_parser.h"
#include "steering/source_budget.h"
#include "steering/steering_config.h"
#include "steering/table_hash.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <vector>

namespace qs {

// An entry learning added to the established table, for the peers that
// share what this appliance learns (peer sync): its key, as the table files
// it, its target and learn credit.
struct LearnedEntry {
  std::uint64_t key;
  std::uint16_t target;
  std::uint8_t credit;
};
// Where a receiver collects one burst's LearnedEntries: at most two per
// packet (a DCID and a 4-tuple) of a burst of up to 64.
struct LearnedLog {
  static constexpr unsigned kCapacity = 128;
  unsigned n = 0;
  unsigned overflowed = 0;  // entries that found the log full (not shared)
  LearnedEntry entries[kCapacity];
};

// What learning did, added up by the caller per burst.
struct LearnCounts {
  std::uint32_t learned = 0;        // entries added to the established table
  std::uint32_t setups = 0;         // entries added to the setup table
  std::uint32_t setup_evicted = 0;  // setup entries replaced by newer ones (table full)
  std::uint32_t table_full = 0;     // established entries refused: the table is full
  std::uint32_t over_budget = 0;    // DCIDs not learned: their connection had taught its share
  std::uint32_t lost_races = 0;     // entries not written: other lcores changed the buckets meanwhile
  std::uint32_t retired_hits = 0;   // entries found that name a backend a reload removed (read as misses)
  std::uint32_t source_over_budget = 0;   // entries not learned: their source had taught its share (SourceBudget)
  std::uint32_t undersized_initials = 0;  // first Initials in datagrams under 1,200 octets: no setup entry
  LearnedLog* log = nullptr;  // where established entries added go, when peers share them (else null)
};

// The two tables a data path shares between its receiving lcores (or a tool
// replaying a capture keeps).
class ForwardingTables {
 public:
  // DCIDs one setup entry, and one learned 4-tuple, may add to the
  // established table (see the top of this file).
  static constexpr unsigned kSetupCredit = 4;
  static constexpr unsigned kTupleCredit = ForwardingTable::kMaxCredit;
  static_assert(kMaxBackends <= ForwardingTable::kMaxTarget + 1u, "a table word holds any backend slot");
  static_assert(kTargetSpace == ForwardingTable::kMaxTarget + 1u, "a resolver answers for any target a table holds");

  // `key`: keys the tables' hashes. quicsteer draws one at random at each
  // start; quicsteer-cid classify uses the profile's fallback key. Only
  // which bucket an entry takes depends on it, so the two differ at most in
  // which entries a full table refuses or evicts. Throws
  // std::invalid_argument on a size of 0, std::bad_alloc when memory has no
  // room.
  ForwardingTables(const ForwardingConfig& config, const std::array<std::uint8_t, 16>& key,
                   SlotMemory memory = heap_slot_memory())
      : established_(config.max_entries, ForwardingTable::Policy::kKeep, memory, refresh_ms(config)),
        setup_(config.max_setup_entries, ForwardingTable::Policy::kEvictOldest, memory, refresh_ms(config)),
        sources_(config.max_entries_per_source, config.idle_timeout_ms, memory),
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
           ForwardingTable::memory_bytes(config.max_setup_entries) +
           SourceBudget::kBuckets * sizeof(std::uint64_t);
  }

  ForwardingTable& established() { return established_; }
  ForwardingTable& setup() { return setup_; }
  const ForwardingTable& established() const { return established_; }
  const ForwardingTable& setup() const { return setup_; }

  // The tables' keys: a DCID; a 4-tuple; a 4-tuple and a long header's SCID
  // (long_header_keys, below, with the 4-tuple's).
  std::uint64_t cid_key(const std::uint8_t* frame, const ParsedPacket& p) const {
    return table_hash(seed_, p.dcid(frame), p.dcid_len);
  }
  std::uint64_t tuple_key(const std::uint8_t* frame, const ParsedPacket& p) const {
    std::uint8_t input[38];
    return table_hash(seed_ ^ kTupleSeed, input, resolver_detail::tuple_octets(frame, p, input));
  }

  // The source a packet's entries are charged to: its IPv4 address, or
  // its IPv6 address's /64 (SourceBudget).
  std::uint64_t source_key(const std::uint8_t* frame, const ParsedPacket& p) const {
    std::uint8_t input[9];
    input[0] = p.ip_version;
    std::memcpy(input + 1, p.src_addr(frame), p.ip_version == 6 ? 8 : 4);
    return table_hash(seed_ ^ kSourceSeed, input, p.ip_version == 6 ? 9 : 5);
  }

  // RFC 9000 14.1: a client pads every datagram that carries an Initial to
  // at least this much UDP payload; only such a datagram opens a setup
  // entry, so that a flood of set-ups costs its sender 1,200 octets each.
  static constexpr std::size_t kMinInitialDatagram = 1200;

  // Starts loading what the lookup of this DCID key reads first.
  void prefetch(std::uint64_t cid_key) const { established_.prefetch(cid_key); }

  // A long header's other keys. A burst computes them with its DCID keys
  // and prefetches their buckets, because a new connection's Initial looks
  // up all three (its setup entry, its DCID, its 4-tuple), each a miss in a
  // large table: asked for one after the other, they cost one round trip
  // each per new connection.
  struct LongHeaderKeys {
    std::uint64_t setup;
    std::uint64_t tuple;
  };
  LongHeaderKeys long_header_keys(const std::uint8_t* frame, const ParsedPacket& p) const {
    std::uint8_t input[38 + 1 + 255];
    std::size_t n = resolver_detail::tuple_octets(frame, p, input);
    const std::uint64_t tuple = table_hash(seed_ ^ kTupleSeed, input, n);
    input[n++] = p.scid_len;
    std::memcpy(input + n, p.scid(frame), p.scid_len);
    return {table_hash(seed_ ^ kSetupSeed, input, n + p.scid_len), tuple};
  }
  void prefetch(const LongHeaderKeys& keys) const {
    setup_.prefetch(keys.setup);
    established_.prefetch(keys.tuple);
  }

  // Removes idle entries of both tables, up to max_buckets of each. Returns
  // how many went. One caller at a time.
  unsigned expire(std::uint32_t now_ms, unsigned max_buckets) {
    return established_.expire(now_ms, idle_ms_, max_buckets) + setup_.expire(now_ms, idle_ms_, max_buckets);
  }

  // Retirement of targets (backend slots a reload removed; see the top of
  // this file). Control path: retire() once no lcore resolves with a
  // resolver that still routes to them (after the reload's grace period);
  // it returns the generation whose sweep removes their entries. Once
  // swept(generation), forget() them before a resolver routes to them
  // again.
  std::uint64_t retire(const std::vector<std::uint16_t>& targets) {
    for (const std::uint16_t t : targets) retiring_.add(t);
    // Release: a sweep pass that reads this generation sees the targets.
    return retire_requested_.fetch_add(1, std::memory_order_release) + 1;
  }
  bool swept(std::uint64_t generation) const { return retire_done_.load(std::memory_order_acquire) >= generation; }
  void forget(const std::vector<std::uint16_t>& targets) {
    for (const std::uint16_t t : targets) retiring_.remove(t);
  }
  // The sweeping lcore, once per housekeeping tick: whether a sweep is due.
  bool retirement_pending() const {
    return retire_requested_.load(std::memory_order_relaxed) != retire_done_.load(std::memory_order_relaxed);
  }
  // Sweeps the next max_buckets buckets of both tables of every retiring
  // target's entries; returns how many went. A pass covers every bucket
  // and completes the generation requested when it began. The same one
  // caller as expire().
  unsigned sweep_retired(unsigned max_buckets) {
    if (retire_cursor_ == 0) retire_pass_ = retire_requested_.load(std::memory_order_acquire);
    const std::uint32_t buckets = std::max(established_.bucket_count(), setup_.bucket_count());
    const unsigned n = std::min<std::uint32_t>(max_buckets, buckets - retire_cursor_);
    const unsigned removed =
        established_.remove_targets(retiring_, retire_cursor_, n) + setup_.remove_targets(retiring_, retire_cursor_, n);
    retire_cursor_ += n;
    if (retire_cursor_ == buckets) {
      retire_cursor_ = 0;
      retire_done_.store(retire_pass_, std::memory_order_release);
    }
    return removed;
  }

  // The target the established table learned for a 4-tuple given as
  // tuple_octets() lays one out (input, n octets), or none; learns nothing.
  // For a packet about a connection that is not one of its own, such as an
  // ICMP error quoting a server's datagram (PacketClassifier::route_quoted).
  Resolution find_tuple(const OwnerResolver& r, const std::uint8_t* input, std::size_t n, std::uint32_t now_ms) {
    const ForwardingTable::Entry e = established_.find_entry(table_hash(seed_ ^ kTupleSeed, input, n), now_ms);
    return e.found() ? r.resolution(e.target(), ResolveMethod::kLearnedTuple) : Resolution{};
  }

  // Routes a QUIC packet with a DCID that QUIC-LB did not route, learning as
  // it goes (see the top of this file).
  Resolution resolve(const OwnerResolver& r, const std::uint8_t* frame, const ParsedPacket& p,
                     std::uint32_t now_ms, LearnCounts& counts) {
    return resolve(r, frame, p, cid_key(frame, p), nullptr, now_ms, counts);
  }
  // The same, with the DCID's key (cid_key) already known, and a long
  // header's other keys (nullptr: computed here): a burst computes its keys
  // and prefetches their buckets first.
  Resolution resolve(const OwnerResolver& r, const std::uint8_t* frame, const ParsedPacket& p, std::uint64_t cid,
                     const LongHeaderKeys* keys, std::uint32_t now_ms, LearnCounts& counts) {
    if (p.form == QuicForm::kLong) {
      const LongHeaderKeys own = keys != nullptr ? *keys : long_header_keys(frame, p);
      const std::uint64_t setup = own.setup;
      ForwardingTable::Entry entry = setup_.find_entry(setup, now_ms);
      if (entry.found()) {
        const std::uint16_t target = entry.target();
        const Resolution learned = r.resolution(target, ResolveMethod::kLearnedSetup);
        if (learned.routed()) {
          // The 4-tuple is learned with each new DCID (the rest of a
          // handshake's packets find theirs present and skip it).
          if (learn_from(setup_, entry, frame, p, cid, false, now_ms, counts))
            learn(frame, p, own.tuple, target, now_ms, counts, kTupleCredit);
          return learned;
        }
        ++counts.retired_hits;
      }
      const Resolution known = resolve_known(r, frame, p, cid, &own.tuple, now_ms, counts);
      if (known.routed()) return known;
      const std::uint16_t hashed = r.fallback_target(frame, p);
      if (p.opens_connection && udp_payload(frame, p) < kMinInitialDatagram) {
        ++counts.undersized_initials;
      } else if (p.opens_connection) {
        switch (setup_.insert(setup, hashed, now_ms, kSetupCredit)) {
          case ForwardingTable::Insert::kInserted: ++counts.setups; break;
          case ForwardingTable::Insert::kEvicted: ++counts.setups; ++counts.setup_evicted; break;
          case ForwardingTable::Insert::kLost: ++counts.lost_races; break;
          case ForwardingTable::Insert::kPresent:
          case ForwardingTable::Insert::kFull:
          case ForwardingTable::Insert::kRefused: break;
        }
      }
      return r.resolution(hashed, r.fallback_method());
    }
    const Resolution known = resolve_known(r, frame, p, cid, nullptr, now_ms, counts);
    if (known.routed()) return known;
    return r.resolution(r.fallback_target(frame, p), ResolveMethod::kFallbackUnknownCid);
  }

 private:
  static constexpr std::uint64_t kTupleSeed = 0x5475706c65ull;  // keys of different kinds never meet by design
  static constexpr std::uint64_t kSetupSeed = 0x5365747570ull;
  static constexpr std::uint64_t kSourceSeed = 0x536f75726365ull;

  // The UDP payload's length, from the UDP header (which the parser checked
  // against the IP packet).
  static std::size_t udp_payload(const std::uint8_t* frame, const ParsedPacket& p) {
    const std::uint8_t* udp = frame + p.l4_offset;
    return std::size_t(udp[4] << 8 | udp[5]) - 8;
  }

  // `tuple`: the 4-tuple's key when the caller has it (nullptr: computed
  // here, only when the DCID is not known).
  Resolution resolve_known(const OwnerResolver& r, const std::uint8_t* frame, const ParsedPacket& p,
                           std::uint64_t cid, const std::uint64_t* tuple_key_known, std::uint32_t now_ms,
                           LearnCounts& counts) {
    const std::uint16_t target = established_.find(cid, now_ms);
    if (target != ForwardingTable::kNone) {
      const Resolution learned = r.resolution(target, ResolveMethod::kLearnedCid);
      if (learned.routed()) return learned;
      ++counts.retired_hits;
    }
    ForwardingTable::Entry tuple =
        established_.find_entry(tuple_key_known != nullptr ? *tuple_key_known : tuple_key(frame, p), now_ms);
    if (tuple.found()) {
      const Resolution learned = r.resolution(tuple.target(), ResolveMethod::kLearnedTuple);
      if (learned.routed()) {
        learn_from(established_, tuple, frame, p, cid, true, now_ms, counts);
        return learned;
      }
      ++counts.retired_hits;
    }
    return {};
  }

  // Learns cid -> the target of `teacher` (an entry of `table`) if the
  // teacher has credit left, and takes one credit when the DCID was new (a
  // DCID already learned costs nothing). `missing`: the caller has just
  // looked the DCID up and not found it. True when the DCID was learned.
  // Lcores learning from one teacher at once may each see the last credit
  // and insert: a connection's packets normally reach one lcore (RSS), and
  // the overshoot is at most one per lcore.
  bool learn_from(ForwardingTable& table, ForwardingTable::Entry& teacher, const std::uint8_t* frame,
                  const ParsedPacket& p, std::uint64_t cid, bool missing, std::uint32_t now_ms, LearnCounts& counts) {
    if (teacher.credit() == 0) {
      // Present already is the common case (the rest of a handshake's
      // packets) and not refused: only a DCID the table lacks is counted.
      // The lookup costs a line only once a connection has spent its
      // credit, which real ones rarely do.
      if (missing || established_.find(cid, now_ms) == ForwardingTable::kNone) ++counts.over_budget;
      return false;
    }
    if (!learn(frame, p, cid, teacher.target(), now_ms, counts)) return false;
    table.spend(teacher);
    return true;
  }

  // Records key -> target in the established table, charged to the
  // packet's source; true when the entry was added. A source over its
  // budget adds nothing. The source is looked at only when the key would
  // be added: the common case, a key present already (the rest of a
  // handshake's packets), costs nothing more.
  bool learn(const std::uint8_t* frame, const ParsedPacket& p, std::uint64_t key, std::uint16_t target,
             std::uint32_t now_ms, LearnCounts& counts, unsigned credit = 0) {
    std::uint64_t source = 0;
    const auto admit = [&] {
      if (!sources_.bounded()) return true;
      source = source_key(frame, p);
      return sources_.allows(source, now_ms);
    };
    switch (established_.insert(key, target, now_ms, credit, admit)) {
      case ForwardingTable::Insert::kInserted:
        ++counts.learned;
        sources_.charge(source, now_ms);
        if (counts.log != nullptr) [[unlikely]] {
          LearnedLog& log = *counts.log;
          if (log.n < LearnedLog::kCapacity)
            log.entries[log.n++] = {key, target, std::uint8_t(credit)};
          else
            ++log.overflowed;
        }
        return true;
      case ForwardingTable::Insert::kRefused: ++counts.source_over_budget; break;
      case ForwardingTable::Insert::kFull: ++counts.table_full; break;
      case ForwardingTable::Insert::kLost: ++counts.lost_races; break;
      case ForwardingTable::Insert::kPresent:
      case ForwardingTable::Insert::kEvicted: break;
    }
    return false;
  }

  ForwardingTable established_;
  ForwardingTable setup_;
  SourceBudget sources_;
  std::uint32_t idle_ms_;
  std::uint64_t seed_ = 0;
  // Retirement: the control path's targets and generations, the sweeping
  // lcore's cursor (in buckets of the larger table) and the generation its
  // pass completes.
  ForwardingTable::TargetSet retiring_;
  std::atomic<std::uint64_t> retire_requested_{0};
  std::atomic<std::uint64_t> retire_done_{0};
  std::uint32_t retire_cursor_ = 0;
  std::uint64_t retire_pass_ = 0;
};

}  // namespace qs
