// Hashing and owner resolution: SipHash against the paper's vectors and
// OpenSSL, the consistent-hash ring against a brute-force search and its
// movement bounds, server-ID routing, config validation.
#include "steering/owner_resolver.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>

#include "steering/packet_classifier.h"
#include "tests/steering/classify_burst.h"
#include "tests/steering/hex.h"
#include "tests/steering/packet_fixtures.h"

namespace qs {
namespace {

using test::unhex;

std::array<std::uint8_t, 16> counting_key() {
  std::array<std::uint8_t, 16> k{};
  for (int i = 0; i < 16; ++i) k[std::size_t(i)] = std::uint8_t(i);
  return k;
}

// The paper's reference vectors (vectors_sip64): key 00..0f, message
// 00 01 .. (n-1).
TEST(SipHash, PaperVectors24) {
  const SipHashKey key = SipHashKey::from_bytes(counting_key());
  std::uint8_t msg[64];
  for (int i = 0; i < 64; ++i) msg[i] = std::uint8_t(i);
  EXPECT_EQ(siphash24(key, msg, 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(siphash24(key, msg, 8), 0x93f5f5799a932462ULL);
  EXPECT_EQ(siphash24(key, msg, 15), 0xa129ca6149be45e5ULL);
}

// OpenSSL 3's SIPHASH MAC takes the round counts as parameters, which gives
// an implementation we did not write for both variants, at every length
// across several blocks.
std::uint64_t openssl_siphash(const std::array<std::uint8_t, 16>& key, unsigned c, unsigned d,
                              const std::uint8_t* msg, std::size_t len) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "SIPHASH", nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  std::size_t size = 8;
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
      OSSL_PARAM_construct_uint(OSSL_MAC_PARAM_C_ROUNDS, &c),
      OSSL_PARAM_construct_uint(OSSL_MAC_PARAM_D_ROUNDS, &d),
      OSSL_PARAM_construct_end(),
  };
  std::uint8_t out[8] = {};
  std::size_t out_len = 0;
  const bool ok = EVP_MAC_init(ctx, key.data(), key.size(), params) == 1 &&
                  EVP_MAC_update(ctx, msg, len) == 1 &&
                  EVP_MAC_final(ctx, out, &out_len, sizeof out) == 1;
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  EXPECT_TRUE(ok);
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | out[i];  // output octets are little endian
  return v;
}

TEST(SipHash, MatchesOpenSsl13And24) {
  std::mt19937_64 rng(11);
  std::array<std::uint8_t, 16> key_bytes;
  for (auto& b : key_bytes) b = std::uint8_t(rng());
  const SipHashKey key = SipHashKey::from_bytes(key_bytes);
  std::uint8_t msg[70];
  for (auto& b : msg) b = std::uint8_t(rng());
  for (std::size_t len = 0; len <= sizeof msg; ++len) {
    EXPECT_EQ(siphash13(key, msg, len), openssl_siphash(key_bytes, 1, 3, msg, len)) << len;
    EXPECT_EQ(siphash24(key, msg, len), openssl_siphash(key_bytes, 2, 4, msg, len)) << len;
  }
}

SipHashKey test_key() { return SipHashKey::from_bytes(counting_key()); }

void expect_lookup_equals_brute_force(const ConsistentHashRing& ring) {
  for (std::size_t i = 1; i < ring.point_count(); ++i)
    ASSERT_LE(ring.point_position(i - 1), ring.point_position(i));
  const auto brute = [&](std::uint64_t h) {
    for (std::size_t i = 0; i < ring.point_count(); ++i)
      if (ring.point_position(i) >= h) return ring.point_owner(i);
    return ring.point_owner(0);
  };
  std::vector<std::uint64_t> probes = {0, 1, ~0ULL, ~0ULL - 1};
  for (std::size_t i = 0; i < ring.point_count(); ++i) {
    const std::uint64_t p = ring.point_position(i);
    probes.insert(probes.end(), {p, p + 1, p - 1});
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) probes.push_back(rng());
  for (std::uint64_t h : probes) ASSERT_EQ(ring.owner_for(h), brute(h)) << h;
}

TEST(ConsistentHashRing, LookupEqualsBruteForce) {
  const ConsistentHashRing ring({4, 9, 1}, test_key(), 16);
  ASSERT_EQ(ring.point_count(), 48u);
  expect_lookup_equals_brute_force(ring);
  // One point: every hash wraps to it or stops at it. A thousand points per
  // owner: walks of more than one step.
  expect_lookup_equals_brute_force(ConsistentHashRing({7}, test_key(), 1));
  expect_lookup_equals_brute_force(ConsistentHashRing({2, 3}, test_key(), 1000));
}

std::vector<unsigned> lcores(unsigned n) {
  std::vector<unsigned> v;
  for (unsigned i = 0; i < n; ++i) v.push_back(10 + 3 * i);
  return v;
}

// Adding one owner to N moves about 1/(N+1) of the keys, never more than
// twice that, and only to the new owner; removing it moves them back.
TEST(ConsistentHashRing, AddingAnOwnerMovesAboutOneOverNPlusOne) {
  constexpr int kKeys = 200000;
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> keys(kKeys);
  for (auto& k : keys) k = rng();
  for (unsigned n = 1; n <= 12; ++n) {
    const auto before_ids = lcores(n);
    auto after_ids = before_ids;
    after_ids.push_back(7);  // a new lcore id, anywhere in the order
    const ConsistentHashRing before(before_ids, test_key(), 128);
    const ConsistentHashRing after(after_ids, test_key(), 128);
    int moved = 0;
    for (std::uint64_t k : keys) {
      const unsigned a = before_ids[before.owner_for(k)];
      const unsigned b = after_ids[after.owner_for(k)];
      if (a != b) {
        ++moved;
        ASSERT_EQ(b, 7u) << "a key moved between two old owners";
      }
    }
    const double fraction = double(moved) / kKeys, ideal = 1.0 / (n + 1);
    RecordProperty("moved_" + std::to_string(n), std::to_string(fraction * (n + 1)));
    EXPECT_LE(fraction, 2 * ideal) << n << " owners";
    EXPECT_GE(fraction, ideal / 2) << n << " owners";
  }
}

// Owners are identified by lcore id: listing them in another order changes
// indices, not which lcore a key reaches.
TEST(ConsistentHashRing, OwnerOrderDoesNotMatterButKeyDoes) {
  const std::vector<unsigned> ids = {3, 8, 1, 6}, shuffled = {6, 1, 3, 8};
  const ConsistentHashRing a(ids, test_key(), 64), b(shuffled, test_key(), 64);
  SipHashKey other = test_key();
  other.k1 ^= 1;
  const ConsistentHashRing c(ids, other, 64);
  std::mt19937_64 rng(9);
  int differ = 0;
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t h = rng();
    EXPECT_EQ(ids[a.owner_for(h)], shuffled[b.owner_for(h)]);
    differ += a.owner_for(h) != c.owner_for(h);
  }
  EXPECT_GT(differ, 5000);  // another key, another ring (3/4 differ on average)
}

TEST(ConsistentHashRing, RejectsBadOwnerSets) {
  EXPECT_THROW(ConsistentHashRing({}, test_key(), 8), std::invalid_argument);
  EXPECT_THROW(ConsistentHashRing({1, 2, 1}, test_key(), 8), std::invalid_argument);
  EXPECT_THROW(ConsistentHashRing({1}, test_key(), 0), std::invalid_argument);
  EXPECT_THROW(ConsistentHashRing({1}, test_key(), 5000), std::invalid_argument);
}

// The fallback spreads DCIDs over owners: each of 4 gets 1/4 +- 40% (the
// ring's +-10% spread plus sampling; the key is fixed, so this is exact).
TEST(OwnerResolverFallback, SpreadsDcidsOverOwners) {
  const OwnerResolver r(test::fixture_steering_config());
  std::mt19937_64 rng(13);
  std::vector<int> count(r.owner_count());
  constexpr int kDcids = 100000;
  for (int i = 0; i < kDcids; ++i) {
    std::uint8_t dcid[8];
    for (auto& b : dcid) b = std::uint8_t(rng());
    const auto owner = r.fallback_owner_for_dcid(dcid, sizeof dcid);
    ASSERT_LT(owner, r.owner_count());
    ++count[owner];
  }
  for (int c : count) {
    EXPECT_GT(c, kDcids / 4 * 6 / 10);
    EXPECT_LT(c, kDcids / 4 * 14 / 10);
  }
}

// Every routed server ID, under every config, with many nonces, reaches its
// owner by QUIC-LB; a server ID without a route falls back to the DCID hash.
TEST(OwnerResolverQuicLb, RoutedServerIdsReachTheirOwner) {
  const SteeringConfig config = test::fixture_steering_config();
  const OwnerResolver r(config);
  std::mt19937_64 rng(17);
  for (const QuicLbConfig& lb : config.quic_lb) {
    const QuicLbCodec codec(lb);
    for (const ServerRoute& route : config.server_routes) {
      if (route.server_id.size() != lb.server_id_len) continue;
      for (int i = 0; i < 50; ++i) {
        std::uint8_t nonce[18], cid[20];
        for (auto& b : nonce) b = std::uint8_t(rng());
        codec.encode(route.server_id.data(), nonce, cid, std::uint8_t(rng()));
        const Resolution res = r.resolve_dcid(cid, codec.cid_len());
        ASSERT_EQ(res.how, ResolveMethod::kQuicLb);
        EXPECT_EQ(r.owner_lcore(res.owner_index), route.owner_lcore);
      }
    }
    std::vector<std::uint8_t> unknown(lb.server_id_len, 0xee);
    std::uint8_t nonce[18] = {}, cid[20];
    codec.encode(unknown.data(), nonce, cid);
    const Resolution res = r.resolve_dcid(cid, codec.cid_len());
    EXPECT_EQ(res.how, ResolveMethod::kFallbackDcid);
    EXPECT_EQ(res.owner_index, r.fallback_owner_for_dcid(cid, codec.cid_len()));
  }
}

TEST(ServerIdMap, FindsExactlyTheRoutedIds) {
  ServerIdMap map;
  std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>> routes;
  std::mt19937_64 rng(19);
  for (std::uint16_t i = 0; i < 300; ++i) {
    std::vector<std::uint8_t> id(1 + i % 15);
    for (auto& b : id) b = std::uint8_t(rng());
    id[0] = std::uint8_t(i);  // distinct
    routes.emplace_back(id, std::uint16_t(i % 7));
  }
  routes.emplace_back(std::vector<std::uint8_t>{0x01, 0x00}, 9);  // a prefix-extended id
  map.build(routes);
  for (const auto& [id, owner] : routes) {
    EXPECT_EQ(map.find(id.data(), id.size()), owner);
    // The wide form ignores whatever follows the ID in its 16 octets.
    std::uint8_t padded[16];
    std::memset(padded, 0xa5, sizeof padded);
    std::memcpy(padded, id.data(), id.size());
    std::uint64_t mask_a, mask_b;
    ServerIdMap::key_masks(id.size(), mask_a, mask_b);
    EXPECT_EQ(map.find_wide(padded, id.size(), mask_a, mask_b), owner);
  }
  const std::uint8_t one[] = {0x01, 0x00, 0x00};
  EXPECT_EQ(map.find(one, 3), kNoOwner);  // same octets, other length
  EXPECT_EQ(map.find(one, 0), kNoOwner);
  const std::uint8_t absent[] = {0xff, 0xfe, 0xfd, 0xfc};
  EXPECT_EQ(map.find(absent, 4), kNoOwner);
  EXPECT_THROW(map.build({{{}, 0}}), std::invalid_argument);
  EXPECT_THROW(map.build({{{1}, 0}, {{1}, 2}}), std::invalid_argument);
}

TEST(OwnerResolverConfig, RejectsInconsistentProfiles) {
  const auto expect_error = [](SteeringConfig c, const std::string& words) {
    try {
      OwnerResolver r(c);
      ADD_FAILURE() << "accepted; expected an error about " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  SteeringConfig c = test::fixture_steering_config();
  c.owner_lcores.clear();
  expect_error(c, "no owner");
  c = test::fixture_steering_config();
  c.server_routes.push_back({unhex("0c0d"), 42});
  expect_error(c, "which is not an owner");
  c = test::fixture_steering_config();
  c.server_routes.push_back({unhex("0102"), 2});
  expect_error(c, "listed twice");
  c = test::fixture_steering_config();
  c.server_routes.push_back({unhex("0102030405"), 2});
  expect_error(c, "no QUIC-LB config's server_id_len");
  c = test::fixture_steering_config();
  c.quic_lb.push_back(c.quic_lb[0]);
  expect_error(c, "configured twice");
  c = test::fixture_steering_config();
  c.quic_lb[1].nonce_len = 2;
  expect_error(c, "nonce_len");
  c = test::fixture_steering_config();
  c.fallback_vnodes = 0;
  expect_error(c, "fallback_vnodes");
}

// Every Initial of a connection carries one DCID; whichever 4-tuple and IP
// version it arrives with, it reaches the same owner.
TEST(OwnerResolverFallback, SameDcidSameOwnerWhateverTheTuple) {
  const SteeringConfig config = test::fixture_steering_config();
  PacketClassifier classifier(config);
  std::vector<std::uint8_t> base;
  for (const auto& f : test::packet_fixtures())
    if (std::string(f.name) == "v1_initial_ipv4") base = f.bytes();
  ASSERT_FALSE(base.empty());
  const Decision first = classifier.classify(base.data(), base.size());
  ASSERT_EQ(first.resolution.how, ResolveMethod::kFallbackDcid);
  for (int i = 0; i < 64; ++i) {
    auto frame = base;
    frame[14 + 12] = std::uint8_t(i);      // source address
    frame[14 + 20] = std::uint8_t(i * 7);  // source port
    const Decision d = classifier.classify(frame.data(), frame.size());
    EXPECT_EQ(d.resolution.owner_index, first.resolution.owner_index);
  }
}

// steering.mode: four_tuple is the baseline the realquic test fails with: the
// same QUIC-LB CID from other 4-tuples goes to other owners, and the burst
// classifier agrees with the per-frame one.
TEST(OwnerResolverMode, FourTupleIgnoresTheDcidCidFollowsIt) {
  SteeringConfig config = test::fixture_steering_config();
  std::vector<std::uint8_t> base;
  for (const auto& f : test::packet_fixtures())
    if (std::string(f.name) == "v1_handshake_vlan_quic_lb_single_pass") base = f.bytes();
  ASSERT_FALSE(base.empty());
  PacketClassifier by_cid(config);
  config.mode = SteeringMode::kFourTuple;
  PacketClassifier by_tuple(config);
  const Decision first = by_cid.classify(base.data(), base.size());
  ASSERT_EQ(first.resolution.how, ResolveMethod::kQuicLb);
  std::vector<std::vector<std::uint8_t>> frames;
  std::set<std::uint16_t> tuple_owners;
  for (int i = 0; i < 64; ++i) {
    auto frame = base;
    frame[18 + 20] = std::uint8_t(i);  // source port (after Ethernet, VLAN, IPv4)
    frames.push_back(frame);
    const Decision c = by_cid.classify(frame.data(), frame.size());
    EXPECT_EQ(c.resolution.how, ResolveMethod::kQuicLb);
    EXPECT_EQ(c.resolution.owner_index, first.resolution.owner_index);
    const Decision t = by_tuple.classify(frame.data(), frame.size());
    EXPECT_EQ(t.resolution.how, ResolveMethod::kFallbackTuple);
    EXPECT_EQ(t.resolution.owner_index, by_tuple.resolver().fallback_owner_for_tuple(frame.data(), t.packet));
    tuple_owners.insert(t.resolution.owner_index);
  }
  EXPECT_GT(tuple_owners.size(), 1u);
  const std::vector<Decision> burst = test::classify_as_burst(by_tuple, frames);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(burst[i].resolution.how, ResolveMethod::kFallbackTuple);
    EXPECT_EQ(burst[i].resolution.owner_index,
              by_tuple.classify(frames[i].data(), frames[i].size()).resolution.owner_index);
  }
}

}  // namespace
}  // namespace qs

// Backends: the resolver's targets become backend slots.
namespace qs {
namespace {

SteeringConfig fleet(unsigned n, const std::vector<BackendState>& states = {}) {
  SteeringConfig s;
  s.owner_lcores = {1, 2};
  s.fallback_key = counting_key();
  QuicLbConfig lb;
  lb.config_id = 0;
  lb.server_id_len = 2;
  lb.nonce_len = 6;
  s.quic_lb.push_back(lb);
  for (unsigned i = 0; i < n; ++i) {
    BackendConfig b;
    b.name = "srv" + std::to_string(i);
    b.server_ids = {{0x0a, std::uint8_t(i)}};
    b.owner_lcore = 1 + i % 2;
    // Slots need not follow profile order (a reload keeps each backend's).
    b.slot = std::uint16_t(3 * i + 1);
    if (i < states.size()) b.state = states[i];
    s.backends.push_back(b);
  }
  return s;
}

std::vector<std::uint8_t> plaintext_cid(std::uint8_t server_low, std::uint8_t nonce) {
  return {0x00, 0x0a, server_low, nonce, 1, 2, 3, 4, 5};
}

TEST(BackendResolution, ServerIdGivesItsBackendAndTheBackendsOwner) {
  const OwnerResolver r(fleet(6));
  ASSERT_TRUE(r.has_backends());
  for (unsigned i = 0; i < 6; ++i) {
    const auto cid = plaintext_cid(std::uint8_t(i), 9);
    const Resolution res = r.resolve_quic_lb(cid.data(), cid.size());
    ASSERT_EQ(res.how, ResolveMethod::kQuicLb);
    EXPECT_EQ(res.backend, 3 * i + 1);
    EXPECT_EQ(res.owner_index, i % 2) << "backend " << i << " is served by lcore " << 1 + i % 2;
  }
  // Without backends no resolution names one.
  SteeringConfig plain = fleet(0);
  plain.server_routes.push_back({{0x0a, 0x00}, 2});
  const OwnerResolver p(plain);
  EXPECT_FALSE(p.has_backends());
  const auto cid = plaintext_cid(0, 9);
  EXPECT_EQ(p.resolve_quic_lb(cid.data(), cid.size()).backend, kNoBackend);
  EXPECT_EQ(p.resolve_quic_lb(cid.data(), cid.size()).owner_index, 1u);
}

TEST(BackendResolution, TheHashPicksOnlyActiveBackendsWhateverTheOrderOfTheList) {
  const std::vector<BackendState> states = {BackendState::kActive, BackendState::kDraining, BackendState::kActive,
                                            BackendState::kDown, BackendState::kActive, BackendState::kActive};
  const SteeringConfig config = fleet(6, states);
  SteeringConfig reversed = config;
  std::reverse(reversed.backends.begin(), reversed.backends.end());
  const OwnerResolver r(config), rr(reversed);
  std::map<std::uint16_t, unsigned> hits;
  std::mt19937_64 rng(5);
  for (int k = 0; k < 20000; ++k) {
    std::uint8_t dcid[8];
    for (auto& b : dcid) b = std::uint8_t(rng());
    dcid[0] = 0xe0;  // codepoint 7: never QUIC-LB
    const Resolution a = r.resolve_dcid(dcid, sizeof dcid);
    ASSERT_EQ(a.how, ResolveMethod::kFallbackDcid);
    ASSERT_EQ(a.backend, rr.resolve_dcid(dcid, sizeof dcid).backend) << "two appliances must agree";
    ASSERT_EQ(a.owner_index, (a.backend - 1) / 3 % 2);
    ++hits[a.backend];
  }
  EXPECT_EQ(hits.count(3 * 1 + 1), 0u) << "draining";
  EXPECT_EQ(hits.count(3 * 3 + 1), 0u) << "down";
  ASSERT_EQ(hits.size(), 4u);
  for (const auto& [slot, n] : hits) EXPECT_NEAR(n, 5000, 500) << "slot " << slot;
  // A draining or down backend's own CIDs still name it: its connections
  // go on (the data path drops a down backend's packets, counted).
  const auto cid = plaintext_cid(1, 9);
  EXPECT_EQ(r.resolve_quic_lb(cid.data(), cid.size()).backend, 4u);
}

// The backend hash has the profile's backend_table_size, or when that is 0
// the default for the ACTIVE backends' weights: what backend_hash_table_size()
// tells the dump and the logs.
TEST(BackendResolution, TheHashHasTheProfilesTableSize) {
  SteeringConfig c = fleet(120, std::vector<BackendState>(20, BackendState::kDraining));
  EXPECT_EQ(backend_hash_table_size(c), maglev_default_table_size(100));
  EXPECT_EQ(OwnerResolver(c).backend_table_size(), 1048583u);
  // The 100 active backends weighing 99 x 655 + 691 = 65,536 units (in
  // lowest terms: 691 is prime), past what 1048583 slots hold at 64 per
  // unit but not 4194319; the 20 draining ones (weight 1) would tip it over.
  for (std::size_t i = 20; i < c.backends.size(); ++i) c.backends[i].weight = 655;
  c.backends[30].weight = 691;
  EXPECT_EQ(backend_hash_table_size(c), 4194319u);
  EXPECT_EQ(OwnerResolver(c).backend_table_size(), 4194319u);
  c.backend_table_size = 1009;
  EXPECT_EQ(backend_hash_table_size(c), 1009u);
  EXPECT_EQ(OwnerResolver(c).backend_table_size(), 1009u);
  EXPECT_EQ(OwnerResolver(fleet(0)).backend_table_size(), 0u);
  c.backend_table_size = 1011;  // 3 x 337
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument);
}

TEST(BackendResolution, RefusesWhatItCannotRoute) {
  SteeringConfig c = fleet(3);
  c.backends[1].owner_lcore = 9;
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument);
  c = fleet(3);
  c.backends[2].slot = c.backends[0].slot;
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument);
  c = fleet(3, {BackendState::kDraining, BackendState::kDown, BackendState::kDraining});
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument) << "no active backend";
  c = fleet(3);
  c.backends[0].server_ids = {{1, 2, 3}};
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument) << "no config has 3-octet server IDs";
  c = fleet(3);
  c.server_routes.push_back({{0x0a, 0x07}, 1});
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument) << "server routes and backends together";
  c = fleet(3);
  c.backends[2].server_ids = c.backends[0].server_ids;
  EXPECT_THROW(OwnerResolver{c}, std::invalid_argument) << "one server ID, two backends";
}

}  // namespace
}  // namespace qs
