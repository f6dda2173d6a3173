// scale_traffic.h: the traffic of ring_loop's scale modes (--scale), which
// make the few frames that circulate on the loop stand for many connections.
//
// The loop holds ~1,000 mbufs; a million connections cannot each have one.
// So an RX callback on the loop's queues rewrites each frame as it comes
// round, before quicsteer reads it:
//   - short headers (--scale connections|forwarding|backends): the DCID and
//     the source address and port, from the next record of a stream laid out
//     at start-up. A record is one connection's (its CID and 4-tuple are
//     always the same, so the owner sees a known connection on its recorded
//     4-tuple, not a migration). The stream is read in order, so that what
//     the harness itself costs per packet (a sequential 24-octet read,
//     prefetched by the hardware) is the same whatever the number of
//     connections, and only quicsteer's own lookups grow with it;
//   - Initials (--scale new): the DCID's octets after the first and the
//     SCID's first eight from a 64-bit counter times an odd constant (a
//     bijection, so never a CID or SCID seen before): every packet is the
//     first Initial of a new connection.
//   - handshakes (--scale learn): two packets per new connection k, from
//     its own source address and port (from k): its first Initial (the
//     client's DCID and SCID, as with --scale new), then the client's next
//     long header, the same SCID to the DCID the server chose. The first
//     opens a setup entry; the second hits it, and the established table
//     learns its DCID and its 4-tuple: two entries per connection, what
//     peer sync shares. Paced (pace_tsc != 0: one new connection per
//     pace_tsc TSC cycles), the packets in between are connection 0's second
//     packet again, which hits what it taught and learns nothing more.
// The stream is a preamble that visits every connection once in a random
// order (so that all N are live before the window), then a cycle of 2^20
// records: random permutations of the N connections one after another
// (uniform: each lap touches them all) or Zipf draws over them.
// IP and UDP checksums are left as they were: quicsteer checks neither.
#pragma once

#include <rte_mbuf.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "dataplane/fastpath/connection_table.h"

namespace qs::bench {

struct ScaleRecord {  // 24 octets: one connection as the frame carries it
  std::uint8_t cid[17];
  std::uint8_t pad;
  std::uint16_t src_port;  // network order
  std::uint32_t src_ipv4;  // network order
};
static_assert(sizeof(ScaleRecord) == 24);

// Where the rewritten fields sit: every circulating frame has the same
// layout (untagged IPv4, so the offsets are the same for all).
struct FrameLayout {
  std::uint16_t dcid_offset = 0, dcid_len = 0, scid_offset = 0, scid_len = 0, src_addr_offset = 0,
                src_port_offset = 0;
};

struct ScaleStream {
  FrameLayout layout;
  std::vector<ScaleRecord> records;  // preamble, then the cycle
  std::uint64_t preamble = 0;        // records before the cycle
  std::uint64_t cycle_mask = 0;      // the cycle's length - 1 (a power of two)
  std::uint64_t next = 0;            // packets rewritten so far
  std::uint64_t bursts = 0;          // callbacks with at least one packet (next / bursts: the RX burst's mean)
  bool initials = false;             // --scale new: counter-made CIDs, no records
  bool handshakes = false;           // --scale learn: two packets per new connection
  std::uint64_t made = 0;            // --scale learn: connections begun (read by the main thread)
  bool half = false;                 // --scale learn: the next packet is connection `made`'s second
  std::uint64_t pace_tsc = 0;        // --scale learn: TSC cycles per new connection (0: every pair new)
  std::uint64_t pace_start = 0;
  // --early-prefetch (an experiment, not quicsteer's data path): the owner's
  // CID table and seed, so that the callback prefetches each packet's slot
  // before quicsteer classifies the burst, as a receiver that hashed the
  // DCID right after parsing it would.
  const ConnectionTable* early_table = nullptr;
  std::uint64_t early_seed = 0;
};

inline constexpr std::uint64_t kCycleRecords = 1u << 20;

// The connection each of the stream's records names: the preamble (a
// permutation of 0..n-1), then kCycleRecords of permutations (zipf 0) or of
// Zipf(zipf) draws by rank (rank r is connection r; which connections are
// hot does not matter, the table's hash scatters them alike).
inline std::vector<std::uint32_t> stream_order(std::uint32_t n, double zipf, std::mt19937_64& rng) {
  std::vector<std::uint32_t> order;
  order.reserve(n + kCycleRecords);
  std::vector<std::uint32_t> perm(n);
  for (std::uint32_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  order.insert(order.end(), perm.begin(), perm.end());
  if (zipf <= 0) {
    while (order.size() < n + kCycleRecords) {
      std::shuffle(perm.begin(), perm.end(), rng);
      const std::size_t take = std::min<std::size_t>(n, n + kCycleRecords - order.size());
      order.insert(order.end(), perm.begin(), perm.begin() + std::ptrdiff_t(take));
    }
    return order;
  }
  std::vector<double> cumulative(n);
  double total = 0;
  for (std::uint32_t r = 0; r < n; ++r) cumulative[r] = total += 1.0 / std::pow(double(r + 1), zipf);
  std::uniform_real_distribution<double> u(0, total);
  for (std::uint64_t i = 0; i < kCycleRecords; ++i) {
    const auto at = std::lower_bound(cumulative.begin(), cumulative.end(), u(rng));
    order.push_back(std::uint32_t(std::min<std::ptrdiff_t>(at - cumulative.begin(), n - 1)));
  }
  return order;
}

// Lays the stream out from one record per connection.
inline void fill_stream(ScaleStream& s, const std::vector<ScaleRecord>& connections, double zipf, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto order = stream_order(std::uint32_t(connections.size()), zipf, rng);
  s.records.resize(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) s.records[i] = connections[order[i]];
  s.preamble = connections.size();
  s.cycle_mask = kCycleRecords - 1;
}

// Connection i's 4-tuple: a client address in 10.0.0.0/8 and a port, both
// from i (distinct for every i below 2^24 * 64,512).
inline void set_tuple(ScaleRecord& r, std::uint32_t i) {
  const std::uint32_t addr = 0x0a000000u | (i & 0xffffffu);
  const std::uint16_t port = std::uint16_t(1024 + (i >> 24));
  r.src_ipv4 = __builtin_bswap32(addr);
  r.src_port = __builtin_bswap16(port);
}

// The RX callback (rte_rx_callback_fn); user_param is the ScaleStream. All
// queues' callbacks run on the solo layout's one lcore, so `next` needs no
// atomics.
inline std::uint16_t rewrite_for_scale(std::uint16_t, std::uint16_t, rte_mbuf** pkts, std::uint16_t n, std::uint16_t,
                                       void* user_param) {
  auto& s = *static_cast<ScaleStream*>(user_param);
  const FrameLayout& l = s.layout;
  if (n != 0) ++s.bursts;
  if (s.handshakes) {
    std::uint64_t due = ~std::uint64_t(0), made = s.made;
    if (s.pace_tsc != 0 && n != 0) {
      const std::uint64_t now = rte_rdtsc();
      if (s.pace_start == 0) s.pace_start = now;
      due = (now - s.pace_start) / s.pace_tsc;
    }
    for (std::uint16_t i = 0; i < n; ++i) {
      std::uint64_t k = 0;
      bool second = true;
      if (s.half) {
        k = made, s.half = false;
      } else if (made < due) {
        k = ++made, second = false, s.half = true;
      }
      auto* f = rte_pktmbuf_mtod(pkts[i], std::uint8_t*);
      const std::uint64_t client = k * 0x9e3779b97f4a7c15ull, server = k * 0xc2b2ae3d27d4eb4full;
      std::memcpy(f + l.dcid_offset + 1, second ? &server : &client, 7);
      std::memcpy(f + l.scid_offset, &client, 8);
      const std::uint32_t addr = __builtin_bswap32(0x0a000000u | std::uint32_t(k & 0xffffffu));
      const std::uint16_t port = __builtin_bswap16(std::uint16_t(1024 + ((k >> 24) & 0x3fff)));
      std::memcpy(f + l.src_addr_offset, &addr, 4);
      std::memcpy(f + l.src_port_offset, &port, 2);
    }
    s.next += n;
    __atomic_store_n(&s.made, made, __ATOMIC_RELAXED);
    return n;
  }
  if (s.initials) {
    for (std::uint16_t i = 0; i < n; ++i) {
      auto* f = rte_pktmbuf_mtod(pkts[i], std::uint8_t*);
      const std::uint64_t id = ++s.next * 0x9e3779b97f4a7c15ull;
      std::memcpy(f + l.dcid_offset + 1, &id, 7);  // the first octet keeps its (unroutable) codepoint
      std::memcpy(f + l.scid_offset, &id, 8);
    }
    return n;
  }
  for (std::uint16_t i = 0; i < n; ++i) {
    const std::uint64_t k = s.next++;
    const ScaleRecord& r = s.records[k < s.preamble ? k : s.preamble + ((k - s.preamble) & s.cycle_mask)];
    auto* f = rte_pktmbuf_mtod(pkts[i], std::uint8_t*);
    std::memcpy(f + l.dcid_offset, r.cid, 17);
    std::memcpy(f + l.src_addr_offset, &r.src_ipv4, 4);
    std::memcpy(f + l.src_port_offset, &r.src_port, 2);
    if (s.early_table != nullptr) s.early_table->prefetch(ConnectionTable::hash_cid(r.cid, 17, s.early_seed));
  }
  return n;
}

}  // namespace qs::bench
