// Affinity: quicsteer sends every packet of a connection to one owner,
// whatever RX queue RSS put it on, through migrations and NAT rebindings,
// and the first flight to its DCID's fallback owner. Checked from what each
// owner transmitted (one TX ring per owner), packet by packet.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs::test {
namespace {

using traffic::Direction;
using traffic::PacketKind;

std::string symmetric_profile(unsigned lcores) {
  const std::string n = std::to_string(lcores);
  std::string y = "ports:\n  - {name: wire, device: \"{DEVICE}\", rx_queues: ";
  y += n;
  y += ", tx_queues: ";
  y += n;
  y += ", rx_descriptors: 512, rss: false}\nmempool: {mbufs: 16383, cache: 64}\nlcores:\n";
  std::vector<unsigned> owners;
  for (unsigned i = 1; i <= lcores; ++i) {
    y += "  - {id: ";
    y += std::to_string(i);
    y += ", rx: [\"wire:";
    y += std::to_string(i - 1);
    y += "\"], owner: true}\n";
    owners.push_back(i);
  }
  y += "rings: {size: 512, burst: 32}\n";
  y += steering_yaml(owners);
  y += "backpressure: {policy: park, park_timeout_us: 10000000}\n"
       "action: {type: forward, tx_port: wire}\n"
       "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
       "stats: {period_ms: 0}\n";
  return y;
}

class Affinity : public ::testing::Test {
 protected:
  static constexpr unsigned kLcores = 3;

  void SetUp() override {
    auto options = traffic_options(1500, kLcores, 7);
    options.migrate = 0.15;
    options.nat_rebind = 0.15;
    options.packets_per_connection = 10;
    steering_ = parse_test_profile(symmetric_profile(kLcores)).steering;
    traffic_ = prepare(options, kLcores, steering_);
  }

  SteeringConfig steering_;
  PreparedTraffic traffic_;
};

TEST_F(Affinity, EveryConnectionLeavesOneOwnerInOrderAcrossMigrations) {
  RingPort port(kLcores, 1024, kLcores, 1 << 16);
  Scenario scenario(symmetric_profile(kLcores), port);
  const ScenarioResult r = scenario.run(traffic_.frames, traffic_.queue_of);
  ASSERT_FALSE(r.stalled);
  ASSERT_EQ(r.sent, traffic_.frames.size());
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";

  const auto& packets = traffic_.traffic.packets;
  std::size_t malformed = 0, quicgen_malformed = 0, routed_by_server = 0, first_flight = 0, migrated_routed = 0;
  for (const auto& d : traffic_.decision) malformed += d.packet.verdict == Verdict::kMalformed;
  for (const auto& p : packets) quicgen_malformed += p.kind == PacketKind::kMalformed;
  EXPECT_GE(malformed, quicgen_malformed);
  // Exactly what steering/ calls malformed is dropped, each counted.
  EXPECT_EQ(r.stats.drops_total[std::size_t(DropReason::kMalformed)], malformed);
  EXPECT_EQ(r.stats.drops_sum(), malformed);
  EXPECT_EQ(r.delivered.size() + malformed, r.sent);

  // Ground truth: server i+1 is owned by owner index i.
  auto server_owner = [](const std::vector<std::uint8_t>& id) { return unsigned(id.at(0) << 8 | id.at(1)) - 1; };

  // Per connection and RX queue, the last sequence number seen leaving.
  std::map<std::pair<int, unsigned>, std::uint64_t> last_seq;
  std::map<int, std::set<unsigned>> owners_of_connection;
  PacketClassifier reference(steering_);
  for (const DeliveredPacket& d : r.delivered) {
    const auto& p = packets[d.seq];
    const Decision& decision = traffic_.decision[d.seq];
    // Every packet leaves the owner steering/ resolves for it.
    ASSERT_EQ(d.tx_queue, decision.resolution.owner_index) << "frame " << d.seq << " " << traffic::to_string(p.kind);
    if (p.direction == Direction::kClientToServer && p.dcid_server_chosen) {
      ++routed_by_server;
      migrated_routed += p.post_migration;
      ASSERT_EQ(decision.resolution.how, ResolveMethod::kQuicLb);
      ASSERT_EQ(d.tx_queue, server_owner(p.server_id)) << "frame " << d.seq;
      owners_of_connection[p.connection].insert(d.tx_queue);
      const auto key = std::make_pair(p.connection, traffic_.queue_of[d.seq]);
      const auto it = last_seq.find(key);
      if (it != last_seq.end()) {
        ASSERT_LT(it->second, d.seq) << "connection " << p.connection << " reordered";
      }
      last_seq[key] = d.seq;
    }
    if (p.first_flight()) {
      ++first_flight;
      ASSERT_EQ(d.tx_queue, reference.resolver().fallback_owner_for_dcid(p.dcid.data(), p.dcid.size()));
    }
  }
  for (const auto& [conn, owners] : owners_of_connection) EXPECT_EQ(owners.size(), 1u) << "connection " << conn;
  EXPECT_GT(routed_by_server, 1000u);
  EXPECT_GT(migrated_routed, 100u);
  EXPECT_GE(first_flight, 1500u);
  // NAT rebindings keep the CID and change the 4-tuple: the owners saw them.
  EXPECT_GT(r.stats.owner_total.migrations, 0u);
  // Every owner got work, and the rings carried the traffic between lcores.
  for (const auto& l : r.stats.lcores) EXPECT_GT(l.owner.processed, 0u) << "lcore " << l.lcore;
  EXPECT_GT(r.stats.rx_total.enqueued, 0u);
  EXPECT_GT(r.stats.rx_total.steered_self, 0u);
}

// The problem quicsteer solves: steered by a hash of the 4-tuple (what RSS
// does), connections that migrate end up at two owners.
TEST_F(Affinity, FourTupleSteeringAloneSplitsMigratedConnections) {
  std::map<int, std::set<unsigned>> owner_by_tuple;
  std::map<int, std::set<unsigned>> owner_by_cid;
  const auto& packets = traffic_.traffic.packets;
  for (std::size_t i = 0; i < packets.size(); ++i) {
    const auto& p = packets[i];
    if (p.connection < 0 || p.direction != Direction::kClientToServer || !p.dcid_server_chosen) continue;
    owner_by_tuple[p.connection].insert(rss_queue(p.frame, kLcores));
    owner_by_cid[p.connection].insert(traffic_.decision[i].resolution.owner_index);
  }
  std::size_t split_by_tuple = 0, split_by_cid = 0, migrated = 0;
  for (const auto& c : traffic_.traffic.connections) migrated += c.migration != traffic::Migration::kNone;
  for (const auto& [conn, owners] : owner_by_tuple) split_by_tuple += owners.size() > 1;
  for (const auto& [conn, owners] : owner_by_cid) split_by_cid += owners.size() > 1;
  ASSERT_GT(migrated, 300u);
  // Most migrated connections change RSS bucket (about 2/3 with 3 queues).
  EXPECT_GT(split_by_tuple, migrated / 3);
  EXPECT_EQ(split_by_cid, 0u);
}

}  // namespace
}  // namespace qs::test
