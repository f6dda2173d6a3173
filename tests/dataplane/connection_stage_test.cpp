// The owner's connection stage (dataplane/connection_stage.h) against a
// reference model: quicgen traffic with migrations and NAT rebindings goes
// through MbufClassifier (which leaves the SteerMeta) and run_connection_burst
// in bursts of every shape, and the counts of new connections, migrations and
// untracked packets must be what a plain map of DCID -> 4-tuple says. The
// stage works in passes over a burst, so bursts of 1, odd sizes and more than
// its 64-packet chunk are all run; the action must see every packet once, in
// order. Also: the dataplane's shards come from EAL memory on the owner's
// socket, and one too large for EAL is a clear error.
#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/connection_stage.h"
#include "dataplane/dataplane.h"  // make_connection_table
#include "dataplane/mbuf_classifier.h"
#include "dataplane/profile.h"
#include "dataplane/steer_meta.h"
#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs {
namespace {

SteeringConfig steering() {
  const std::string yaml =
      "ports:\n  - {name: p, device: \"net_null0\"}\nlcores:\n  - {id: 1, rx: [\"p:0\"], owner: true}\n"
      "  - {id: 2, owner: true}\n" +
      test::steering_yaml({1, 2}) + "action: {type: sink}\n";
  return parse_profile(yaml, "stage.yaml").steering;
}

struct Expected {
  std::uint64_t connections = 0, migrations = 0, untracked = 0, not_quic = 0;
};

// What the stage must count: a table of at most `max` CIDs, never expired.
Expected model(const std::vector<rte_mbuf*>& pkts, std::uint32_t max) {
  Expected e;
  std::map<std::string, FourTuple> table;
  for (rte_mbuf* m : pkts) {
    const SteerMeta& meta = *steer_meta(m);
    if (!(meta.flags & kSteerMetaQuic)) {
      ++e.not_quic;
      continue;
    }
    const std::uint8_t* cid = dcid_of(m, meta);
    const std::string key(reinterpret_cast<const char*>(cid), meta.dcid_len);
    FourTuple t;
    read_four_tuple(m, meta, t);
    const auto it = table.find(key);
    if (it == table.end()) {
      if (table.size() >= max) {
        ++e.untracked;
        continue;
      }
      table.emplace(key, t);
      ++e.connections;
    } else if (!(it->second == t)) {
      it->second = t;
      ++e.migrations;
    }
  }
  return e;
}

class ConnectionStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_steer_meta();
    static int instance = 0;
    pool_ = rte_pktmbuf_pool_create(("stage_test_" + std::to_string(instance++)).c_str(), 8191, 0, 0,
                                    RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(pool_, nullptr) << rte_strerror(rte_errno);
    auto options = test::traffic_options(300, 2, 7);
    options.migrate = 0.2;
    options.nat_rebind = 0.2;
    traffic_ = traffic::generate_traffic(options);
    const MbufClassifier classifier(steering());
    for (const auto& p : traffic_.packets) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      ASSERT_NE(m, nullptr);
      char* data = rte_pktmbuf_append(m, std::uint16_t(p.frame.size()));
      ASSERT_NE(data, nullptr);
      std::memcpy(data, p.frame.data(), p.frame.size());
      std::uint16_t owner;
      RxClass cls;
      RouteCounts routes;
      classifier.classify(&m, 1, &owner, &cls, 0, routes);
      pkts_.push_back(m);
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
    ConnectionShard shard{&table, &connections, 0x1234, 1ull << 40};
    std::vector<rte_mbuf*> seen;
    std::size_t next = 0;
    for (std::size_t k = 0; next < pkts_.size(); ++k) {
      const unsigned n = unsigned(std::min<std::size_t>(sizes[k % sizes.size()], pkts_.size() - next));
      run_connection_burst(shard, pkts_.data() + next, n, 1000 + k, stats,
                           [&](rte_mbuf* m, const SteerMeta&) { seen.push_back(m); });
      next += n;
    }
    EXPECT_EQ(seen, pkts_);
  }

  rte_mempool* pool_ = nullptr;
  traffic::Traffic traffic_;
  std::vector<rte_mbuf*> pkts_;
};

TEST_F(ConnectionStageTest, CountsWhatTheModelCountsForEveryBurstShape) {
  const Expected want = model(pkts_, 1u << 20);
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
  }
}

TEST_F(ConnectionStageTest, AFullShardCountsTheRestAsUntracked) {
  const Expected want = model(pkts_, 100);
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
    const auto table = make_connection_table(100000, lcore);
    ASSERT_EQ(rte_malloc_get_socket_stats(socket, &during), 0);
    EXPECT_GE(during.heap_allocsz_bytes - before.heap_allocsz_bytes, ConnectionTable::memory_bytes(100000));
  }
  rte_malloc_socket_stats after{};
  ASSERT_EQ(rte_malloc_get_socket_stats(socket, &after), 0);
  EXPECT_EQ(after.heap_allocsz_bytes, before.heap_allocsz_bytes);
}

TEST(ConnectionTableInEalMemory, TooLargeForEalIsAClearError) {
  // 2^24 connections take 4 GB; these tests give EAL 1 GB.
  try {
    make_connection_table(1u << 24, 1);
    FAIL() << "a 4 GB table fit in 1 GB of EAL memory";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("connection table of lcore 1 (4096 MB on socket"), std::string::npos) << what;
    EXPECT_NE(what.find("raise EAL -m / --socket-mem or lower action.max_connections"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace qs
