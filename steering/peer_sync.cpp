#include "steering/peer_sync.h"

#include <algorithm>
#include <cstring>

// SHA256_Init and the rest are deprecated in OpenSSL 3 in favour of EVP, but
// an EVP digest context is allocated and mutable per call; SHA256_CTX is a
// plain struct on the stack (see HmacSha256 in peer_sync.h).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace qs::peer_sync {
namespace {

constexpr std::uint8_t kMagic[4] = {'Q', 'S', 'S', 'Y'};

// Where the header's fields lie.
enum : std::size_t {
  kAtVersion = 4,
  kAtType = 5,
  kAtReserved = 6,
  kAtBootId = 8,
  kAtSequence = 16,
  kAtSentMs = 24,
  kAtBuckets = 32,
  kAtTotal = 36,
  kAtCount = 40,
  kAtReserved2 = 42,
};
static_assert(kAtReserved2 + 2 == kHeaderLen);
static_assert(kHeaderLen + kMaxEntries * kEntryLen + kMacLen <= kMaxDatagram);
static_assert(kMaxEntries <= 0xffff, "entry_count holds any count");

void put(std::uint8_t* p, std::uint64_t v, unsigned octets) {
  for (unsigned i = octets; i-- > 0; v >>= 8) p[i] = std::uint8_t(v);
}

std::uint64_t get(const std::uint8_t* p, unsigned octets) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < octets; ++i) v = v << 8 | p[i];
  return v;
}

bool known_type(std::uint8_t type) {
  return type >= std::uint8_t(MessageType::kEntries) && type <= std::uint8_t(MessageType::kResyncDone);
}

// A request or a done carries no entries (what a resync sends comes as
// kEntries), and only a done a total: anything else is a sender's bug, or
// an attacker's, never a message to act on.
bool consistent(MessageType type, std::uint32_t total, std::size_t n) {
  return (type == MessageType::kEntries || n == 0) && (type == MessageType::kResyncDone || total == 0);
}

}  // namespace

HmacSha256::HmacSha256(const std::uint8_t* key, std::size_t len) {
  if (len > kBlock) SHA256(key, len, key_.data());
  else if (len != 0) std::memcpy(key_.data(), key, len);
}

std::array<std::uint8_t, HmacSha256::kOutLen> HmacSha256::mac(const std::uint8_t* data, std::size_t len) const {
  std::uint8_t pad[kBlock];
  std::array<std::uint8_t, kOutLen> out;
  SHA256_CTX ctx;
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = key_[i] ^ 0x36;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, pad, kBlock);
  SHA256_Update(&ctx, data, len);
  SHA256_Final(out.data(), &ctx);
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = key_[i] ^ 0x5c;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, pad, kBlock);
  SHA256_Update(&ctx, out.data(), out.size());
  SHA256_Final(out.data(), &ctx);
  return out;
}

Keys Keys::derive(const std::array<std::uint8_t, 32>& secret) {
  const HmacSha256 prf(secret.data(), secret.size());
  const auto under = [&prf](std::string_view label) {
    return prf.mac(reinterpret_cast<const std::uint8_t*>(label.data()), label.size());
  };
  const auto mac = under(kMacLabel);
  const auto backend = under(kBackendLabel);
  const auto table = under(kTableLabel);
  std::array<std::uint8_t, 16> table_key;
  std::memcpy(table_key.data(), table.data(), table_key.size());
  return Keys(HmacSha256(mac.data(), mac.size()), HmacSha256(backend.data(), backend.size()), table_key);
}

std::uint32_t Keys::backend_id(std::string_view backend_name) const {
  const auto h = backend_.mac(reinterpret_cast<const std::uint8_t*>(backend_name.data()), backend_name.size());
  return std::uint32_t(get(h.data(), 4));
}

std::array<std::uint8_t, kMacLen> Keys::mac(const std::uint8_t* data, std::size_t len) const {
  const auto full = mac_.mac(data, len);
  std::array<std::uint8_t, kMacLen> out;
  std::memcpy(out.data(), full.data(), kMacLen);
  return out;
}

std::size_t encode(const Keys& keys, const Header& header, const Entry* entries, std::size_t n, std::uint8_t* out,
                   std::size_t cap) {
  const std::size_t len = kHeaderLen + n * kEntryLen + kMacLen;
  if (n > kMaxEntries || cap < len) return 0;
  if (!known_type(std::uint8_t(header.type)) || !consistent(header.type, header.total, n)) return 0;
  for (std::size_t i = 0; i < n; ++i)
    if (entries[i].credit > kMaxCredit) return 0;

  std::memcpy(out, kMagic, sizeof kMagic);
  out[kAtVersion] = kVersion;
  out[kAtType] = std::uint8_t(header.type);
  put(out + kAtReserved, 0, 2);
  put(out + kAtBootId, header.boot_id, 8);
  put(out + kAtSequence, header.sequence, 8);
  put(out + kAtSentMs, header.sent_ms, 8);
  put(out + kAtBuckets, header.table_buckets, 4);
  put(out + kAtTotal, header.total, 4);
  put(out + kAtCount, n, 2);
  put(out + kAtReserved2, 0, 2);
  std::uint8_t* p = out + kHeaderLen;
  for (std::size_t i = 0; i < n; ++i, p += kEntryLen) {
    put(p, entries[i].key, 8);
    put(p + 8, entries[i].backend_id, 4);
    put(p + 12, entries[i].age_ms, 4);
    p[16] = entries[i].credit;
  }
  const auto mac = keys.mac(out, std::size_t(p - out));
  std::memcpy(p, mac.data(), kMacLen);
  return len;
}

Refusal decode(const Keys& keys, const std::uint8_t* data, std::size_t len, Header& header, Entry* entries) {
  // The datagram's length is all that is trusted before the MAC: it alone
  // says what the MAC covers and where it lies.
  if (len < kHeaderLen + kMacLen || len > kMaxDatagram || (len - kHeaderLen - kMacLen) % kEntryLen != 0)
    return Refusal::kMalformed;
  const std::size_t body = len - kMacLen;
  const auto mac = keys.mac(data, body);
  if (CRYPTO_memcmp(mac.data(), data + body, kMacLen) != 0) return Refusal::kBadMac;

  // Authentic from here on, but a peer holding the key may still be buggy,
  // or another version: every field is checked all the same.
  const std::size_t n = (body - kHeaderLen) / kEntryLen;  // at most kMaxEntries, as len <= kMaxDatagram
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0 || data[kAtVersion] != kVersion || !known_type(data[kAtType]) ||
      get(data + kAtReserved, 2) != 0 || get(data + kAtReserved2, 2) != 0 || get(data + kAtCount, 2) != n)
    return Refusal::kMalformed;
  header.type = MessageType(data[kAtType]);
  header.boot_id = get(data + kAtBootId, 8);
  header.sequence = get(data + kAtSequence, 8);
  header.sent_ms = get(data + kAtSentMs, 8);
  header.table_buckets = std::uint32_t(get(data + kAtBuckets, 4));
  header.total = std::uint32_t(get(data + kAtTotal, 4));
  header.entry_count = std::uint16_t(n);
  if (!consistent(header.type, header.total, n)) return Refusal::kMalformed;
  const std::uint8_t* p = data + kHeaderLen;
  for (std::size_t i = 0; i < n; ++i, p += kEntryLen) {
    if (p[16] > kMaxCredit) return Refusal::kMalformed;
    entries[i] = Entry{get(p, 8), std::uint32_t(get(p + 8, 4)), std::uint32_t(get(p + 12, 4)), p[16]};
  }
  return Refusal::kNone;
}

std::string_view to_string(Refusal r) {
  static constexpr std::string_view kNames[kRefusals] = {
      "none",         "malformed",      "bad_mac",         "replayed",   "stale",
      "unknown_peer", "table_mismatch", "unknown_backend", "over_share", "rate_limited",
  };
  return std::size_t(r) < kRefusals ? kNames[std::size_t(r)] : "unknown";
}

Refusal ReplayGuard::admit(const Header& header, std::uint64_t now_ms, std::uint32_t max_skew_ms) {
  // Both ways: a message stamped ahead could be held back and replayed once
  // now catches up with it.
  const std::uint64_t skew = header.sent_ms > now_ms ? header.sent_ms - now_ms : now_ms - header.sent_ms;
  if (skew > max_skew_ms) return Refusal::kStale;
  if (header.sent_ms < min_sent_ms_) return Refusal::kReplayed;

  Boot* boot = nullptr;
  for (Boot& b : boots_)
    if (b.used && b.id == header.boot_id) boot = &b;
  if (boot == nullptr) {
    // A boot not kept: it takes an unused slot, or the slot of the boot whose
    // newest message is the oldest (the earliest boot), which is forgotten
    // and from then on refused by the floor. A message older than the boot
    // it would push out comes from a boot older still: refused, as its own
    // slot may have gone before.
    Boot* victim = &boots_[0];
    for (Boot& b : boots_) {
      if (!b.used) {
        victim = &b;
        break;
      }
      if (b.newest_ms < victim->newest_ms) victim = &b;
    }
    if (victim->used) {
      if (header.sent_ms <= victim->newest_ms) return Refusal::kReplayed;
      min_sent_ms_ = std::max(min_sent_ms_, victim->newest_ms + 1);
    }
    *victim = Boot{header.boot_id, header.sequence, 1, header.sent_ms, true};
    return Refusal::kNone;
  }

  if (header.sequence > boot->highest) {
    const std::uint64_t ahead = header.sequence - boot->highest;
    boot->seen = ahead >= kWindow ? 1 : boot->seen << ahead | 1;
    boot->highest = header.sequence;
  } else {
    // Below the window nothing is remembered: refused, as it may have been
    // taken (a sender's messages come at most a little out of order).
    const std::uint64_t behind = boot->highest - header.sequence;
    if (behind >= kWindow) return Refusal::kReplayed;
    const std::uint64_t bit = std::uint64_t(1) << behind;
    if ((boot->seen & bit) != 0) return Refusal::kReplayed;
    boot->seen |= bit;
  }
  boot->newest_ms = std::max(boot->newest_ms, header.sent_ms);
  return Refusal::kNone;
}

PeerBudget::Bucket::Bucket(std::uint32_t per_window, std::uint32_t window_ms)
    : per_window_(per_window),
      window_ms_(window_ms == 0 ? 1 : window_ms),
      capacity_(per_window_ * window_ms_),  // < 2^64: both below 2^32
      tokens_(capacity_) {}

bool PeerBudget::Bucket::take(std::uint64_t now_ms) {
  if (now_ms > last_ms_) {
    const std::uint64_t elapsed = now_ms - last_ms_;
    const std::uint64_t room = capacity_ - tokens_;
    // A window or more fills any room (and elapsed * per_window_ could then
    // overflow).
    tokens_ += elapsed >= window_ms_ ? room : std::min(room, elapsed * per_window_);
    last_ms_ = now_ms;
  }
  if (tokens_ < window_ms_) return false;
  tokens_ -= window_ms_;
  return true;
}

PeerBudget::PeerBudget(std::uint32_t max_new_entries, std::uint32_t window_ms, std::uint32_t entries_per_s)
    : share_(max_new_entries, window_ms), rate_(entries_per_s, 1000) {}

}  // namespace qs::peer_sync
