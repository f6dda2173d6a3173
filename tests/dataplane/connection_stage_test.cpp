// The owner's connection stage (dataplane/fastpath/connection_stage.h) against a
// reference model: quicgen traffic with migrations and NAT rebindings goes
// through MbufClassifier (which gives each packet's SteerMeta) and run_connection_burst
// in bursts of every shape, and the counts of new connections, migrations and
// untracked packets must be what a plain map of DCID -> 4-tuple says, filled
// from the generator's record of each packet and the model's own parse of
// the frames. The
// stage works in passes over a burst, so bursts of 1, odd sizes and more than
// its 64-packet chunk are all run; the action must see every packet once, in
// order. Also: the dataplane's shards come from EAL memory on the owner's
// socket, and one too large for EAL is a clear error.
#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/fastpath/connection_stage.h"
#include "dataplane/runtime/dataplane.h"  // make_connection_table
#include "dataplane/fastpath/mbuf_classifier.h"
#include "dataplane/config/profile.h"
#include "dataplane/fastpath/steer_meta.h"
#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs {
namespace {

constexpr std::uint64_t kSeed = 0x1234;  // the DCID hash's key

SteeringConfig steering() {
  const std::string yaml =
      "ports:\n  - {name: p, device: \"net_null0\"}\nlcores:\n  - {id: 1, rx: [\"p:0\"], owner: true}\n"
      "  - {id: 2, owner: true}\n" +
      test::steering_yaml({1, 2}) + "action: {type: sink}\n";
  return parse_profile(yaml, "stage.yaml").steering;
}


// The model's own reading of a frame's addresses and ports, from the wire
// formats and nothing of the code under test (not SteerMeta's offsets, not
// read_four_tuple, not FourTuple's comparison): Ethernet, any number of
// 802.1Q / 802.1ad tags, IPv4 (with its IHL) or IPv6, then UDP.
struct ModelTuple {
  bool ipv6 = false;
  std::string src, dst;  // address octets
  std::uint16_t src_port = 0, dst_port = 0;
  bool operator==(const ModelTuple&) const = default;
};

// Where the frame's UDP payload starts, and its addresses and ports.
ModelTuple parse_tuple(const std::vector<std::uint8_t>& f, std::size_t& udp_payload) {
  auto be16 = [&](std::size_t at) { return std::uint16_t(f.at(at) << 8 | f.at(at + 1)); };
  std::size_t at = 12;
  while (be16(at) == 0x8100 || be16(at) == 0x88a8) at += 4;
  const std::uint16_t ether_type = be16(at);
  at += 2;
  ModelTuple t;
  std::size_t udp;
  if (ether_type == 0x86dd) {
    t.ipv6 = true;
    EXPECT_EQ(f.at(at + 6), 17) << "IPv6 next header is not UDP";
    t.src.assign(f.begin() + long(at + 8), f.begin() + long(at + 24));
    t.dst.assign(f.begin() + long(at + 24), f.begin() + long(at + 40));
    udp = at + 40;
  } else {
    EXPECT_EQ(ether_type, 0x0800);
    EXPECT_EQ(f.at(at + 9), 17) << "IPv4 protocol is not UDP";
    t.src.assign(f.begin() + long(at + 12), f.begin() + long(at + 16));
    t.dst.assign(f.begin() + long(at + 16), f.begin() + long(at + 20));
    udp = at + std::size_t(f.at(at) & 0x0f) * 4;
  }
  t.src_port = be16(udp);
  t.dst_port = be16(udp + 2);
  udp_payload = udp + 8;
  return t;
}

struct ModelEntry {
  ModelTuple tuple;  // the latest
};

struct Expected {
  std::uint64_t connections = 0, migrations = 0, untracked = 0, not_quic = 0;
  std::map<std::string, ModelEntry> table;  // by DCID
};

// The same from the generator's ground truth, for packets of a connection:
// checks the model's parser against what quicgen says it wrote.
ModelTuple fixture_tuple(const traffic::Traffic& traffic, const traffic::Packet& p) {
  const traffic::Connection& c = traffic.connections[std::size_t(p.connection)];
  const traffic::FourTuple& ft = p.post_migration ? c.migrated : c.original;
  auto bytes = [](const traffic::IpAddress& ip) {
    return std::string(ip.bytes.begin(), ip.bytes.begin() + long(ip.size()));
  };
  ModelTuple client{ft.client_ip.v6, bytes(ft.client_ip), bytes(ft.server_ip), ft.client_port, ft.server_port};
  if (p.direction == traffic::Direction::kClientToServer) return client;
  return ModelTuple{client.ipv6, client.dst, client.src, client.dst_port, client.src_port};
}

// What the stage must count: a table of at most `max` CIDs, never expired.
// QUIC-ness comes from the generator's record of each packet. The DCID is
// read from the frame at the model's own offset: a long header says its
// length; a short header does not, and the key is as many octets as steering
// decided (SteerMeta::dcid_len: the QUIC-LB config's CID length or
// steering.short_dcid_len), which starts with the CID the generator wrote.
Expected model(const traffic::Traffic& traffic, const std::vector<SteerMeta>& metas, std::uint32_t max) {
  Expected e;
  auto& table = e.table;
  for (std::size_t i = 0; i < traffic.packets.size(); ++i) {
    const traffic::Packet& p = traffic.packets[i];
    if (p.dcid.empty()) {  // non-QUIC UDP and malformed QUIC carry none
      ++e.not_quic;
      continue;
    }
    // QUIC v1 and v2 CIDs are at most 20 octets (RFC 9000 17.2); a longer
    // DCID (an unknown version's) fits no table key and is counted apart.
    if (p.dcid.size() > 20) continue;
    std::size_t payload = 0;
    const ModelTuple t = parse_tuple(p.frame, payload);
    if (p.connection >= 0) {
      EXPECT_EQ(t, fixture_tuple(traffic, p)) << "the model misreads a frame";
    }
    const bool long_header = (p.frame.at(payload) & 0x80) != 0;
    const std::size_t dcid_at = payload + (long_header ? 6 : 1);
    const std::size_t dcid_len = long_header ? p.frame.at(payload + 5) : metas[i].dcid_len;
    const std::string dcid(p.frame.begin() + long(dcid_at), p.frame.begin() + long(dcid_at + dcid_len));
    const std::size_t common = std::min(dcid.size(), p.dcid.size());
    EXPECT_EQ(dcid.substr(0, common), std::string(p.dcid.begin(), p.dcid.begin() + long(common)))
        << "frame " << i << ": the model reads another DCID than the generator wrote";
    const auto it = table.find(dcid);
    if (it == table.end()) {
      if (table.size() >= max) {
        ++e.untracked;
        continue;
      }
      table.emplace(dcid, ModelEntry{t});
      ++e.connections;
    } else if (!(it->second.tuple == t)) {
      it->second.tuple = t;
      ++e.migrations;
    }
  }
  return e;
}

// Every connection the model holds is in the shard with the model's latest
// 4-tuple on record (FrameTuple::record: the ports and IPv4 addresses octet
// by octet, IPv6's addresses by their digest). The migrations are counted
// whole (OwnerStats::migrations).
void expect_table_holds(ConnectionTable& table, const Expected& want) {
  unsigned wrong = 0;
  for (const auto& [dcid, entry] : want.table) {
    const auto* cid = reinterpret_cast<const std::uint8_t*>(dcid.data());
    const Connection* c = table.find(ConnectionTable::hash_cid(cid, unsigned(dcid.size()), kSeed), cid,
                                     unsigned(dcid.size()));
    if (c == nullptr) {
      ADD_FAILURE() << "a connection the model holds is not in the shard";
      return;
    }
    const ModelTuple& t = entry.tuple;
    const std::string addresses = t.src + t.dst;
    const auto* ports = reinterpret_cast<const std::uint8_t*>(&c->tuple_ports);
    const bool same = c->tuple_ipv6 == t.ipv6 &&
                      c->tuple_addresses ==
                          tuple_addresses(reinterpret_cast<const std::uint8_t*>(addresses.data()), t.ipv6, kSeed) &&
                      (ports[0] << 8 | ports[1]) == t.src_port && (ports[2] << 8 | ports[3]) == t.dst_port;
    wrong += !same;
  }
  EXPECT_EQ(wrong, 0u) << "connections whose 4-tuple on record differs from the model's";
}

class ConnectionStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int instance = 0;
    pool_ = rte_pktmbuf_pool_create(("stage_test_" + std::to_string(instance++)).c_str(), 8191, 0, 0,
                                    RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(pool_, nullptr) << rte_strerror(rte_errno);
    auto options = test::traffic_options(300, 2, 7);
    options.migrate = 0.2;
    options.nat_rebind = 0.2;
    traffic_ = traffic::generate_traffic(options);
    MbufClassifier classifier(steering());
    // The slots a receiving owner would prefetch, of a table of this seed:
    // the hashes the classifier gives for a warm burst.
    ConnectionTable prefetched(1024);
    for (const auto& p : traffic_.packets) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      ASSERT_NE(m, nullptr);
      char* data = rte_pktmbuf_append(m, std::uint16_t(p.frame.size()));
      ASSERT_NE(data, nullptr);
      std::memcpy(data, p.frame.data(), p.frame.size());
      std::uint16_t owner;
      RxClass cls;
      SteerMeta unused;
      RouteCounts routes;
      std::uint32_t hash = 0;  // stays 0 for a packet that is not QUIC
      const SlotPrefetch slots{&prefetched, kSeed, &hash};
      // As a receiver that owns nothing: the SteerMeta goes into the mbuf.
      classifier.classify(&m, 1, &owner, &cls, &unused, kNoOwner, 0, routes, &slots);
      pkts_.push_back(m);
      metas_.push_back(*steer_meta(m));
      hashes_.push_back(hash);
    }
  }
  void TearDown() override {
    for (rte_mbuf* m : pkts_) rte_pktmbuf_free(m);
    rte_mempool_free(pool_);
  }

  // Runs every packet through the stage in bursts cycling through `sizes`;
  // checks that the action saw each packet once, in order.
  void run(ConnectionTable& table, const std::vector<unsigned>& sizes, OwnerStats& stats) {
    ConnectionTable connections(1u << 20);
    ConnectionShard shard{&table, &connections, kSeed, 1ull << 40};
    std::vector<rte_mbuf*> seen;
    std::size_t next = 0;
    for (std::size_t k = 0; next < pkts_.size(); ++k) {
      const unsigned n = unsigned(std::min<std::size_t>(sizes[k % sizes.size()], pkts_.size() - next));
      // Cold bursts (each SteerMeta from its mbuf), warm ones (from the
      // classifier's array) and warm ones with the classifier's DCID hashes
      // (SlotPrefetch) take turns. A cold burst's mbufs carry their
      // SteerMeta, as a hand-off leaves it; a warm burst's hold none (the
      // receiver did not write them): here, one that says "not QUIC".
      const bool cold = k % 3 == 1, hashed = k % 3 == 2;
      for (unsigned i = 0; i < n; ++i) *steer_meta(pkts_[next + i]) = cold ? metas_[next + i] : SteerMeta{};
      run_connection_burst(shard, pkts_.data() + next, cold ? nullptr : metas_.data() + next,
                           hashed ? hashes_.data() + next : nullptr, n, 1000 + k, stats,
                           [&](rte_mbuf* m, std::uint8_t*, const SteerMeta& meta, Tracked, std::uint32_t hash) {
                             // The classifier's hash is the stage's own (seen
                             // holds every packet before this one, in order).
                             if ((meta.flags & kSteerMetaQuic) && seen.size() < hashes_.size()) {
                               EXPECT_EQ(hash, hashes_[seen.size()]);
                             }
                             seen.push_back(m);
                           });
      next += n;
    }
    EXPECT_EQ(seen, pkts_);
  }

  rte_mempool* pool_ = nullptr;
  traffic::Traffic traffic_;
  std::vector<rte_mbuf*> pkts_;
  std::vector<SteerMeta> metas_;
  std::vector<std::uint32_t> hashes_;  // the classifier's DCID hashes (SlotPrefetch)
};

TEST_F(ConnectionStageTest, CountsWhatTheModelCountsForEveryBurstShape) {
  const Expected want = model(traffic_, metas_, 1u << 20);
  ASSERT_GT(want.connections, 600u);  // client Initial DCIDs and server CIDs
  ASSERT_GT(want.migrations, 50u);
  ASSERT_GT(want.not_quic, 0u);
  for (const auto& sizes : std::vector<std::vector<unsigned>>{{1}, {7, 3}, {32}, {64}, {100, 1, 65}}) {
    ConnectionTable table(1u << 16);
    OwnerStats s;
    run(table, sizes, s);
    EXPECT_EQ(s.cids.get(), want.connections) << "bursts of " << sizes[0];
    EXPECT_EQ(s.migrations.get(), want.migrations) << "bursts of " << sizes[0];
    EXPECT_EQ(s.connections_untracked.get(), 0u);
    EXPECT_EQ(s.processed.get(), pkts_.size());
    EXPECT_EQ(table.size(), want.connections);
    expect_table_holds(table, want);
  }
}

TEST_F(ConnectionStageTest, AFullShardCountsTheRestAsUntracked) {
  const Expected want = model(traffic_, metas_, 100);
  ASSERT_GT(want.untracked, 0u);
  ConnectionTable table(100);
  OwnerStats s;
  run(table, {32}, s);
  EXPECT_EQ(s.cids.get(), 100u);
  EXPECT_EQ(s.migrations.get(), want.migrations);
  EXPECT_EQ(s.connections_untracked.get(), want.untracked);
}

// In the running data path, idle connections expire: with a 40 ms idle
// timeout, once the traffic stops every connection an owner created is
// removed again by the paced sweep, and the shards end empty.
TEST(ConnectionExpiry, IdleConnectionsLeaveTheRunningShards) {
  test::RingPort port(2, 1024, 2, 4096);
  const std::string yaml =
      "ports:\n  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rss: false}\n"
      "mempool: {mbufs: 8191, cache: 64}\n"
      "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n  - {id: 2, rx: [\"wire:1\"], owner: true}\n" +
      test::steering_yaml({1, 2}) +
      "action: {type: forward, tx_port: wire, idle_timeout_ms: 40}\n"
      "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
      "stats: {period_ms: 0}\n";
  test::Scenario scenario(yaml, port);
  const auto traffic = test::prepare(test::traffic_options(100, 2, 11), 2, steering());
  test::RunOptions options;
  options.stall_limit = std::chrono::seconds(20);  // a hang detector: expiry takes about 50 ms
  options.keep_running_until = [](const StatsSnapshot& s) {
    return s.owner_total.connections > 0 && s.owner_total.connections_expired == s.owner_total.connections;
  };
  const auto r = scenario.run(traffic.frames, traffic.queue_of, options);
  ASSERT_FALSE(r.stalled) << "connections never expired: " << r.stats.owner_total.connections_expired << " of "
                          << r.stats.owner_total.connections;
  EXPECT_GT(r.stats.owner_total.connections, 200u);
  EXPECT_EQ(r.stats.owner_total.connections_live, 0u);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
}

// The dataplane's shards live in EAL memory on the owner's socket, and a shard
// EAL cannot hold is a clear start-up error naming the fix.
TEST(ConnectionTableInEalMemory, ComesFromTheOwnersSocketHeap) {
  const unsigned lcore = 1;
  const int socket = int(rte_lcore_to_socket_id(lcore));
  rte_malloc_socket_stats before{}, during{};
  ASSERT_EQ(rte_malloc_get_socket_stats(socket, &before), 0);
  {
    const auto table = make_connection_table(100000, 2, lcore);
    ASSERT_EQ(rte_malloc_get_socket_stats(socket, &during), 0);
    EXPECT_GE(during.heap_allocsz_bytes - before.heap_allocsz_bytes, ConnectionTable::memory_bytes(100000, 2));
  }
  rte_malloc_socket_stats after{};
  ASSERT_EQ(rte_malloc_get_socket_stats(socket, &after), 0);
  EXPECT_EQ(after.heap_allocsz_bytes, before.heap_allocsz_bytes);
}

// The error of a table EAL cannot hold, or "" when it fit.
std::string table_error(std::uint32_t max_connections, unsigned slots_per_connection) {
  try {
    make_connection_table(max_connections, slots_per_connection, 1);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ConnectionTableInEalMemory, TooLargeForEalIsAClearError) {
  // 2^24 connections take 2 GB (2^25 slots of 64 octets); these tests give
  // EAL 1 GB.
  std::string what = table_error(1u << 24, 2);
  EXPECT_NE(what.find("connection table of lcore 1 (2048 MB on socket"), std::string::npos) << what;
  EXPECT_NE(what.find("raise EAL -m / --socket-mem or lower action.max_connections"), std::string::npos) << what;
  // More slots per connection: the size counts them, and the error names
  // both keys.
  what = table_error(1u << 22, 8);
  EXPECT_NE(what.find("connection table of lcore 1 (2048 MB on socket"), std::string::npos) << what;
  EXPECT_NE(what.find("lower action.max_connections or action.slots_per_connection"), std::string::npos) << what;
}

}  // namespace
}  // namespace qs
