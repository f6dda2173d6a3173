// PeerSync (dataplane/runtime/peer_sync.h), no EAL: instances in one process
// on loopback, each with its own forwarding tables, as two appliances would
// have. What one learns reaches the other; a starting one takes a copy
// before it is ready; forged, unknown and flooding peers are refused and
// counted; and a connection that rebinds its NAT on one instance and then
// moves to the other keeps its backend.
#include "dataplane/runtime/peer_sync.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_cycles.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "steering/packet_classifier.h"
#include "tests/traffic/frame.h"
#include "tests/traffic/quic_packets.h"
#include "tests/traffic/quic_wire.h"

namespace qs {
namespace {

using Bytes = std::vector<std::uint8_t>;
using traffic::random_cid;
using namespace std::chrono_literals;

// The tables' clock as the sync threads read it: the TSC in "milliseconds"
// of a nominal 1 GHz (only differences matter, and both sides share it).
constexpr std::uint64_t kTscPerMs = 1000000;
std::uint32_t tables_now() { return std::uint32_t(rte_rdtsc() / kTscPerMs); }

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

ListenAddress loopback(std::uint16_t port) { return ListenAddress{false, "127.0.0.1", port}; }

SteeringConfig fleet() {
  SteeringConfig s;
  s.owner_lcores = {1, 2};
  s.fallback_key = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
  s.forwarding.max_entries = 20000;
  s.forwarding.max_setup_entries = 4000;
  s.forwarding.idle_timeout_ms = 30000;
  for (std::uint16_t i = 0; i < 8; ++i) {
    BackendConfig b;
    b.name = "srv" + std::to_string(i);
    b.slot = i;
    b.owner_lcore = 1 + i % 2;
    s.backends.push_back(b);
  }
  return s;
}

PeerSyncConfig sync_config(std::uint16_t listen, std::vector<std::uint16_t> peers) {
  PeerSyncConfig c;
  c.enabled = true;
  c.listen = loopback(listen);
  for (std::uint16_t p : peers) c.peers.push_back(loopback(p));
  for (std::size_t i = 0; i < c.key.size(); ++i) c.key[i] = std::uint8_t(0x40 + i);
  c.resync_timeout_ms = 1500;
  c.ring_size = 1024;
  return c;
}

// One appliance: its tables (keyed by the sync secret), a classifier that
// learns into them and logs for the sync thread, and the thread.
struct Appliance {
  SteeringConfig steering;
  PeerSyncConfig config;
  ForwardingTables tables;
  PacketClassifier classifier;
  LearnedRing ring{1024};
  std::unique_ptr<PeerSync> sync;
  Appliance(const SteeringConfig& s, const PeerSyncConfig& c)
      : steering(s), config(c), tables(s.forwarding, PeerSync::table_key(c)), classifier(s) {
    classifier.use_tables(&tables);
    sync = std::make_unique<PeerSync>(config, steering.forwarding, tables, std::vector<LearnedRing*>{&ring}, kTscPerMs);
    sync->set_backends(steering.backends);
  }
  // Classifies a frame as a receiver does, handing what it learned to the ring.
  Resolution route(const Bytes& f) {
    LearnedLog log;
    LearnCounts counts;
    counts.log = &log;
    const Resolution r = classifier.classify(f.data(), f.size(), tables_now(), &counts).resolution;
    ring.enqueue_burst(log.entries, log.n);
    return r;
  }
};

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

const traffic::IpAddress kVip = traffic::IpAddress::v4(198, 18, 0, 1);

Bytes datagram(std::uint16_t client_port, const Bytes& quic) {
  return traffic::build_udp_frame(traffic::L2Header{}, traffic::IpAddress::v4(10, 1, 2, 3), client_port, kVip, 443,
                                  quic, 1, 0);
}
Bytes long_packet(std::uint16_t port, traffic::LongType type, const Bytes& dcid, const Bytes& scid) {
  return datagram(port, traffic::long_header_packet(type, dcid, scid));
}
Bytes short_packet(std::uint16_t port, const Bytes& dcid) { return datagram(port, traffic::short_header_packet(dcid)); }

// Connections to random-CID servers set up on `a`, each then rebinding its
// NAT there (a new port, the same DCID), then moved to `b`: with sync every
// one keeps its backend on `b`; without, most do not (RulesTierChange).
TEST(PeerSync, ARebindingThenAMoveToAPeerKeepsTheBackend) {
  const std::uint16_t pa = free_port(), pb = free_port();
  Appliance a(fleet(), sync_config(pa, {pb})), b(fleet(), sync_config(pb, {pa}));
  a.sync->start();
  b.sync->start();
  std::mt19937_64 rng(37);
  struct Connection {
    Bytes cid;
    std::uint16_t rebound_port;
    std::uint16_t backend;
  };
  std::vector<Connection> connections;
  for (std::uint16_t i = 0; i < 200; ++i) {
    const std::uint16_t port = std::uint16_t(20000 + i), rebound = std::uint16_t(40000 + i);
    const Bytes odcid = random_cid(rng, 12), scid = random_cid(rng, 8), server_cid = random_cid(rng, 8);
    const Resolution opened = a.route(long_packet(port, traffic::LongType::kInitial, odcid, scid));
    ASSERT_EQ(a.route(long_packet(port, traffic::LongType::kHandshake, server_cid, scid)).backend, opened.backend);
    ASSERT_EQ(a.route(short_packet(rebound, server_cid)).backend, opened.backend) << "the DCID follows it on a";
    connections.push_back({server_cid, rebound, opened.backend});
  }
  ASSERT_TRUE(eventually([&] { return b.sync->snapshot().entries_added >= 400; }))
      << b.sync->snapshot().entries_added << " entries added on b";
  unsigned kept = 0;
  for (const Connection& c : connections) kept += b.route(short_packet(c.rebound_port, c.cid)).backend == c.backend;
  EXPECT_EQ(kept, connections.size());
  const PeerSyncSnapshot sa = a.sync->snapshot(), sb = b.sync->snapshot();
  EXPECT_GE(sa.entries_sent, 400u);
  EXPECT_EQ(sb.refused_bad_mac + sb.refused_replayed + sb.refused_unknown_backend + sb.refused_over_share, 0u);
  EXPECT_EQ(sa.ready, 1u);
}

// A starting instance asks for a copy: it is not ready until the copy is in,
// and then holds what its peer learned before it started.
TEST(PeerSync, AStartingInstanceTakesACopyBeforeItIsReady) {
  const std::uint16_t pa = free_port(), pb = free_port();
  Appliance a(fleet(), sync_config(pa, {pb}));
  a.sync->start();
  std::mt19937_64 rng(5);
  std::vector<std::pair<Bytes, std::uint16_t>> learned;
  for (std::uint16_t i = 0; i < 300; ++i) {
    const Bytes odcid = random_cid(rng, 12), scid = random_cid(rng, 8), server_cid = random_cid(rng, 8);
    const std::uint16_t port = std::uint16_t(10000 + i);
    const Resolution r = a.route(long_packet(port, traffic::LongType::kInitial, odcid, scid));
    a.route(long_packet(port, traffic::LongType::kHandshake, server_cid, scid));
    learned.emplace_back(server_cid, r.backend);
  }
  PeerSyncConfig late = sync_config(pb, {pa});
  late.resync_timeout_ms = 60000;  // only the copy makes it ready
  Appliance b(fleet(), late);
  EXPECT_FALSE(b.sync->ready());
  b.sync->start();
  ASSERT_TRUE(eventually([&] { return b.sync->ready(); })) << "no copy came";
  EXPECT_EQ(b.sync->snapshot().resyncs_completed, 1u);
  EXPECT_EQ(a.sync->snapshot().resyncs_served, 1u);
  unsigned kept = 0;
  for (const auto& [cid, backend] : learned) kept += b.route(short_packet(55555, cid)).backend == backend;
  EXPECT_EQ(kept, learned.size()) << "every DCID learned before b started, from a 4-tuple b never saw";
}

// Without any peer answering, a start goes on after resync_timeout_ms.
TEST(PeerSync, WithNoPeerAStartIsReadyAfterTheTimeout) {
  PeerSyncConfig c = sync_config(free_port(), {free_port()});
  c.resync_timeout_ms = 300;
  Appliance a(fleet(), c);
  a.sync->start();
  EXPECT_FALSE(a.sync->ready());
  ASSERT_TRUE(eventually([&] { return a.sync->ready(); }));
  EXPECT_EQ(a.sync->snapshot().resync_timeouts, 1u);
}

// Raw datagrams at an instance: from an address that is no peer, under
// another key, a replay of a real message, and a peer whose entries name a
// backend this instance lacks.
TEST(PeerSync, ForgedUnknownAndReplayedMessagesAreRefusedAndCounted) {
  const std::uint16_t pb = free_port(), pa = free_port();
  Appliance b(fleet(), sync_config(pb, {pa}));
  b.sync->start();
  // The peer's socket, as a test double: bound where b expects its peer.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in self{};
  self.sin_family = AF_INET;
  self.sin_port = htons(pa);
  self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self), 0);
  sockaddr_in to = self;
  to.sin_port = htons(pb);
  const auto send = [&](const std::uint8_t* d, std::size_t n) {
    ::sendto(fd, d, n, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  };
  const peer_sync::Keys keys = peer_sync::Keys::derive(sync_config(0, {}).key);
  const auto message = [&](const peer_sync::Keys& k, std::uint64_t seq, std::uint32_t backend_id, std::uint64_t key) {
    peer_sync::Header h;
    h.boot_id = 77;
    h.sequence = seq;
    h.sent_ms = std::uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    h.table_buckets = b.tables.established().bucket_count();
    const peer_sync::Entry e{key, backend_id, 0, 0};
    Bytes out(peer_sync::kMaxDatagram);
    out.resize(peer_sync::encode(k, h, &e, 1, out.data(), out.size()));
    return out;
  };
  const Bytes good = message(keys, 1, keys.backend_id("srv3"), 0x1234567812345678ull);
  send(good.data(), good.size());
  ASSERT_TRUE(eventually([&] { return b.sync->snapshot().entries_added == 1; }));
  EXPECT_EQ(b.tables.established().find(0x1234567812345678ull, tables_now()), 3) << "srv3 is slot 3";
  send(good.data(), good.size());  // replayed
  std::array<std::uint8_t, 32> other{};
  other[0] = 1;
  const Bytes forged = message(peer_sync::Keys::derive(other), 2, keys.backend_id("srv3"), 42);
  send(forged.data(), forged.size());
  const Bytes unknown = message(keys, 3, keys.backend_id("srv99"), 43);
  send(unknown.data(), unknown.size());
  const std::uint8_t junk[10] = {};
  send(junk, sizeof junk);
  ASSERT_TRUE(eventually([&] {
    const PeerSyncSnapshot s = b.sync->snapshot();
    return s.refused_replayed == 1 && s.refused_bad_mac == 1 && s.refused_unknown_backend == 1 &&
           s.refused_malformed == 1;
  })) << "replayed " << b.sync->snapshot().refused_replayed << ", bad_mac " << b.sync->snapshot().refused_bad_mac
      << ", unknown_backend " << b.sync->snapshot().refused_unknown_backend << ", malformed "
      << b.sync->snapshot().refused_malformed;
  EXPECT_EQ(b.tables.established().find(42, tables_now()), ForwardingTable::kNone);
  EXPECT_EQ(b.tables.established().find(43, tables_now()), ForwardingTable::kNone);
  // From a socket that is no peer.
  const int stranger = ::socket(AF_INET, SOCK_DGRAM, 0);
  const Bytes again = message(keys, 4, keys.backend_id("srv3"), 44);
  ::sendto(stranger, again.data(), again.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  ASSERT_TRUE(eventually([&] { return b.sync->snapshot().refused_unknown_peer == 1; }));
  EXPECT_EQ(b.tables.established().find(44, tables_now()), ForwardingTable::kNone);
  ::close(stranger);
  ::close(fd);
}

// A peer that floods new entries adds its share of the table and no more.
TEST(PeerSync, AFloodingPeerAddsItsShareAndNoMore) {
  const std::uint16_t pa = free_port(), pb = free_port();
  PeerSyncConfig flooder = sync_config(pa, {pb});
  flooder.entries_per_s = 1000000;
  PeerSyncConfig victim = sync_config(pb, {pa});
  victim.max_peer_share = 0.05;  // 1,000 of 20,000
  victim.entries_per_s = 1000000;
  Appliance a(fleet(), flooder), b(fleet(), victim);
  a.sync->start();
  b.sync->start();
  std::mt19937_64 rng(3);
  for (unsigned i = 0; i < 5000; ++i) {
    LearnedEntry e{rng(), std::uint16_t(i % 8), 0};
    while (a.ring.enqueue_burst(&e, 1) == 0) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(eventually([&] {
    const PeerSyncSnapshot s = b.sync->snapshot();
    return s.entries_added + s.refused_over_share >= 5000;
  })) << b.sync->snapshot().entries_added << " added, " << b.sync->snapshot().refused_over_share << " over share";
  EXPECT_EQ(a.sync->snapshot().send_over_rate, 0u);
  const PeerSyncSnapshot s = b.sync->snapshot();
  // The share refills at 1,000 per idle timeout (30 s): a few more may
  // come in during the test's second or so.
  EXPECT_GE(s.entries_added, 1000u);
  EXPECT_LE(s.entries_added, 1100u);
  EXPECT_EQ(s.entries_added + s.refused_over_share, 5000u);
  EXPECT_EQ(b.tables.established().size(), s.entries_added);
}

}  // namespace
}  // namespace qs
