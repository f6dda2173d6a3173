// Backends on ring ports: 8 backends served by 2 owner lcores, delivered by
// l2 (each frame leaves with its backend's MAC). Every packet leaves towards
// the backend steering/ resolves for it, every connection towards one
// backend and from its backend's owner; a backend drained under traffic keeps
// its connections and takes no new one; a backend down gets nothing, each of
// its packets counted as backend_down on it.
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_ether.h>

#include <array>
#include <map>
#include <set>

#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace qs::test {
namespace {

using traffic::Direction;

constexpr unsigned kLcores = 2;
constexpr unsigned kBackends = 8;

std::array<std::uint8_t, 6> backend_mac(unsigned b) { return {0x02, 0, 0, 0, 0x0b, std::uint8_t(b + 1)}; }

// Backend b (0..7) mints server ID b+1, as quicgen's servers do.
std::string fleet_profile(const std::map<unsigned, const char*>& states = {}) {
  std::string y =
      "ports:\n  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rx_descriptors: 512, rss: false}\n"
      "mempool: {mbufs: 16383, cache: 64}\n"
      "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n  - {id: 2, rx: [\"wire:1\"], owner: true}\n"
      "rings: {size: 512, burst: 32}\n" +
      steering_head_yaml() +
      "  fallback: {key: \"000102030405060708090a0b0c0d0e0f\"}\n"
      "  forwarding: {enabled: false}\n"
      "backends:\n";
  for (unsigned b = 0; b < kBackends; ++b) {
    char line[200];
    const auto mac = backend_mac(b);
    const auto state = states.find(b);
    std::snprintf(line, sizeof line,
                  "  - {name: b%u, server_ids: [\"%04x\"], mac: \"%02x:%02x:%02x:%02x:%02x:%02x\", state: %s}\n", b,
                  b + 1, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
                  state == states.end() ? "active" : state->second);
    y += line;
  }
  y += "backpressure: {policy: park, park_timeout_us: 10000000}\n"
       "action: {type: forward, tx_port: wire, delivery: {mode: l2}}\n"
       "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
       "stats: {period_ms: 0}\n";
  return y;
}

unsigned backend_of_mac(const std::uint8_t* dst) {
  for (unsigned b = 0; b < kBackends; ++b)
    if (std::equal(dst, dst + 6, backend_mac(b).begin())) return b;
  return ~0u;
}

struct Sent {
  unsigned backend;  // by the destination MAC it left with
  unsigned tx_queue;
  std::array<std::uint8_t, 6> src;
};

class Backends : public ::testing::Test {
 protected:
  void SetUp() override {
    auto options = traffic_options(1200, kBackends, 11);
    options.migrate = 0.15;
    options.nat_rebind = 0.15;
    options.packets_per_connection = 10;
    traffic_ = prepare(options, kLcores, parse_test_profile(fleet_profile()).steering);
  }

  // Runs frames through a data path on `profile`, reloading to `reload_to`
  // (when given) once the first `reload_after` frames are through.
  ScenarioResult run(const std::string& profile, std::map<std::uint64_t, Sent>& sent,
                     std::array<std::uint8_t, 6>& port_mac, const std::string& reload_to = "",
                     std::size_t reload_after = 0, Dataplane::SteeringReload* reload = nullptr) {
    RingPort port(kLcores, 1024, kLcores, 1 << 16);
    Scenario scenario(profile, port);
    rte_ether_addr mac{};
    EXPECT_EQ(rte_eth_macaddr_get(scenario.dataplane().port_id("wire"), &mac), 0);
    std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), port_mac.begin());
    RunOptions options;
    options.inspect_tx = [&](const rte_mbuf* m, unsigned q) {
      const auto* eth = rte_pktmbuf_mtod(m, const std::uint8_t*);
      Sent s{backend_of_mac(eth), q, {}};
      std::copy(eth + 6, eth + 12, s.src.begin());
      sent[test_seq(const_cast<rte_mbuf*>(m))] = s;
    };
    if (!reload_to.empty()) {
      options.after_send = [&](std::size_t i) {
        if (i + 1 != reload_after) return;
        scenario.wait_until_through(i + 1);
        *reload = scenario.dataplane().reload_steering(parse_test_profile(reload_to, port.device()));
      };
    }
    return scenario.run(traffic_.frames, traffic_.queue_of, options);
  }

  PreparedTraffic traffic_;
};

TEST_F(Backends, L2SendsEveryConnectionToItsBackendFromItsOwner) {
  const Profile profile = parse_test_profile(fleet_profile());
  ASSERT_EQ(profile.steering.backends.size(), kBackends);
  std::map<std::uint64_t, Sent> sent;
  std::array<std::uint8_t, 6> port_mac{};
  const ScenarioResult r = run(fleet_profile(), sent, port_mac);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "");

  const auto& packets = traffic_.traffic.packets;
  std::size_t malformed = 0;
  for (const auto& d : traffic_.decision) malformed += d.packet.verdict == Verdict::kMalformed;
  EXPECT_EQ(r.stats.drops_sum(), malformed);
  ASSERT_EQ(sent.size() + malformed, r.sent);

  std::map<int, std::set<unsigned>> backends_of_connection;
  std::array<std::uint64_t, kBackends> per_backend{};
  std::size_t by_server_id = 0, first_flight = 0;
  for (const auto& [seq, s] : sent) {
    const Decision& d = traffic_.decision[seq];
    ASSERT_NE(d.resolution.backend, kNoBackend) << "frame " << seq;
    ASSERT_EQ(s.backend, d.resolution.backend) << "frame " << seq;
    ASSERT_EQ(s.src, port_mac) << "frame " << seq << ": the source MAC is the TX port's";
    // The backend's owner sent it: backends are spread evenly over owners.
    ASSERT_EQ(s.tx_queue, profile.steering.backends[s.backend].owner_lcore - 1) << "frame " << seq;
    ASSERT_EQ(s.tx_queue, d.resolution.owner_index);
    ++per_backend[s.backend];
    const auto& p = packets[seq];
    if (p.direction == Direction::kClientToServer && p.dcid_server_chosen) {
      ++by_server_id;
      ASSERT_EQ(s.backend, unsigned(p.server_id.at(0) << 8 | p.server_id.at(1)) - 1) << "frame " << seq;
      backends_of_connection[p.connection].insert(s.backend);
    }
    first_flight += p.first_flight();
  }
  for (const auto& [conn, b] : backends_of_connection) EXPECT_EQ(b.size(), 1u) << "connection " << conn;
  EXPECT_GT(by_server_id, 1000u);
  EXPECT_GT(first_flight, 1000u);
  // Owners spread 8 backends 4 and 4, and the counters agree with the wire.
  unsigned on_owner[kLcores] = {};
  for (const auto& b : profile.steering.backends) ++on_owner[b.owner_lcore - 1];
  EXPECT_EQ(on_owner[0], 4u);
  EXPECT_EQ(on_owner[1], 4u);
  ASSERT_EQ(r.stats.backends.size(), kBackends);
  std::uint64_t connections = 0;
  for (unsigned b = 0; b < kBackends; ++b) {
    const BackendSnapshot& bs = r.stats.backends[b];
    EXPECT_EQ(bs.name, "b" + std::to_string(b));
    EXPECT_EQ(bs.packets, per_backend[b]) << bs.name;
    EXPECT_GT(bs.packets, 0u) << bs.name;
    EXPECT_EQ(bs.backend_down, 0u);
    connections += bs.connections;
  }
  // A backend counts the connections whose handshake (a long header) it was
  // sent; the owners also count each CID first seen in a short header (an
  // active migration's, a stray one's) as a connection of its own, and the
  // backends used to copy them: a migrated connection counted twice.
  std::size_t active = 0;
  for (const auto& c : traffic_.traffic.connections) active += c.migration == traffic::Migration::kActive;
  ASSERT_GT(active, 0u);
  EXPECT_GE(connections, traffic_.traffic.connections.size());
  EXPECT_LT(connections, r.stats.owner_total.connections) << "short-header CIDs counted as connections";
}

TEST_F(Backends, DrainedBackendKeepsItsConnectionsAndDownBackendGetsNothing) {
  const std::size_t half = traffic_.frames.size() / 2;
  const std::string after = fleet_profile({{2, "draining"}, {5, "down"}});
  PacketClassifier drained(parse_test_profile(after).steering);
  std::map<std::uint64_t, Sent> sent;
  std::array<std::uint8_t, 6> port_mac{};
  Dataplane::SteeringReload reload;
  const ScenarioResult r = run(fleet_profile(), sent, port_mac, after, half, &reload);
  ASSERT_FALSE(r.stalled);
  ASSERT_TRUE(reload.applied) << reload.message;
  EXPECT_NE(reload.message.find("backends 8 -> 8 (1 draining, 1 down), backend hash 1048583 slots, delivery l2"),
            std::string::npos)
      << reload.message;
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "");

  const auto& packets = traffic_.traffic.packets;
  std::uint64_t to_down = 0, drained_kept = 0, new_after = 0, malformed_after = 0;
  for (std::size_t seq = half; seq < traffic_.frames.size(); ++seq) {
    const auto& p = packets[seq];
    const Decision d = drained.classify(p.frame.data(), p.frame.size());
    if (d.packet.verdict == Verdict::kMalformed) {
      ++malformed_after;
      continue;
    }
    const auto it = sent.find(seq);
    if (d.resolution.backend == 5) {
      ++to_down;
      EXPECT_EQ(it, sent.end()) << "frame " << seq << " reached a backend that is down";
      continue;
    }
    ASSERT_NE(it, sent.end()) << "frame " << seq;
    ASSERT_EQ(it->second.backend, d.resolution.backend) << "frame " << seq;
    if (d.resolution.how == ResolveMethod::kQuicLb) {
      drained_kept += d.resolution.backend == 2;
    } else {
      // Anything the hash places (a client's first Initials among it) goes
      // to an active backend only.
      ++new_after;
      EXPECT_NE(it->second.backend, 2u) << "frame " << seq << ": a new connection on a draining backend";
    }
  }
  EXPECT_GT(to_down, 50u);
  EXPECT_GT(drained_kept, 50u) << "the draining backend's connections go on";
  EXPECT_GT(new_after, 500u);
  ASSERT_EQ(r.stats.backends.size(), kBackends);
  EXPECT_EQ(r.stats.backends[5].backend_down, to_down);
  EXPECT_EQ(r.stats.backends[5].state, "down");
  EXPECT_EQ(r.stats.backends[2].state, "draining");
  EXPECT_EQ(r.stats.drops_total[std::size_t(DropReason::kBackendDown)], to_down);
  std::size_t malformed = 0;
  for (const auto& d : traffic_.decision) malformed += d.packet.verdict == Verdict::kMalformed;
  EXPECT_EQ(r.stats.drops_sum(), malformed + to_down);
  EXPECT_GE(malformed, malformed_after);
}

// VXLAN delivery through a port of MTU 1250: a frame whose IP packet no
// longer fits once encapsulated (50 octets around an IPv4 one, 70 around an
// IPv6 one, outer family = inner here) is dropped as too_big on its backend,
// and the client gets an ICMP "fragmentation needed" / ICMPv6 "packet too
// big" with the MTU it may use, out of the port the frame came in on.
// The fleet with addresses, on a port of MTU 1350 (IPv6 keeps the 1280
// octets it must, RFC 8200, after vxlan's 70; the client's larger IPv6
// datagrams do not fit), delivered by `delivery` (l2, or vxlan answering
// every frame too big).
std::string mtu_profile(bool vxlan) {
  std::string yaml = fleet_profile();
  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = yaml.find(from);
    if (at == std::string::npos) throw std::logic_error("no " + from);
    yaml.replace(at, from.size(), to);
  };
  replace("rss: false}", "rss: false, mtu: 1350}");
  if (vxlan)
    replace("delivery: {mode: l2}",
            "delivery: {mode: vxlan, source_ipv4: 10.9.0.1, source_ipv6: \"fd09::1\", vxlan_vni: 7, "
            "vxlan_mac: \"02:00:00:00:0c:01\", icmp_too_big_per_s: 1000000, icmp_too_big_per_client_per_s: 0}");
  for (unsigned b = 0; b < kBackends; ++b) {
    char from[64], to[128];
    std::snprintf(from, sizeof from, "name: b%u, ", b);
    std::snprintf(to, sizeof to, "name: b%u, ipv4: 10.9.1.%u, ipv6: \"fd09::1:%u\", ", b, b + 1, b + 1);
    replace(from, to);
  }
  return yaml;
}

// The frames as the router sends them: to the port's own MAC (a frame to
// another MAC gets no reply: delivery_test's IcmpTooBig tests).
struct FramesToPort {
  std::vector<std::vector<std::uint8_t>> copies;
  std::vector<const std::vector<std::uint8_t>*> frames;
  rte_ether_addr mac{};
  FramesToPort(Scenario& scenario, const PreparedTraffic& t) {
    if (rte_eth_macaddr_get(scenario.dataplane().port_id("wire"), &mac) != 0) throw std::runtime_error("no MAC");
    for (const auto* f : t.frames) {
      copies.push_back(*f);
      std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), copies.back().begin());
    }
    for (const auto& f : copies) frames.push_back(&f);
  }
};

TEST_F(Backends, TooBigOnceEncapsulatedIsDroppedCountedAndAnsweredWithTheUsableMtu) {
  RingPort port(kLcores, 1024, kLcores, 1 << 16);
  Scenario scenario(mtu_profile(true), port);
  FramesToPort to_port(scenario, traffic_);
  const auto& frames = to_port.frames;
  const rte_ether_addr& port_mac = to_port.mac;
  std::uint64_t icmp4 = 0, icmp6 = 0, encapsulated = 0;
  std::set<std::uint16_t> announced;
  std::set<unsigned> not_quic_entropy;  // the VXLAN source ports of UDP that is not QUIC
  RunOptions options;
  options.inspect_tx = [&](const rte_mbuf* m, unsigned) {
    const auto* f = rte_pktmbuf_mtod(m, const std::uint8_t*);
    const std::uint32_t len = rte_pktmbuf_data_len(m);
    ASSERT_GE(len, 14u + 40u + 8u);
    if (f[12] == 0x08 && f[23] == 1) {  // IPv4, ICMP: our reply
      EXPECT_EQ(f[34], 3);  // destination unreachable
      EXPECT_EQ(f[35], 4);  // fragmentation needed
      announced.insert(std::uint16_t(f[40] << 8 | f[41]));
      EXPECT_TRUE(std::equal(f + 6, f + 12, std::begin(port_mac.addr_bytes))) << "from the port's MAC";
      ++icmp4;
    } else if (f[12] == 0x86 && f[20] == 58) {  // IPv6, ICMPv6
      EXPECT_EQ(f[54], 2);  // packet too big
      announced.insert(std::uint16_t(f[60] << 8 | f[61]));
      ++icmp6;
    } else {
      // Encapsulated: outer UDP to 4789, within the MTU.
      const unsigned ip = f[12] == 0x86 ? 40 : 20;
      EXPECT_EQ(f[14 + ip + 2] << 8 | f[14 + ip + 3], 4789);
      EXPECT_LE(len - 14, 1350u);
      ++encapsulated;
      // The inner frame: outer IP, UDP 8, VXLAN 8, Ethernet 14, then IP.
      const std::uint8_t* inner = f + 14 + ip + 8 + 8 + 14;
      const unsigned inner_ip = inner[0] >> 4 == 6 ? 40 : 20;
      const unsigned sport = inner[inner_ip] << 8 | inner[inner_ip + 1];
      const unsigned dport = inner[inner_ip + 2] << 8 | inner[inner_ip + 3];
      if (inner[inner_ip == 40 ? 6 : 9] == 17 && sport != 443 && dport != 443)
        not_quic_entropy.insert(f[14 + ip] << 8 | f[14 + ip + 1]);
    }
  };
  const ScenarioResult r = scenario.run(frames, traffic_.queue_of, options);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  EXPECT_EQ(r.accounting, "");

  // What should not fit, and which of those an ICMP error may answer: every
  // IPv6 packet, and IPv4 ones that forbid fragmentation (DF).
  std::uint64_t too_big = 0, answerable = 0, fits = 0;
  for (const auto& p : traffic_.traffic.packets) {
    const ParsedPacket pp = parse_packet(p.frame.data(), p.frame.size(), ParserConfig{});
    if (pp.verdict == Verdict::kMalformed) continue;
    const std::uint8_t* ip = p.frame.data() + pp.l3_offset;
    const bool v6 = pp.ip_version == 6;
    const unsigned ip_len = v6 ? 40u + (ip[4] << 8 | ip[5]) : unsigned(ip[2] << 8 | ip[3]);
    if (ip_len + (v6 ? 70u : 50u) > 1350u) {
      ++too_big;
      answerable += v6 || (ip[6] & 0x40) != 0;
    } else {
      ++fits;
    }
  }
  ASSERT_GT(too_big, 100u) << "the traffic must have frames that do not fit";
  EXPECT_EQ(r.stats.drops_total[std::size_t(DropReason::kTooBig)], too_big);
  std::uint64_t counted = 0, sent = 0;
  for (const auto& b : r.stats.backends) counted += b.too_big, sent += b.icmp_sent;
  EXPECT_EQ(counted, too_big);
  EXPECT_EQ(sent, icmp4 + icmp6);
  EXPECT_EQ(sent, answerable);
  EXPECT_GT(icmp4 + icmp6, 0u);
  EXPECT_EQ(encapsulated, fits);
  // UDP that is not QUIC has no connection, but its flows still spread over
  // the paths to the backends (issue 38: they all left with one port).
  EXPECT_GT(not_quic_entropy.size(), 3u);
  // The MTU announced is what the port leaves of the frame once encapsulated.
  for (const std::uint16_t mtu : announced) EXPECT_TRUE(mtu == 1350 - 50 || mtu == 1350 - 70) << mtu;
}

// A reload from l2 to an encapsulation that answers frames too big for it
// turns the replies on: the receivers record each packet's port from then on
// (issue 38: the ICMP set-up was fixed at start-up, though delivery could
// change by reload).
TEST_F(Backends, AReloadToAnEncapsulationAnswersFramesTooBig) {
  RingPort port(kLcores, 1024, kLcores, 1 << 16);
  Scenario scenario(mtu_profile(false), port);
  FramesToPort to_port(scenario, traffic_);
  const Profile vxlan = parse_test_profile(mtu_profile(true), port.device());
  std::uint64_t icmp = 0;
  RunOptions options;
  options.inspect_tx = [&](const rte_mbuf* m, unsigned) {
    const auto* f = rte_pktmbuf_mtod(m, const std::uint8_t*);
    icmp += (f[12] == 0x08 && f[23] == 1) || (f[12] == 0x86 && f[20] == 58);
  };
  Dataplane::SteeringReload reload;
  options.after_send = [&](std::size_t i) {
    if (i != 0) return;
    scenario.wait_until_through(1);
    reload = scenario.dataplane().reload_steering(vxlan);
  };
  const ScenarioResult r = scenario.run(to_port.frames, traffic_.queue_of, options);
  ASSERT_TRUE(reload.applied) << reload.message;
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.mbufs_leaked, 0);
  std::uint64_t counted = 0, sent = 0;
  for (const auto& b : r.stats.backends) counted += b.too_big, sent += b.icmp_sent;
  EXPECT_GT(counted, 100u);
  EXPECT_EQ(sent, counted) << "every frame too big is an IPv6 one, and each is answered";
  EXPECT_EQ(icmp, sent);
}

}  // namespace
}  // namespace qs::test
