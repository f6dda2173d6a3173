// Forwarding tables in the live data path: quicgen traffic whose servers mint
// random CIDs (no QUIC-LB), on three RX queues spread by 4-tuple, three
// owners. Checked from what each owner transmitted, packet by packet.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs::test {
namespace {

using traffic::Direction;
using traffic::Migration;

constexpr unsigned kLcores = 3;

std::string profile(bool tables) {
  std::string y =
      "ports:\n  - {name: wire, device: \"{DEVICE}\", rx_queues: 3, tx_queues: 3, rx_descriptors: 512, rss: false}\n"
      "mempool: {mbufs: 16383, cache: 64}\nlcores:\n";
  for (unsigned i = 1; i <= kLcores; ++i)
    y += "  - {id: " + std::to_string(i) + ", rx: [\"wire:" + std::to_string(i - 1) + "\"], owner: true}\n";
  y += "rings: {size: 512, burst: 32}\n";
  // The QUIC-LB config only gives the CIDs their length (17): no server is
  // routed by it, the servers' CIDs are random.
  y += "steering:\n  quic_ports: [443]\n  short_dcid_len: 17\n"
       "  fallback: {key: \"000102030405060708090a0b0c0d0e0f\"}\n";
  y += tables ? "  forwarding: {enabled: true, max_entries: 65536, max_setup_entries: 16384}\n"
              : "  forwarding: {enabled: false}\n";
  y += "backpressure: {policy: park, park_timeout_us: 10000000}\n"
       "action: {type: forward, tx_port: wire}\n"
       "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
       "stats: {period_ms: 0}\n";
  return y;
}

struct RandomCidTraffic {
  PreparedTraffic t;
  std::vector<std::uint16_t> owner_of_connection;  // the hash of its first Initial's DCID
  std::vector<bool> first_after_rebinding;         // frame i is a connection's first on its new 4-tuple
};

RandomCidTraffic make_traffic() {
  traffic::TrafficOptions o = traffic_options(800, kLcores, 21);
  o.random_server_cids = true;
  o.client_to_server_only = true;  // what an appliance in front of servers sees
  o.migrate = 0.1;
  o.nat_rebind = 0.2;
  o.packets_per_connection = 12;
  o.version_negotiation = 0;
  RandomCidTraffic r;
  const SteeringConfig steering = parse_test_profile(profile(false)).steering;
  r.t = prepare(o, kLcores, steering);
  PacketClassifier plain(steering);
  for (const auto& c : r.t.traffic.connections)
    r.owner_of_connection.push_back(
        plain.resolver().fallback_owner_for_dcid(c.client_initial_dcid.data(), c.client_initial_dcid.size()));
  std::set<int> moved;
  for (const auto& p : r.t.traffic.packets) {
    const bool first = p.connection >= 0 && p.post_migration && moved.insert(p.connection).second;
    r.first_after_rebinding.push_back(first);
  }
  return r;
}

const RandomCidTraffic& traffic_once() {
  static const RandomCidTraffic t = make_traffic();
  return t;
}

// A receiver learns a connection's CIDs from its handshake on the RX queue of
// its first 4-tuple; after a NAT rebinding another queue's receiver looks
// them up. On the wire an RTT at least lies between the two; here frames are
// sent back to back, so before each connection's first frame on a new
// 4-tuple the sender waits until the owners are through with every frame
// sent so far: classified is not enough, since an old-path frame still in a
// receiver's ring would reach the owner after the new path's first and count
// as a second migration.
RunOptions in_causal_order(Scenario& scenario, const RandomCidTraffic& t) {
  RunOptions options;
  options.after_send = [&scenario, &t](std::size_t i) {
    if (i + 1 < t.first_after_rebinding.size() && t.first_after_rebinding[i + 1]) scenario.wait_until_through(i + 1);
  };
  return options;
}

std::uint64_t routed(const StatsSnapshot& s, ResolveMethod m) { return s.rx_total.routed[std::size_t(m)]; }

TEST(ForwardingTables, ConnectionsOfServersWithRandomCidsStayOnTheOwnerOfTheirFirstInitial) {
  const RandomCidTraffic& t = traffic_once();
  RingPort port(kLcores, 1024, kLcores, 1 << 16);
  Scenario scenario(profile(true), port);
  const ScenarioResult r = scenario.run(t.t.frames, t.t.queue_of, in_causal_order(scenario, t));
  ASSERT_FALSE(r.stalled);
  ASSERT_EQ(r.sent, t.t.frames.size());
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "");

  const auto& packets = t.t.traffic.packets;
  const auto& connections = t.t.traffic.connections;
  std::size_t checked = 0, after_active_migration = 0, quic = 0;
  std::map<int, std::set<unsigned>> owners;
  for (const DeliveredPacket& d : r.delivered) {
    const auto& p = packets[d.seq];
    if (p.connection < 0) continue;
    ++quic;
    const auto& c = connections[std::size_t(p.connection)];
    if (c.migration == Migration::kActive && p.post_migration) {
      // A new CID from a new 4-tuple: no table knows it (nor can any).
      ++after_active_migration;
      continue;
    }
    owners[p.connection].insert(d.tx_queue);
    ASSERT_EQ(d.tx_queue, t.owner_of_connection[std::size_t(p.connection)])
        << "frame " << d.seq << " (" << traffic::to_string(p.kind) << ") of connection " << p.connection;
    ++checked;
  }
  EXPECT_EQ(owners.size(), connections.size());
  EXPECT_GT(checked, 5000u);
  EXPECT_GT(after_active_migration, 0u);

  // Every packet kept is counted under the rule that routed it (a dropped
  // one under none).
  const StatsSnapshot& s = r.stats;
  EXPECT_EQ(std::accumulate(s.rx_total.routed.begin(), s.rx_total.routed.end(), std::uint64_t(0)),
            r.sent - s.drops_sum());
  EXPECT_EQ(routed(s, ResolveMethod::kQuicLb), 0u);
  EXPECT_GT(routed(s, ResolveMethod::kLearnedSetup), 0u);
  EXPECT_GT(routed(s, ResolveMethod::kLearnedCid), 0u);
  EXPECT_EQ(routed(s, ResolveMethod::kFallbackUnknownCid), after_active_migration)
      << "exactly the packets after an active migration found no table entry";
  EXPECT_EQ(s.rx_total.table_full, 0u);
  EXPECT_GT(s.forwarding.entries, 0u);
  EXPECT_EQ(s.rx_total.setups, connections.size());
  EXPECT_EQ(s.drops_sum(), std::size_t(std::count_if(t.t.decision.begin(), t.t.decision.end(), [](const Decision& d) {
              return d.packet.verdict == Verdict::kMalformed;
            })));
  EXPECT_GT(quic, 0u);

  // What the owners count, from quicgen's ground truth: a connection's first
  // DCID and the server's CID it moves to are one connection with two CIDs;
  // a NAT rebinding is one migration; an active migration brings a CID
  // nothing ties to its connection, so it counts as a connection of its own.
  std::uint64_t active = 0, rebound = 0;
  for (const auto& c : connections) {
    active += c.migration == Migration::kActive;
    rebound += c.migration == Migration::kNatRebinding;
  }
  ASSERT_GT(rebound, 0u);
  EXPECT_EQ(s.owner_total.connections, connections.size() + active);
  EXPECT_EQ(s.owner_total.cids, 2 * connections.size() + active);
  EXPECT_EQ(s.owner_total.migrations, rebound);
}

// A reload of the steering section halfway through (SIGHUP or
// /quicsteer/reload: here a QUIC-LB config and servers these CIDs do not
// match, and a new fallback key) swaps the classifier but keeps the tables:
// connections set up before it stay with the owner of their first Initial.
TEST(ForwardingTables, ReloadKeepsWhatTheTablesLearned) {
  const RandomCidTraffic& t = traffic_once();
  RingPort port(kLcores, 1024, kLcores, 1 << 16);
  Scenario scenario(profile(true), port);
  std::string next_yaml = profile(true);
  const std::string old_key = "fallback: {key: \"000102030405060708090a0b0c0d0e0f\"}";
  next_yaml.replace(next_yaml.find(old_key), old_key.size(),
                    "fallback: {key: \"ff0102030405060708090a0b0c0d0e0f\", rekey_on_reload: true}\n"
                    "  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 14}]\n"
                    "  servers: [{server_id: \"0001\", owner: 1}]");
  const Profile next = parse_test_profile(next_yaml, port.device());
  RunOptions options = in_causal_order(scenario, t);
  const auto causal = options.after_send;
  const std::size_t half = t.t.frames.size() / 2;
  Dataplane::SteeringReload reload;
  options.after_send = [&](std::size_t i) {
    causal(i);
    if (i + 1 != half) return;
    scenario.wait_until_through(half);  // a first Initial still queued would meet the new key
    reload = scenario.dataplane().reload_steering(next);
  };
  const ScenarioResult r = scenario.run(t.t.frames, t.t.queue_of, options);
  ASSERT_FALSE(r.stalled);
  ASSERT_TRUE(reload.applied) << reload.message;
  EXPECT_EQ(r.stats.steering_generation, 2u);
  EXPECT_EQ(r.mbufs_leaked, 0);
  std::set<int> started_before;
  for (std::size_t i = 0; i < half; ++i)
    if (t.t.traffic.packets[i].connection >= 0) started_before.insert(t.t.traffic.packets[i].connection);
  std::size_t checked_after = 0;
  for (const DeliveredPacket& d : r.delivered) {
    const auto& p = t.t.traffic.packets[d.seq];
    if (p.connection < 0 || !started_before.count(p.connection)) continue;
    const auto& c = t.t.traffic.connections[std::size_t(p.connection)];
    if (c.migration == Migration::kActive && p.post_migration) continue;
    ASSERT_EQ(d.tx_queue, t.owner_of_connection[std::size_t(p.connection)])
        << "frame " << d.seq << " (" << traffic::to_string(p.kind) << ", post_migration " << p.post_migration << ") of connection " << p.connection;
    checked_after += d.seq >= half;
  }
  EXPECT_GT(checked_after, 500u) << "packets of connections set up before the reload, sent after it";
}

// The same traffic without the tables: the client's packets to the server's
// CID are hashed on their own, and most connections end up on two owners.
TEST(ForwardingTables, WithoutThemConnectionsSplit) {
  const RandomCidTraffic& t = traffic_once();
  RingPort port(kLcores, 1024, kLcores, 1 << 16);
  Scenario scenario(profile(false), port);
  const ScenarioResult r = scenario.run(t.t.frames, t.t.queue_of);
  ASSERT_FALSE(r.stalled);
  std::map<int, std::set<unsigned>> owners;
  for (const DeliveredPacket& d : r.delivered) {
    const auto& p = t.t.traffic.packets[d.seq];
    if (p.connection >= 0 && !p.post_migration) owners[p.connection].insert(d.tx_queue);
  }
  std::size_t split = 0;
  for (const auto& [conn, o] : owners) split += o.size() > 1;
  // With three owners, two of three connections' server CIDs hash away from
  // their first Initial's owner.
  EXPECT_GT(split, owners.size() / 2);
  EXPECT_EQ(r.stats.forwarding.enabled, false);
  EXPECT_EQ(r.mbufs_leaked, 0);
}

}  // namespace
}  // namespace qs::test
