// The owner's per-packet bookkeeping: find (or create) the packet's
// connection in this owner's shard and follow a change of 4-tuple, a burst at
// a time (run_connection_burst). Shared by
// the owner lcores and the rte_distributor baseline, which must do exactly
// the same work to be a fair comparison.
#pragma once

#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataplane/fastpath/connection_table.h"
#include "dataplane/fastpath/lcore_stats.h"
#include "dataplane/fastpath/steer_meta.h"
#include "steering/siphash.h"

namespace qs {

// One owner's connection state: its CIDs, and the connections they belong
// to. A connection's entry is keyed by what ties its CIDs together:
//   - a CID first seen in a long header (Initial, 0-RTT, Handshake): the
//     keyed hash of the 4-tuple and the SCID, which stay the same through a
//     client's handshake, so its original DCID and the server's CIDs it moves
//     to are one connection;
//   - a CID first seen in a short header: the CID itself (nothing ties it to
//     another; after an active migration it is a connection of its own).
// A migration is a known connection arriving from a new 4-tuple, whichever of
// its CIDs it uses; a connection's entry stays as long as one of its CIDs is
// in use (each refreshes it once per refresh_tsc).
struct ConnectionShard {
  ConnectionTable* cids = nullptr;
  ConnectionTable* connections = nullptr;
  std::uint64_t seed = 0;          // keys CID and connection hashes
  std::uint64_t refresh_tsc = 1;   // a quarter of the idle timeout
};

enum class Tracked : std::uint8_t {
  kNotQuic,    // no DCID to track
  kKnown,      // a known CID, same 4-tuple
  kNew,        // a new connection (and its first CID)
  kNewCid,     // a new CID of a known connection
  kMigrated,   // a known connection arrived from a new 4-tuple
  kNewCidMigrated,  // both at once: a new CID of a known connection, from a new 4-tuple
  kUntracked,  // the shard is full
  kUntrackedLongDcid,  // a DCID longer than a table key (an unknown version's, up to 255 octets)
};

// A 4-tuple, whole: what a long header's connection key is computed from
// (connection_key_of). An entry records less (FrameTuple::record).
struct FourTuple {
  std::uint8_t src_addr[16];  // IPv4 uses the first 4 octets
  std::uint8_t dst_addr[16];
  std::uint16_t src_port;     // network byte order, as on the wire
  std::uint16_t dst_port;
  std::uint8_t ipv6;
};

// A 4-tuple's addresses as an entry records them, in 8 octets: IPv4's source
// and destination as they are (adjacent in the header, as IPv6's are);
// IPv6's 32 as a 64-bit digest keyed by the shard's seed. The whole tuple
// would take an entry past one cache line (Connection). The cost is that two
// IPv6 address pairs with one digest would hide a migration between them
// from the owner's count: at 2^-64 per change, and not to be aimed at
// without the seed. Nothing routes by the record: the CID decides the owner
// and the backend either way.
inline std::uint64_t tuple_addresses(const std::uint8_t* addresses, bool ipv6, std::uint64_t seed) {
  using connection_table_detail::hash_mix;
  using connection_table_detail::hash_word;
  if (!ipv6) return hash_word(addresses);
  // Two independent products, then one: the chain is two multiplies long.
  const std::uint64_t a = hash_mix(hash_word(addresses) ^ seed, hash_word(addresses + 8) ^ 0xa0761d6478bd642full);
  const std::uint64_t b = hash_mix(hash_word(addresses + 16) ^ ~seed, hash_word(addresses + 24) ^ 0xe7037ed1a0b428dbull);
  return hash_mix(a ^ 0x8ebc6af09c88c6e3ull, b ^ seed);
}

// A packet's 4-tuple where its frame holds it. The per-packet question is
// only whether it still equals the one on record, so it is compared in place
// with fixed-size loads; it is recorded (record) only when it differs. A
// FourTuple staged on the stack with a memset and small copies and then
// compared whole costs a store-forwarding stall on every packet.
struct FrameTuple {
  const std::uint8_t* l3;
  const std::uint8_t* udp;
  bool ipv6;

  FrameTuple(const std::uint8_t* frame, const SteerMeta& meta)
      : l3(frame + meta.l3_offset()), udp(frame + meta.l4_offset), ipv6((meta.flags & kSteerMetaIpv6) != 0) {}
  FrameTuple(rte_mbuf* m, const SteerMeta& meta) : FrameTuple(rte_pktmbuf_mtod(m, const std::uint8_t*), meta) {}

  // The source and destination addresses, adjacent in either header.
  const std::uint8_t* addresses() const { return l3 + (ipv6 ? 8 : 12); }
  std::uint32_t ports() const {
    std::uint32_t p;
    std::memcpy(&p, udp, 4);
    return p;
  }

  // Whether this is the 4-tuple `c` records (`seed`: its shard's). The
  // ports and the family first: an IPv6 packet on its recorded ports pays
  // for the digest, nothing else does.
  bool matches(const Connection& c, std::uint64_t seed) const {
    if (ports() != c.tuple_ports || c.tuple_ipv6 != std::uint8_t(ipv6)) return false;
    return tuple_addresses(addresses(), ipv6, seed) == c.tuple_addresses;
  }

  void record(Connection& c, std::uint64_t seed) const {
    c.tuple_ipv6 = std::uint8_t(ipv6);
    c.tuple_ports = ports();
    c.tuple_addresses = tuple_addresses(addresses(), ipv6, seed);
  }

  void copy_to(FourTuple& t) const {
    std::memset(&t, 0, sizeof t);
    if (ipv6) {
      t.ipv6 = 1;
      std::memcpy(t.src_addr, l3 + 8, 16);
      std::memcpy(t.dst_addr, l3 + 24, 16);
    } else {
      std::memcpy(t.src_addr, l3 + 12, 4);
      std::memcpy(t.dst_addr, l3 + 16, 4);
    }
    std::memcpy(&t.src_port, udp, 2);
    std::memcpy(&t.dst_port, udp + 2, 2);
  }
};

inline void copy_tuple_record(Connection& to, const Connection& from) {
  to.tuple_ipv6 = from.tuple_ipv6;
  to.tuple_ports = from.tuple_ports;
  to.tuple_addresses = from.tuple_addresses;
}

inline const std::uint8_t* dcid_of(rte_mbuf* m, const SteerMeta& meta) {
  return rte_pktmbuf_mtod_offset(m, const std::uint8_t*, meta.dcid_offset);
}

// The key of the connection a new CID belongs to (see ConnectionShard).
inline std::uint64_t connection_key_of(const ConnectionShard& shard, rte_mbuf* m, const SteerMeta& meta,
                                       const FourTuple& t) {
  const SipHashKey key{shard.seed, ~shard.seed};
  const std::uint8_t* cid = dcid_of(m, meta);
  if (!(meta.flags & kSteerMetaLongHeader)) return siphash13(key, cid, meta.dcid_len);
  std::uint8_t input[sizeof(FourTuple) + 1 + 255];
  std::memcpy(input, &t, sizeof t);
  const std::uint8_t scid_len = cid[meta.dcid_len];
  input[sizeof t] = scid_len;
  std::memcpy(input + sizeof t + 1, cid + meta.dcid_len + 1, scid_len);
  return siphash13(key, input, sizeof t + 1 + scid_len);
}

// A connection key is the connections table's 8-octet "CID".
inline std::uint32_t connection_hash(const ConnectionShard& shard, std::uint64_t key) {
  std::uint8_t bytes[8];
  std::memcpy(bytes, &key, 8);
  return ConnectionTable::hash_cid(bytes, 8, shard.seed);
}

inline Connection* find_connection(ConnectionShard& shard, std::uint64_t key, std::uint64_t now, bool create,
                                   bool& created) {
  std::uint8_t bytes[8];
  std::memcpy(bytes, &key, 8);
  const std::uint32_t h = connection_hash(shard, key);
  created = false;
  return create ? shard.connections->find_or_insert(h, bytes, 8, now, created) : shard.connections->find(h, bytes, 8);
}

// What track_connection does when a CID is new or its 4-tuple changed: the
// rare outcomes, out of line so that the common one (a known CID on its
// recorded 4-tuple) inlines into the burst loop without their registers.
// `known_key`: the new CID's connection key when the burst computed it
// (prefetch_new_connections), else nullptr.
[[gnu::noinline]] inline Tracked track_connection_change(ConnectionShard& shard, Connection* cid, bool created,
                                                        const FrameTuple& seen, rte_mbuf* m, const SteerMeta& meta,
                                                        std::uint64_t now, const std::uint64_t* known_key) {
  const std::uint64_t seed = shard.seed;
  if (created) {
    seen.record(*cid, seed);
    if (known_key != nullptr) {
      cid->connection_key = *known_key;
    } else {
      FourTuple t;
      seen.copy_to(t);
      cid->connection_key = connection_key_of(shard, m, meta, t);
    }
    cid->connection_refreshed_tsc = now;
    bool new_connection = false;
    Connection* conn = find_connection(shard, cid->connection_key, now, true, new_connection);
    if (conn == nullptr || new_connection) {
      if (conn != nullptr) copy_tuple_record(*conn, *cid);
      return Tracked::kNew;  // (without room for the connection, the CID is counted as one)
    }
    conn->last_seen_tsc = now;
    if (seen.matches(*conn, seed)) return Tracked::kNewCid;
    copy_tuple_record(*conn, *cid);
    return Tracked::kNewCidMigrated;
  }
  seen.record(*cid, seed);
  bool unused;
  Connection* conn = find_connection(shard, cid->connection_key, now, false, unused);
  // Another of its CIDs may have shown the connection's move already.
  if (conn != nullptr && seen.matches(*conn, seed)) return Tracked::kKnown;
  if (conn != nullptr) {
    copy_tuple_record(*conn, *cid);
    conn->last_seen_tsc = now;
    cid->connection_refreshed_tsc = now;
  }
  return Tracked::kMigrated;
}

// The connection's own last-seen time, written once per refresh period
// rather than per packet (see ConnectionShard::refresh_tsc).
[[gnu::noinline]] inline void refresh_connection(ConnectionShard& shard, Connection* cid, std::uint64_t now) {
  cid->connection_refreshed_tsc = now;
  bool unused;
  if (Connection* conn = find_connection(shard, cid->connection_key, now, false, unused)) conn->last_seen_tsc = now;
}

// A flow's hash for a packet that is not QUIC (UDP to another port): its
// addresses and ports, never 0, so that ipip's and vxlan's outer entropy
// (the VXLAN source port, the IPv6 flow label) spreads such flows too.
inline std::uint32_t tuple_entropy(const std::uint8_t* frame, const SteerMeta& meta, std::uint64_t seed) {
  const std::uint8_t* ip = frame + meta.l3_offset();
  const bool v6 = (meta.flags & kSteerMetaIpv6) != 0;
  const std::uint8_t* addresses = ip + (v6 ? 8 : 12);
  std::uint64_t h = seed;
  for (unsigned at = 0; at < (v6 ? 32u : 8u); at += 8) {
    std::uint64_t w;
    std::memcpy(&w, addresses + at, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
  }
  std::uint32_t ports;
  std::memcpy(&ports, frame + meta.l4_offset, 4);
  h = (h ^ ports) * 0xc2b2ae3d27d4eb4full;
  return std::uint32_t(h ^ h >> 32) | 1;
}

// `hash` is ConnectionTable::hash_cid of the packet's DCID (for a packet
// that is not QUIC, tuple_entropy); `frame` is m's data (rte_pktmbuf_mtod), which the
// burst loop has already located; `known_key` as track_connection_change's.
[[gnu::always_inline]] inline Tracked track_connection(ConnectionShard& shard, std::uint32_t hash, rte_mbuf* m,
                                                       const std::uint8_t* frame, const SteerMeta& meta,
                                                       std::uint64_t now, const std::uint64_t* known_key = nullptr) {
  if (!(meta.flags & kSteerMetaQuic)) return Tracked::kNotQuic;
  if (meta.dcid_len > kMaxCidLen) return Tracked::kUntrackedLongDcid;
  bool created = false;
  Connection* cid = shard.cids->find_or_insert(hash, frame + meta.dcid_offset, meta.dcid_len, now, created);
  if (cid == nullptr) return Tracked::kUntracked;
  const FrameTuple seen(frame, meta);
  Tracked outcome = Tracked::kKnown;
  if (created || !seen.matches(*cid, shard.seed)) [[unlikely]]
    outcome = track_connection_change(shard, cid, created, seen, m, meta, now, known_key);
  if (now - cid->connection_refreshed_tsc > shard.refresh_tsc) [[unlikely]]
    refresh_connection(shard, cid, now);
  cid->last_seen_tsc = now;
  return outcome;
}

inline constexpr unsigned kTrackedKinds = unsigned(Tracked::kUntrackedLongDcid) + 1;

// A burst's outcomes, tallied per packet by index (no branch on the outcome)
// and added to the counters once per burst.
inline void count_tracked(OwnerStats& s, const unsigned (&tally)[kTrackedKinds]) {
  const unsigned new_connections = tally[unsigned(Tracked::kNew)];
  const unsigned new_cids = new_connections + tally[unsigned(Tracked::kNewCid)] +
                            tally[unsigned(Tracked::kNewCidMigrated)];
  const unsigned migrations = tally[unsigned(Tracked::kMigrated)] + tally[unsigned(Tracked::kNewCidMigrated)];
  if (new_connections) s.connections.add(new_connections);
  if (new_cids) s.cids.add(new_cids);
  if (migrations) s.migrations.add(migrations);
  if (tally[unsigned(Tracked::kUntracked)]) s.connections_untracked.add(tally[unsigned(Tracked::kUntracked)]);
  if (tally[unsigned(Tracked::kUntrackedLongDcid)])
    s.connections_untracked_long_dcid.add(tally[unsigned(Tracked::kUntrackedLongDcid)]);
}

// The connection stage of one burst, then `act(m, frame, meta, outcome, hash)`
// on each packet in order (frame: m's data, located once for the burst;
// outcome: what track_connection found; hash: the
// DCID's ConnectionTable::hash_cid, 0 when not QUIC). `metas[i]` is the SteerMeta of pkts[i] when the receiving lcore is
// this one and has it at hand (a warm burst: the classifier has just read
// the headers and the DCID on this lcore, and the mbufs were not written);
// nullptr for a burst that came over a ring (cold: the receiver left each
// packet's SteerMeta in its mbuf, see hand_off). A cold burst takes three
// passes, so that the cache misses of each pass overlap instead of costing
// one round trip per packet:
//   1. mbuf headers. Mbufs that came over a ring were last written by the
//      receiving lcore; here their first line (data_off, pkt_len and the
//      SteerMeta) is cold, and the frame cannot even be located before it
//      arrives. The second line is not needed here;
//   2. the frames' header lines, as far as the DCID reaches (the 4-tuple
//      lies before it);
//   3. DCID hashes, and the table slots they select;
// and then the bookkeeping proper, whose loads were all asked for already.
// A warm burst starts at the third, or skips it for its QUIC packets when
// `hashes` is given: hashes[i] is then pkts[i]'s DCID hash, which the
// receiver computed (with this shard's seed) when it parsed the packet, and
// the slot's prefetch is already under way (SlotPrefetch,
// mbuf_classifier.h). Only with `metas`; the entries of packets that are not
// QUIC are not read.
//
// Always inlined into its caller, so that what `act` keeps over a burst (a
// count, a tally) stays in registers: called out of line, each packet's act
// went through the closure's references (callgrind: 11 instructions more
// per packet in the owner's stage).
template <typename Act>
[[gnu::always_inline]] inline void run_connection_burst(ConnectionShard& shard, rte_mbuf* const* pkts,
                                                        const SteerMeta* metas, const std::uint32_t* hashes,
                                                        unsigned n, std::uint64_t now, OwnerStats& stats, Act&& act) {
  constexpr unsigned kMaxStageBurst = 64;
  std::uint32_t hash[kMaxStageBurst];
  std::uint8_t* frame[kMaxStageBurst];
  for (unsigned base = 0; base < n; base += kMaxStageBurst) {
    const unsigned k = n - base < kMaxStageBurst ? n - base : kMaxStageBurst;
    rte_mbuf* const* b = pkts + base;
    const auto meta = [&](unsigned i) -> const SteerMeta& {
      return metas != nullptr ? metas[base + i] : *steer_meta(b[i]);
    };
    if (metas == nullptr) {
      for (unsigned i = 0; i < k; ++i) {
        rte_prefetch0(b[i]);
      }
      for (unsigned i = 0; i < k; ++i) {
        const SteerMeta& m = *steer_meta(b[i]);
        const auto* frame = rte_pktmbuf_mtod(b[i], const char*);
        rte_prefetch0(frame);
        // The line the DCID ends on, when it is the next one; otherwise the
        // first line again (a select, not a branch on the header's length).
        const unsigned second = m.dcid_offset + m.dcid_len > RTE_CACHE_LINE_MIN_SIZE ? RTE_CACHE_LINE_MIN_SIZE : 0;
        rte_prefetch0(frame + second);
      }
    }
    // Each frame is located once (buf_addr + data_off) and kept for the
    // bookkeeping below; `initials` marks the Initials that may open a
    // connection (bit i: b[i]), for the pass after.
    static_assert(kMaxStageBurst <= 64);
    constexpr std::uint8_t kOpening = kSteerMetaQuic | kSteerMetaLongHeader | kSteerMetaOpensConnection;
    std::uint64_t initials = 0;
    if (hashes != nullptr) {
      for (unsigned i = 0; i < k; ++i) {
        frame[i] = rte_pktmbuf_mtod(b[i], std::uint8_t*);
        // No connection to track, but a flow all the same: its hash is the
        // entropy an encapsulation gives the paths to its backend.
        hash[i] = !(meta(i).flags & kSteerMetaQuic) ? tuple_entropy(frame[i], meta(i), shard.seed) : hashes[base + i];
        initials |= std::uint64_t((meta(i).flags & kOpening) == kOpening) << i;
      }
    } else {
      for (unsigned i = 0; i < k; ++i) {
        frame[i] = rte_pktmbuf_mtod(b[i], std::uint8_t*);
        initials |= std::uint64_t((meta(i).flags & kOpening) == kOpening) << i;
        if (!(meta(i).flags & kSteerMetaQuic)) [[unlikely]] {
          hash[i] = tuple_entropy(frame[i], meta(i), shard.seed);
          continue;
        }
        hash[i] = ConnectionTable::hash_cid(frame[i] + meta(i).dcid_offset, meta(i).dcid_len, shard.seed);
        shard.cids->prefetch(hash[i]);
      }
    }
    // An Initial whose CID the shard lacks opens a connection: its
    // connection's key and the connections table's slot, asked for before
    // the bookkeeping, so that a burst of new connections waits for those
    // misses once, not once per packet. The CID slots were prefetched above
    // (or by the receiver). Only Initials: the other long headers (a
    // Handshake's, a known connection's) would pay a lookup here for
    // nothing, and did (the demo's replayed handshakes: +8 %); a burst of
    // short headers skips the pass.
    std::uint64_t new_key[kMaxStageBurst];
    std::uint64_t keyed = 0;  // bit i: new_key[i] holds b[i]'s
    for (std::uint64_t todo = initials; todo != 0; todo &= todo - 1) {
      const unsigned i = unsigned(__builtin_ctzll(todo));
      const SteerMeta& mi = meta(i);
      if (mi.dcid_len > kMaxCidLen || shard.cids->find(hash[i], frame[i] + mi.dcid_offset, mi.dcid_len) != nullptr)
        continue;
      FourTuple t;
      FrameTuple(frame[i], mi).copy_to(t);
      new_key[i] = connection_key_of(shard, b[i], mi, t);
      shard.connections->prefetch(connection_hash(shard, new_key[i]));
      keyed |= std::uint64_t(1) << i;
    }
    // Counted before `act`: a TX refusal inside it takes its packets back
    // out of processed (they are tx_full drops), and must find them counted.
    stats.processed.add(k);
    unsigned tally[kTrackedKinds] = {};
    for (unsigned i = 0; i < k; ++i) {
      const Tracked outcome = track_connection(shard, hash[i], b[i], frame[i], meta(i), now,
                                               (keyed >> i & 1) != 0 ? &new_key[i] : nullptr);
      ++tally[unsigned(outcome)];
      act(b[i], frame[i], meta(i), outcome, hash[i]);
    }
    count_tracked(stats, tally);
  }
}

}  // namespace qs
