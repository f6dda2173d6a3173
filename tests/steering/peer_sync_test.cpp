// peer_sync: the codec (round trips, what encode refuses, every bit flip and
// truncation refused, hand-built messages with a valid MAC but a bad field),
// the MAC and key derivation against RFC 4231 and OpenSSL's own HMAC, the
// replay guard (windows, skew, restarts) and the peer budget.
#include "steering/peer_sync.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "tests/steering/hex.h"

namespace qs::peer_sync {

// gtest prints refusals by name (found by argument-dependent lookup).
void PrintTo(Refusal r, std::ostream* os) { *os << to_string(r); }

namespace {

using test::hex;
using test::unhex;

std::array<std::uint8_t, 32> secret(std::uint8_t first) {
  std::array<std::uint8_t, 32> s{};
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = std::uint8_t(first + i);
  return s;
}

// OpenSSL's HMAC-SHA256, an implementation we did not write.
std::vector<std::uint8_t> openssl_hmac(const std::vector<std::uint8_t>& key, const std::uint8_t* data,
                                       std::size_t len) {
  std::vector<std::uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned out_len = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), data, len, out.data(), &out_len);
  out.resize(out_len);
  return out;
}
std::vector<std::uint8_t> openssl_hmac(const std::vector<std::uint8_t>& key, std::string_view text) {
  return openssl_hmac(key, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}
std::vector<std::uint8_t> bytes(const std::array<std::uint8_t, 32>& a) { return {a.begin(), a.end()}; }

// The MAC key as the protocol defines it, computed with OpenSSL.
std::vector<std::uint8_t> mac_key(const std::array<std::uint8_t, 32>& s) { return openssl_hmac(bytes(s), kMacLabel); }

// Re-MACs a message (after a test changed a field) with OpenSSL.
void remac(std::vector<std::uint8_t>& msg, const std::array<std::uint8_t, 32>& s) {
  const std::size_t body = msg.size() - kMacLen;
  const std::vector<std::uint8_t> mac = openssl_hmac(mac_key(s), msg.data(), body);
  std::memcpy(msg.data() + body, mac.data(), kMacLen);
}

constexpr std::size_t kAtCountForTests = 40;  // entry_count's offset

Header header(MessageType type, std::uint64_t sequence = 7) {
  Header h;
  h.type = type;
  h.boot_id = 0x0123456789abcdefull;
  h.sequence = sequence;
  h.sent_ms = 1700000000123ull;
  h.table_buckets = 65536;
  return h;
}

std::vector<Entry> entries(std::size_t n) {
  std::vector<Entry> e(n);
  for (std::size_t i = 0; i < n; ++i)
    e[i] = Entry{0xfedcba9876543210ull ^ (i * 0x9e3779b97f4a7c15ull), std::uint32_t(0x80000000u + i),
                 std::uint32_t(i * 1000 + 1), std::uint8_t(i % (kMaxCredit + 1))};
  return e;
}

std::vector<std::uint8_t> encoded(const Keys& keys, const Header& h, const std::vector<Entry>& e) {
  std::vector<std::uint8_t> out(kMaxDatagram);
  out.resize(encode(keys, h, e.data(), e.size(), out.data(), out.size()));
  return out;
}

Refusal decoded(const Keys& keys, const std::vector<std::uint8_t>& msg, std::size_t len) {
  Header h;
  Entry e[kMaxEntries];
  return decode(keys, msg.data(), len, h, e);
}
Refusal decoded(const Keys& keys, const std::vector<std::uint8_t>& msg) { return decoded(keys, msg, msg.size()); }

TEST(PeerSyncCodec, Sizes) {
  EXPECT_EQ(kHeaderLen, 4u + 1 + 1 + 2 + 8 + 8 + 8 + 4 + 4 + 2 + 2);
  EXPECT_EQ(kMaxEntries, 78u);
  EXPECT_LE(kHeaderLen + kMaxEntries * kEntryLen + kMacLen, kMaxDatagram);
  EXPECT_GT(kHeaderLen + (kMaxEntries + 1) * kEntryLen + kMacLen, kMaxDatagram);
}

void expect_round_trip(const Header& sent, const std::vector<Entry>& e) {
  const Keys keys = Keys::derive(secret(1));
  const std::vector<std::uint8_t> msg = encoded(keys, sent, e);
  ASSERT_EQ(msg.size(), kHeaderLen + e.size() * kEntryLen + kMacLen);
  Header got;
  got.entry_count = 999;
  Entry out[kMaxEntries];
  ASSERT_EQ(decode(keys, msg.data(), msg.size(), got, out), Refusal::kNone);
  EXPECT_EQ(got.type, sent.type);
  EXPECT_EQ(got.boot_id, sent.boot_id);
  EXPECT_EQ(got.sequence, sent.sequence);
  EXPECT_EQ(got.sent_ms, sent.sent_ms);
  EXPECT_EQ(got.table_buckets, sent.table_buckets);
  EXPECT_EQ(got.total, sent.total);
  ASSERT_EQ(got.entry_count, e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(out[i].key, e[i].key) << i;
    EXPECT_EQ(out[i].backend_id, e[i].backend_id) << i;
    EXPECT_EQ(out[i].age_ms, e[i].age_ms) << i;
    EXPECT_EQ(out[i].credit, e[i].credit) << i;
  }
}

TEST(PeerSyncCodec, RoundTripsEachType) {
  for (const std::size_t n : {std::size_t(0), std::size_t(1), kMaxEntries}) {
    SCOPED_TRACE(n);
    expect_round_trip(header(MessageType::kEntries), entries(n));
  }
  expect_round_trip(header(MessageType::kResyncRequest), {});
  Header done = header(MessageType::kResyncDone);
  done.total = 0xdeadbeef;
  expect_round_trip(done, {});
  // Extremes of every field.
  Header h = header(MessageType::kEntries, ~std::uint64_t(0));
  h.boot_id = ~std::uint64_t(0);
  h.sent_ms = ~std::uint64_t(0);
  h.table_buckets = ~std::uint32_t(0);
  expect_round_trip(h, {Entry{~std::uint64_t(0), ~std::uint32_t(0), ~std::uint32_t(0), kMaxCredit}, Entry{}});
}

TEST(PeerSyncCodec, LayoutIsBigEndian) {
  const Keys keys = Keys::derive(secret(1));
  Header h = header(MessageType::kResyncDone, 0x1112131415161718ull);
  h.total = 0x21222324;
  std::vector<std::uint8_t> msg = encoded(keys, h, {});
  msg.resize(kHeaderLen);
  EXPECT_EQ(hex(msg), "51535359" "01" "03" "0000" "0123456789abcdef" "1112131415161718" "0000018bcfe5687b"
                      "00010000" "21222324" "0000" "0000");
  const std::vector<std::uint8_t> one =
      encoded(keys, header(MessageType::kEntries), {Entry{0x0102030405060708ull, 0x090a0b0c, 0x0d0e0f10, 5}});
  EXPECT_EQ(hex(one.data() + kHeaderLen - 4, 4 + kEntryLen), "0001" "0000" "0102030405060708" "090a0b0c" "0d0e0f10" "05");
}

TEST(PeerSyncCodec, EncodeRefuses) {
  const Keys keys = Keys::derive(secret(1));
  std::uint8_t out[2 * kMaxDatagram];
  const std::vector<Entry> many = entries(kMaxEntries + 1);
  const Header h = header(MessageType::kEntries);
  EXPECT_EQ(encode(keys, h, many.data(), kMaxEntries + 1, out, sizeof out), 0u);
  const std::size_t full = kHeaderLen + kMaxEntries * kEntryLen + kMacLen;
  EXPECT_EQ(encode(keys, h, many.data(), kMaxEntries, out, full - 1), 0u);
  EXPECT_EQ(encode(keys, h, many.data(), kMaxEntries, out, full), full);
  // What decode would refuse as malformed.
  EXPECT_EQ(encode(keys, header(MessageType::kResyncRequest), many.data(), 1, out, sizeof out), 0u);
  EXPECT_EQ(encode(keys, header(MessageType::kResyncDone), many.data(), 1, out, sizeof out), 0u);
  Header total = h;
  total.total = 1;
  EXPECT_EQ(encode(keys, total, many.data(), 1, out, sizeof out), 0u);
  EXPECT_EQ(encode(keys, header(MessageType(0)), nullptr, 0, out, sizeof out), 0u);
  EXPECT_EQ(encode(keys, header(MessageType(4)), nullptr, 0, out, sizeof out), 0u);
  const Entry over{1, 2, 3, kMaxCredit + 1};
  EXPECT_EQ(encode(keys, h, &over, 1, out, sizeof out), 0u);
}

// The length is the only thing trusted before the MAC, and any change to
// the octets it covers, or to the MAC, fails it.
TEST(PeerSyncCodec, EveryBitFlipIsRefused) {
  const Keys keys = Keys::derive(secret(1));
  Header done = header(MessageType::kResyncDone);
  done.total = 3;
  for (const std::vector<std::uint8_t>& msg :
       {encoded(keys, header(MessageType::kEntries), entries(3)), encoded(keys, done, {})}) {
    ASSERT_FALSE(msg.empty());
    ASSERT_EQ(decoded(keys, msg), Refusal::kNone);
    for (std::size_t bit = 0; bit < msg.size() * 8; ++bit) {
      std::vector<std::uint8_t> m = msg;
      m[bit / 8] ^= std::uint8_t(1u << (bit % 8));
      const Refusal r = decoded(keys, m);
      EXPECT_TRUE(r == Refusal::kBadMac || r == Refusal::kMalformed) << "bit " << bit << ": " << to_string(r);
    }
  }
}

TEST(PeerSyncCodec, EveryTruncationIsRefused) {
  const Keys keys = Keys::derive(secret(1));
  for (const std::size_t n : {std::size_t(0), std::size_t(2), kMaxEntries}) {
    std::vector<std::uint8_t> msg = encoded(keys, header(MessageType::kEntries), entries(n));
    for (std::size_t len = 0; len < msg.size(); ++len) {
      // A copy of exactly len octets, so that ASan sees a read past it.
      const std::vector<std::uint8_t> cut(msg.begin(), msg.begin() + std::ptrdiff_t(len));
      const Refusal r = decoded(keys, cut);
      EXPECT_TRUE(r == Refusal::kBadMac || r == Refusal::kMalformed) << "n " << n << " len " << len;
      // A whole number of entries off the end leaves a well-formed length:
      // the MAC refuses it.
      if (len >= kHeaderLen + kMacLen && (msg.size() - len) % kEntryLen == 0) {
        EXPECT_EQ(r, Refusal::kBadMac) << len;
      }
    }
    msg.push_back(0);
    EXPECT_NE(decoded(keys, msg), Refusal::kNone);
  }
  std::vector<std::uint8_t> huge(kMaxDatagram + kEntryLen - (kMaxDatagram - kHeaderLen - kMacLen) % kEntryLen);
  EXPECT_EQ(decoded(keys, huge), Refusal::kMalformed);  // a whole number of entries, over kMaxDatagram
}

TEST(PeerSyncCodec, WrongKeyIsBadMac) {
  const std::vector<std::uint8_t> msg = encoded(Keys::derive(secret(1)), header(MessageType::kEntries), entries(4));
  EXPECT_EQ(decoded(Keys::derive(secret(1)), msg), Refusal::kNone);
  EXPECT_EQ(decoded(Keys::derive(secret(2)), msg), Refusal::kBadMac);
  std::array<std::uint8_t, 32> one_bit = secret(1);
  one_bit[31] ^= 0x80;
  EXPECT_EQ(decoded(Keys::derive(one_bit), msg), Refusal::kBadMac);
}

// Messages with a valid MAC (built here with OpenSSL) and one bad field:
// malformed, not bad_mac, and not taken.
TEST(PeerSyncCodec, AuthenticButMalformed) {
  const auto s = secret(1);
  const Keys keys = Keys::derive(s);
  const std::vector<std::uint8_t> good = encoded(keys, header(MessageType::kEntries), entries(2));
  const auto with = [&](auto change) {
    std::vector<std::uint8_t> m = good;
    change(m);
    remac(m, s);
    return decoded(keys, m);
  };
  EXPECT_EQ(with([](auto&) {}), Refusal::kNone);  // the re-MAC itself is right
  EXPECT_EQ(with([](auto& m) { m[0] = 'X'; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[3] = 'Z'; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[4] = 2; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[4] = 0; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[5] = 0; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[5] = 4; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[6] = 1; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[7] = 1; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[42] = 1; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[43] = 1; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[41] = 3; }), Refusal::kMalformed);  // entry_count 3, length says 2
  EXPECT_EQ(with([](auto& m) { m[41] = 1; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[40] = 1; }), Refusal::kMalformed);  // 258
  EXPECT_EQ(with([](auto& m) { m[kHeaderLen + 16] = kMaxCredit + 1; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[kHeaderLen + kEntryLen + 16] = 0xff; }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[5] = std::uint8_t(MessageType::kResyncRequest); }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[5] = std::uint8_t(MessageType::kResyncDone); }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m[39] = 1; }), Refusal::kMalformed);  // total outside a done
  // A request with total set.
  std::vector<std::uint8_t> req = encoded(keys, header(MessageType::kResyncRequest), {});
  req[39] = 1;
  remac(req, s);
  EXPECT_EQ(decoded(keys, req), Refusal::kMalformed);
  // Lengths that are not a header, whole entries and a MAC, MACed all the
  // same: one octet more, and one entry more than a datagram holds.
  EXPECT_EQ(with([](auto& m) { m.insert(m.end() - kMacLen, 0); }), Refusal::kMalformed);
  EXPECT_EQ(with([](auto& m) { m.insert(m.end() - kMacLen, kEntryLen - 1, 0); }), Refusal::kMalformed);
  std::vector<std::uint8_t> over = encoded(keys, header(MessageType::kEntries), entries(kMaxEntries));
  over.insert(over.end() - kMacLen, kEntryLen, 0);
  over[kAtCountForTests + 1] = std::uint8_t(kMaxEntries + 1);
  remac(over, s);
  EXPECT_EQ(decoded(keys, over), Refusal::kMalformed);
}

// RFC 4231's HMAC-SHA-256 vectors through Keys' primitive (cases 6 and 7:
// a key longer than a block, hashed first).
TEST(PeerSyncMac, Rfc4231) {
  struct Case {
    std::vector<std::uint8_t> key;
    std::string data;
    const char* mac;
  };
  const std::vector<Case> cases = {
      {std::vector<std::uint8_t>(20, 0x0b), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {{'J', 'e', 'f', 'e'}, "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::vector<std::uint8_t>(20, 0xaa), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {std::vector<std::uint8_t>(131, 0xaa), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {std::vector<std::uint8_t>(131, 0xaa),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
       "hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const Case& c : cases) {
    const HmacSha256 h(c.key.data(), c.key.size());
    const auto mac = h.mac(reinterpret_cast<const std::uint8_t*>(c.data.data()), c.data.size());
    EXPECT_EQ(hex(mac.data(), mac.size()), c.mac) << c.data;
  }
}

// Every key length around the block size, every data length over a few
// blocks, against OpenSSL's HMAC.
TEST(PeerSyncMac, MatchesOpenSsl) {
  std::vector<std::uint8_t> data(200);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::uint8_t(i * 7 + 3);
  for (std::size_t key_len = 0; key_len <= 2 * HmacSha256::kBlock + 1; ++key_len) {
    const std::vector<std::uint8_t> key(data.rbegin(), data.rbegin() + std::ptrdiff_t(key_len));
    const HmacSha256 h(key.data(), key.size());
    for (std::size_t len = 0; len <= data.size(); len += 13) {
      const auto mac = h.mac(data.data(), len);
      EXPECT_EQ(hex(mac.data(), mac.size()), hex(openssl_hmac(key, data.data(), len))) << key_len << " " << len;
    }
  }
}

// Known answer for a whole message: its MAC is OpenSSL's HMAC-SHA256 under
// HMAC-SHA256(secret, kMacLabel), cut to 16 octets.
TEST(PeerSyncMac, MessageMacKnownAnswer) {
  const auto s = secret(9);
  const std::vector<std::uint8_t> msg = encoded(Keys::derive(s), header(MessageType::kEntries), entries(5));
  const std::size_t body = msg.size() - kMacLen;
  const std::vector<std::uint8_t> want = openssl_hmac(mac_key(s), msg.data(), body);
  EXPECT_EQ(hex(msg.data() + body, kMacLen), hex(want.data(), kMacLen));
}

TEST(PeerSyncKeys, Derivation) {
  const auto s = secret(1);
  const Keys a = Keys::derive(s);
  const Keys b = Keys::derive(s);
  const Keys other = Keys::derive(secret(2));
  EXPECT_EQ(a.table_key(), b.table_key());
  EXPECT_NE(a.table_key(), other.table_key());
  EXPECT_EQ(a.backend_id("web-1"), b.backend_id("web-1"));
  EXPECT_NE(a.backend_id("web-1"), other.backend_id("web-1"));
  EXPECT_EQ(a.mac(s.data(), s.size()), b.mac(s.data(), s.size()));
  EXPECT_NE(a.mac(s.data(), s.size()), other.mac(s.data(), s.size()));

  // Each use under its own label, computed independently.
  const std::vector<std::uint8_t> table = openssl_hmac(bytes(s), kTableLabel);
  EXPECT_EQ(hex(a.table_key().data(), 16), hex(table.data(), 16));
  const std::vector<std::uint8_t> backend_key = openssl_hmac(bytes(s), kBackendLabel);
  const std::vector<std::uint8_t> id = openssl_hmac(backend_key, "web-1");
  EXPECT_EQ(a.backend_id("web-1"), std::uint32_t(id[0]) << 24 | id[1] << 16 | id[2] << 8 | id[3]);
  // The labels, and so the keys, differ: no use reveals another's key.
  const std::vector<std::uint8_t> mac = mac_key(s);
  EXPECT_NE(hex(table), hex(mac));
  EXPECT_NE(hex(table), hex(backend_key));
  EXPECT_NE(hex(mac), hex(backend_key));
  EXPECT_NE(hex(a.table_key().data(), 16), hex(mac.data(), 16));
}

TEST(PeerSyncKeys, BackendIdsDifferByName) {
  const Keys keys = Keys::derive(secret(3));
  std::set<std::uint32_t> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string name = "backend-";
    name.append(std::to_string(i));
    ids.insert(keys.backend_id(name));
  }
  EXPECT_EQ(ids.size(), 1000u);  // no collision expected (p ~ 1e-4, and the keys are fixed)
  EXPECT_NE(keys.backend_id(""), keys.backend_id(std::string_view("\0", 1)));
  EXPECT_NE(keys.backend_id("a"), keys.backend_id("A"));
}

TEST(PeerSyncRefusals, Names) {
  const std::vector<std::string_view> want = {"none",         "malformed",      "bad_mac",         "replayed",
                                              "stale",        "unknown_peer",   "table_mismatch", "unknown_backend",
                                              "over_share",   "rate_limited"};
  ASSERT_EQ(want.size(), kRefusals);
  for (std::size_t i = 0; i < kRefusals; ++i) EXPECT_EQ(to_string(Refusal(i)), want[i]);
  Refusals counts;
  counts.add(Refusal::kBadMac);
  counts.add(Refusal::kBadMac, 2);
  counts.add(Refusal::kRateLimited);
  EXPECT_EQ(counts.at(Refusal::kBadMac), 3u);
  EXPECT_EQ(counts.at(Refusal::kRateLimited), 1u);
  EXPECT_EQ(counts.at(Refusal::kNone), 0u);
}

// ReplayGuard: every call is at now = sent_ms unless a test says otherwise.
constexpr std::uint64_t kNow = 1700000000000ull;
constexpr std::uint32_t kSkew = 30000;

struct Peer {
  ReplayGuard guard;
  Refusal send(std::uint64_t boot, std::uint64_t sequence, std::uint64_t sent_ms, std::uint64_t now_ms) {
    Header h = header(MessageType::kEntries, sequence);
    h.boot_id = boot;
    h.sent_ms = sent_ms;
    return guard.admit(h, now_ms, kSkew);
  }
  Refusal send(std::uint64_t boot, std::uint64_t sequence, std::uint64_t at_ms = kNow) {
    return send(boot, sequence, at_ms, at_ms);
  }
};

TEST(PeerSyncReplay, InOrderAndDuplicates) {
  Peer p;
  for (std::uint64_t seq = 0; seq < 200; ++seq) EXPECT_EQ(p.send(1, seq, kNow + seq), Refusal::kNone) << seq;
  EXPECT_EQ(p.send(1, 199, kNow + 300), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 198, kNow + 300), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 200, kNow + 300), Refusal::kNone);
  EXPECT_EQ(p.send(1, 200, kNow + 300), Refusal::kReplayed);
}

TEST(PeerSyncReplay, OutOfOrderWithinTheWindow) {
  Peer p;
  EXPECT_EQ(p.send(1, 100), Refusal::kNone);
  EXPECT_EQ(p.send(1, 90), Refusal::kNone);
  EXPECT_EQ(p.send(1, 90), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 37), Refusal::kNone);  // the window's oldest: 100 - 63
  EXPECT_EQ(p.send(1, 37), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 36), Refusal::kReplayed);  // below it
  EXPECT_EQ(p.send(1, 0), Refusal::kReplayed);
  // Sliding keeps what it saw: 90 is still within the window of 120.
  EXPECT_EQ(p.send(1, 120), Refusal::kNone);
  EXPECT_EQ(p.send(1, 90), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 91), Refusal::kNone);
  EXPECT_EQ(p.send(1, 100), Refusal::kReplayed);
  // A jump past the whole window forgets everything below it.
  EXPECT_EQ(p.send(1, 1000), Refusal::kNone);
  EXPECT_EQ(p.send(1, 936), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 937), Refusal::kNone);
  EXPECT_EQ(p.send(1, 999), Refusal::kNone);
  EXPECT_EQ(p.send(1, 999), Refusal::kReplayed);
  EXPECT_EQ(p.send(1, 120), Refusal::kReplayed);
}

TEST(PeerSyncReplay, StaleBothWays) {
  Peer p;
  EXPECT_EQ(p.send(1, 1, kNow - kSkew - 1, kNow), Refusal::kStale);
  EXPECT_EQ(p.send(1, 2, kNow + kSkew + 1, kNow), Refusal::kStale);
  EXPECT_EQ(p.send(1, 3, 0, kNow), Refusal::kStale);
  EXPECT_EQ(p.send(1, 4, ~std::uint64_t(0), kNow), Refusal::kStale);
  // Refusals leave no trace: the same sequences, fresh, are taken.
  EXPECT_EQ(p.send(1, 1, kNow - kSkew, kNow), Refusal::kNone);
  EXPECT_EQ(p.send(1, 2, kNow + kSkew, kNow), Refusal::kNone);
  // A message taken, replayed once it is stale: stale (and still refused
  // within the skew, as replayed).
  EXPECT_EQ(p.send(1, 2, kNow + kSkew, kNow + 2 * kSkew + 1), Refusal::kStale);
  EXPECT_EQ(p.send(1, 2, kNow + kSkew, kNow + 2 * kSkew), Refusal::kReplayed);
}

TEST(PeerSyncReplay, RestartStartsANewBoot) {
  Peer p;
  for (std::uint64_t seq = 1; seq <= 100; ++seq) ASSERT_EQ(p.send(0xaaaa, seq, kNow + seq), Refusal::kNone);
  // The restarted peer starts over at sequence 1 under a new boot id.
  for (std::uint64_t seq = 1; seq <= 100; ++seq) EXPECT_EQ(p.send(0xbbbb, seq, kNow + 1000 + seq), Refusal::kNone);
  // The old boot's messages, replayed within the skew: refused by its own window.
  for (std::uint64_t seq = 37; seq <= 100; ++seq) EXPECT_EQ(p.send(0xaaaa, seq, kNow + seq, kNow + 2000), Refusal::kReplayed);
  EXPECT_EQ(p.send(0xaaaa, 1, kNow + 1, kNow + 2000), Refusal::kReplayed);
  // A late message of the old boot it never got is taken, once.
  EXPECT_EQ(p.send(0xaaaa, 101, kNow + 101, kNow + 2000), Refusal::kNone);
  EXPECT_EQ(p.send(0xaaaa, 101, kNow + 101, kNow + 2000), Refusal::kReplayed);
  EXPECT_EQ(p.send(0xbbbb, 50, kNow + 1050, kNow + 2000), Refusal::kReplayed);
  EXPECT_EQ(p.send(0xbbbb, 101, kNow + 2000), Refusal::kNone);
}

// A peer restarting more often than the guard keeps boots: no message of
// any boot, kept or forgotten, is taken twice, and the kept boots' late
// messages still are.
TEST(PeerSyncReplay, FiveBootsCycling) {
  Peer p;
  constexpr std::uint64_t kBootsSent = 5 * ReplayGuard::kBoots;
  constexpr std::uint64_t kPerBoot = 10;
  const auto sent_at = [](std::uint64_t boot, std::uint64_t seq) { return kNow + boot * 100 + seq; };
  const std::uint64_t end = sent_at(kBootsSent, 0);  // all within the skew
  for (std::uint64_t boot = 1; boot <= kBootsSent; ++boot) {
    for (std::uint64_t seq = 1; seq <= kPerBoot; ++seq)
      ASSERT_EQ(p.send(boot, seq, sent_at(boot, seq)), Refusal::kNone) << boot << " " << seq;
    // Every message sent so far, again: refused.
    for (std::uint64_t old = 1; old <= boot; ++old)
      for (std::uint64_t seq = 1; seq <= kPerBoot; ++seq)
        EXPECT_EQ(p.send(old, seq, sent_at(old, seq), sent_at(boot, kPerBoot)), Refusal::kReplayed)
            << "boot " << old << " seq " << seq << " after boot " << boot;
  }
  // The kept boots' late messages (each never sent before) are taken once.
  for (std::uint64_t boot = kBootsSent - ReplayGuard::kBoots + 1; boot <= kBootsSent; ++boot) {
    EXPECT_EQ(p.send(boot, kPerBoot + 1, sent_at(boot, kPerBoot + 1), end), Refusal::kNone) << boot;
    EXPECT_EQ(p.send(boot, kPerBoot + 1, sent_at(boot, kPerBoot + 1), end), Refusal::kReplayed) << boot;
  }
  // A forgotten boot's message that was never taken is refused too: the
  // guard cannot tell it from a replay.
  EXPECT_EQ(p.send(1, kPerBoot + 1, sent_at(1, kPerBoot + 1), end), Refusal::kReplayed);
  EXPECT_EQ(p.send(kBootsSent - ReplayGuard::kBoots, kPerBoot + 1,
                   sent_at(kBootsSent - ReplayGuard::kBoots, kPerBoot + 1), end),
            Refusal::kReplayed);
  // And a new boot still comes in.
  EXPECT_EQ(p.send(kBootsSent + 1, 1, end + 1), Refusal::kNone);
}

// Replays of a forgotten boot cannot take a slot back and then be taken
// again within its fresh window.
TEST(PeerSyncReplay, ForgottenBootCannotComeBack) {
  Peer p;
  const std::uint64_t first = 0x1111;
  EXPECT_EQ(p.send(first, 10, kNow + 10), Refusal::kNone);
  for (std::uint64_t boot = 2; boot <= ReplayGuard::kBoots + 1; ++boot)
    EXPECT_EQ(p.send(boot, 1, kNow + boot * 100), Refusal::kNone);
  const std::uint64_t later = kNow + 1000;
  // first was pushed out: its message 10 again, or its unsent 11 sent just
  // after it, are both at or below the floor.
  EXPECT_EQ(p.send(first, 10, kNow + 10, later), Refusal::kReplayed);
  EXPECT_EQ(p.send(first, 11, kNow + 11, later), Refusal::kReplayed);
  EXPECT_EQ(p.send(first, 9, kNow + 9, later), Refusal::kReplayed);
}

// Which boot goes is decided by its newest message, not its first: a boot
// that started early and still sends (the live one) is kept.
TEST(PeerSyncReplay, LongLivedBootIsKept) {
  Peer p;
  const std::uint64_t live = 0xaaaa, later = kNow + 1000;
  EXPECT_EQ(p.send(live, 1, kNow + 100), Refusal::kNone);
  EXPECT_EQ(p.send(live, 2, kNow + 900), Refusal::kNone);
  for (std::uint64_t boot = 2; boot <= ReplayGuard::kBoots + 1; ++boot)
    EXPECT_EQ(p.send(boot, 1, kNow + boot * 100), Refusal::kNone);  // the last pushes boot 2 out
  EXPECT_EQ(p.send(live, 2, kNow + 900, later), Refusal::kReplayed);
  EXPECT_EQ(p.send(live, 3, kNow + 950, later), Refusal::kNone);
  EXPECT_EQ(p.send(2, 1, kNow + 200, later), Refusal::kReplayed);
}

// A forgotten boot that comes back after all (its sender's clock went back
// between boots, so a message of it is newer than a kept boot's) gets a
// fresh window, in which its messages taken before are unmarked: the floor
// still refuses them.
TEST(PeerSyncReplay, FloorHoldsWhateverTheSendersClock) {
  Peer p;
  const std::uint64_t first = 0x1111, later = kNow + 1000;
  EXPECT_EQ(p.send(first, 1, kNow + 100), Refusal::kNone);
  for (std::uint64_t boot = 2; boot <= ReplayGuard::kBoots + 1; ++boot)
    EXPECT_EQ(p.send(boot, 1, kNow + boot * 100), Refusal::kNone);  // the last pushes `first` out
  EXPECT_EQ(p.send(first, 3, kNow + 250, later), Refusal::kNone);   // newer than boot 2's newest: back in
  EXPECT_EQ(p.send(first, 1, kNow + 100, later), Refusal::kReplayed);
  EXPECT_EQ(p.send(first, 3, kNow + 250, later), Refusal::kReplayed);
}

TEST(PeerSyncBudget, ShareFloodGetsExactlyItsShare) {
  constexpr std::uint32_t kShare = 100, kWindowMs = 30000;
  PeerBudget b(kShare, kWindowMs, ~std::uint32_t(0));
  const auto flood = [&](std::uint64_t now) {
    std::uint32_t taken = 0;
    while (b.admit_new(now) == Refusal::kNone) {
      if (++taken > 10 * kShare) break;
    }
    return taken;
  };
  const std::uint64_t t0 = kNow;
  EXPECT_EQ(flood(t0), kShare);
  EXPECT_EQ(b.admit_new(t0), Refusal::kOverShare);
  EXPECT_EQ(flood(t0 + kWindowMs / 2), kShare / 2);  // refilled in proportion
  EXPECT_EQ(flood(t0 + kWindowMs / 2 + kWindowMs), kShare);  // a whole window: all of it
  EXPECT_EQ(flood(t0 + 10 * kWindowMs), kShare);  // and no more after a long pause
  // Time going back refills nothing.
  EXPECT_EQ(flood(t0), 0u);
}

// What the header says a peer's unused entries take at most: a burst and a
// window's refill, 2 * share, over any window.
TEST(PeerSyncBudget, AtMostTwiceTheSharePerWindow) {
  constexpr std::uint32_t kShare = 64, kWindowMs = 1000;
  PeerBudget b(kShare, kWindowMs, ~std::uint32_t(0));
  std::uint32_t taken = 0;
  for (std::uint64_t t = kNow; t <= kNow + kWindowMs; ++t)
    while (b.admit_new(t) == Refusal::kNone) ++taken;
  EXPECT_EQ(taken, 2 * kShare);
}

TEST(PeerSyncBudget, Rate) {
  constexpr std::uint32_t kPerS = 1000;
  PeerBudget b(0, 30000, kPerS);
  std::uint32_t taken = 0;
  while (b.admit_entry(kNow) == Refusal::kNone && taken <= 2 * kPerS) ++taken;
  EXPECT_EQ(taken, kPerS);  // a second's worth at once
  EXPECT_EQ(b.admit_entry(kNow), Refusal::kRateLimited);
  EXPECT_EQ(b.admit_entry(kNow + 1), Refusal::kNone);  // then one per millisecond
  EXPECT_EQ(b.admit_entry(kNow + 1), Refusal::kRateLimited);
  taken = 0;
  for (std::uint64_t t = kNow + 2; t < kNow + 2 + 10000; ++t)
    while (b.admit_entry(t) == Refusal::kNone) ++taken;
  EXPECT_EQ(taken, 10000u);  // ten seconds at the rate
  // The share is a budget of its own (0 here: nothing new).
  EXPECT_EQ(b.admit_new(kNow + 20000), Refusal::kOverShare);

  PeerBudget slow(10, 30000, 3);
  EXPECT_EQ(slow.admit_entry(kNow), Refusal::kNone);
  EXPECT_EQ(slow.admit_entry(kNow), Refusal::kNone);
  EXPECT_EQ(slow.admit_entry(kNow), Refusal::kNone);
  EXPECT_EQ(slow.admit_entry(kNow + 333), Refusal::kRateLimited);  // 0.999 of an entry
  EXPECT_EQ(slow.admit_entry(kNow + 334), Refusal::kNone);
  EXPECT_EQ(slow.admit_new(kNow + 334), Refusal::kNone);  // the rate's refusals did not touch the share
}

// Full from the start, also on a clock that starts at 0.
TEST(PeerSyncBudget, BurstFromTheStart) {
  PeerBudget b(10, 30000, 5);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b.admit_new(0), Refusal::kNone) << i;
  EXPECT_EQ(b.admit_new(0), Refusal::kOverShare);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.admit_entry(1), Refusal::kNone) << i;
  EXPECT_EQ(b.admit_entry(1), Refusal::kRateLimited);
}

TEST(PeerSyncBudget, ExtremesDoNotOverflow) {
  PeerBudget b(~std::uint32_t(0), ~std::uint32_t(0), ~std::uint32_t(0));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(b.admit_new(kNow), Refusal::kNone);
    ASSERT_EQ(b.admit_entry(kNow), Refusal::kNone);
  }
  EXPECT_EQ(b.admit_new(~std::uint64_t(0)), Refusal::kNone);
  PeerBudget none(0, 0, 0);
  EXPECT_EQ(none.admit_new(0), Refusal::kOverShare);
  EXPECT_EQ(none.admit_entry(kNow), Refusal::kRateLimited);
  PeerBudget zero_window(5, 0, 1);  // a window of 0 counts as 1 ms
  for (int i = 0; i < 5; ++i) EXPECT_EQ(zero_window.admit_new(kNow), Refusal::kNone);
  EXPECT_EQ(zero_window.admit_new(kNow), Refusal::kOverShare);
  EXPECT_EQ(zero_window.admit_new(kNow + 1), Refusal::kNone);
}

}  // namespace
}  // namespace qs::peer_sync
