// Back-pressure: the parking ticket (park), the conventional baseline (drop),
// shedding new connections (shed-new), the park timeout, freedom from
// deadlock, and a clean stop under load. Each scenario runs the real
// Dataplane on ring ports; a slow owner is made with the lcore's synthetic
// per-packet cost.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <tuple>
#include <set>

#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs::test {
namespace {

using traffic::PacketKind;

struct Layout {
  std::string policy = "park";
  unsigned ring_size = 64;
  unsigned high = 48;
  unsigned low = 16;
  unsigned park_timeout_us = 10000000;  // far beyond any test's run: no timeouts
  unsigned slow_cost = 0;               // cycles per packet on owner lcore 2
  unsigned fast_cost = 0;               // on owner lcore 3
  unsigned tx_ring_size = 1 << 17;      // each owner's TX queue (a ring the test empties)
};

// Pipeline layout: lcore 1 receives on both RX queues and owns nothing;
// lcores 2 (server 0001) and 3 (server 0002) own connections.
std::string pipeline_profile(const Layout& l) {
  return "ports:\n"
         "  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rx_descriptors: 128, rss: false}\n"
         "mempool: {mbufs: 8191, cache: 32}\n"
         "lcores:\n"
         "  - {id: 1, rx: [\"wire:0\", \"wire:1\"]}\n"
         "  - {id: 2, owner: true, cost_cycles: " + std::to_string(l.slow_cost) + "}\n"
         "  - {id: 3, owner: true, cost_cycles: " + std::to_string(l.fast_cost) + "}\n"
         "rings: {size: " + std::to_string(l.ring_size) + ", burst: 32}\n" +
         steering_yaml({2, 3}) +
         "backpressure: {policy: " + l.policy + ", high_watermark: " + std::to_string(l.high) +
         ", low_watermark: " + std::to_string(l.low) + ", park_timeout_us: " + std::to_string(l.park_timeout_us) + "}\n"
         "action: {type: forward, tx_port: wire}\n"
         "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
         "stats: {period_ms: 0}\n";
}

SteeringConfig steering_of(const std::string& yaml) { return parse_test_profile(yaml).steering; }

PreparedTraffic quic_only_traffic(std::uint32_t connections, const SteeringConfig& steering, std::uint64_t seed) {
  auto o = traffic_options(connections, 2, seed);
  o.malformed = 0;
  o.non_quic = 0;
  o.version_negotiation = 0;
  o.client_to_server_only = true;
  o.migrate = 0.1;
  o.nat_rebind = 0.1;
  return prepare(o, 2, steering);
}

// The pipeline layout end to end: its profile, QUIC traffic steered by that
// profile, a ring port, one run.
struct PipelineRun {
  PreparedTraffic t;
  ScenarioResult r;
};

PipelineRun run_pipeline(const Layout& l, std::uint32_t connections, std::uint64_t seed,
                         const RunOptions& options = {}) {
  const std::string yaml = pipeline_profile(l);
  PipelineRun run{quic_only_traffic(connections, steering_of(yaml), seed), {}};
  RingPort port(2, 128, 2, l.tx_ring_size);
  Scenario s(yaml, port);
  run.r = s.run(run.t.frames, run.t.queue_of, options);
  return run;
}

// What one owner sends of one connection from one RX queue leaves in arrival
// order. (A connection's first flight and its later packets go to different
// owners, and the test empties the owners' TX rings one after the other, so
// order across owners says nothing.)
void expect_in_order(const ScenarioResult& r, const PreparedTraffic& t) {
  std::map<std::tuple<unsigned, int, unsigned>, std::uint64_t> last;
  for (const auto& d : r.delivered) {
    const auto& p = t.traffic.packets[d.seq];
    const auto key = std::make_tuple(d.tx_queue, p.connection, t.queue_of[d.seq]);
    const auto it = last.find(key);
    if (it != last.end()) {
      ASSERT_LT(it->second, d.seq) << "connection " << p.connection << " reordered";
    }
    last[key] = d.seq;
  }
}

std::uint64_t drops(const ScenarioResult& r, DropReason why) { return r.stats.drops_total[std::size_t(why)]; }

TEST(Backpressure, ParkIsLosslessAndPushesBackOnTheSender) {
  Layout l;
  l.slow_cost = 6000;  // the slow owner handles a fraction of what the sender offers
  const auto [t, r] = run_pipeline(l, 2000, 11);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  EXPECT_EQ(r.sent, t.frames.size());
  // Zero software drops: everything taken from an RX queue was delivered.
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.sent);
  // The back-pressure reached the sender: its RX ring was full.
  EXPECT_GT(r.sender_saw_full, 0u);
  EXPECT_GT(r.stats.rx_total.parks, 0u);
  EXPECT_GT(r.stats.rx_total.parked_packets, 0u);
  // The ring to the slow owner never went past its high watermark.
  for (const auto& ring : r.stats.rings) EXPECT_LE(ring.high_water, l.high);
  expect_in_order(r, t);
  for (const auto& d : r.delivered) ASSERT_EQ(d.tx_queue, t.decision[d.seq].resolution.owner_index);
}

TEST(Backpressure, DropPolicyDropsWhatTheRingRejectsAndCountsIt) {
  Layout l;
  l.policy = "drop";
  l.slow_cost = 6000;
  const auto [t, r] = run_pipeline(l, 2000, 12);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  EXPECT_GT(drops(r, DropReason::kRingFull), 0u);
  EXPECT_EQ(r.stats.drops_sum(), drops(r, DropReason::kRingFull));
  EXPECT_EQ(r.delivered.size() + drops(r, DropReason::kRingFull), r.sent);
  EXPECT_EQ(r.stats.rx_total.parks, 0u);
  // The slow owner's ring (lcore 1 -> 2) is where they were lost. (The fast
  // owner may lose some too: with four lcores on two CPUs it is sometimes
  // descheduled, and a plain ring drops whatever arrives meanwhile.)
  bool slow_ring_full = false;
  for (const auto& ring : r.stats.rings) slow_ring_full |= ring.to_lcore == 2 && ring.full_events > 0;
  EXPECT_TRUE(slow_ring_full);
  expect_in_order(r, t);
}

TEST(Backpressure, ShedNewDropsOnlyConnectionOpenersWhileEstablishedTrafficFlows) {
  Layout l;
  l.policy = "shed-new";
  l.slow_cost = 6000;
  const auto [t, r] = run_pipeline(l, 3000, 13);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  const std::uint64_t shed = drops(r, DropReason::kShedNew);
  EXPECT_GT(shed, 0u);
  EXPECT_EQ(r.stats.drops_sum(), shed);
  EXPECT_EQ(r.delivered.size() + shed, r.sent);
  std::set<std::uint64_t> delivered;
  for (const auto& d : r.delivered) delivered.insert(d.seq);
  std::size_t established = 0;
  for (std::size_t i = 0; i < t.frames.size(); ++i) {
    if (t.decision[i].packet.opens_connection) continue;
    ++established;
    // Established connections' packets are parked, never shed.
    ASSERT_TRUE(delivered.count(i)) << "frame " << i << " (" << traffic::to_string(t.traffic.packets[i].kind)
                                    << ") of an established connection was lost";
  }
  EXPECT_GT(established, 10000u);
  EXPECT_GT(r.stats.rx_total.parks, 0u);
  expect_in_order(r, t);
}

// One owner stalls: the receiving lcore's tickets for it time out, the
// parked packets are dropped and counted, and the other owner keeps getting
// all of its traffic. The healthy owner is the receiving lcore itself (its
// packets skip the ring), so that no scheduling hiccup of a third thread on
// this oversubscribed machine can make its packets wait.
TEST(Backpressure, ParkTimeoutDropsOnlyTheStalledOwnersPacketsAndOthersFlow) {
  const std::string yaml =
      "ports:\n"
      "  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rx_descriptors: 128, rss: false}\n"
      "mempool: {mbufs: 8191, cache: 32}\n"
      "lcores:\n"
      "  - {id: 1, rx: [\"wire:0\", \"wire:1\"], owner: true}\n"
      "  - {id: 2, owner: true, cost_cycles: 1000000}\n"
      "rings: {size: 16, burst: 16}\n" +
      steering_yaml({1, 2}) +
      "backpressure: {policy: park, high_watermark: 16, low_watermark: 4, park_timeout_us: 2000}\n"
      "action: {type: forward, tx_port: wire}\n"
      "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
      "stats: {period_ms: 0}\n";
  const PreparedTraffic t = quic_only_traffic(300, steering_of(yaml), 14);
  RingPort port(2, 128, 2, 1 << 17);
  Scenario s(yaml, port);
  const ScenarioResult r = s.run(t.frames, t.queue_of);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  const std::uint64_t timed_out = drops(r, DropReason::kParkTimeout);
  EXPECT_GT(timed_out, 0u);
  EXPECT_EQ(r.stats.drops_sum(), timed_out);
  EXPECT_EQ(r.delivered.size() + timed_out, r.sent);
  // The healthy owner (index 0) received every one of its packets.
  std::size_t healthy_sent = 0, healthy_delivered = 0;
  for (std::size_t i = 0; i < t.frames.size(); ++i) healthy_sent += t.decision[i].resolution.owner_index == 0;
  for (const auto& d : r.delivered) healthy_delivered += d.tx_queue == 0;
  EXPECT_GT(healthy_sent, 1000u);
  EXPECT_EQ(healthy_delivered, healthy_sent);
  // Every lost packet was bound for the stalled owner.
  ASSERT_EQ(r.stats.lcores.size(), 2u);
  EXPECT_EQ(r.stats.lcores[1].owner.processed + timed_out, t.frames.size() - healthy_sent);
  expect_in_order(r, t);
}

// Two lcores that both receive and own, each sending everything it receives
// to the other, with tiny rings filled to the brim: inbound rings are dequeued from
// every iteration whatever the RX side's state, so neither waits on the other.
TEST(Backpressure, CrossTrafficBetweenTwoFullRingsDoesNotDeadlock) {
  const std::string yaml =
      "ports:\n"
      "  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rx_descriptors: 64, rss: false}\n"
      "mempool: {mbufs: 4095, cache: 32}\n"
      "lcores:\n"
      "  - {id: 1, rx: [\"wire:0\"], owner: true, cost_cycles: 3000}\n"
      "  - {id: 2, rx: [\"wire:1\"], owner: true, cost_cycles: 3000}\n"
      "rings: {size: 16, burst: 16}\n" +
      steering_yaml({1, 2}) +
      "backpressure: {policy: park, high_watermark: 16, low_watermark: 8, park_timeout_us: 10000000}\n"
      "action: {type: forward, tx_port: wire}\n"
      "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
      "stats: {period_ms: 0}\n";
  PreparedTraffic t = quic_only_traffic(1000, steering_of(yaml), 15);
  // Everything owner 0 handles arrives on lcore 2's queue and vice versa.
  for (std::size_t i = 0; i < t.frames.size(); ++i) t.queue_of[i] = t.decision[i].resolution.owner_index == 0 ? 1 : 0;
  RingPort port(2, 64, 2, 1 << 16);
  Scenario s(yaml, port);
  const ScenarioResult r = s.run(t.frames, t.queue_of);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.sent);
  ASSERT_EQ(r.stats.rings.size(), 2u);
  for (const auto& ring : r.stats.rings) EXPECT_GT(ring.full_events, 0u) << ring.from_lcore << "->" << ring.to_lcore;
  EXPECT_EQ(r.stats.rx_total.steered_self, 0u);
  expect_in_order(r, t);
}

// Stop while the slow owner's ring is full and tickets are held: the lcores
// stop polling RX first and let what they hold reach the owners, so a busy
// but healthy data path stops without losing a packet it took.
TEST(Backpressure, StopUnderLoadDeliversWhatWasTakenAndReturnsEveryMbuf) {
  Layout l;
  l.slow_cost = 20000;
  const std::string yaml = pipeline_profile(l);
  const PreparedTraffic t = quic_only_traffic(1000, steering_of(yaml), 16);
  RingPort port(2, 128, 2, 1 << 17);
  Scenario s(yaml, port);
  const std::size_t half = t.frames.size() / 2;
  RunOptions stop_at_half;
  stop_at_half.stop_early = [&](const ScenarioResult& sofar) { return sofar.sent >= half; };
  const ScenarioResult r = s.run(t.frames, t.queue_of, stop_at_half);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  EXPECT_EQ(r.sent, half);
  EXPECT_GT(r.stats.rx_total.parks, 0u);  // it was under back-pressure when stopped
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.stats.rx_total.rx);
  EXPECT_EQ(r.delivered.size() + r.never_received, r.sent);
  expect_in_order(r, t);
}

// Stop while the receiver is between rte_eth_rx_burst and its hand-off: it
// runs its own (slow) share of each burst before handing the rest to the
// other owner, so at almost any moment it holds packets that no ring or
// ticket shows. The stop waits for every lcore to acknowledge the quiesce
// before it trusts that rings and tickets are empty, so those packets are
// delivered, not counted as shutdown drops.
TEST(Backpressure, StopDuringAReceiveBurstDeliversWhatItTook) {
  // Owner index 0 is lcore 1 (listed first): it runs its own share of a
  // burst before it hands owner 1's share over, so for most of each burst
  // owner 1's packets are in no ring.
  const std::string yaml =
      "ports:\n"
      "  - {name: wire, device: \"{DEVICE}\", rx_queues: 1, tx_queues: 2, rx_descriptors: 128, rss: false}\n"
      "mempool: {mbufs: 8191, cache: 32}\n"
      "lcores:\n"
      "  - {id: 1, rx: [\"wire:0\"], owner: true, cost_cycles: 300000}\n"
      "  - {id: 2, owner: true}\n"
      "rings: {size: 1024, burst: 32}\n" +
      steering_yaml({1, 2}) +
      "backpressure: {policy: park, park_timeout_us: 10000000}\n"
      "action: {type: forward, tx_port: wire}\n"
      "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
      "stats: {period_ms: 0}\n";
  PreparedTraffic t = quic_only_traffic(300, steering_of(yaml), 24);
  for (auto& q : t.queue_of) q = 0;  // one RX queue
  RingPort port(1, 128, 2, 1 << 16);
  Scenario s(yaml, port);
  RunOptions stop_early;
  stop_early.stop_early = [&](const ScenarioResult& sofar) { return sofar.sent >= 600; };
  const ScenarioResult r = s.run(t.frames, t.queue_of, stop_early);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_GT(r.stats.rx_total.rx, 0u);
  EXPECT_EQ(drops(r, DropReason::kShutdown), 0u);
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.stats.rx_total.rx);
  EXPECT_EQ(r.delivered.size() + r.never_received, r.sent);
}

// An owner that is stuck (milliseconds a packet) cannot hold up the
// stop: after Dataplane::kQuiesceLimit what is still parked or queued is
// freed and counted as shutdown drops, and every mbuf is back.
TEST(Backpressure, StopWithAStuckOwnerCountsWhatItDropsAndReturnsEveryMbuf) {
  Layout l;
  l.slow_cost = 20000000;  // ~8 ms a packet
  l.park_timeout_us = 10000000;
  const std::string yaml = pipeline_profile(l);
  const PreparedTraffic t = quic_only_traffic(100, steering_of(yaml), 18);
  RingPort port(2, 128, 2, 1 << 16);
  Scenario s(yaml, port);
  RunOptions stop_when_parked;
  // Stop once the receiver has parked: the stuck owner's ring is then at its
  // high watermark (48 packets, about 0.4 s of its work, beyond the quiesce
  // limit). A full RX ring alone is not enough: on a busy machine the
  // receiver may just have been descheduled, with the owner's ring nearly
  // empty, and the stop would then deliver everything.
  stop_when_parked.stop_early = [&](const ScenarioResult& sofar) {
    return sofar.sender_saw_full > 0 && s.dataplane().snapshot().rx_total.parks > 0;
  };
  const ScenarioResult r = s.run(t.frames, t.queue_of, stop_when_parked);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  EXPECT_GT(r.stats.rx_total.parks, 0u);
  EXPECT_GT(drops(r, DropReason::kShutdown), 0u);
  EXPECT_EQ(r.stats.drops_sum(), drops(r, DropReason::kShutdown));
  EXPECT_EQ(r.delivered.size() + r.stats.drops_sum(), r.stats.rx_total.rx);
}

// Hysteresis: once a queue has parked, its packets go back only when the
// owner's ring is at or below the low watermark. One receiver, one slow
// owner (far slower than the receiver, even under ThreadSanitizer), one RX
// queue, bursts of 8 into a 64-slot ring (high 64, low 16): a
// park happens with more than 56 packets in the ring and its release waits
// until 16 or fewer are left, so the owner takes at least 40 packets between
// two parks. Releasing as soon as the ring has room would park about once
// per packet the owner takes.
TEST(Backpressure, ParkedQueueResumesOnlyAtTheLowWatermark) {
  const std::string yaml =
      "ports:\n"
      "  - {name: wire, device: \"{DEVICE}\", rx_queues: 1, tx_queues: 1, rx_descriptors: 128, rss: false}\n"
      "mempool: {mbufs: 8191, cache: 32}\n"
      "lcores:\n"
      "  - {id: 1, rx: [\"wire:0\"]}\n"
      "  - {id: 2, owner: true, cost_cycles: 60000}\n"
      "rings: {size: 64, burst: 8}\n" +
      steering_yaml({2}) +
      "backpressure: {policy: park, high_watermark: 64, low_watermark: 16, park_timeout_us: 10000000}\n"
      "action: {type: forward, tx_port: wire}\n"
      "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
      "stats: {period_ms: 0}\n";
  auto o = traffic_options(500, 1, 22);
  o.malformed = 0;
  o.non_quic = 0;
  o.version_negotiation = 0;
  o.client_to_server_only = true;
  const PreparedTraffic t = prepare(o, 1, steering_of(yaml));
  RingPort port(1, 128, 1, 1 << 17);
  Scenario s(yaml, port);
  const ScenarioResult r = s.run(t.frames, t.queue_of);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.sent);
  const std::uint64_t parks = r.stats.rx_total.parks;
  const std::uint64_t taken = r.stats.owner_total.dequeued;
  EXPECT_GT(parks, 10u);
  EXPECT_LE(parks, taken / 40 + 1) << taken << " packets taken by the owner";
}

// The chain from the TX queue back to the sender: the test empties each
// owner's TX queue (a 64-descriptor ring) a few packets at a time, far slower
// than the owners produce. Under park the owners keep what TX refuses, stop
// taking work, their rings fill, the receiver parks and the sender's RX ring
// fills: nothing is dropped anywhere, and order holds.
TEST(Backpressure, FullTxQueueHoldsTheOwnerAndTheChainBackToTheSender) {
  Layout l;
  l.tx_ring_size = 64;
  RunOptions slow_tx;
  slow_tx.tx_take_per_look = 4;
  const auto [t, r] = run_pipeline(l, 1000, 19, slow_tx);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.sent);
  EXPECT_GT(r.stats.owner_total.tx_holds, 0u);  // owners stopped taking work
  EXPECT_GT(r.stats.rx_total.parks, 0u);        // so the receiver parked
  EXPECT_GT(r.sender_saw_full, 0u);             // so the sender was held back
  EXPECT_EQ(r.stats.owner_total.tx, r.sent);
  expect_in_order(r, t);
  for (const auto& d : r.delivered) ASSERT_EQ(d.tx_queue, t.decision[d.seq].resolution.owner_index);
}

// A TX queue that takes nothing more once full, under drop: what TX refuses
// is dropped and counted as tx_full, as before TX back-pressure existed, and
// no owner is ever held. The sender pauses every 16 frames so that the owners
// (which sleep on doorbells when idle) take far more than their TX rings
// hold, rather than the receiver dropping most of it at their rings.
TEST(Backpressure, DropPolicyDropsWhatTheTxQueueRefusesAndCountsIt) {
  Layout l;
  l.policy = "drop";
  l.tx_ring_size = 64;
  RunOptions dead_tx;
  dead_tx.tx_take_per_look = 0;
  dead_tx.after_send = [](std::size_t i) {
    if (i % 16 == 15) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  const auto [t, r] = run_pipeline(l, 1000, 20, dead_tx);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  const std::uint64_t tx_full = drops(r, DropReason::kTxFull);
  EXPECT_GT(tx_full, 0u);
  EXPECT_EQ(r.stats.owner_total.tx_holds, 0u);
  EXPECT_EQ(r.left_in_tx, 2u * 64u);
  EXPECT_EQ(r.delivered.size() + r.stats.drops_sum(), r.sent);
  EXPECT_EQ(r.stats.drops_sum(), tx_full + drops(r, DropReason::kRingFull));
}

// A TX queue that takes nothing (a dead link): the hold is bounded by the
// park timeout, after which what the owners hold is dropped as tx_timeout;
// every packet is accounted for and every mbuf comes back.
TEST(Backpressure, StalledTxQueueTimesOutAndCountsWhatItDrops) {
  Layout l;
  l.tx_ring_size = 64;
  l.park_timeout_us = 5000;
  RunOptions dead_tx;
  dead_tx.tx_take_per_look = 0;
  const auto [t, r] = run_pipeline(l, 200, 21, dead_tx);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_GT(drops(r, DropReason::kTxTimeout), 0u);
  EXPECT_EQ(drops(r, DropReason::kTxFull), 0u);
  // What left is what the two 64-slot TX rings hold; everything else was
  // dropped with a reason (TX or park timeout).
  EXPECT_EQ(r.left_in_tx, 2u * 64u);
  EXPECT_EQ(r.delivered.size(), r.left_in_tx);
  EXPECT_EQ(r.delivered.size() + r.stats.drops_sum(), r.sent);
  EXPECT_EQ(r.stats.drops_sum(), drops(r, DropReason::kTxTimeout) + drops(r, DropReason::kParkTimeout));
}

// Owners that poll no RX queue sleep on a doorbell when idle; the receiver
// rings it after handing packets over. The sender pauses between bursts, so
// the owners fall asleep again and again, and every packet must still arrive,
// woken by the doorbell, not left until a timer: the owners' sleep limit
// (1 ms in service) is raised to seconds, and no sleep may run to it. A
// receiver that forgot to ring leaves packets in the ring until the limit:
// the run then stops at the first timed-out sleep and fails.
TEST(Backpressure, IdleOwnersSleepOnTheDoorbellAndWakeForTraffic) {
  Layout l;
  const std::string yaml = pipeline_profile(l);
  const PreparedTraffic t = quic_only_traffic(100, steering_of(yaml), 17);
  RingPort port(2, 128, 2, l.tx_ring_size);
  Scenario s(yaml, port);
  for (const auto& c : s.dataplane().lcores()) c->doorbell_sleep_limit = std::chrono::seconds(5);
  auto timed_out_sleeps = [&] {
    std::uint64_t n = 0;
    for (const auto& c : s.dataplane().lcores()) n += c->loop_stats.doorbell_timeouts.get();
    return n;
  };
  RunOptions paced;
  paced.after_send = [](std::size_t i) {
    if (i % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  };
  paced.stop_early = [&](const ScenarioResult&) { return timed_out_sleeps() != 0; };
  const ScenarioResult r = s.run(t.frames, t.queue_of, paced);
  EXPECT_EQ(timed_out_sleeps(), 0u) << "an owner slept to its limit with packets waiting: the doorbell was not rung";
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "") << "the identities of a run";
  EXPECT_EQ(r.stats.drops_sum(), 0u);
  EXPECT_EQ(r.delivered.size(), r.sent);
  EXPECT_EQ(r.sent, t.frames.size());
  ASSERT_EQ(r.stats.lcores.size(), 3u);
  for (unsigned i = 1; i < 3; ++i) {
    const LcoreSnapshot& owner = r.stats.lcores[i];
    EXPECT_GT(owner.idle_sleeps, 0u) << "lcore " << owner.lcore;
    EXPECT_GT(owner.doorbell_wakes, 0u) << "lcore " << owner.lcore;
  }
  // The receiver polls RX queues: it never sleeps on a doorbell.
  EXPECT_EQ(r.stats.lcores[0].doorbell_wakes, 0u);
  expect_in_order(r, t);
}

}  // namespace
}  // namespace qs::test

namespace qs::test {
namespace {

// Reflect on two ports, one owner polling both (issue 29, item 12): port b's
// TX queue is a 64-descriptor ring nobody reads (a dead link), port a's is
// read. b's TX queue fills and holds the owner, once, until the park timeout;
// from then on what b refuses is dropped at once as tx_timeout and the owner
// goes on with port a, which is never held for b again. Before, b held the
// owner (and with it port a) for a park timeout on every burst it was given.
// Once b's ring is read again, b transmits again.
TEST(Backpressure, ReflectDeadTxPortHoldsTheOwnerOnceAndNotItsOtherPorts) {
  RingPort a(1, 256, 1, 1 << 16), b(1, 256, 1, 64);
  const std::string yaml =
      "ports:\n"
      "  - {name: a, device: \"" + a.device() + "\", rx_queues: 1, tx_queues: 1, rx_descriptors: 256, rss: false}\n"
      "  - {name: b, device: \"" + b.device() + "\", rx_queues: 1, tx_queues: 1, rx_descriptors: 256, rss: false}\n"
      "mempool: {mbufs: 16383, cache: 64}\n"
      "lcores:\n  - {id: 1, rx: [\"a:0\", \"b:0\"], owner: true}\n"
      "rings: {size: 512, burst: 32}\n" +
      steering_yaml({1}) +
      "backpressure: {policy: park, park_timeout_us: 20000}\n"
      "action: {type: reflect}\n"
      "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
      "stats: {period_ms: 0}\n";
  auto o = traffic_options(200, 1, 41);
  o.malformed = 0;
  const PreparedTraffic t = prepare(o, 1, parse_test_profile(yaml).steering);
  Dataplane dp(parse_test_profile(yaml));
  auto through = [&] {
    const StatsSnapshot s = dp.snapshot();
    return s.owner_total.tx + s.owner_total.sunk + s.drops_sum();
  };
  // Frame i goes to port a when even, b when odd; a full RX ring is waited
  // on (a lossless sender). Returns how many went to each.
  auto send = [&](std::size_t from, std::size_t to, std::uint64_t& to_a, std::uint64_t& to_b) {
    for (std::size_t i = from; i < to; ++i) {
      rte_mbuf* m = nullptr;
      while ((m = rte_pktmbuf_alloc(dp.pool())) == nullptr) std::this_thread::yield();
      const auto& f = *t.frames[i % t.frames.size()];
      std::memcpy(rte_pktmbuf_append(m, std::uint16_t(f.size())), f.data(), f.size());
      test_seq(m) = i;
      rte_ring* rx = (i % 2 == 0 ? a : b).rx(0);
      tsan_release(m);
      while (rte_ring_enqueue(rx, m) != 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
      ++(i % 2 == 0 ? to_a : to_b);
    }
  };
  auto wait_through = [&](std::uint64_t n) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);  // a hang detector
    while (through() < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "stuck at " << through() << " of " << n;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  auto drain = [](rte_ring* r) {
    std::uint64_t n = 0;
    void* m;
    while (rte_ring_dequeue(r, &m) == 0) {
      tsan_acquire(m);
      rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      ++n;
    }
    return n;
  };
  dp.launch();
  std::uint64_t to_a = 0, to_b = 0;
  const std::size_t first = 4000;
  send(0, first, to_a, to_b);
  wait_through(first);
  const StatsSnapshot dead = dp.snapshot();
  // b's 64 descriptors took the first 64 of b's frames; every other frame of
  // b's was dropped at its TX queue; a's went out, every one.
  EXPECT_EQ(rte_ring_count(b.tx(0)), 64u);
  EXPECT_EQ(dead.owner_total.drops[std::size_t(DropReason::kTxTimeout)], to_b - 64);
  EXPECT_EQ(dead.drops_sum(), to_b - 64);
  EXPECT_EQ(drain(a.tx(0)), to_a);
  EXPECT_EQ(dead.owner_total.tx_holds, 1u) << "b held the owner once, until its queue timed out";

  // b's peer reads again: b transmits again, and nothing more is dropped.
  EXPECT_EQ(drain(b.tx(0)), 64u);
  std::uint64_t again_a = 0, again_b = 0;
  send(first, first + 64, again_a, again_b);
  wait_through(first + 64);
  dp.stop();
  const StatsSnapshot end = dp.snapshot();
  EXPECT_EQ(end.drops_sum(), dead.drops_sum());
  EXPECT_EQ(drain(a.tx(0)), again_a);
  EXPECT_EQ(drain(b.tx(0)), again_b);
  EXPECT_EQ(end.owner_total.processed, end.owner_total.tx);
  EXPECT_EQ(dp.close_ports_and_count_leaks(), 0);
}

}  // namespace
}  // namespace qs::test
