// The owner's per-packet bookkeeping: find (or create) the packet's
// connection in this owner's shard and follow a change of 4-tuple. Shared by
// the owner lcores and the rte_distributor baseline, which must do exactly
// the same work to be a fair comparison.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

#include "dataplane/connection_table.h"
#include "dataplane/lcore_stats.h"
#include "dataplane/steer_meta.h"

namespace qs {

enum class Tracked : std::uint8_t {
  kNotQuic,    // no DCID to track
  kKnown,      // an existing connection, same 4-tuple
  kNew,        // a connection entry was created
  kMigrated,   // an existing connection arrived from a new 4-tuple
  kUntracked,  // the shard is full
};

inline void read_four_tuple(rte_mbuf* m, const SteerMeta& meta, FourTuple& t) {
  std::memset(&t, 0, sizeof t);
  const auto* l3 = rte_pktmbuf_mtod_offset(m, const std::uint8_t*, meta.l3_offset);
  if (meta.flags & kSteerMetaIpv6) {
    t.ipv6 = 1;
    std::memcpy(t.src_addr, l3 + 8, 16);
    std::memcpy(t.dst_addr, l3 + 24, 16);
  } else {
    std::memcpy(t.src_addr, l3 + 12, 4);
    std::memcpy(t.dst_addr, l3 + 16, 4);
  }
  const auto* udp = rte_pktmbuf_mtod_offset(m, const std::uint8_t*, meta.l4_offset);
  std::memcpy(&t.src_port, udp, 2);
  std::memcpy(&t.dst_port, udp + 2, 2);
}

inline Tracked track_connection(ConnectionTable& table, std::uint64_t cid_hash_seed, rte_mbuf* m,
                                const SteerMeta& meta, std::uint64_t now) {
  if (!(meta.flags & kSteerMetaQuic)) return Tracked::kNotQuic;
  const auto* cid = rte_pktmbuf_mtod_offset(m, const std::uint8_t*, meta.dcid_offset);
  const std::uint32_t hash = ConnectionTable::hash_cid(cid, meta.dcid_len, cid_hash_seed);
  bool created = false;
  Connection* conn = table.find_or_insert(hash, cid, meta.dcid_len, now, created);
  if (conn == nullptr) return Tracked::kUntracked;
  FourTuple t;
  read_four_tuple(m, meta, t);
  Tracked outcome = Tracked::kKnown;
  if (created) {
    conn->tuple = t;
    outcome = Tracked::kNew;
  } else if (!(conn->tuple == t)) {
    conn->tuple = t;
    ++conn->migrations;
    outcome = Tracked::kMigrated;
  }
  conn->last_seen_tsc = now;
  ++conn->packets;
  conn->bytes += m->pkt_len;
  return outcome;
}

inline void count_tracked(OwnerStats& s, Tracked outcome) {
  switch (outcome) {
    case Tracked::kNew: s.connections.add(); break;
    case Tracked::kMigrated: s.migrations.add(); break;
    case Tracked::kUntracked: s.connections_untracked.add(); break;
    case Tracked::kKnown:
    case Tracked::kNotQuic: break;
  }
}

}  // namespace qs
