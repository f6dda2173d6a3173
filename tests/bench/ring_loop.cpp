// ring_loop: quicsteer on a copy-free closed loop, for cycles per packet
// without net_pcap's RX memcpy.
//
//   ring_loop --layout demo|split|solo [--seconds S] [--warmup S] [--packets N] [--json FILE] [--hugepages]
//             [--delivery as_is|l2|ipip|vxlan [--backends N]] [--eal-mb MB]
//             [--scale connections|forwarding|backends|new|learn [--connections N] [--zipf S] [--idle-ms MS]
//              [--max-connections M] [--slots-per-connection S] [--early-prefetch] [--new-per-s R] [--peer-sync LISTEN,PEER [--sync-ring N]]]
//
// --scale (solo layout only) makes the circulating frames stand for many
// connections (scale_traffic.h: an RX callback rewrites each one's DCID and
// 4-tuple from a stream laid out at start-up, or makes each an Initial of a
// new connection), for scripts/bench/scale.sh:
//   connections  N QUIC-LB connections (servers 0001 and 0002), a shard
//                sized for N (action.max_connections N); --zipf S > 0 draws
//                the packets from a Zipf(S) skew instead of round-robin
//   forwarding   N random-CID connections (no QUIC-LB codepoint), each with
//                an entry in the forwarding tables' established table
//                (steering.forwarding.max_entries N, filled before launch),
//                and a shard sized for N
//   backends     --backends B (each minting server ID B+1) with l2 delivery,
//                N connections spread over them all
//   new          every packet the first Initial of a new connection (with
//                the forwarding tables on: setup-table and connection-table
//                inserts), a shard of N (action.max_connections) whose
//                entries expire after --idle-ms
//   learn        random-CID handshakes to 2 backends (l2) with the
//                forwarding tables on: each new connection's first Initial,
//                then its next long header with the server's DCID, so that
//                the established table learns 2 entries per connection
//                (steering.forwarding.max_entries N, the shard N); with
//                --new-per-s R only R new connections per second, the other
//                packets one known connection's. --peer-sync LISTEN,PEER adds
//                a peer_sync block (resync_timeout_ms 0, ring_size
//                --sync-ring, 65536 unless given, so that the ring does not
//                overflow and every entry's enqueue is paid): what sharing
//                costs the data path, and the sync thread's counters
// --max-connections M sizes the shard apart from N (a large shard with few
// live connections: what its size costs without their misses).
// --slots-per-connection S sets action.slots_per_connection (2, 4 or 8).
// --early-prefetch (connections and backends; an experiment on the harness
// side, not quicsteer's data path): the callback also prefetches each
// packet's CID-table slot, before quicsteer classifies the burst.
// The JSON then also says what EAL memory start-up took, the tables' bytes,
// and the window's new connections and untracked packets.
//
// --delivery forwards to backends (the profile's `backends`, N of them; the
// first two mint the traffic's server IDs, one per owner) with that delivery
// mode. An RX callback on each loop queue takes ipip's and vxlan's outer
// headers off again (as a backend's tunnel device would), so that what
// circulates stays the same; it runs in every delivery mode, so that its
// reads cost them alike (see decapsulate).
//
// The port is made of rte_rings the way a net_ring vdev makes them: RX queue
// q and TX queue q are the same ring, so what an owner transmits on its TX
// queue comes back on that RX queue. A preloaded set of quicgen frames (QUIC
// only: a malformed frame is dropped and would leave the loop) circulates
// with no copy and no allocation; the rings are large enough that TX never
// refuses. The layouts are scripts/bench/e2e.sh's:
//   demo   lcores 1 and 2 each poll one RX queue and own connections
//          (after the first lap every packet arrives at its owner's queue);
//   split  lcore 1 polls both queues and owns nothing, lcore 2 owns every
//          connection: every packet crosses a ring.
// Lcores: main 0 on CPU 0, forwarding 1 on CPU 0 and 2 on CPU 1, as e2e.sh and
// its testpmd runs (scripts/bench/ringloop.sh runs testpmd io and macswap on
// a net_ring vdev with the same lcores). And one more layout:
//   solo   lcore 1, alone on CPU 1 (main 0 on CPU 0), polls both queues and
//          owns every connection: the demo's work per packet on one lcore.
//          On a VM whose two vCPUs both spin, each run's cycles swing by up
//          to 2x as the host schedules them; with one spinning they hold
//          within a few per cent, which is what comparing delivery modes
//          needs (scripts/bench/ringloop.sh).
// Cycles per packet = the forwarding lcores' TSC cycles over the window /
// packets received in it.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_malloc.h>
#include <rte_ring.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/fastpath/connection_table.h"
#include "dataplane/fastpath/lcore_context.h"
#include "dataplane/runtime/dataplane.h"
#include "dataplane/runtime/eal_init.h"
#include "steering/forwarding_rules.h"
#include "steering/owner_resolver.h"
#include "steering/packet_classifier.h"
#include "steering/quic_lb.h"
#include "tests/bench/scale_traffic.h"
#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace {

constexpr unsigned kLoopRingSize = 8192;  // per queue; holds every preloaded packet

struct Options {
  std::string layout = "demo";
  std::string delivery;   // empty: no backends (today's forward); else as_is|l2|ipip|vxlan to backends
  unsigned backends = 2;  // with --delivery: how many (the first two mint the traffic's server IDs)
  double seconds = 3;
  double warmup = 0.5;
  unsigned packets = 2048;
  std::string json;
  bool hugepages = false;  // EAL memory from hugetlbfs (set up by hand) instead of --no-huge
  unsigned eal_mb = 1024;  // EAL -m
  std::string scale;          // empty, or connections|forwarding|backends|new (solo layout)
  std::uint32_t connections = 1000;
  double zipf = 0;            // 0: round-robin over the connections
  std::uint32_t idle_ms = 0;  // action.idle_timeout_ms; 0: the profile's default
  std::uint32_t max_connections = 0;  // action.max_connections; 0: --connections
  std::uint32_t slots_per_connection = 0;  // action.slots_per_connection; 0: the profile's default
  bool early_prefetch = false;        // an experiment: see scale_traffic.h
  double new_per_s = 0;               // --scale learn: 0, every packet pair a new connection
  std::string peer_sync;              // --scale learn: "LISTEN,PEER" (host:port each), or empty: no peer sync
  std::uint32_t sync_ring = 65536;    // peer_sync.ring_size
};

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: ring_loop --layout demo|split|solo [--seconds S] [--warmup S] [--packets N] [--json FILE] [--hugepages]\n"
                       "                 [--delivery as_is|l2|ipip|vxlan [--backends N]] [--eal-mb MB]\n"
                       "                 [--scale connections|forwarding|backends|new|learn [--connections N] [--zipf S] [--idle-ms MS]\n"
                       "                  [--max-connections M] [--slots-per-connection S] [--early-prefetch] [--new-per-s R] [--peer-sync LISTEN,PEER [--sync-ring N]]]\n");
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hugepages") {
      o.hugepages = true;
      continue;
    }
    if (a == "--early-prefetch") {
      o.early_prefetch = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    const std::string v = argv[++i];
    if (a == "--layout") o.layout = v;
    else if (a == "--seconds") o.seconds = std::stod(v);
    else if (a == "--warmup") o.warmup = std::stod(v);
    else if (a == "--packets") o.packets = unsigned(std::stoul(v));
    else if (a == "--json") o.json = v;
    else if (a == "--delivery") o.delivery = v;
    else if (a == "--backends") o.backends = unsigned(std::stoul(v));
    else if (a == "--eal-mb") o.eal_mb = unsigned(std::stoul(v));
    else if (a == "--scale") o.scale = v;
    else if (a == "--connections") o.connections = std::uint32_t(std::stoul(v));
    else if (a == "--zipf") o.zipf = std::stod(v);
    else if (a == "--idle-ms") o.idle_ms = std::uint32_t(std::stoul(v));
    else if (a == "--max-connections") o.max_connections = std::uint32_t(std::stoul(v));
    else if (a == "--slots-per-connection") o.slots_per_connection = std::uint32_t(std::stoul(v));
    else if (a == "--new-per-s") o.new_per_s = std::stod(v);
    else if (a == "--peer-sync") o.peer_sync = v;
    else if (a == "--sync-ring") o.sync_ring = std::uint32_t(std::stoul(v));
    else usage();
  }
  if (!o.scale.empty()) {
    if ((o.scale != "connections" && o.scale != "forwarding" && o.scale != "backends" && o.scale != "new" &&
         o.scale != "learn") ||
        o.layout != "solo" || !o.delivery.empty() || o.connections == 0 || o.connections > (16u << 20))
      usage();
    if (o.scale == "backends") o.delivery = "l2";
  }
  if ((o.scale != "learn" && (o.new_per_s != 0 || !o.peer_sync.empty())) ||
      (!o.peer_sync.empty() && o.peer_sync.find(',') == std::string::npos))
    usage();
  if (!o.delivery.empty() && o.delivery != "as_is" && o.delivery != "l2" && o.delivery != "ipip" &&
      o.delivery != "vxlan")
    usage();
  if (o.backends < 2 || o.backends > qs::kMaxBackends) usage();
  if ((o.layout != "demo" && o.layout != "split" && o.layout != "solo") || o.seconds <= 0 || o.packets == 0 ||
      o.packets > kLoopRingSize)
    usage();
  return o;
}

std::string server_ids(unsigned b, bool all_mint) {
  if (!all_mint && b >= 2) return "";
  char ids[48];
  std::snprintf(ids, sizeof ids, "server_ids: [\"%04x\"], ", b + 1);
  return ids;
}

// The steering section with backends: b0 and b1 mint the traffic's server
// IDs 0001 and 0002 (owned by lcores 1 and 2 in the demo layout, as the
// servers are without backends), the rest only take hashed connections.
// With all_mint (--scale backends) every backend b mints server ID b+1, so
// that traffic spread over the server IDs reaches them all.
std::string backends_yaml(const std::vector<unsigned>& owners, unsigned n, const std::string& delivery,
                          bool all_mint = false) {
  std::string y =
      qs::test::steering_head_yaml() +
      "  fallback: {key: \"000102030405060708090a0b0c0d0e0f\"}\n"
      "  forwarding: {enabled: false}\n"
      "backends:\n";
  for (unsigned b = 0; b < n; ++b) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "  - {name: b%u, %smac: \"02:00:00:%02x:%02x:01\", ipv4: 10.%u.%u.1, ipv6: \"fd00::%x\", "
                  "vxlan_mac: \"02:00:01:%02x:%02x:01\", owner: %u}\n",
                  b, server_ids(b, all_mint).c_str(),
                  b >> 8, b & 255, 1 + (b >> 8), b & 255, b + 1, b >> 8, b & 255, owners[b % owners.size()]);
    y += line;
  }
  return y + "action: {type: forward, tx_port: loop, delivery: {mode: " + delivery +
         ", source_ipv4: 10.255.0.1, source_ipv6: \"fd00::1\", vxlan_vni: 42}}\n";
}

// The solo layout's profile for --scale: the shard sized for the
// connections (for `new`, for what lives within the idle timeout), and the
// forwarding tables on where the mode needs them.
std::string scale_yaml(const std::string& device, const Options& opt) {
  std::string steering;
  if (opt.scale == "backends") {
    steering = backends_yaml({1}, opt.backends, "l2", true);
  } else if (opt.scale == "learn") {
    // Random CIDs (no QUIC-LB codepoint) to 2 backends, the tables on and
    // sized for N, no bound per source (every connection has its own
    // address anyway).
    steering = backends_yaml({1}, 2, "l2");
    const std::string off = "  forwarding: {enabled: false}\n";
    steering.replace(steering.find(off), off.size(),
                     "  forwarding: {enabled: true, max_entries: " + std::to_string(opt.connections) +
                         ", max_entries_per_source: 0}\n");
  } else {
    steering = qs::test::steering_head_yaml() +
               "  servers:\n    - {server_id: \"0001\", owner: 1}\n    - {server_id: \"0002\", owner: 1}\n"
               "  fallback: {key: \"000102030405060708090a0b0c0d0e0f\"}\n";
    if (opt.scale == "connections") steering += "  forwarding: {enabled: false}\n";
    if (opt.scale == "forwarding")
      steering += "  forwarding: {enabled: true, max_entries: " + std::to_string(opt.connections) +
                  ", max_entries_per_source: 0}\n";
    if (opt.scale == "new") steering += "  forwarding: {enabled: true, max_entries_per_source: 0}\n";
    steering += "action: {type: forward, tx_port: loop}\n";
  }
  // The action line is the last of `steering`: the shard's size goes into it.
  steering.pop_back();  // "\n"
  steering.pop_back();  // "}"
  steering += ", max_connections: " + std::to_string(opt.max_connections ? opt.max_connections : opt.connections) +
              (opt.idle_ms ? ", idle_timeout_ms: " + std::to_string(opt.idle_ms) : std::string()) +
              (opt.slots_per_connection ? ", slots_per_connection: " + std::to_string(opt.slots_per_connection)
                                        : std::string()) +
              "}\n";
  std::string sync;
  if (!opt.peer_sync.empty()) {
    const std::size_t comma = opt.peer_sync.find(',');
    sync = "peer_sync: {listen: \"" + opt.peer_sync.substr(0, comma) + "\", peers: [\"" +
           opt.peer_sync.substr(comma + 1) +
           "\"], key: \"8d5f0c7a1e2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5\", "
           "resync_timeout_ms: 0, ring_size: " + std::to_string(opt.sync_ring) + "}\n";
  }
  return "ports:\n  - {name: loop, device: \"" + device +
         "\", rx_queues: 2, tx_queues: 2, rx_descriptors: 1024, tx_descriptors: 1024, rss: false}\n"
         "mempool: {mbufs: 16383, cache: 256}\n"
         "lcores:\n  - {id: 1, rx: [\"loop:0\", \"loop:1\"], owner: true}\n"
         "rings: {size: 1024, burst: 32}\n" +
         steering + "stats: {period_ms: 0}\n" + sync;
}

std::string profile_yaml(const std::string& layout, const std::string& device, const Options& opt) {
  if (!opt.scale.empty()) return scale_yaml(device, opt);
  const std::string lcores =
      layout == "demo"    ? "  - {id: 1, rx: [\"loop:0\"], owner: true}\n  - {id: 2, rx: [\"loop:1\"], owner: true}\n"
      : layout == "split" ? "  - {id: 1, rx: [\"loop:0\", \"loop:1\"]}\n  - {id: 2, owner: true}\n"
                          : "  - {id: 1, rx: [\"loop:0\", \"loop:1\"], owner: true}\n";
  const std::vector<unsigned> owners = layout == "demo"    ? std::vector<unsigned>{1, 2}
                                       : layout == "split" ? std::vector<unsigned>{2, 2}
                                                           : std::vector<unsigned>{1, 1};
  return "ports:\n  - {name: loop, device: \"" + device +
         "\", rx_queues: 2, tx_queues: 2, rx_descriptors: 1024, tx_descriptors: 1024, rss: false}\n"
         "mempool: {mbufs: 16383, cache: 256}\n"
         "lcores:\n" + lcores + "rings: {size: 1024, burst: 32}\n" +
         (opt.delivery.empty() ? qs::test::steering_yaml(owners) + "action: {type: forward, tx_port: loop}\n"
                               : backends_yaml(owners, opt.backends, opt.delivery)) +
         "stats: {period_ms: 0}\n";
}

// What a backend's tunnel device does, on the loop's RX side: the outer
// headers of ipip or vxlan come off, leaving the frame the owner was given.
// It runs on every configuration with backends, as_is and l2 included, and
// does the same loads and stores in each: where nothing comes off it writes
// back the octets and lengths it read, unchanged. So the harness costs every
// mode alike, and what differs between modes is quicsteer's delivery alone
// (with a branch per outcome, the harness's own stores and branches made
// ipip 1.2 cycles per packet dearer and as_is 0.5 cheaper: medians of 3
// runs of each). ipip replaced the frame's
// Ethernet header: the 14 octets in front of the inner IP header become its
// Ethernet header, and only its EtherType is written (nothing on the loop
// reads the MACs).
std::uint16_t decapsulate(std::uint16_t, std::uint16_t, rte_mbuf** pkts, std::uint16_t n, std::uint16_t, void*) {
  for (std::uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    auto* f = rte_pktmbuf_mtod(m, std::uint8_t*);
    if (f[12] != 0x08 && f[12] != 0x86) continue;  // VLAN-tagged: never encapsulated (the tunnels drop tags)
    const bool outer_v6 = f[12] == 0x86;
    const unsigned outer_ip = outer_v6 ? 40 : 20;
    const std::uint8_t proto = outer_v6 ? f[14 + 6] : f[14 + 9];
    const bool vxlan = proto == 17 && f[14 + outer_ip + 2] == 0x12 && f[14 + outer_ip + 3] == 0xb5;
    const bool ipip = proto == 4 || proto == 41;
    const unsigned strip = vxlan ? 14 + outer_ip + 8 + 8 : ipip ? outer_ip : 0;
    std::uint8_t* type = f + outer_ip + 12;
    const std::uint8_t t0 = type[0], t1 = type[1];
    type[0] = ipip ? (proto == 41 ? 0x86 : 0x08) : t0;
    type[1] = ipip ? (proto == 41 ? 0xdd : 0x00) : t1;
    m->data_off = std::uint16_t(m->data_off + strip);
    m->data_len = std::uint16_t(m->data_len - strip);
    m->pkt_len -= strip;
  }
  return n;
}

struct Window {
  std::uint64_t rx = 0, drops = 0, tsc = 0;
  std::array<std::uint64_t, qs::kResolveMethods> routed{};
  std::uint64_t connections = 0, untracked = 0, connections_live = 0, expired = 0;
  std::uint64_t made = 0, learned = 0, setups = 0, table_full = 0;  // --scale learn
  qs::PeerSyncSnapshot sync;                                        // with --peer-sync
};

Window sample(const qs::Dataplane& dp, const qs::bench::ScaleStream* stream) {
  const qs::StatsSnapshot s = dp.snapshot();
  return Window{s.rx_total.rx, s.drops_sum(), rte_rdtsc(), s.rx_total.routed, s.owner_total.connections,
                s.owner_total.connections_untracked, s.owner_total.connections_live, s.owner_total.connections_expired,
                stream != nullptr ? __atomic_load_n(&stream->made, __ATOMIC_RELAXED) : 0, s.rx_total.learned,
                s.rx_total.setups, s.rx_total.table_full, s.peer_sync.empty() ? qs::PeerSyncSnapshot{} : s.peer_sync[0]};
}

// The CPU's model name, which every figure is printed with.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// Whether a frame can stand for the --scale mode's packets: untagged IPv4 to
// port 443 with the fields the callback rewrites (scale_traffic.h).
bool scale_template(const Options& opt, const qs::ParsedPacket& p) {
  if (p.verdict != qs::Verdict::kQuic || p.ip_version != 4 || p.l3_offset != 14 || p.dst_port != 443) return false;
  if (opt.scale == "new" || opt.scale == "learn")
    return p.type == qs::QuicPacketType::kInitial && p.opens_connection && p.dcid_len >= 8 && p.scid_len >= 8;
  return p.form == qs::QuicForm::kShort && p.dcid_len == 17;
}

// What the --scale modes set up before launch.
struct ScaleSetup {
  qs::bench::ScaleStream stream;
  std::uint32_t forwarding_entries = 0;  // --scale forwarding: entries in the established table
  std::size_t table_bytes = 0;           // the shard's two tables (+ the forwarding tables)
  std::size_t established_bytes = 0;     // the forwarding tables' established table alone
};

// The records of --scale connections|backends|forwarding, one per
// connection; with forwarding, each CID's entry goes into the established
// table (and a CID whose bucket was full is left out of the traffic).
void build_scale(const Options& opt, const qs::Profile& profile, qs::Dataplane& dp,
                 const std::vector<std::uint8_t>& frame, const qs::ParsedPacket& p, ScaleSetup& setup) {
  auto& s = setup.stream;
  s.layout = {p.dcid_offset, p.dcid_len, p.scid_offset, p.scid_len,
              std::uint16_t(p.l3_offset + 12), p.l4_offset};
  setup.table_bytes =
      2 * qs::ConnectionTable::memory_bytes(profile.action.max_connections, profile.action.slots_per_connection);
  if (profile.steering.forwarding.enabled) {
    setup.table_bytes += qs::ForwardingTables::memory_bytes(profile.steering.forwarding);
    setup.established_bytes = qs::ForwardingTable::memory_bytes(profile.steering.forwarding.max_entries);
  }
  if (opt.scale == "new") {
    s.initials = true;
    return;
  }
  if (opt.scale == "learn") {
    s.handshakes = true;
    if (opt.new_per_s > 0) s.pace_tsc = std::max<std::uint64_t>(1, std::uint64_t(double(rte_get_tsc_hz()) / opt.new_per_s));
    return;
  }
  std::mt19937_64 rng(42);
  std::vector<qs::bench::ScaleRecord> connections;
  connections.reserve(opt.connections);
  if (opt.scale == "forwarding") {
    qs::ForwardingTables* tables = nullptr;
    std::uint64_t tsc_per_ms = 1;
    for (const auto& c : dp.lcores())
      if (c->forwarding_sweeper != nullptr) tables = c->forwarding_sweeper, tsc_per_ms = c->tsc_per_ms;
    if (tables == nullptr) throw std::runtime_error("--scale forwarding: no lcore ages the forwarding tables");
    const qs::OwnerResolver resolver(profile.steering);
    std::vector<std::uint8_t> f = frame;
    const std::uint32_t now_ms = std::uint32_t(rte_rdtsc() / tsc_per_ms);
    for (std::uint32_t i = 0; connections.size() < opt.connections && i < 2 * opt.connections; ++i) {
      qs::bench::ScaleRecord r{};
      for (auto& o : r.cid) o = std::uint8_t(rng());
      r.cid[0] = std::uint8_t(0x20 | (r.cid[0] & 0x1f));  // config 1: not configured, so QUIC-LB leaves it
      std::memcpy(f.data() + p.dcid_offset, r.cid, 17);
      const std::uint16_t target = resolver.fallback_target_for_dcid(r.cid, 17);
      if (tables->established().insert(tables->cid_key(f.data(), p), target, now_ms) !=
          qs::ForwardingTable::Insert::kInserted)
        continue;
      qs::bench::set_tuple(r, std::uint32_t(connections.size()));
      connections.push_back(r);
    }
    setup.forwarding_entries = std::uint32_t(connections.size());
  } else {
    const qs::QuicLbCodec codec(profile.steering.quic_lb.at(0));
    const unsigned servers = opt.scale == "backends" ? opt.backends : 2;
    for (std::uint32_t i = 0; i < opt.connections; ++i) {
      qs::bench::ScaleRecord r{};
      const unsigned id = i % servers + 1;
      const std::uint8_t server_id[2] = {std::uint8_t(id >> 8), std::uint8_t(id)};
      std::uint8_t nonce[14];
      for (auto& o : nonce) o = std::uint8_t(rng());
      codec.encode(server_id, nonce, r.cid, std::uint8_t(rng()));
      qs::bench::set_tuple(r, i);
      connections.push_back(r);
    }
  }
  qs::bench::fill_stream(s, connections, opt.zipf, 7);
  if (opt.early_prefetch)
    for (const auto& c : dp.lcores())
      if (c->shard.cids != nullptr) s.early_table = c->shard.cids, s.early_seed = c->shard.seed;
}

// What the window measured: the share of packets each steering rule routed.
std::string rule_mix(const Window& a, const Window& b) {
  std::string out;
  const double total = double(b.rx - a.rx);
  for (std::size_t m = 0; m < qs::kResolveMethods; ++m) {
    const std::uint64_t n = b.routed[m] - a.routed[m];
    if (n == 0 || total == 0) continue;
    char part[64];
    std::snprintf(part, sizeof part, "%s%s %.1f%%", out.empty() ? "" : ", ",
                  std::string(qs::to_string(qs::ResolveMethod(m))).c_str(), 100.0 * double(n) / total);
    out += part;
  }
  return out;
}

int run(const Options& opt) {
  // One ring per queue, RX and TX alike: a net_ring vdev's loop.
  std::vector<rte_ring*> rings;
  for (unsigned q = 0; q < 2; ++q) {
    const std::string name = "loop" + std::to_string(q);
    rte_ring* r = rte_ring_create(name.c_str(), kLoopRingSize, 0, RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
    if (r == nullptr) throw std::runtime_error("rte_ring_create: " + std::string(rte_strerror(rte_errno)));
    rings.push_back(r);
  }
  if (rte_eth_from_rings("loop", rings.data(), 2, rings.data(), 2, 0) < 0)
    throw std::runtime_error("rte_eth_from_rings: " + std::string(rte_strerror(rte_errno)));

  const std::string yaml = profile_yaml(opt.layout, "net_ring_loop", opt);
  const qs::Profile profile = qs::test::parse_test_profile(yaml);
  auto traffic_options = qs::test::traffic_options(400, 2, 1);
  traffic_options.malformed = 0;  // dropped, so it would leave the loop
  const qs::test::PreparedTraffic t = qs::test::prepare(traffic_options, 2, profile.steering);

  rte_malloc_socket_stats heap_before{}, heap_after{};
  rte_malloc_get_socket_stats(int(rte_socket_id()), &heap_before);
  qs::Dataplane dp(profile);
  rte_malloc_get_socket_stats(int(rte_socket_id()), &heap_after);
  // The scale modes' frames: one kind, one layout (the first that fits).
  int scale_first = -1;
  if (!opt.scale.empty()) {
    for (std::size_t i = 0; i < t.frames.size() && scale_first < 0; ++i)
      if (scale_template(opt, t.decision[i].packet)) scale_first = int(i);
    if (scale_first < 0) throw std::runtime_error("no frame in the traffic fits --scale " + opt.scale);
  }
  ScaleSetup scale;
  if (scale_first >= 0) build_scale(opt, profile, dp, *t.frames[unsigned(scale_first)], t.decision[unsigned(scale_first)].packet, scale);
  if (!opt.delivery.empty()) {
    for (std::uint16_t q = 0; q < 2; ++q)
      if (rte_eth_add_rx_callback(dp.port_id("loop"), q, decapsulate, nullptr) == nullptr)
        throw std::runtime_error("rte_eth_add_rx_callback: " + std::string(rte_strerror(rte_errno)));
  }
  if (scale_first >= 0) {
    for (std::uint16_t q = 0; q < 2; ++q)
      if (rte_eth_add_rx_callback(dp.port_id("loop"), q, qs::bench::rewrite_for_scale, &scale.stream) == nullptr)
        throw std::runtime_error("rte_eth_add_rx_callback: " + std::string(rte_strerror(rte_errno)));
  }
  const auto same_layout = [&](const qs::ParsedPacket& p) {
    const qs::ParsedPacket& first = t.decision[unsigned(scale_first)].packet;
    return p.dcid_offset == first.dcid_offset && p.dcid_len == first.dcid_len && p.scid_offset == first.scid_offset &&
           p.scid_len == first.scid_len && p.l4_offset == first.l4_offset;
  };
  unsigned preloaded = 0;
  for (unsigned i = 0; preloaded < opt.packets; i = (i + 1) % unsigned(t.frames.size())) {
    if (t.decision[i].packet.verdict != qs::Verdict::kQuic && t.decision[i].packet.verdict != qs::Verdict::kNotQuic) continue;
    if (scale_first >= 0 && !(scale_template(opt, t.decision[i].packet) && same_layout(t.decision[i].packet))) continue;
    rte_mbuf* m = rte_pktmbuf_alloc(dp.pool());
    if (m == nullptr) throw std::runtime_error("mbuf pool too small for the preload");
    const auto& f = *t.frames[i];
    std::memcpy(rte_pktmbuf_append(m, std::uint16_t(f.size())), f.data(), f.size());
    if (rte_ring_enqueue(rings[t.queue_of[i]], m) != 0) throw std::runtime_error("loop ring full at preload");
    ++preloaded;
  }

  dp.launch();
  std::this_thread::sleep_for(std::chrono::duration<double>(opt.warmup));
  const qs::bench::ScaleStream* stream = opt.scale == "learn" ? &scale.stream : nullptr;
  const Window a = sample(dp, stream);
  std::this_thread::sleep_for(std::chrono::duration<double>(opt.seconds));
  const Window b = sample(dp, stream);
  dp.stop();
  const qs::StatsSnapshot s = dp.snapshot();
  // What circulates is the loop's, not quicsteer's: back to the pool first.
  for (rte_ring* r : rings) {
    void* m = nullptr;
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }
  const std::int64_t leaked = dp.close_ports_and_count_leaks();

  const double hz = double(rte_get_tsc_hz());
  const double packets = double(b.rx - a.rx);
  const double window_s = double(b.tsc - a.tsc) / hz;
  const double mpps = packets / window_s / 1e6;
  const unsigned forwarding_lcores = opt.layout == "solo" ? 1 : 2;
  const double cycles_per_packet = packets > 0 ? forwarding_lcores * double(b.tsc - a.tsc) / packets : 0;
  const std::string label = opt.layout + (opt.delivery.empty() ? "" : "/" + opt.delivery);
  std::printf("ring_loop %s: %u packets circulating, %.3f Mpps, %.1f TSC cycles per packet (%u lcores), "
              "tsc_hz %.0f, drops in the window %llu (at the stop %llu), leaked %lld\n",
              label.c_str(), preloaded, mpps, cycles_per_packet, forwarding_lcores, hz,
              static_cast<unsigned long long>(b.drops - a.drops), static_cast<unsigned long long>(s.drops_sum() - b.drops),
              static_cast<long long>(leaked));
  std::printf("ring_loop %s: routed by %s; %llu packets received from launch to stop\n", label.c_str(),
              rule_mix(a, b).c_str(), static_cast<unsigned long long>(s.rx_total.rx));
  const double new_per_s = double(b.connections - a.connections) / window_s;
  const std::uint64_t eal_startup = heap_after.heap_allocsz_bytes - heap_before.heap_allocsz_bytes;
  if (!opt.scale.empty()) {
    std::printf("ring_loop scale %s (%s): %u connections%s, %.1f cycles per packet, %.3f Mpps; in the window "
                "%.0f new connections/s, %llu untracked, %llu expired, %llu live at its end; start-up took %.1f MB "
                "of EAL memory (tables %.1f MB, %.1f octets per connection)%s; %.1f packets per RX burst\n",
                opt.scale.c_str(), cpu_model().c_str(), opt.connections,
                opt.zipf > 0 ? (", zipf " + std::to_string(opt.zipf)).c_str() : "", cycles_per_packet, mpps, new_per_s,
                static_cast<unsigned long long>(b.untracked - a.untracked),
                static_cast<unsigned long long>(b.expired - a.expired),
                static_cast<unsigned long long>(b.connections_live), double(eal_startup) / 1048576.0,
                double(scale.table_bytes) / 1048576.0, double(scale.table_bytes) / double(opt.connections),
                opt.scale == "forwarding" ? (", " + std::to_string(scale.forwarding_entries) + " forwarding entries").c_str()
                                          : "",
                scale.stream.bursts ? double(scale.stream.next) / double(scale.stream.bursts) : 0.0);
  }
  // --scale learn: the connections begun, what the tables learned from
  // them, and what the sync thread made of it, over the window.
  const double made = double(b.made - a.made);
  const qs::PeerSyncSnapshot& sa = a.sync;
  const qs::PeerSyncSnapshot& sb = b.sync;
  if (opt.scale == "learn") {
    std::printf("ring_loop scale learn: %.0f new connections/s, %.2f established entries learned per connection "
                "(%llu setups, %llu refused: table full)%s\n",
                made / window_s, made > 0 ? double(b.learned - a.learned) / made : 0.0,
                static_cast<unsigned long long>(b.setups - a.setups),
                static_cast<unsigned long long>(b.table_full - a.table_full), opt.peer_sync.empty() ? "; no peer sync" : "");
    if (!opt.peer_sync.empty())
      std::printf("ring_loop peer sync: %llu messages, %llu entries sent; %llu over the send rate, %llu lost to a "
                  "full ring, %llu send errors\n",
                  static_cast<unsigned long long>(sb.messages_sent - sa.messages_sent),
                  static_cast<unsigned long long>(sb.entries_sent - sa.entries_sent),
                  static_cast<unsigned long long>(sb.send_over_rate - sa.send_over_rate),
                  static_cast<unsigned long long>(sb.ring_full - sa.ring_full),
                  static_cast<unsigned long long>(sb.send_errors - sa.send_errors));
  }
  if (!opt.json.empty()) {
    std::ofstream o(opt.json);
    o << "{\"layout\": \"" << opt.layout << "\", \"delivery\": \"" << opt.delivery << "\", \"backends\": "
      << (opt.delivery.empty() ? 0 : opt.backends) << ", \"packets_circulating\": " << preloaded << ", \"mpps\": " << mpps
      << ", \"cycles_per_packet\": " << cycles_per_packet << ", \"tsc_hz\": " << hz << ", \"window_s\": " << window_s
      << ", \"drops\": " << b.drops - a.drops << ", \"leaked\": " << leaked << ", \"cpu\": \"" << cpu_model()
      << "\", \"scale\": \"" << opt.scale << "\", \"connections\": " << opt.connections << ", \"zipf\": " << opt.zipf
      << ", \"max_connections\": " << profile.action.max_connections
      << ", \"slots_per_connection\": " << profile.action.slots_per_connection
      << ", \"forwarding_entries\": " << scale.forwarding_entries << ", \"new_connections_per_s\": " << new_per_s
      << ", \"untracked\": " << b.untracked - a.untracked << ", \"expired\": " << b.expired - a.expired
      << ", \"connections_live\": " << b.connections_live << ", \"eal_startup_bytes\": " << eal_startup
      << ", \"table_bytes\": " << scale.table_bytes << ", \"established_bytes\": " << scale.established_bytes << ", \"rx_packets\": " << b.rx - a.rx
      << ", \"handshakes\": " << b.made - a.made << ", \"learned\": " << b.learned - a.learned
      << ", \"setups\": " << b.setups - a.setups << ", \"table_full\": " << b.table_full - a.table_full
      << ", \"peer_sync\": " << (opt.peer_sync.empty() ? "null" : "{")
      << (opt.peer_sync.empty() ? ""
                                : "\"messages_sent\": " + std::to_string(sb.messages_sent - sa.messages_sent) +
                                      ", \"entries_sent\": " + std::to_string(sb.entries_sent - sa.entries_sent) +
                                      ", \"send_over_rate\": " + std::to_string(sb.send_over_rate - sa.send_over_rate) +
                                      ", \"ring_full\": " + std::to_string(sb.ring_full - sa.ring_full) +
                                      ", \"send_errors\": " + std::to_string(sb.send_errors - sa.send_errors) + "}")
      << "}\n";
  }
  // A loop that lost packets while measured measures something else. (At the
  // stop, what is still in a TX stage or ring is counted as shutdown drops.)
  return b.drops == a.drops && leaked == 0 && packets > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  const std::string eal_mb = std::to_string(opt.eal_mb);
  std::vector<std::string> eal = {"--lcores", opt.layout == "solo" ? "0@0,1@1" : "0@0,1@0,2@1", "-m", eal_mb,
                                  "--no-shconf", "--no-pci",
                                  "--log-level", "*:warning"};
  // --huge-unlink: nothing else maps these pages, and files left in
  // hugetlbfs would keep them from the next run.
  eal.insert(eal.begin() + 2, opt.hugepages ? "--huge-unlink" : "--no-huge");
  if (!qs::init_eal("ring_loop", eal)) return 1;
  int status = 1;
  try {
    status = run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_loop: %s\n", e.what());
  }
  rte_eal_cleanup();
  return status;
}
