// The forwarding tables (steering/forwarding_table.h) and the rules that use
// them (steering/forwarding_rules.h), on frames built here: a connection whose
// server mints random CIDs, followed packet by packet.
#include "steering/forwarding_rules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "steering/packet_classifier.h"
#include "tests/steering/classify_burst.h"
#include "tests/traffic/frame.h"
#include "tests/traffic/quic_packets.h"
#include "tests/traffic/quic_traffic.h"
#include "tests/traffic/quic_wire.h"

namespace qs {
namespace {

using Bytes = std::vector<std::uint8_t>;
using traffic::IpAddress;
using traffic::random_cid;

// ---------------------------------------------------------------- the table

TEST(ForwardingTable, FindsWhatWasInsertedAndKeepsTheFirstOwner) {
  ForwardingTable t(1000, ForwardingTable::Policy::kKeep);
  EXPECT_EQ(t.find(0x1234567890abcdefULL, 0), ForwardingTable::kNone);
  EXPECT_EQ(t.insert(0x1234567890abcdefULL, 3, 0), ForwardingTable::Insert::kInserted);
  EXPECT_EQ(t.find(0x1234567890abcdefULL, 0), 3);
  EXPECT_EQ(t.insert(0x1234567890abcdefULL, 5, 0), ForwardingTable::Insert::kPresent);
  EXPECT_EQ(t.find(0x1234567890abcdefULL, 0), 3) << "an entry's owner never changes";
  EXPECT_EQ(t.size(), 1u);
  // Another hash with the same bucket bits but another fingerprint.
  EXPECT_EQ(t.find(0x1234567890abcdefULL ^ (1ULL << 40), 0), ForwardingTable::kNone);
}

TEST(ForwardingTable, HoldsWhatItWasSizedFor) {
  constexpr std::uint32_t kEntries = 20000;
  ForwardingTable t(kEntries, ForwardingTable::Policy::kKeep);
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> keys(kEntries);
  for (auto& k : keys) k = rng();
  unsigned refused = 0;
  for (std::size_t i = 0; i < keys.size(); ++i)
    refused += t.insert(keys[i], std::uint16_t(i % 7), 0) == ForwardingTable::Insert::kFull;
  EXPECT_EQ(refused, 0u);
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(t.find(keys[i], 0), i % 7) << i;
  EXPECT_EQ(t.size(), kEntries);
}

TEST(ForwardingTable, AFullKeepTableRefusesNewKeysAndKeepsTheOldOnes) {
  ForwardingTable t(16, ForwardingTable::Policy::kKeep);
  std::mt19937_64 rng(1);
  std::vector<std::uint64_t> in;
  unsigned full = 0;
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t k = rng();
    const auto r = t.insert(k, 1, std::uint32_t(i));
    if (r == ForwardingTable::Insert::kInserted) in.push_back(k);
    full += r == ForwardingTable::Insert::kFull;
    ASSERT_NE(r, ForwardingTable::Insert::kEvicted);
  }
  EXPECT_GT(full, 0u);
  EXPECT_EQ(t.size(), in.size());
  EXPECT_LE(in.size(), t.slot_count());
  for (std::uint64_t k : in) EXPECT_EQ(t.find(k, 300), 1) << "nothing pushed out an entry";
}

// The smallest table has two buckets, so every key's two buckets are the
// same pair: ten keys fill it, and an eleventh evicts the least recently
// seen entry of its first bucket.
TEST(ForwardingTable, AFullEvictingTableReplacesTheLeastRecentlySeen) {
  ForwardingTable t(1, ForwardingTable::Policy::kEvictOldest);
  ASSERT_EQ(t.bucket_count(), 2u);
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> keys;
  while (keys.size() < 11) keys.push_back(rng() & ~1ULL);  // first bucket 0
  for (std::size_t i = 0; i < 10; ++i)
    ASSERT_EQ(t.insert(keys[i], std::uint16_t(i), std::uint32_t(i)), ForwardingTable::Insert::kInserted) << i;
  // Refresh every entry but those inserted at times 2 and 3 (at least one
  // of them is in bucket 0: keys alternate between the two).
  for (std::size_t i = 0; i < 10; ++i)
    if (i != 2 && i != 3) t.find(keys[i], 100);
  EXPECT_EQ(t.insert(keys[10], 10, 101), ForwardingTable::Insert::kEvicted);
  EXPECT_EQ(t.find(keys[10], 101), 10);
  EXPECT_EQ((t.find(keys[2], 101) == ForwardingTable::kNone) + (t.find(keys[3], 101) == ForwardingTable::kNone), 1)
      << "one of the least recently seen went";
  for (std::size_t i = 0; i < 10; ++i) {
    if (i == 2 || i == 3) continue;
    EXPECT_EQ(t.find(keys[i], 101), i);
  }
  EXPECT_EQ(t.size(), 10u);
}

// Another lcore may stamp an entry with a time later than the `now` an
// evicting inserter read a moment before: that entry is the freshest, not
// one seen 49 days ago.
TEST(ForwardingTable, EvictionCountsATimeAheadOfNowAsFresh) {
  ForwardingTable t(1, ForwardingTable::Policy::kEvictOldest);
  std::mt19937_64 rng(4);
  std::vector<std::uint64_t> keys;
  while (keys.size() < 11) keys.push_back(rng() & ~1ULL);
  for (std::size_t i = 0; i < 10; ++i) ASSERT_EQ(t.insert(keys[i], std::uint16_t(i), 50), ForwardingTable::Insert::kInserted);
  // All seen at 100 but keys 2 and 3 (still at 50), and keys 0 and 1 (one
  // of each bucket) seen at 102 by a receiver whose clock read later.
  for (std::size_t i = 4; i < 10; ++i) t.find(keys[i], 100);
  t.find(keys[0], 102);
  t.find(keys[1], 102);
  EXPECT_EQ(t.insert(keys[10], 10, 101), ForwardingTable::Insert::kEvicted);
  EXPECT_EQ(t.find(keys[0], 102), 0) << "seen after now: the freshest entry stays";
  EXPECT_EQ(t.find(keys[1], 102), 1);
  EXPECT_EQ((t.find(keys[2], 102) == ForwardingTable::kNone) + (t.find(keys[3], 102) == ForwardingTable::kNone), 1);
}

// The sweeper's `now` is read before other receivers stamp entries: an
// entry seen a millisecond after it is fresh.
TEST(ForwardingTable, ExpireKeepsEntriesSeenAfterItsNow) {
  ForwardingTable t(100, ForwardingTable::Policy::kKeep);
  t.insert(7ULL << 20, 1, 1001);
  t.insert(9ULL << 20, 2, 500);
  t.find(9ULL << 20, 1002);
  EXPECT_EQ(t.expire(1000, 1000, t.bucket_count()), 0u);
  EXPECT_EQ(t.find(7ULL << 20, 1003), 1);
  EXPECT_EQ(t.find(9ULL << 20, 1003), 2);
  EXPECT_EQ(t.size(), 2u);
  // And they still go once idle for the timeout.
  EXPECT_EQ(t.expire(2004, 1000, t.bucket_count()), 2u);
}

// Keys that differ in one bit are told apart wherever they sit: the
// fingerprint and the bucket's index together hold 48 + log2(buckets) bits
// of the hash (all 64 from 65,536 buckets on), in the first bucket and in
// the second. Half the keys of a busy table live in their second bucket.
TEST(ForwardingTable, KeysDifferingInOneBitAreToldApartInEitherBucket) {
  for (const std::uint32_t entries : {1000u, 262144u}) {
    ForwardingTable t(entries, ForwardingTable::Policy::kKeep);
    unsigned bits = 0;
    while ((1u << bits) < t.bucket_count()) ++bits;
    const unsigned told_apart = std::min(64u, 48u + bits);
    std::mt19937_64 rng(entries);
    std::set<std::uint64_t> in;
    for (std::uint32_t i = 0; i < entries * 3 / 4; ++i) {
      const std::uint64_t k = rng();
      if (t.insert(k, 1, 0) == ForwardingTable::Insert::kInserted) in.insert(k);
    }
    ASSERT_GT(in.size(), entries / 2);
    unsigned confused = 0;
    for (std::uint64_t k : in) {
      for (unsigned bit = 0; bit < told_apart; ++bit) {
        const std::uint64_t other = k ^ (1ULL << bit);
        if (t.find(other, 0) != ForwardingTable::kNone && in.count(other) == 0) ++confused;
      }
    }
    EXPECT_EQ(confused, 0u) << entries << " entries: keys one bit apart taken for each other";
  }
}

TEST(ForwardingTable, ExpireRemovesOnlyEntriesIdleForLongerThanTheTimeout) {
  ForwardingTable t(100, ForwardingTable::Policy::kKeep);
  t.insert(0xaaaa0000ULL << 16, 1, 1000);
  t.insert(0xbbbb0000ULL << 16 | 1, 2, 1000);
  EXPECT_EQ(t.find(0xaaaa0000ULL << 16, 1900), 1);  // seen again at 1900
  EXPECT_EQ(t.expire(2000, 1000, t.bucket_count()), 0u) << "idle for exactly the timeout stays";
  EXPECT_EQ(t.expire(2001, 1000, t.bucket_count()), 1u);
  EXPECT_EQ(t.find(0xbbbb0000ULL << 16 | 1, 2001), ForwardingTable::kNone);
  EXPECT_EQ(t.find(0xaaaa0000ULL << 16, 2001), 1);
  EXPECT_EQ(t.size(), 1u);
  // The clock wraps (milliseconds in 32 bits, about 49 days).
  ForwardingTable w(100, ForwardingTable::Policy::kKeep);
  w.insert(42ULL << 16, 1, 0xfffffff0u);
  EXPECT_EQ(w.expire(0x10, 1000, w.bucket_count()), 0u);
  EXPECT_EQ(w.expire(0xfffffff0u + 1001, 1000, w.bucket_count()), 1u);
}

// Receivers insert and look up at once: each finds every key it or the
// other inserted with the owner it was given (ThreadSanitizer checks the
// publication).
TEST(ForwardingTable, ConcurrentInsertersAndReadersAgree) {
  ForwardingTable t(40000, ForwardingTable::Policy::kKeep);
  auto worker = [&](std::uint64_t seed, std::uint16_t owner) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 10000; ++i) {
      const std::uint64_t k = rng();
      ASSERT_EQ(t.insert(k, owner, 0), ForwardingTable::Insert::kInserted);
      ASSERT_EQ(t.find(k, 0), owner);
    }
  };
  std::thread a(worker, 1, 1), b(worker, 2, 2);
  a.join();
  b.join();
  std::mt19937_64 ra(1), rb(2);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(t.find(ra(), 0), 1);
    ASSERT_EQ(t.find(rb(), 0), 2);
  }
}

// Inserters that evict and a sweeper that expires change the same slots at
// once; every change is a compare-and-swap, so size() stays the count of
// occupied slots (a plain store of an eviction over a slot the sweeper had
// just emptied would leave it one short, and it could wrap).
TEST(ForwardingTable, SizeStaysTheCountOfOccupiedSlotsUnderConcurrentInsertEvictAndExpire) {
  ForwardingTable t(16, ForwardingTable::Policy::kEvictOldest);
  std::atomic<std::uint32_t> clock{0};
  std::atomic<bool> done{false};
  auto inserter = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 200000; ++i) {
      const std::uint32_t now = clock.fetch_add(1, std::memory_order_relaxed);
      ASSERT_NE(t.insert(rng(), std::uint16_t(i & 7), now), ForwardingTable::Insert::kFull)
          << "an evicting table makes room";
      // One more than the slots while the sweeper is between emptying a
      // slot and counting it, never a wrapped count.
      ASSERT_LE(t.size(), t.slot_count() + 1) << "size wrapped";
    }
  };
  std::thread sweeper([&] {
    while (!done.load(std::memory_order_relaxed))
      t.expire(clock.load(std::memory_order_relaxed), 16, t.bucket_count());
  });
  std::thread a(inserter, 1), b(inserter, 2);
  a.join();
  b.join();
  done = true;
  sweeper.join();
  EXPECT_EQ(t.size(), t.occupied_slots());
}

// Lcores spending one entry's learn credit at once take each credit once.
TEST(ForwardingTable, ConcurrentSpendersTakeEachCreditOnce) {
  ForwardingTable t(100, ForwardingTable::Policy::kKeep);
  for (int trial = 0; trial < 200; ++trial) {
    const std::uint64_t key = 0x9e3779b97f4a7c15ULL * std::uint64_t(trial + 1);
    ASSERT_EQ(t.insert(key, 3, 0, ForwardingTable::kMaxCredit), ForwardingTable::Insert::kInserted);
    std::atomic<unsigned> taken{0};
    auto spender = [&] {
      for (int i = 0; i < 10; ++i) {
        ForwardingTable::Entry e = t.find_entry(key, 0);
        ASSERT_TRUE(e.found());
        taken += t.spend(e);
      }
    };
    std::thread a(spender), b(spender);
    a.join();
    b.join();
    EXPECT_EQ(taken.load(), ForwardingTable::kMaxCredit);
    EXPECT_EQ(t.find_entry(key, 0).credit(), 0u);
    EXPECT_EQ(t.find(key, 0), 3) << "spending leaves the target";
    t.expire(1000, 0, t.bucket_count());
  }
}

// ---------------------------------------------------------------- the rules

SteeringConfig two_owners(bool tables) {
  SteeringConfig s;
  s.owner_lcores = {1, 2};
  s.short_dcid_len = 8;
  s.fallback_key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  s.forwarding.enabled = tables;
  s.forwarding.max_entries = 1000;
  s.forwarding.max_setup_entries = 1000;
  s.forwarding.idle_timeout_ms = 30000;
  return s;
}

struct Tuple {
  IpAddress client = IpAddress::v4(10, 0, 0, 1);
  std::uint16_t port = 40000;
};

const IpAddress kServer = IpAddress::v4(198, 18, 0, 1);
const IpAddress kServer6 = traffic::TrafficOptions::ipv6_address("2001:db8::443");

Bytes frame_of(const Tuple& t, const Bytes& quic) {
  return traffic::build_udp_frame(traffic::L2Header{}, t.client, t.port, t.client.v6 ? kServer6 : kServer, 443, quic,
                                  1, 0);
}

// An Initial fills its datagram to 1,200 octets of UDP payload, as RFC
// 9000 14.1 asks of clients (a smaller one opens no setup entry);
// `initial_payload` makes a smaller one.
Bytes long_packet(const Tuple& t, traffic::LongType type, const Bytes& dcid, const Bytes& scid,
                  std::size_t initial_payload = ForwardingTables::kMinInitialDatagram) {
  return frame_of(t, traffic::long_header_packet(type, dcid, scid, initial_payload));
}

Bytes short_packet(const Tuple& t, const Bytes& dcid) { return frame_of(t, traffic::short_header_packet(dcid)); }

// A connection's first Initial (odcid), its Handshake to the server's CID
// and a short header, classified in one burst.
std::vector<Decision> handshake_in_one_burst(PacketClassifier& classifier, const Tuple& t, const Bytes& odcid,
                                             const Bytes& scid, const Bytes& server_cid, LearnCounts& counts) {
  return test::classify_as_burst(classifier,
                                {long_packet(t, traffic::LongType::kInitial, odcid, scid),
                                 long_packet(t, traffic::LongType::kHandshake, server_cid, scid),
                                 short_packet(t, server_cid)},
                                0, &counts);
}

class Rules : public ::testing::Test {
 protected:
  Rules() : config_(two_owners(true)), tables_(config_.forwarding, config_.fallback_key), classifier_(config_), plain_(two_owners(false)) {
    classifier_.use_tables(&tables_);
  }
  Decision route(const Bytes& frame, std::uint32_t now_ms = 0) {
    return classifier_.classify(frame.data(), frame.size(), now_ms, &counts_);
  }
  std::uint16_t hashed(const Bytes& cid) const {
    return plain_.resolver().fallback_owner_for_dcid(cid.data(), cid.size());
  }
  // A random CID the hash sends to `owner` (or away from it).
  Bytes cid_hashed_to(std::uint16_t owner, bool to, std::size_t len = 8) {
    for (;;) {
      Bytes c = random_cid(rng_, len);
      if ((hashed(c) == owner) == to) return c;
    }
  }

  SteeringConfig config_;
  ForwardingTables tables_;
  PacketClassifier classifier_;
  PacketClassifier plain_;
  LearnCounts counts_;
  std::mt19937_64 rng_{11};
};

// One connection from its first Initial to 1-RTT, then a NAT rebinding, a
// switch to another of the server's CIDs, and an active migration.
TEST_F(Rules, AConnectionStaysWithTheOwnerOfItsFirstInitial) {
  const Tuple t;
  const Bytes odcid = random_cid(rng_, 12), scid = random_cid(rng_, 8);
  const std::uint16_t owner = hashed(odcid);
  // The server's CID would hash to the other owner: without tables the
  // connection splits.
  const Bytes server_cid = cid_hashed_to(owner, false);
  ASSERT_NE(plain_.classify(short_packet(t, server_cid).data(), short_packet(t, server_cid).size()).resolution.owner_index,
            owner);

  Decision d = route(long_packet(t, traffic::LongType::kInitial, odcid, scid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackDcid);
  EXPECT_EQ(d.resolution.owner_index, owner);
  EXPECT_EQ(counts_.setups, 1u);

  d = route(long_packet(t, traffic::LongType::kZeroRtt, odcid, scid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedSetup);
  EXPECT_EQ(d.resolution.owner_index, owner);

  for (auto type : {traffic::LongType::kInitial, traffic::LongType::kHandshake}) {
    d = route(long_packet(t, type, server_cid, scid));
    EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedSetup);
    EXPECT_EQ(d.resolution.owner_index, owner);
  }
  EXPECT_GT(counts_.learned, 0u);

  d = route(short_packet(t, server_cid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedCid);
  EXPECT_EQ(d.resolution.owner_index, owner);

  // NAT rebinding: same CID, new port.
  Tuple rebound = t;
  rebound.port = 50000;
  d = route(short_packet(rebound, server_cid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedCid);
  EXPECT_EQ(d.resolution.owner_index, owner);

  // Another of the server's CIDs on a 4-tuple the tables know: the 4-tuple
  // routes it, and the CID is learned for the next address change.
  const Bytes second_cid = cid_hashed_to(owner, false);
  d = route(short_packet(t, second_cid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedTuple);
  EXPECT_EQ(d.resolution.owner_index, owner);
  Tuple moved = t;
  moved.client = IpAddress::v4(10, 9, 9, 9);
  d = route(short_packet(moved, second_cid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedCid);
  EXPECT_EQ(d.resolution.owner_index, owner);

  // An active migration: a CID never seen, from a 4-tuple never seen. Only
  // QUIC-LB could follow it; it is hashed and counted as such.
  const Bytes third_cid = cid_hashed_to(owner, false);
  Tuple elsewhere = t;
  elsewhere.client = IpAddress::v4(10, 7, 7, 7);
  d = route(short_packet(elsewhere, third_cid));
  EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackUnknownCid);
  EXPECT_EQ(d.resolution.owner_index, hashed(third_cid));
  EXPECT_EQ(counts_.table_full, 0u);
}

// An ICMP error a router sends to the VIP about a server's datagram
// (issue 38 item 4): `quoted` is the server -> client frame whose IP
// packet the error quotes (cut to `quote` octets of it).
Bytes icmp_error_about(const Bytes& quoted, bool v6, std::size_t quote = 200) {
  const Bytes inner(quoted.begin() + 14, quoted.begin() + 14 + std::min(quote, quoted.size() - 14));
  Bytes f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 0xfe, std::uint8_t(v6 ? 0x86 : 0x08), std::uint8_t(v6 ? 0xdd : 0x00)};
  const IpAddress router = v6 ? traffic::TrafficOptions::ipv6_address("2001:db8:ffff::1") : IpAddress::v4(192, 0, 2, 254);
  const IpAddress& vip = v6 ? kServer6 : kServer;
  const std::size_t icmp_len = 8 + inner.size();
  if (v6) {
    Bytes ip = {0x60, 0, 0, 0, std::uint8_t(icmp_len >> 8), std::uint8_t(icmp_len), 58, 64};
    ip.insert(ip.end(), router.bytes.begin(), router.bytes.begin() + 16);
    ip.insert(ip.end(), vip.bytes.begin(), vip.bytes.begin() + 16);
    f.insert(f.end(), ip.begin(), ip.end());
    f.insert(f.end(), {2, 0, 0, 0, 0, 0, 0x05, 0x00});  // packet too big, MTU 1280
  } else {
    const std::size_t total = 20 + icmp_len;
    Bytes ip = {0x45, 0, std::uint8_t(total >> 8), std::uint8_t(total), 0, 0, 0, 0, 64, 1, 0, 0};
    ip.insert(ip.end(), router.bytes.begin(), router.bytes.begin() + 4);
    ip.insert(ip.end(), vip.bytes.begin(), vip.bytes.begin() + 4);
    f.insert(f.end(), ip.begin(), ip.end());
    f.insert(f.end(), {3, 4, 0, 0, 0, 0, 0x05, 0x00});  // fragmentation needed, MTU 1280
  }
  f.insert(f.end(), inner.begin(), inner.end());
  return f;
}

// The server's reply to a client: from the VIP's port 443 to the client's.
Bytes server_reply(const Tuple& t, const Bytes& client_cid) {
  return traffic::build_udp_frame(traffic::L2Header{}, t.client.v6 ? kServer6 : kServer, 443, t.client, t.port,
                                  traffic::short_header_packet(client_cid, 1200), 1, 0);
}

SteeringConfig with_service(SteeringConfig c) {
  ServiceConfig web;
  web.ipv4 = {{198, 18, 0, 1}};
  std::array<std::uint8_t, 16> v6{};
  std::copy(kServer6.bytes.begin(), kServer6.bytes.begin() + 16, v6.begin());
  web.ipv6 = {v6};
  web.udp_ports = {443};
  c.services = {web};
  return c;
}

// The error reaches the owner of the connection whose datagram it quotes,
// by the 4-tuple the client's packets taught the tables; an error about a
// connection the tables never saw, or about a datagram that did not leave
// the VIP, or a message that is no error, is nobody's.
TEST(RulesIcmp, AnErrorToTheVipReachesTheOwnerOfTheConnectionItQuotes) {
  for (const bool v6 : {false, true}) {
    const SteeringConfig config = with_service(two_owners(true));
    ForwardingTables tables(config.forwarding, config.fallback_key);
    PacketClassifier classifier(config);
    classifier.use_tables(&tables);
    std::mt19937_64 rng(5);
    Tuple t;
    if (v6) t.client = traffic::TrafficOptions::ipv6_address("2001:db8:1::7");
    const Bytes odcid = random_cid(rng, 12), scid = random_cid(rng, 8), server_cid = random_cid(rng, 8);
    LearnCounts counts;
    const std::vector<Decision> hs = handshake_in_one_burst(classifier, t, odcid, scid, server_cid, counts);
    const std::uint16_t owner = hs.back().resolution.owner_index;
    ASSERT_NE(owner, kNoOwner);

    const Bytes error = icmp_error_about(server_reply(t, scid), v6);
    Decision d = classifier.classify(error.data(), error.size());
    EXPECT_EQ(d.destination, Destination::kService) << v6;
    EXPECT_EQ(d.resolution.owner_index, owner);
    EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedTuple);
    EXPECT_EQ(d.packet.verdict, Verdict::kNotQuic) << "steered as UDP that is not QUIC";
    // The burst form agrees.
    EXPECT_EQ(test::classify_as_burst(classifier, {error}, 0, &counts)[0].resolution.owner_index, owner);

    Tuple stranger = t;
    stranger.port = 40001;
    d = classifier.classify(icmp_error_about(server_reply(stranger, scid), v6).data(),
                            icmp_error_about(server_reply(stranger, scid), v6).size());
    EXPECT_EQ(d.destination, Destination::kNotService) << "a connection the tables never saw";
    EXPECT_FALSE(d.resolution.routed());
    Bytes not_from_vip = server_reply(t, scid);
    not_from_vip[14 + (v6 ? 8 + 15 : 12 + 3)] ^= 1;  // the quote's source is another address
    const Bytes e2 = icmp_error_about(not_from_vip, v6);
    EXPECT_EQ(classifier.classify(e2.data(), e2.size()).destination, Destination::kNotService);
    Bytes echo = error;
    echo[14 + (v6 ? 40 : 20)] = v6 ? 128 : 8;  // an echo request is no error
    EXPECT_EQ(classifier.classify(echo.data(), echo.size()).destination, Destination::kNotService);
    const Bytes cut = icmp_error_about(server_reply(t, scid), v6, v6 ? 44 : 24);  // no room for the UDP header
    EXPECT_EQ(classifier.classify(cut.data(), cut.size()).destination, Destination::kNotService);
  }
}

// A server's long header carries its own CID as the SCID: QUIC-LB routes
// the error without any table.
TEST(RulesIcmp, AQuotedLongHeaderIsRoutedByItsServersCid) {
  SteeringConfig config = with_service(two_owners(false));
  config.quic_lb = {QuicLbConfig{0, 2, 6, false, std::nullopt}};
  config.server_routes = {ServerRoute{{0x0a, 0x02}, 2}};
  PacketClassifier classifier(config);
  const Tuple t;
  traffic::LongHeader h;
  h.type = traffic::LongType::kHandshake;
  const Bytes client_cid = {1, 2, 3, 4, 5, 6, 7, 8};
  const Bytes server_cid = {0x00, 0x0a, 0x02, 9, 9, 9, 9, 9, 9};  // config 0, server ID 0a02
  h.dcid = client_cid;
  h.scid = server_cid;
  std::size_t pn_offset = 0;
  Bytes q = traffic::build_long_header(h, 1200, &pn_offset);
  q.resize(q.size() + 1200, 0x5a);
  const Bytes reply = traffic::build_udp_frame(traffic::L2Header{}, kServer, 443, t.client, t.port, q, 1, 0);
  const Bytes error = icmp_error_about(reply, false);
  const Decision d = classifier.classify(error.data(), error.size());
  EXPECT_EQ(d.destination, Destination::kService);
  EXPECT_EQ(d.resolution.how, ResolveMethod::kQuicLb);
  EXPECT_EQ(d.resolution.owner_index, 1u) << "lcore 2 is the second owner";
}

// Packets of the handshake in one burst, the first Initial included: the
// burst resolves them in arrival order, so the later ones find what the
// earlier ones taught.
TEST_F(Rules, ABurstLearnsInArrivalOrder) {
  const Tuple t;
  const Bytes odcid = random_cid(rng_, 12), scid = random_cid(rng_, 8);
  const std::uint16_t owner = hashed(odcid);
  const Bytes server_cid = cid_hashed_to(owner, false);
  const std::vector<Decision> out = handshake_in_one_burst(classifier_, t, odcid, scid, server_cid, counts_);
  EXPECT_EQ(out[0].resolution.how, ResolveMethod::kFallbackDcid);
  EXPECT_EQ(out[1].resolution.how, ResolveMethod::kLearnedSetup);
  EXPECT_EQ(out[2].resolution.how, ResolveMethod::kLearnedCid);
  for (const auto& d : out) EXPECT_EQ(d.resolution.owner_index, owner);
}

// The same when the first Initial's client-chosen DCID happens to start with
// an encrypted QUIC-LB config's codepoint (one in eight random DCIDs does):
// the burst tries that config's decode first, fails, and must still resolve
// the Initial before the packets that depend on it.
TEST(RulesBurst, AFailedDecodeKeepsItsPlaceInArrivalOrder) {
  SteeringConfig config = two_owners(true);
  QuicLbConfig lb;
  lb.config_id = 0;
  lb.server_id_len = 2;
  lb.nonce_len = 14;
  lb.key = std::array<std::uint8_t, 16>{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
  config.quic_lb = {lb};
  config.server_routes = {ServerRoute{{0x00, 0x01}, 1}};
  ForwardingTables tables(config.forwarding, config.fallback_key);
  PacketClassifier classifier(config);
  classifier.use_tables(&tables);
  PacketClassifier plain(two_owners(false));
  std::mt19937_64 rng(3);
  const Tuple t;
  Bytes odcid = random_cid(rng, 17);
  odcid[0] &= 0x1f;  // codepoint 0: the encrypted config's
  const Bytes scid = random_cid(rng, 8);
  const std::uint16_t owner = plain.resolver().fallback_owner_for_dcid(odcid.data(), odcid.size());
  Bytes server_cid;
  do {
    server_cid = random_cid(rng, 8);
    server_cid[0] = std::uint8_t(0x20 | (server_cid[0] & 0x1f));  // codepoint 1: no config
  } while (plain.resolver().fallback_owner_for_dcid(server_cid.data(), server_cid.size()) == owner);
  LearnCounts counts;
  const std::vector<Decision> out = handshake_in_one_burst(classifier, t, odcid, scid, server_cid, counts);
  ASSERT_EQ(out[0].resolution.how, ResolveMethod::kFallbackDcid) << "the random DCID decodes to no listed server";
  EXPECT_EQ(out[1].resolution.how, ResolveMethod::kLearnedSetup);
  EXPECT_EQ(out[2].resolution.how, ResolveMethod::kLearnedCid);
  for (const auto& d : out) EXPECT_EQ(d.resolution.owner_index, owner);
}

// A full established table refuses new entries (counted) and the packets
// that needed them are hashed; established connections keep their routes.
TEST(RulesFull, AFullTableFallsBackToTheHashAndKeepsWhatItHas) {
  SteeringConfig config = two_owners(true);
  config.forwarding.max_entries = 16;
  ForwardingTables tables(config.forwarding, config.fallback_key);
  PacketClassifier c(config);
  c.use_tables(&tables);
  std::mt19937_64 rng(5);
  LearnCounts counts;
  struct Conn {
    Tuple t;
    Bytes server_cid;
    std::uint16_t owner;
  };
  std::vector<Conn> learned;
  for (int i = 0; i < 100 && counts.table_full == 0; ++i) {
    Tuple t;
    t.port = std::uint16_t(20000 + i);
    const Bytes odcid = random_cid(rng, 12), scid = random_cid(rng, 8), server_cid = random_cid(rng, 8);
    const auto f1 = long_packet(t, traffic::LongType::kInitial, odcid, scid);
    const std::uint16_t owner = c.classify(f1.data(), f1.size(), 0, &counts).resolution.owner_index;
    const unsigned full_before = counts.table_full;
    const auto f2 = long_packet(t, traffic::LongType::kHandshake, server_cid, scid);
    const Decision d = c.classify(f2.data(), f2.size(), 0, &counts);
    EXPECT_EQ(d.resolution.owner_index, owner) << "the setup table still routes the handshake";
    if (counts.table_full == full_before) learned.push_back({t, server_cid, owner});
  }
  ASSERT_GT(counts.table_full, 0u) << "16 entries cannot hold 100 connections";
  ASSERT_FALSE(learned.empty());
  for (const Conn& k : learned) {
    const auto f = short_packet(k.t, k.server_cid);
    const Decision d = c.classify(f.data(), f.size(), 0, &counts);
    EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedCid);
    EXPECT_EQ(d.resolution.owner_index, k.owner);
  }
  EXPECT_LE(tables.established().size(), tables.established().slot_count());
}

// Entries go once idle for the connection idle timeout, not before; a
// connection that keeps sending keeps its entries.
TEST_F(Rules, EntriesAgeWithTheIdleTimeout) {
  const Tuple t;
  const Bytes odcid = random_cid(rng_, 12), scid = random_cid(rng_, 8);
  const std::uint16_t owner = hashed(odcid);
  const Bytes busy_cid = cid_hashed_to(owner, false);
  route(long_packet(t, traffic::LongType::kInitial, odcid, scid), 1000);
  route(long_packet(t, traffic::LongType::kHandshake, busy_cid, scid), 1000);
  Tuple quiet_tuple;
  quiet_tuple.port = 40001;
  const Bytes odcid2 = random_cid(rng_, 12), scid2 = random_cid(rng_, 8);
  const Bytes quiet_cid = cid_hashed_to(hashed(odcid2), false);
  route(long_packet(quiet_tuple, traffic::LongType::kInitial, odcid2, scid2), 1000);
  route(long_packet(quiet_tuple, traffic::LongType::kHandshake, quiet_cid, scid2), 1000);

  EXPECT_EQ(route(short_packet(t, busy_cid), 20000).resolution.how, ResolveMethod::kLearnedCid);
  EXPECT_EQ(tables_.expire(31000, 1u << 20), 0u) << "nothing idle for 30 s yet";
  const unsigned before = tables_.established().size();
  // Idle now: the quiet connection's CID and 4-tuple, the busy one's
  // 4-tuple (its short headers hit the CID), and both setups.
  EXPECT_EQ(tables_.expire(31001, 1u << 20), 5u);
  EXPECT_EQ(tables_.established().size(), before - 3);
  EXPECT_EQ(route(short_packet(t, busy_cid), 31002).resolution.how, ResolveMethod::kLearnedCid);
  Tuple rebound = quiet_tuple;
  rebound.port = 50001;
  EXPECT_EQ(route(short_packet(rebound, quiet_cid), 31002).resolution.how, ResolveMethod::kFallbackUnknownCid);
}

// A flood of first Initials with random DCIDs and SCIDs from random 4-tuples
// (a spoofing attacker, or a retry storm) churns the setup table only: the
// established connections keep their entries, and their packets are still
// routed by one lookup of their CID.
TEST_F(Rules, AFloodOfInitialsDoesNotEvictEstablishedConnections) {
  struct Conn {
    Tuple t;
    Bytes server_cid;
    std::uint16_t owner;
  };
  std::vector<Conn> established;
  for (int i = 0; i < 200; ++i) {
    Tuple t;
    t.port = std::uint16_t(30000 + i);
    const Bytes odcid = random_cid(rng_, 12), scid = random_cid(rng_, 8);
    const std::uint16_t owner = hashed(odcid);
    const Bytes server_cid = cid_hashed_to(owner, false);
    route(long_packet(t, traffic::LongType::kInitial, odcid, scid));
    route(long_packet(t, traffic::LongType::kHandshake, server_cid, scid));
    established.push_back({t, server_cid, owner});
  }
  const unsigned entries = tables_.established().size();
  const LearnCounts before = counts_;
  for (int i = 0; i < 50000; ++i) {
    Tuple t;
    t.client = IpAddress::v4(100, std::uint8_t(rng_()), std::uint8_t(rng_()), std::uint8_t(rng_()));
    t.port = std::uint16_t(rng_());
    route(long_packet(t, traffic::LongType::kInitial, random_cid(rng_, 8 + rng_() % 13),
                      random_cid(rng_, rng_() % 21)));
  }
  EXPECT_EQ(counts_.learned, before.learned) << "single Initials teach the established table nothing";
  EXPECT_EQ(tables_.established().size(), entries);
  EXPECT_GT(counts_.setup_evicted, 0u) << "the flood filled the setup table";
  for (const Conn& k : established) {
    const Decision d = route(short_packet(k.t, k.server_cid));
    ASSERT_EQ(d.resolution.how, ResolveMethod::kLearnedCid);
    ASSERT_EQ(d.resolution.owner_index, k.owner);
  }
}

// 200 new connections of other clients, each with a server CID the hash
// sends away from its first Initial's owner: how many split (a packet on
// another owner) and how many server CIDs the tables did not learn.
struct NewConnections {
  unsigned split = 0, unlearned = 0;
};

NewConnections open_connections_of_others(PacketClassifier& c, ForwardingTables& tables, PacketClassifier& plain,
                                          std::mt19937_64& rng, LearnCounts& counts) {
  auto route = [&](const Bytes& f) { return c.classify(f.data(), f.size(), 0, &counts).resolution; };
  NewConnections out;
  for (int i = 0; i < 200; ++i) {
    Tuple t;
    t.client = IpAddress::v4(10, 1, std::uint8_t(i / 200), std::uint8_t(i % 200 + 1));
    t.port = std::uint16_t(30000 + i);
    const Bytes odcid = random_cid(rng, 12), client_scid = random_cid(rng, 8);
    const std::uint16_t target = route(long_packet(t, traffic::LongType::kInitial, odcid, client_scid)).owner_index;
    Bytes server_cid;
    do server_cid = random_cid(rng, 8);
    while (plain.resolver().fallback_owner_for_dcid(server_cid.data(), server_cid.size()) == target);
    Tuple rebound = t;
    rebound.port = std::uint16_t(40000 + i);
    const Bytes later[] = {long_packet(t, traffic::LongType::kHandshake, server_cid, client_scid),
                           short_packet(t, server_cid), short_packet(rebound, server_cid)};
    bool splits = false;
    for (const Bytes& f : later) splits |= route(f).owner_index != target;
    out.split += splits;
    const ParsedPacket p = plain.classify(later[1].data(), later[1].size()).packet;
    out.unlearned += tables.established().find(tables.cid_key(later[1].data(), p), 0) == ForwardingTable::kNone;
  }
  return out;
}

// Tables of the default size (262,144 entries) behind a classifier over
// two owners, and the classifier without tables that shows where the hash
// alone sends a CID: what the flood tests start from.
struct DefaultTables {
  explicit DefaultTables(std::uint32_t per_source = ForwardingConfig::default_entries_per_source(262144))
      : config(with_default_size(per_source)), tables(config.forwarding, config.fallback_key), c(config),
        plain(two_owners(false)) {
    c.use_tables(&tables);
  }
  static SteeringConfig with_default_size(std::uint32_t per_source) {
    SteeringConfig s = two_owners(true);
    s.forwarding.max_entries = 262144;
    s.forwarding.max_entries_per_source = per_source;
    return s;
  }
  SteeringConfig config;
  ForwardingTables tables;
  PacketClassifier c;
  PacketClassifier plain;
};

// One client (no spoofing) that sent one Initial keeps sending Handshakes
// with its SCID, and short headers from its 4-tuple, each with a new DCID
// (issue 29). Its setup entry and 4-tuple teach a few DCIDs and no more:
// the established table keeps room, and new connections of other clients
// are learned and do not split. Every flood packet still reaches the
// client's own owner.
TEST(RulesFlood, OneClientWithFreshDcidsCannotFillTheTable) {
  DefaultTables t;
  ForwardingTables& tables = t.tables;
  PacketClassifier& c = t.c;
  PacketClassifier& plain = t.plain;
  std::mt19937_64 rng(29);
  LearnCounts counts;
  auto route = [&](const Bytes& f) { return c.classify(f.data(), f.size(), 0, &counts).resolution; };
  Tuple attacker;
  attacker.client = IpAddress::v4(10, 66, 0, 1);
  attacker.port = 4444;
  const Bytes scid = random_cid(rng, 8);
  const std::uint16_t owner =
      route(long_packet(attacker, traffic::LongType::kInitial, random_cid(rng, 12), scid)).owner_index;
  // One frame of each kind, its DCID rewritten in place for each packet.
  Bytes frames[2] = {long_packet(attacker, traffic::LongType::kHandshake, random_cid(rng, 8), scid),
                     short_packet(attacker, random_cid(rng, 8))};
  std::size_t dcid_at[2];
  for (int k = 0; k < 2; ++k) {
    const Decision d = plain.classify(frames[k].data(), frames[k].size());
    ASSERT_EQ(d.packet.dcid_len, 8u);
    dcid_at[k] = std::size_t(d.packet.dcid(frames[k].data()) - frames[k].data());
  }
  for (int i = 0; i < 1000000; ++i) {
    Bytes& f = frames[i & 1];
    const std::uint64_t dcid = rng();
    std::memcpy(f.data() + dcid_at[i & 1], &dcid, 8);
    const Resolution r = route(f);
    ASSERT_EQ(r.owner_index, owner) << i;
    ASSERT_EQ(r.how, i & 1 ? ResolveMethod::kLearnedTuple : ResolveMethod::kLearnedSetup) << i;
  }
  EXPECT_LE(tables.established().size(), ForwardingTables::kSetupCredit + ForwardingTables::kTupleCredit + 1)
      << "the DCIDs its setup entry may teach, those its 4-tuple may, and the 4-tuple";
  EXPECT_EQ(counts.table_full, 0u);
  EXPECT_GT(counts.over_budget, 999000u);

  const NewConnections others = open_connections_of_others(c, tables, plain, rng, counts);
  EXPECT_EQ(others.split, 0u) << "new connections split while one client floods";
}

// One host (one address, no spoofing) on 25,000 source ports: on each, one
// full-size Initial with its own SCID, 4 Handshakes and then 7 short headers,
// each with a fresh DCID (issue 38): 300,000 packets that would teach the
// established table 12 entries per port, more than it holds. The per-source
// budget stops it at max_entries_per_source, and 200 new connections of
// other clients are each learned and none splits. With the budget off
// (max_entries_per_source: 0), the same flood fills the table and they do.
struct FloodOutcome {
  unsigned split = 0, unlearned = 0;
  std::uint32_t entries = 0;
  LearnCounts counts;
};

FloodOutcome flood_from_one_host(std::uint32_t per_source) {
  DefaultTables t(per_source);
  ForwardingTables& tables = t.tables;
  PacketClassifier& c = t.c;
  PacketClassifier& plain = t.plain;
  std::mt19937_64 rng(38);
  FloodOutcome out;
  auto route = [&](const Bytes& f) { return c.classify(f.data(), f.size(), 0, &out.counts).resolution; };
  Tuple attacker;
  attacker.client = IpAddress::v4(10, 66, 0, 1);
  for (unsigned port = 0; port < 25000; ++port) {
    attacker.port = std::uint16_t(1024 + port);
    const Bytes scid = random_cid(rng, 8);
    route(long_packet(attacker, traffic::LongType::kInitial, random_cid(rng, 12), scid));
    for (int i = 0; i < 4; ++i) route(long_packet(attacker, traffic::LongType::kHandshake, random_cid(rng, 8), scid));
    for (int i = 0; i < 7; ++i) route(short_packet(attacker, random_cid(rng, 8)));
  }
  out.entries = tables.established().size();
  const NewConnections others = open_connections_of_others(c, tables, plain, rng, out.counts);
  out.split = others.split;
  out.unlearned = others.unlearned;
  return out;
}

TEST(RulesFlood, OneHostOnManyPortsCannotFillTheTable) {
  const FloodOutcome bounded = flood_from_one_host(ForwardingConfig::default_entries_per_source(262144));
  EXPECT_EQ(bounded.split, 0u) << "new connections split while one host floods";
  EXPECT_EQ(bounded.unlearned, 0u);
  // Past its budget each of the host's Handshakes is refused (its short
  // headers come from 4-tuples never learned, so they teach nothing).
  EXPECT_GT(bounded.counts.source_over_budget, 25000u * 3);
  EXPECT_EQ(bounded.counts.table_full, 0u);
  // The host's 16,384, the 4-tuples and CIDs of the 200 (an overshoot of
  // none: one caller).
  EXPECT_LE(bounded.entries, 16384u + 2 * 200u);

  const FloodOutcome unbounded = flood_from_one_host(0);
  EXPECT_GT(unbounded.split, 20u) << "without the budget the flood must fill the table, or this test shows nothing";
  EXPECT_GT(unbounded.counts.table_full, 0u);
  EXPECT_EQ(unbounded.counts.source_over_budget, 0u);
}

// A first Initial in a datagram of less than 1,200 octets of UDP payload
// opens no setup entry (counted), so the rest of its handshake is hashed;
// a full-size one does.
TEST(RulesFlood, OnlyAFullSizeInitialOpensASetupEntry) {
  SteeringConfig config = two_owners(true);
  ForwardingTables tables(config.forwarding, config.fallback_key);
  PacketClassifier c(config);
  c.use_tables(&tables);
  std::mt19937_64 rng(14);
  LearnCounts counts;
  Tuple t;
  const Bytes small = long_packet(t, traffic::LongType::kInitial, random_cid(rng, 12), random_cid(rng, 8),
                                  ForwardingTables::kMinInitialDatagram - 1);
  const Decision d = c.classify(small.data(), small.size(), 0, &counts);
  ASSERT_EQ(d.packet.verdict, Verdict::kQuic);
  ASSERT_TRUE(d.packet.opens_connection);
  EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackDcid) << "still routed, by the hash";
  EXPECT_EQ(counts.undersized_initials, 1u);
  EXPECT_EQ(counts.setups, 0u);
  EXPECT_EQ(tables.setup().size(), 0u);
  t.port = 40001;
  const Bytes full = long_packet(t, traffic::LongType::kInitial, random_cid(rng, 12), random_cid(rng, 8));
  c.classify(full.data(), full.size(), 0, &counts);
  EXPECT_EQ(counts.undersized_initials, 1u);
  EXPECT_EQ(counts.setups, 1u);
}

// The budget itself: per_source entries at once, then one more per
// idle_ms / per_source, a full budget again after idle_ms; the same across
// the millisecond clock's wrap.
TEST(SourceBudget, RefillsOverTheIdleTimeout) {
  for (const std::uint32_t t0 : {0u, 0xffffff00u}) {
    SourceBudget b(10, 1000, heap_slot_memory());
    const std::uint64_t host = 0x1234, other = 0x1235;
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(b.allows(host, t0)) << i;
      b.charge(host, t0);
    }
    EXPECT_FALSE(b.allows(host, t0));
    EXPECT_TRUE(b.allows(other, t0)) << "another bucket has its own budget";
    EXPECT_FALSE(b.allows(host, t0 + 99));
    EXPECT_TRUE(b.allows(host, t0 + 100)) << "one entry's share refilled";
    b.charge(host, t0 + 100);
    EXPECT_FALSE(b.allows(host, t0 + 150));
    unsigned later = 0;
    while (b.allows(host, t0 + 2000)) {
      b.charge(host, t0 + 2000);
      ++later;
    }
    EXPECT_EQ(later, 10u) << "a whole budget after an idle timeout";
  }
  SourceBudget unbounded(0, 1000, heap_slot_memory());
  for (int i = 0; i < 100000; ++i) unbounded.charge(7, 0);
  EXPECT_TRUE(unbounded.allows(7, 0));
}

// A source is an IPv4 address, or an IPv6 address's /64.
TEST(SourceBudget, AnIpv6SourceIsItsSlash64) {
  SteeringConfig config = two_owners(true);
  ForwardingTables tables(config.forwarding, config.fallback_key);
  PacketClassifier plain(two_owners(false));
  auto source = [&](const IpAddress& a) {
    Tuple t;
    t.client = a;
    const Bytes f = short_packet(t, Bytes(8, 1));
    return tables.source_key(f.data(), plain.classify(f.data(), f.size()).packet);
  };
  const IpAddress a = traffic::TrafficOptions::ipv6_address("2001:db8:1:2::1");
  EXPECT_EQ(source(a), source(traffic::TrafficOptions::ipv6_address("2001:db8:1:2:ffff:1:2:3")));
  EXPECT_NE(source(a), source(traffic::TrafficOptions::ipv6_address("2001:db8:1:3::1")));
  EXPECT_NE(source(IpAddress::v4(10, 0, 0, 1)), source(IpAddress::v4(10, 0, 0, 2)));
}

// ---------------------------------------------------------------- removed backends

SteeringConfig with_backends(const std::vector<std::pair<std::string, std::uint16_t>>& backends) {
  SteeringConfig s = two_owners(true);
  for (const auto& [name, slot] : backends) {
    BackendConfig b;
    b.name = name;
    b.slot = slot;
    b.owner_lcore = 1 + slot % 2;
    s.backends.push_back(b);
  }
  return s;
}

// What the tables learned for a backend that a reload removed names a slot
// the new resolver routes nowhere: each lookup that finds such an entry is a
// miss (counted) and goes on to the next rule, and never teaches the tables
// more. Then the sweep removes exactly those entries.
TEST(RulesRetired, AnEntryOfARemovedBackendIsAMissAndIsSweptOut) {
  const SteeringConfig before = with_backends({{"a", 0}, {"b", 1}, {"c", 2}});
  const SteeringConfig after = with_backends({{"a", 0}, {"c", 2}});
  ForwardingTables tables(before.forwarding, before.fallback_key);
  PacketClassifier old_classifier(before), new_classifier(after);
  old_classifier.use_tables(&tables);
  new_classifier.use_tables(&tables);
  std::mt19937_64 rng(38);

  // Connections set up under the old configuration until each backend has
  // some: one Initial, one Handshake to the server's CID, one short header.
  struct Connection {
    Tuple t;
    Bytes server_cid;
    std::uint16_t backend;
  };
  std::vector<Connection> connections;
  std::set<std::uint16_t> backends;
  LearnCounts counts;
  for (std::uint16_t port = 1000; connections.size() < 60; ++port) {
    Tuple t;
    t.port = port;
    const Bytes odcid = random_cid(rng, 12), scid = random_cid(rng, 8), server_cid = random_cid(rng, 8);
    const std::vector<Decision> out = handshake_in_one_burst(old_classifier, t, odcid, scid, server_cid, counts);
    ASSERT_EQ(out[2].resolution.how, ResolveMethod::kLearnedCid);
    connections.push_back({t, server_cid, out[0].resolution.backend});
    backends.insert(out[0].resolution.backend);
  }
  ASSERT_EQ(backends.size(), 3u);
  const std::uint32_t entries = tables.established().size() + tables.setup().size();

  // Under the new configuration: a's and c's connections still find their
  // backends; b's find retired entries, miss, and are hashed over a and c.
  LearnCounts after_counts;
  unsigned of_b = 0;
  for (const Connection& c : connections) {
    Tuple rebound = c.t;
    rebound.port = std::uint16_t(c.t.port + 20000);  // a new 4-tuple: the CID alone must route it
    const Bytes frame = short_packet(rebound, c.server_cid);
    const Decision d = new_classifier.classify(frame.data(), frame.size(), 0, &after_counts);
    ASSERT_TRUE(d.resolution.routed());
    if (c.backend != 1) {
      EXPECT_EQ(d.resolution.how, ResolveMethod::kLearnedCid);
      EXPECT_EQ(d.resolution.backend, c.backend);
      continue;
    }
    ++of_b;
    EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackUnknownCid);
    EXPECT_NE(d.resolution.backend, 1u);
    EXPECT_EQ(d.resolution.owner_index, d.resolution.backend % 2) << "the backend's own owner";
    // On its first 4-tuple the setup table and the 4-tuple name b too: a
    // long header misses on all three and is hashed.
    const Bytes again = long_packet(c.t, traffic::LongType::kHandshake, c.server_cid, Bytes(8, 0));
    EXPECT_NE(new_classifier.classify(again.data(), again.size(), 0, &after_counts).resolution.backend, 1u);
  }
  ASSERT_GT(of_b, 5u);
  EXPECT_EQ(after_counts.retired_hits, 3 * of_b) << "the short header's CID; the long header's CID and 4-tuple";
  EXPECT_EQ(after_counts.learned, 0u) << "nothing is learned from an entry of a removed backend";
  EXPECT_EQ(tables.established().size() + tables.setup().size(), entries);

  // The sweep: a pass that covers every bucket after retire() completes its
  // generation, and takes out b's entries alone.
  EXPECT_FALSE(tables.retirement_pending());
  const std::uint64_t generation = tables.retire({1});
  EXPECT_TRUE(tables.retirement_pending());
  EXPECT_FALSE(tables.swept(generation));
  const std::uint32_t buckets = std::max(tables.established().bucket_count(), tables.setup().bucket_count());
  unsigned removed = tables.sweep_retired(buckets / 2);
  EXPECT_FALSE(tables.swept(generation)) << "half a pass";
  removed += tables.sweep_retired(buckets);
  EXPECT_TRUE(tables.swept(generation));
  EXPECT_FALSE(tables.retirement_pending());
  EXPECT_GE(removed, 3 * of_b) << "b's setup entries, CIDs and 4-tuples";
  EXPECT_EQ(tables.established().size() + tables.setup().size(), entries - removed);
  EXPECT_EQ(tables.established().occupied_slots() + tables.setup().occupied_slots(), entries - removed);
  for (const Connection& c : connections) {
    const Bytes frame = short_packet(c.t, c.server_cid);
    const Decision d = new_classifier.classify(frame.data(), frame.size(), 0, &after_counts);
    if (c.backend != 1) {
      EXPECT_EQ(d.resolution.backend, c.backend);
    }
  }
  EXPECT_EQ(after_counts.retired_hits, 3 * of_b) << "no entry of b is left to find";
  tables.forget({1});
}

// A retirement requested while a pass is under way is completed by the next
// whole pass, not by the end of the one that began before it.
TEST(RulesRetired, ARetirementWaitsForAPassThatBeganAfterIt) {
  const SteeringConfig config = with_backends({{"a", 0}, {"b", 1}});
  ForwardingTables tables(config.forwarding, config.fallback_key);
  const std::uint32_t buckets = std::max(tables.established().bucket_count(), tables.setup().bucket_count());
  const std::uint64_t first = tables.retire({0});
  tables.sweep_retired(buckets / 2);
  const std::uint64_t second = tables.retire({1});
  tables.sweep_retired(buckets);
  EXPECT_TRUE(tables.swept(first));
  EXPECT_FALSE(tables.swept(second));
  EXPECT_TRUE(tables.retirement_pending());
  tables.sweep_retired(buckets);
  EXPECT_TRUE(tables.swept(second));
}

// ---------------------------------------------------------------- a change of the appliance tier

// Two appliances with one profile of eight backends and tables of their own
// (their table keys differ, as two processes' random ones do). Connections
// to random-CID servers set up through `first`; then the tier changes (a
// crash, a return, a drain) and `second`, which never saw them, takes the
// rest of their packets from the same 4-tuples: a Handshake retransmitted
// to the server's CID, then short headers. Returns how many of those
// `second` sends to another backend than `first` chose.
unsigned moved_after_tier_change(FallbackHash hash, unsigned connections, unsigned* rebound_moved = nullptr) {
  SteeringConfig config = with_backends({{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}, {"e", 4}, {"f", 5}, {"g", 6}, {"h", 7}});
  config.fallback_hash = hash;
  config.forwarding.max_entries = 4 * connections;
  config.forwarding.max_setup_entries = 2 * connections;
  ForwardingTables first_tables(config.forwarding, {1}), second_tables(config.forwarding, {2});
  PacketClassifier first(config), second(config);
  first.use_tables(&first_tables);
  second.use_tables(&second_tables);
  std::mt19937_64 rng(37);
  unsigned moved = 0, rebound = 0;
  LearnCounts counts;
  for (unsigned i = 0; i < connections; ++i) {
    Tuple t;
    t.client = IpAddress::v4(10, 1, std::uint8_t(i >> 8), std::uint8_t(i));
    t.port = std::uint16_t(20000 + i);
    const Bytes odcid = random_cid(rng, 12), scid = random_cid(rng, 8), server_cid = random_cid(rng, 8);
    const auto on = [&](PacketClassifier& c, const Bytes& f) { return c.classify(f.data(), f.size(), 0, &counts).resolution; };
    const Resolution opened = on(first, long_packet(t, traffic::LongType::kInitial, odcid, scid));
    EXPECT_EQ(opened.how, hash == FallbackHash::kDcid ? ResolveMethod::kFallbackDcid : ResolveMethod::kFallbackTuple);
    EXPECT_EQ(on(first, long_packet(t, traffic::LongType::kHandshake, server_cid, scid)).backend, opened.backend);
    EXPECT_EQ(on(first, short_packet(t, server_cid)).backend, opened.backend);
    // A NAT rebinding on `first`: the learned DCID follows it.
    Tuple rebinding = t;
    rebinding.port = std::uint16_t(40000 + i);
    EXPECT_EQ(on(first, short_packet(rebinding, server_cid)).backend, opened.backend);

    const Resolution handshake = on(second, long_packet(t, traffic::LongType::kHandshake, server_cid, scid));
    const Resolution data = on(second, short_packet(t, server_cid));
    EXPECT_EQ(data.how, ResolveMethod::kFallbackUnknownCid);
    moved += handshake.backend != opened.backend || data.backend != opened.backend;
    // The same rebound connection moved to `second`: its new 4-tuple is one
    // no appliance hashed before, so only shared learning can follow it.
    rebound += on(second, short_packet(rebinding, server_cid)).backend != opened.backend;
  }
  if (rebound_moved != nullptr) *rebound_moved = rebound;
  return moved;
}

TEST(RulesTierChange, WithTheTupleHashAnAppliancePicksTheBackendAnotherChoseForAConnection) {
  unsigned rebound_moved = 0;
  EXPECT_EQ(moved_after_tier_change(FallbackHash::kTuple, 400, &rebound_moved), 0u);
  // What the 4-tuple cannot follow (7/8 of rebound connections land
  // elsewhere by chance): the reason peers share what they learn.
  EXPECT_GT(rebound_moved, 250u);
  // The default with backends.
  EXPECT_EQ(moved_after_tier_change(FallbackHash::kAuto, 400), 0u);
}

TEST(RulesTierChange, WithTheDcidHashARandomCidConnectionMovesWhenItsApplianceChanges) {
  // The server's CID hashes elsewhere than the client's first DCID for
  // about 7 in 8 connections over eight backends.
  EXPECT_GT(moved_after_tier_change(FallbackHash::kDcid, 400), 250u);
}

// Without tables the tuple hash routes every QUIC packet QUIC-LB cannot
// (one at a time and in bursts alike), and QUIC-LB still comes first.
TEST(RulesTierChange, WithoutTablesTheTupleHashRoutesWhatQuicLbCannot) {
  SteeringConfig config = with_backends({{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}});
  config.forwarding.enabled = false;
  config.backends[2].server_ids = {{0x00, 0x07}};
  QuicLbConfig lb;
  lb.server_id_len = 2;
  lb.nonce_len = 6;
  config.quic_lb = {lb};
  PacketClassifier plain(config);
  PacketClassifier classifier(config);
  std::mt19937_64 rng(5);
  std::vector<Bytes> frames;
  std::set<std::uint16_t> backends;
  // CIDs of codepoint 2, which has no QUIC-LB config: 8 octets long
  // (short_dcid_len), routable by no server ID.
  const auto unroutable = [&] {
    Bytes c = random_cid(rng, 8);
    c[0] = std::uint8_t(0x40 | (c[0] & 0x1f));
    return c;
  };
  for (unsigned i = 0; i < 64; ++i) {
    Tuple t;
    t.port = std::uint16_t(30000 + i);
    frames.push_back(short_packet(t, unroutable()));
    const Decision one = classifier.classify(frames.back().data(), frames.back().size());
    EXPECT_EQ(one.resolution.how, ResolveMethod::kFallbackTuple);
    // Another DCID on the same 4-tuple: the same backend.
    const Bytes other = short_packet(t, unroutable());
    EXPECT_EQ(classifier.classify(other.data(), other.size()).resolution.backend, one.resolution.backend);
    backends.insert(one.resolution.backend);
  }
  EXPECT_EQ(backends.size(), 4u) << "the hash spreads 4-tuples over every active backend";
  Tuple t;
  frames.push_back(short_packet(t, {0x00, 0x00, 0x07, 1, 2, 3, 4, 5, 6}));
  const std::vector<Decision> burst = test::classify_as_burst(classifier, frames, 0, nullptr);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const Decision one = plain.classify(frames[i].data(), frames[i].size());
    EXPECT_EQ(burst[i].resolution.backend, one.resolution.backend) << i;
    EXPECT_EQ(burst[i].resolution.how, one.resolution.how) << i;
  }
  EXPECT_EQ(burst.back().resolution.how, ResolveMethod::kQuicLb);
  EXPECT_EQ(burst.back().resolution.backend, 2);
}

// ---------------------------------------------------------------- what peers exchange

// Every entry visit() reports, absorbed into a table of the same size,
// is found there by the original hash, with its target, credit and age;
// for a small table (under 65,536 buckets, where the key keeps the low
// 48 + log2(buckets) bits) and a large one alike.
TEST(ForwardingTableSync, VisitedEntriesAbsorbedIntoATableOfTheSameSizeAreFoundByTheirHash) {
  for (const std::uint32_t size : {1000u, 400000u}) {
    ForwardingTable from(size, ForwardingTable::Policy::kKeep), to(size, ForwardingTable::Policy::kKeep);
    std::mt19937_64 rng(size);
    std::vector<std::uint64_t> keys(size / 2);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      keys[i] = rng();
      ASSERT_EQ(from.insert(keys[i], std::uint16_t(i % 4000), std::uint32_t(1000 + i % 500), unsigned(i % 8)),
                ForwardingTable::Insert::kInserted);
    }
    unsigned visited = 0;
    from.visit(0, from.bucket_count(), 2000, [&](std::uint64_t key, std::uint16_t target, unsigned credit, std::uint32_t age) {
      ++visited;
      EXPECT_EQ(to.absorb(key, target, credit, 2000 - age, [] { return true; }), ForwardingTable::Insert::kInserted);
    });
    EXPECT_EQ(visited, keys.size());
    unsigned ages_kept = 0;
    to.visit(0, to.bucket_count(), 2000, [&](std::uint64_t, std::uint16_t, unsigned, std::uint32_t age) {
      ages_kept += age >= 500 && age <= 1000;
    });
    EXPECT_EQ(ages_kept, keys.size()) << "last seen 1000..1499 ms, visited at 2000";
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const ForwardingTable::Entry e = to.find_entry(keys[i], 2000);
      ASSERT_TRUE(e.found()) << size << " " << i;
      ASSERT_EQ(e.target(), i % 4000);
      ASSERT_EQ(e.credit(), i % 8);
    }
  }
}

// A peer's entry moves a present one's last-seen time on, never back, and
// never changes its target; `admit` is asked only for a new one.
TEST(ForwardingTableSync, AbsorbRefreshesForwardOnlyAndKeepsTheTarget) {
  ForwardingTable t(1000, ForwardingTable::Policy::kKeep);
  ASSERT_EQ(t.insert(42, 7, 1000), ForwardingTable::Insert::kInserted);
  int asked = 0;
  const auto admit = [&] { ++asked; return true; };
  EXPECT_EQ(t.absorb(42, 9, 0, 500, admit), ForwardingTable::Insert::kPresent);
  EXPECT_EQ(t.expire(31001, 30000, t.bucket_count()), 1u) << "an older time from a peer did not keep it alive";
  ASSERT_EQ(t.insert(42, 7, 1000), ForwardingTable::Insert::kInserted);
  EXPECT_EQ(t.absorb(42, 9, 0, 20000, admit), ForwardingTable::Insert::kPresent);
  EXPECT_EQ(t.expire(31001, 30000, t.bucket_count()), 0u) << "a later time from a peer keeps it alive";
  EXPECT_EQ(t.find(42, 31001), 7);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(t.absorb(43, 9, 0, 20000, [] { return false; }), ForwardingTable::Insert::kRefused);
  EXPECT_EQ(t.find(43, 20000), ForwardingTable::kNone);
}

// The established entries a handshake teaches, in the log a receiver hands
// to its peers: exactly those the table gained, with their targets.
TEST(ForwardingTableSync, TheLogHoldsWhatTheEstablishedTableLearned) {
  const SteeringConfig config = two_owners(true);
  ForwardingTables tables(config.forwarding, config.fallback_key);
  PacketClassifier classifier(config);
  classifier.use_tables(&tables);
  std::mt19937_64 rng(9);
  LearnedLog log;
  LearnCounts counts;
  counts.log = &log;
  const std::vector<Decision> out =
      handshake_in_one_burst(classifier, Tuple{}, random_cid(rng, 12), random_cid(rng, 8), random_cid(rng, 8), counts);
  ASSERT_EQ(counts.learned, 2u) << "the server's CID and the 4-tuple";
  ASSERT_EQ(log.n, 2u);
  EXPECT_EQ(log.overflowed, 0u);
  std::set<std::uint64_t> logged;
  for (unsigned i = 0; i < log.n; ++i) {
    EXPECT_EQ(log.entries[i].target, out[0].resolution.owner_index);
    logged.insert(log.entries[i].key);
  }
  std::set<std::uint64_t> in_table;
  tables.established().visit(0, tables.established().bucket_count(), 0,
                             [&](std::uint64_t key, std::uint16_t, unsigned, std::uint32_t) { in_table.insert(key); });
  // A table this small keeps the low 48 + log2(buckets) bits of each key.
  const unsigned bits = 48 + unsigned(std::countr_zero(tables.established().bucket_count()));
  std::set<std::uint64_t> logged_kept;
  for (const std::uint64_t k : logged) logged_kept.insert(k & ((std::uint64_t(1) << bits) - 1));
  EXPECT_EQ(in_table, logged_kept);
}

}  // namespace
}  // namespace qs
