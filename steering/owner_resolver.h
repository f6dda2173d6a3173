// Which owner lcore handles a parsed packet.
//
// Owners are the profile's owner_lcores; a Resolution names one by INDEX into
// that vector (0..n-1, for the dataplane's per-owner arrays); owner_lcore()
// turns an index into the lcore id.
//
// Every rule below picks a TARGET: an owner index when the profile has no
// backends, a backend slot when it has (SteeringConfig::backends). Server
// IDs, the forwarding tables and the hashes all deal in targets; a
// Resolution gives both the target's owner and, with backends, the backend
// (resolution()). With backends the hash is a Maglev table over the active
// backends, weighted (steering/maglev.h), not the ring over owners.
//
// In order:
//   1. QUIC with a DCID whose first octet selects a configured QUIC-LB config
//      that decodes it to a server ID listed in server_routes: that route's
//      owner (kQuicLb).
//   2. Any other QUIC DCID (client-chosen Initial DCIDs, CIDs of servers that
//      do not speak QUIC-LB, codepoint 0b111, unknown configs, server IDs
//      without a route): what the forwarding tables learned
//      (steering/forwarding_rules.h: kLearnedSetup, kLearnedCid,
//      kLearnedTuple) when the profile has them, else the consistent-hash ring
//      over the keyed hash of the DCID (steering/cid_hash.h; kFallbackDcid, or
//      kFallbackUnknownCid for a short header the tables know nothing of).
//      Every Initial of a connection carries the same DCID and so reaches the
//      same owner from any RX queue. With fallback_hash kTuple (the default
//      with backends) the hash is of the 4-tuple instead (kFallbackTuple, or
//      kFallbackUnknownCid), so that appliances agree on a connection whose
//      4-tuple has not changed without sharing what they learned.
//   3. QUIC with an empty DCID, UDP that is not QUIC, and other IP traffic:
//      the keyed hash of version, protocol, ports (zero without a UDP
//      header) and addresses (kFallbackTuple). Non-first IP fragments
//      have no ports, so they hash by addresses alone.
//   4. Not IP, or malformed: no owner (kNone); the dataplane decides.
// With SteeringMode::kFourTuple, QUIC skips 1 and 2 (a baseline: what RSS or
// SO_REUSEPORT give).
//
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "steering/cid_hash.h"
#include "steering/consistent_hash.h"
#include "steering/maglev.h"
#include "steering/packet_parser.h"
#include "steering/quic_lb.h"
#include "steering/siphash.h"
#include "steering/steering_config.h"

namespace qs {

// Which rule routed a packet. Every packet is counted under one.
enum class ResolveMethod : std::uint8_t {
  kQuicLb,              // the DCID's server ID (QUIC-LB)
  kLearnedSetup,        // long header: the table of (4-tuple, client SCID) of connections being set up
  kLearnedCid,          // the table of learned DCIDs
  kLearnedTuple,        // the table of learned 4-tuples
  kFallbackDcid,        // the keyed hash of the DCID (a first Initial; every DCID without tables)
  kFallbackUnknownCid,  // a short header whose DCID and 4-tuple no table knows (a migration to a new
                        // CID, or a connection the tables had no room for): the hash of the DCID
  kFallbackTuple,       // the keyed hash of the 4-tuple (not QUIC, or no DCID)
  kNone,                // not routed (not IP, malformed)
};
inline constexpr std::size_t kResolveMethods = 8;
// quic_lb, learned_setup, learned_cid, learned_tuple, fallback_dcid,
// fallback_unknown_cid, fallback_tuple, none
std::string_view to_string(ResolveMethod m);

inline constexpr std::uint16_t kNoOwner = 0xffff;
inline constexpr std::uint16_t kNoBackend = 0xffff;
// Targets a resolver answers for: every value a forwarding-table entry can
// hold (ForwardingTable::kTargetBits), so that resolution() of what a table
// learned under an earlier configuration is in range; those of no owner or
// backend now resolve to kNoOwner.
inline constexpr std::size_t kTargetSpace = 4096;
static_assert(kMaxBackends <= kTargetSpace);

struct Resolution {
  std::uint16_t owner_index = kNoOwner;
  std::uint16_t backend = kNoBackend;  // the backend slot; kNoBackend without backends
  ResolveMethod how = ResolveMethod::kNone;
  bool routed() const { return owner_index != kNoOwner; }
};

// The size of the backend hash that OwnerResolver builds from `config`:
// its backend_table_size, or when that is 0 the default for its active
// backends' weights (0 when it has no backend). For the profile's dump and
// the logs, which show the operator the size and its memory.
inline std::uint32_t backend_hash_table_size(const SteeringConfig& config) {
  if (config.backend_table_size != 0) return config.backend_table_size;
  std::uint32_t divisor = 0;
  for (const BackendConfig& b : config.backends)
    if (b.state == BackendState::kActive) divisor = std::gcd(divisor, b.weight);
  if (divisor == 0) return 0;
  std::uint64_t turns_per_round = 0;
  for (const BackendConfig& b : config.backends)
    if (b.state == BackendState::kActive) turns_per_round += b.weight / divisor;
  return maglev_default_table_size(turns_per_round);
}

// Server ID -> target (owner index or backend slot), filled once. One- and two-octet IDs (up to 65536
// servers, the usual case) index a direct table; longer ones an
// open-addressing hash table.
class ServerIdMap {
 public:
  void build(const std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>>& routes);

  std::uint16_t find(const std::uint8_t* id, std::size_t len) const {
    std::uint64_t a, b;
    if (!load_key(id, len, a, b)) return kNoOwner;
    return find_key(a, b, len);
  }
  // find() when 16 octets may be read at `id`: two loads and two masks
  // (key_masks(len)) instead of a per-length load sequence.
  std::uint16_t find_wide(const std::uint8_t* id, std::size_t len, std::uint64_t mask_a,
                          std::uint64_t mask_b) const {
    std::uint64_t a, b;
    std::memcpy(&a, id, 8);
    std::memcpy(&b, id + 8, 8);
    return find_key(a & mask_a, b & mask_b, len);
  }
  static void key_masks(std::size_t len, std::uint64_t& mask_a, std::uint64_t& mask_b) {
    mask_a = len >= 8 ? ~0ULL : (1ULL << (8 * len)) - 1;
    mask_b = len <= 8 ? 0 : len >= 16 ? ~0ULL : (1ULL << (8 * (len - 8))) - 1;
  }

 private:
  struct Slot {
    std::uint64_t words[2];
    std::uint8_t len;  // 0: empty
    std::uint16_t owner;
  };
  // The ID zero-padded into two words, built from constant-size loads in
  // registers: a variable-length copy into a stack buffer read back as words
  // stalls on store forwarding, and GCC turns a small memcpy into an integer
  // into exactly that.
  template <std::size_t N>
  static std::uint64_t load_le(const std::uint8_t* p) {
    static_assert(N <= 8);
    if constexpr (N == 0) {
      return 0;
    } else if constexpr (N == 8) {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    } else if constexpr (N >= 4) {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v | load_le<N - 4>(p + 4) << 32;
    } else if constexpr (N >= 2) {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v | load_le<N - 2>(p + 2) << 16;
    } else {
      return p[0];
    }
  }
  template <std::size_t N>
  static void load_words(const std::uint8_t* p, std::uint64_t& a, std::uint64_t& b) {
    a = load_le<(N < 8 ? N : 8)>(p);
    b = load_le<(N > 8 ? N - 8 : 0)>(p + 8);
  }
  static bool load_key(const std::uint8_t* p, std::size_t len, std::uint64_t& a,
                       std::uint64_t& b) {
    switch (len) {
      case 1: load_words<1>(p, a, b); return true;
      case 2: load_words<2>(p, a, b); return true;
      case 3: load_words<3>(p, a, b); return true;
      case 4: load_words<4>(p, a, b); return true;
      case 5: load_words<5>(p, a, b); return true;
      case 6: load_words<6>(p, a, b); return true;
      case 7: load_words<7>(p, a, b); return true;
      case 8: load_words<8>(p, a, b); return true;
      case 9: load_words<9>(p, a, b); return true;
      case 10: load_words<10>(p, a, b); return true;
      case 11: load_words<11>(p, a, b); return true;
      case 12: load_words<12>(p, a, b); return true;
      case 13: load_words<13>(p, a, b); return true;
      case 14: load_words<14>(p, a, b); return true;
      case 15: load_words<15>(p, a, b); return true;
      default: return false;
    }
  }
  std::uint16_t find_key(std::uint64_t a, std::uint64_t b, std::size_t len) const {
    if (len <= 2) return direct_.empty() ? kNoOwner : direct_[(len - 1) << 16 | a];
    if (slots_.empty()) return kNoOwner;
    for (std::size_t i = hash(a, b, len) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == 0) return kNoOwner;  // an empty slot ends the probe
      if (s.len == len && s.words[0] == a && s.words[1] == b) return s.owner;
    }
  }
  static std::size_t hash(std::uint64_t a, std::uint64_t b, std::size_t len) {
    std::uint64_t h = (a ^ len) * 0x9e3779b97f4a7c15ULL ^ b * 0xc2b2ae3d27d4eb4fULL;
    return std::size_t(h ^ h >> 29);
  }
  std::vector<std::uint16_t> direct_;  // [0, 64Ki): one octet, [64Ki, 128Ki): two
  std::vector<Slot> slots_;  // at most half full, so a probe always ends
  std::size_t mask_ = 0;
};

class OwnerResolver {
 public:
  // Validates what the resolver relies on and throws std::invalid_argument:
  // at least one owner, QUIC-LB configs valid and one per config_id, server
  // IDs of a configured length, unique, and routed to a listed owner lcore.
  explicit OwnerResolver(const SteeringConfig& config,
                         QuicLbCodec::AesBackend backend = QuicLbCodec::AesBackend::kAuto);

  std::size_t owner_count() const { return owner_lcores_.size(); }
  bool has_backends() const { return backend_hash_.has_value(); }
  // Slots of the backend hash (backend_hash_table_size()); 0 without backends.
  std::uint32_t backend_table_size() const { return backend_hash_ ? backend_hash_->size() : 0; }
  // What a target (below kTargetSpace) stands for: not routed (kNoOwner)
  // for one that names nothing in this configuration, such as the slot of a
  // backend a reload removed, which the forwarding tables may still hold.
  Resolution resolution(std::uint16_t target, ResolveMethod how) const {
    const TargetInfo t = targets_[target];  // one 4-octet load for both
    return {t.owner, t.backend, how};
  }
  unsigned owner_lcore(std::uint16_t owner_index) const { return owner_lcores_[owner_index]; }
  const std::vector<unsigned>& owner_lcores() const { return owner_lcores_; }

  // The codec for the codepoint in a DCID's first octet, or null.
  const QuicLbCodec* codec_for(std::uint8_t first_octet) const {
    const auto& c = codecs_[quic_lb_config_id(first_octet)];
    return c ? &*c : nullptr;
  }
  // The target of a server ID, or kNoOwner.
  std::uint16_t target_for_server_id(const std::uint8_t* id, std::size_t len) const {
    return server_ids_.find(id, len);
  }
  // The same, for an ID at the start of a 16-octet buffer (decode_many output).
  std::uint16_t target_for_server_id_block(const std::uint8_t id[16], std::size_t len) const {
    std::uint64_t mask_a, mask_b;
    ServerIdMap::key_masks(len, mask_a, mask_b);
    return server_ids_.find_wide(id, len, mask_a, mask_b);
  }
  // The hash's target for a keyed hash: the ring over owners, or with
  // backends the Maglev table over the active ones.
  std::uint16_t target_for_hash(std::uint64_t hash) const {
    return backend_hash_ ? backend_hash_->target_for(hash) : ring_.owner_for(hash);
  }
  std::uint16_t fallback_target_for_dcid(const std::uint8_t* dcid, std::size_t len) const {
    return target_for_hash(dcid_hash(dcid, len));
  }
  std::uint16_t fallback_target_for_tuple(const std::uint8_t* frame, const ParsedPacket& p) const {
    return target_for_hash(tuple_hash(frame, p));
  }
  // What routes a QUIC packet that QUIC-LB did not and no table knows
  // (SteeringConfig::fallback_hash): the hash of its 4-tuple or of its DCID.
  bool hashes_tuples() const { return tuple_fallback_; }
  std::uint16_t fallback_target(const std::uint8_t* frame, const ParsedPacket& p) const {
    return tuple_fallback_ ? fallback_target_for_tuple(frame, p) : fallback_target_for_dcid(p.dcid(frame), p.dcid_len);
  }
  ResolveMethod fallback_method() const {
    return tuple_fallback_ ? ResolveMethod::kFallbackTuple : ResolveMethod::kFallbackDcid;
  }
  // The owner index the hash gives (its target's owner).
  std::uint16_t fallback_owner_for_dcid(const std::uint8_t* dcid, std::size_t len) const {
    return targets_[fallback_target_for_dcid(dcid, len)].owner;
  }
  std::uint16_t fallback_owner_for_tuple(const std::uint8_t* frame, const ParsedPacket& p) const {
    return targets_[target_for_hash(tuple_hash(frame, p))].owner;
  }
  // The keyed hashes the fallback ring uses.
  std::uint64_t dcid_hash(const std::uint8_t* dcid, std::size_t len) const { return cid_hash_.hash(dcid, len); }
  // dcid_hash() of n DCIDs at once (see CidHash::hash_many).
  void dcid_hash_many(const std::uint8_t* const* dcids, const std::uint8_t* lens,
                      const std::uint16_t* readable, std::size_t n, std::uint64_t* out) const {
    cid_hash_.hash_many(dcids, lens, readable, n, out);
  }
  std::uint64_t tuple_hash(const std::uint8_t* frame, const ParsedPacket& p) const;
  std::uint16_t owner_for_hash(std::uint64_t hash) const { return targets_[target_for_hash(hash)].owner; }

  // QUIC-LB alone: the owner of the DCID's server ID, or kNoOwner (how =
  // kNone) when the DCID is not routable by the profile's configs.
  // `readable`: how many octets from dcid on may be read (at least len); the
  // rest of the frame after the DCID lets the server ID be loaded wide.
  [[gnu::always_inline]] Resolution resolve_quic_lb(const std::uint8_t* dcid, std::size_t len,
                                                    std::size_t readable = 0) const {
    const Codepoint& cp = codepoints_[quic_lb_config_id(dcid[0])];
    if (cp.kind == Codepoint::kPlaintext) {
      // The server ID is right there in the DCID: no copy, no codec call.
      if (len >= cp.cid_len && (!cp.self_encode || quic_lb_self_encoded_len(dcid[0]) == len)) {
        const std::uint16_t target =
            readable >= 17
                ? server_ids_.find_wide(dcid + 1, cp.server_id_len, cp.mask_a, cp.mask_b)
                : server_ids_.find(dcid + 1, cp.server_id_len);
        if (target != kNoOwner) return resolution(target, ResolveMethod::kQuicLb);
      }
    } else if (cp.kind == Codepoint::kEncrypted) {
      const QuicLbCodec& codec = *codecs_[quic_lb_config_id(dcid[0])];
      std::uint8_t server_id[16];
      if (codec.decode(dcid, len, server_id)) {
        const std::uint16_t target = server_ids_.find(server_id, cp.server_id_len);
        if (target != kNoOwner) return resolution(target, ResolveMethod::kQuicLb);
      }
    }
    return {};
  }

  // QUIC-LB, else the hash of the DCID (no forwarding tables).
  [[gnu::always_inline]] Resolution resolve_dcid(const std::uint8_t* dcid, std::size_t len,
                                                 std::size_t readable = 0) const {
    const Resolution r = resolve_quic_lb(dcid, len, readable);
    if (r.routed()) return r;
    return resolution(fallback_target_for_dcid(dcid, len), ResolveMethod::kFallbackDcid);
  }

  // Whether a DCID's codepoint has an encrypted config (classify_burst
  // batches those).
  bool encrypted_codepoint(std::uint8_t first_octet) const {
    return codepoints_[quic_lb_config_id(first_octet)].kind == Codepoint::kEncrypted;
  }

  SteeringMode mode() const { return mode_; }

  Resolution resolve(const std::uint8_t* frame, const ParsedPacket& p) const {
    switch (p.verdict) {
      case Verdict::kQuic:
        if (p.dcid_len > 0 && mode_ == SteeringMode::kCid) {
          if (!tuple_fallback_) return resolve_dcid(p.dcid(frame), p.dcid_len);
          const Resolution r = resolve_quic_lb(p.dcid(frame), p.dcid_len);
          if (r.routed()) return r;
        }
        [[fallthrough]];
      case Verdict::kNotQuic:
        return resolution(target_for_hash(tuple_hash(frame, p)), ResolveMethod::kFallbackTuple);
      case Verdict::kNotUdp:
        if (p.ip_version != 0)
          return resolution(target_for_hash(tuple_hash(frame, p)), ResolveMethod::kFallbackTuple);
        return {};
      case Verdict::kMalformed:
        return {};
    }
    return {};
  }

 private:
  void build_backends(const SteeringConfig& config, const std::set<std::uint8_t>& sid_lengths,
                      std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>>& routes);
  // What resolve_dcid() needs per codepoint, in one small array.
  struct Codepoint {
    enum Kind : std::uint8_t { kNone, kPlaintext, kEncrypted };
    Kind kind = kNone;
    std::uint8_t cid_len = 0;
    std::uint8_t server_id_len = 0;
    bool self_encode = false;
    std::uint64_t mask_a = 0, mask_b = 0;  // ServerIdMap::key_masks(server_id_len)
  };

  std::vector<unsigned> owner_lcores_;
  SteeringMode mode_ = SteeringMode::kCid;
  bool tuple_fallback_ = false;  // SteeringConfig::resolved_fallback_hash() is kTuple
  std::array<Codepoint, 8> codepoints_{};
  std::array<std::optional<QuicLbCodec>, 8> codecs_;
  ServerIdMap server_ids_;
  SipHashKey key_;
  CidHash cid_hash_;
  ConsistentHashRing ring_;
  std::optional<MaglevTable> backend_hash_;  // with backends only
  // By target, kTargetSpace of them: its owner index, and its backend slot
  // (kNoBackend without backends, where targets are owners). Targets of no
  // owner or backend have kNoOwner.
  struct TargetInfo {
    std::uint16_t owner;
    std::uint16_t backend;
  };
  std::vector<TargetInfo> targets_;
};

namespace resolver_detail {
// Version, protocol, ports, addresses: 14 octets for IPv4, 38 for IPv6.
inline std::size_t tuple_octets(const std::uint8_t* frame, const ParsedPacket& p, std::uint8_t* input) {
  input[0] = p.ip_version;
  input[1] = p.ip_proto;
  input[2] = std::uint8_t(p.src_port >> 8);
  input[3] = std::uint8_t(p.src_port);
  input[4] = std::uint8_t(p.dst_port >> 8);
  input[5] = std::uint8_t(p.dst_port);
  const std::size_t alen = p.addr_len();
  std::memcpy(input + 6, p.src_addr(frame), alen);
  std::memcpy(input + 6 + alen, p.dst_addr(frame), alen);
  return 6 + 2 * alen;
}
}  // namespace resolver_detail

inline std::uint64_t OwnerResolver::tuple_hash(const std::uint8_t* frame, const ParsedPacket& p) const {
  std::uint8_t input[38];
  return siphash13(key_, input, resolver_detail::tuple_octets(frame, p, input));
}

}  // namespace qs
