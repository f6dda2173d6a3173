// peer_sync: the messages quicsteer instances behind one ECMP group send each
// other about what their forwarding tables learned (issue 37), so that a
// connection whose packets the router moves to another instance (a link or
// an instance going away reshuffles ECMP) still reaches its backend. This is
// the message layer only: no sockets, no tables; the sync thread owns those.
//
// Like the IPVS sync daemon (and conntrackd's NOTRACK/ALARM modes), the
// protocol has no acknowledgements or resends: loss is repaired by the
// sender sending an entry again while it is in use (a refresh, as IPVS does
// with sync_refresh_period), and a peer that (re)starts asks for the whole
// table (kResyncRequest, as conntrackd's StartupResync), which the sender
// walks and ends with kResyncDone. Unlike both, which trust a dedicated link,
// every message carries a MAC and a (boot_id, sequence, sent_ms) the
// receiver checks (ReplayGuard): what a peer sends is written into a table
// that routes live traffic, so a forged or replayed message must not be.
// Ordering does not matter: an entry's target never changes once written
// (ForwardingTable), so entries apply in any order and any number of times.
//
// Wire format (big-endian), one UDP datagram of at most kMaxDatagram octets:
//   header: "QSSY" | version 1 (1) | type (1) | reserved 0 (2) | boot_id (8)
//           | sequence (8) | sent_ms (8) | table_buckets (4) | total (4)
//           | entry_count (2) | reserved 0 (2)
//   entries: key (8) | backend_id (4) | age_ms (4) | credit (1), entry_count times
//   MAC: HMAC-SHA256(mac key, everything before it), first 16 octets.
//
// Each peer has a budget (PeerBudget): a peer whose key leaked, or that is
// buggy, can add at most its share of the established table and send at most
// a given rate, so that it cannot push out what this instance learned itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace qs::peer_sync {

inline constexpr std::size_t kMaxDatagram = 1400;  // fits a 1500-octet MTU with IPv6 and UDP headers
inline constexpr std::size_t kMacLen = 16;
inline constexpr std::size_t kHeaderLen = 44;
inline constexpr std::size_t kEntryLen = 17;
inline constexpr std::size_t kMaxEntries = (kMaxDatagram - kHeaderLen - kMacLen) / kEntryLen;  // 78
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint8_t kMaxCredit = 7;  // ForwardingTable::kMaxCredit: a slot keeps 3 bits

// The labels keys are derived under (Keys::derive). Part of the protocol:
// peers must agree on them, and a new version of the format takes new ones.
inline constexpr std::string_view kMacLabel = "quicsteer peer sync v1 mac";
inline constexpr std::string_view kTableLabel = "quicsteer peer sync v1 table";
inline constexpr std::string_view kBackendLabel = "quicsteer peer sync v1 backend";

enum class MessageType : std::uint8_t { kEntries = 1, kResyncRequest = 2, kResyncDone = 3 };

struct Header {
  MessageType type = MessageType::kEntries;
  std::uint64_t boot_id = 0;   // random at each start of the sender: a restart starts a new sequence
  std::uint64_t sequence = 0;  // per message, within the boot
  std::uint64_t sent_ms = 0;   // the sender's Unix time: bounds how long a captured message can be replayed
  std::uint32_t table_buckets = 0;  // the sender's established table; the receiver compares (kTableMismatch)
  std::uint32_t total = 0;  // kResyncDone: the entries the resync it ends sent (the receiver sees its loss); else 0
  std::uint16_t entry_count = 0;  // set by encode() from its n
};

struct Entry {
  std::uint64_t key = 0;         // the established table's key (a keyed hash of a DCID or a 4-tuple)
  std::uint32_t backend_id = 0;  // Keys::backend_id of the backend's name: slots differ between peers
  std::uint32_t age_ms = 0;      // since the sender last saw the entry used
  std::uint8_t credit = 0;       // learn credit left (at most kMaxCredit)
};

// HMAC-SHA256 (RFC 2104) on OpenSSL's SHA-256, with no per-call allocation
// and no mutable state, so that one key serves every thread at once
// (OpenSSL's HMAC and EVP_MAC allocate a context per call, or need one per
// thread). Keys' primitive, public for its test vectors.
class HmacSha256 {
 public:
  static constexpr std::size_t kBlock = 64, kOutLen = 32;
  HmacSha256(const std::uint8_t* key, std::size_t len);
  std::array<std::uint8_t, kOutLen> mac(const std::uint8_t* data, std::size_t len) const;

 private:
  std::array<std::uint8_t, kBlock> key_{};  // the key, hashed first if longer than a block, zero-padded
};

// What the profile's 32-octet sync secret keys, one key per use, each
// HMAC-SHA256(secret, label): knowing one (the table key is handed to the
// data path; backend ids go on the wire) tells nothing of another, the MAC
// key above all.
class Keys {
 public:
  static Keys derive(const std::array<std::uint8_t, 32>& secret);

  // Keys the forwarding tables' hashes, alike on every peer, so that a key
  // one instance computed means the same connection on another.
  const std::array<std::uint8_t, 16>& table_key() const { return table_key_; }
  // A backend's id on the wire: the same on every peer, which number their
  // backend slots each their own way. Keyed, so that the wire does not name
  // backends; 32 bits, so a reload must refuse a set of backends in which
  // two share an id (about n^2 / 2^33 for n backends).
  std::uint32_t backend_id(std::string_view backend_name) const;
  // The MAC of a message: the first kMacLen octets of HMAC-SHA256 over it.
  std::array<std::uint8_t, kMacLen> mac(const std::uint8_t* data, std::size_t len) const;

 private:
  Keys(const HmacSha256& mac, const HmacSha256& backend, const std::array<std::uint8_t, 16>& table)
      : mac_(mac), backend_(backend), table_key_(table) {}
  HmacSha256 mac_;
  HmacSha256 backend_;
  std::array<std::uint8_t, 16> table_key_;
};

// Writes a message into out (cap octets) and returns its length, or 0, when
// it would not fit, n > kMaxEntries, or the message is one decode() refuses
// as malformed (an unknown type, entries in a request or done, total outside
// a done, a credit over kMaxCredit): a sender never emits what its peers drop.
// header.entry_count is ignored (n is written).
std::size_t encode(const Keys& keys, const Header& header, const Entry* entries, std::size_t n, std::uint8_t* out,
                   std::size_t cap);

// Why a message, or an entry of it, was not taken. decode() and the guards
// give the first five and the last two; the others are the caller's checks
// against its own configuration, here so that every refusal counts alike.
enum class Refusal : std::uint8_t {
  kNone,
  kMalformed,       // not a message of this format and version
  kBadMac,          // not from a holder of the secret, or damaged
  kReplayed,        // seen before (ReplayGuard)
  kStale,           // sent_ms too far from now (ReplayGuard)
  kUnknownPeer,     // from an address that is not a configured peer
  kTableMismatch,   // table_buckets differs from this instance's
  kUnknownBackend,  // an entry's backend_id names no backend of this instance
  kOverShare,       // an entry the peer's share of the table has no room for (PeerBudget)
  kRateLimited,     // an entry past the peer's rate (PeerBudget)
};
inline constexpr std::size_t kRefusals = 10;
std::string_view to_string(Refusal r);

// Counts by refusal, for the caller's statistics.
struct Refusals {
  std::array<std::uint64_t, kRefusals> counts{};
  void add(Refusal r, std::uint64_t n = 1) { counts[std::size_t(r)] += n; }
  std::uint64_t at(Refusal r) const { return counts[std::size_t(r)]; }
};

// Reads a message. Only its length is looked at before the MAC is checked
// (in constant time), so that nothing an attacker wrote steers the parse.
// entries needs room for kMaxEntries. On a refusal, header and entries are
// unspecified. Authentic, not fresh: admit the header to the peer's
// ReplayGuard next.
Refusal decode(const Keys& keys, const std::uint8_t* data, std::size_t len, Header& header, Entry* entries);

// One per peer: refuses messages sent too long ago (or ahead), and any
// message a second time. Each boot of the peer has its own sequence window
// (a bitmap of the kWindow sequences up to the highest taken, as IPsec's
// anti-replay window, RFC 4303 3.4.3): reordering within it is taken, older
// is refused. The last kBoots boots are kept, so that a restarted peer's new
// messages and the old boot's late ones are each judged by their own boot's
// window. A peer's boots follow each other in time, so a new boot pushes out
// the one whose newest message is the oldest and raises a floor: nothing the
// peer sent at or before that newest message is taken again, so that a
// forgotten boot's messages are never taken twice (and a boot older than
// every kept one is refused). Call only after decode() returned kNone: only
// authentic messages may move the state.
class ReplayGuard {
 public:
  static constexpr std::size_t kBoots = 4;
  static constexpr std::uint64_t kWindow = 64;
  Refusal admit(const Header& header, std::uint64_t now_ms, std::uint32_t max_skew_ms);

 private:
  struct Boot {
    std::uint64_t id = 0;
    std::uint64_t highest = 0;   // the highest sequence taken
    std::uint64_t seen = 0;      // bit i: highest - i was taken
    std::uint64_t newest_ms = 0;  // the highest sent_ms taken
    bool used = false;
  };
  std::array<Boot, kBoots> boots_{};
  std::uint64_t min_sent_ms_ = 0;  // the floor above: one past the forgotten boots' newest sent_ms
};

// One per peer: what it may do to this instance's established table. Two
// token buckets on now_ms, in exact integer arithmetic:
//   - max_new_entries per window_ms (the tables' idle timeout) for entries
//     new to the table: a burst of that many, refilled over the window. An
//     entry nobody uses goes once idle for the timeout, so a peer's unused
//     entries take at most 2 * max_new_entries slots (a full burst and a
//     window's refill); give half the share for a hard bound.
//   - entries_per_s for every entry it sends (new or refresh), a burst of
//     one second's worth, so that a peer cannot keep this instance's sync
//     thread busy.
// 0 admits nothing. Time going back refills nothing. No allocation.
class PeerBudget {
 public:
  PeerBudget(std::uint32_t max_new_entries, std::uint32_t window_ms, std::uint32_t entries_per_s);
  // kRateLimited past the rate; call for every entry received.
  Refusal admit_entry(std::uint64_t now_ms) { return rate_.take(now_ms) ? Refusal::kNone : Refusal::kRateLimited; }
  // kOverShare past the share; call only for an entry that would be new in
  // the table (ForwardingTable::insert's `admit`).
  Refusal admit_new(std::uint64_t now_ms) { return share_.take(now_ms) ? Refusal::kNone : Refusal::kOverShare; }

 private:
  // Tokens in units of 1/window_ms of an entry, so that per_window entries
  // refill in window_ms with no rounding: capacity per_window * window_ms
  // (< 2^64), an entry costs window_ms, a millisecond adds per_window.
  class Bucket {
   public:
    Bucket(std::uint32_t per_window, std::uint32_t window_ms);
    bool take(std::uint64_t now_ms);

   private:
    std::uint64_t per_window_, window_ms_, capacity_, tokens_;
    std::uint64_t last_ms_ = 0;
  };
  Bucket share_;
  Bucket rate_;
};

}  // namespace qs::peer_sync
