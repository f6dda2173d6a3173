#include "steering/owner_resolver.h"
#include "steering/hex.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace qs {
namespace {

std::vector<unsigned> checked_owners(const SteeringConfig& config) {
  if (config.owner_lcores.empty())
    throw std::invalid_argument("steering: no owner lcores");
  if (config.owner_lcores.size() > kTargetSpace)
    throw std::invalid_argument("steering: more than " + std::to_string(kTargetSpace) + " owner lcores");
  return config.owner_lcores;
}

}  // namespace

std::string_view to_string(ResolveMethod m) {
  switch (m) {
    case ResolveMethod::kQuicLb: return "quic_lb";
    case ResolveMethod::kLearnedSetup: return "learned_setup";
    case ResolveMethod::kLearnedCid: return "learned_cid";
    case ResolveMethod::kLearnedTuple: return "learned_tuple";
    case ResolveMethod::kFallbackDcid: return "fallback_dcid";
    case ResolveMethod::kFallbackUnknownCid: return "fallback_unknown_cid";
    case ResolveMethod::kFallbackTuple: return "fallback_tuple";
    case ResolveMethod::kNone: return "none";
  }
  return "?";
}

void ServerIdMap::build(
    const std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>>& routes) {
  std::size_t size = 4;
  while (size < 2 * routes.size()) size *= 2;
  slots_.assign(size, Slot{{0, 0}, 0, kNoOwner});
  mask_ = size - 1;
  direct_.assign(std::size_t(2) << 16, kNoOwner);
  for (const auto& [id, owner] : routes) {
    if (id.empty() || id.size() > kMaxServerIdLen)
      throw std::invalid_argument("steering.server_routes: server ID " + to_hex(id) +
                                  " must be 1..15 octets");
    if (find(id.data(), id.size()) != kNoOwner)
      throw std::invalid_argument("steering.server_routes: server ID " + to_hex(id) +
                                  " listed twice");
    std::uint64_t a, b;
    load_key(id.data(), id.size(), a, b);
    if (id.size() <= 2) {
      direct_[(id.size() - 1) << 16 | a] = owner;
      continue;
    }
    std::size_t i = hash(a, b, id.size()) & mask_;
    while (slots_[i].len != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{{a, b}, std::uint8_t(id.size()), owner};
  }
}

OwnerResolver::OwnerResolver(const SteeringConfig& config, QuicLbCodec::AesBackend backend)
    : owner_lcores_(checked_owners(config)),
      mode_(config.mode),
      tuple_fallback_(config.resolved_fallback_hash() == FallbackHash::kTuple),
      key_(SipHashKey::from_bytes(config.fallback_key)),
      cid_hash_(key_, backend != QuicLbCodec::AesBackend::kOpenSsl),
      ring_(owner_lcores_, key_, config.fallback_vnodes) {
  std::set<std::uint8_t> sid_lengths;
  for (const QuicLbConfig& lb : config.quic_lb) {
    QuicLbCodec codec(lb, backend);  // validates
    if (codecs_[lb.config_id])
      throw std::invalid_argument("steering.quic_lb: config_id " +
                                  std::to_string(lb.config_id) + " configured twice");
    Codepoint& cp = codepoints_[lb.config_id];
    cp.kind = lb.key ? Codepoint::kEncrypted : Codepoint::kPlaintext;
    cp.cid_len = codec.cid_len();
    cp.server_id_len = codec.server_id_len();
    cp.self_encode = lb.len_self_encode;
    ServerIdMap::key_masks(cp.server_id_len, cp.mask_a, cp.mask_b);
    codecs_[lb.config_id].emplace(std::move(codec));
    sid_lengths.insert(lb.server_id_len);
  }
  std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>> routes;
  if (!config.backends.empty()) {
    build_backends(config, sid_lengths, routes);
    server_ids_.build(routes);
    return;
  }
  targets_.assign(kTargetSpace, TargetInfo{kNoOwner, kNoBackend});
  for (std::size_t i = 0; i < owner_lcores_.size(); ++i) targets_[i] = {std::uint16_t(i), kNoBackend};
  for (const ServerRoute& route : config.server_routes) {
    const auto owner = std::find(owner_lcores_.begin(), owner_lcores_.end(), route.owner_lcore);
    if (owner == owner_lcores_.end())
      throw std::invalid_argument("steering.server_routes: server ID " + to_hex(route.server_id) +
                                  " routes to lcore " + std::to_string(route.owner_lcore) +
                                  ", which is not an owner");
    if (!sid_lengths.count(std::uint8_t(route.server_id.size())))
      throw std::invalid_argument("steering.server_routes: server ID " + to_hex(route.server_id) +
                                  " has " + std::to_string(route.server_id.size()) +
                                  " octets, which no QUIC-LB config's server_id_len matches");
    routes.emplace_back(route.server_id, std::uint16_t(owner - owner_lcores_.begin()));
  }
  server_ids_.build(routes);
}

void OwnerResolver::build_backends(const SteeringConfig& config, const std::set<std::uint8_t>& sid_lengths,
                                   std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>>& routes) {
  if (!config.server_routes.empty())
    throw std::invalid_argument("steering: server routes and backends together (server IDs belong to backends)");
  if (config.backends.size() > kMaxBackends)
    throw std::invalid_argument("steering: more than " + std::to_string(kMaxBackends) + " backends");
  targets_.assign(kTargetSpace, TargetInfo{kNoOwner, kNoBackend});
  std::vector<MaglevMember> active;
  for (const BackendConfig& b : config.backends) {
    const auto owner = std::find(owner_lcores_.begin(), owner_lcores_.end(), b.owner_lcore);
    if (owner == owner_lcores_.end())
      throw std::invalid_argument("steering: backend " + b.name + " is served by lcore " +
                                  std::to_string(b.owner_lcore) + ", which is not an owner");
    if (b.slot >= kTargetSpace)
      throw std::invalid_argument("steering: backend " + b.name + " has slot " + std::to_string(b.slot) +
                                  ", past the last (" + std::to_string(kTargetSpace - 1) + ")");
    if (targets_[b.slot].backend != kNoBackend)
      throw std::invalid_argument("steering: backend " + b.name + " has slot " + std::to_string(b.slot) +
                                  ", which another backend has too");
    targets_[b.slot] = {std::uint16_t(owner - owner_lcores_.begin()), b.slot};
    for (const auto& id : b.server_ids) {
      if (!sid_lengths.count(std::uint8_t(id.size())))
        throw std::invalid_argument("steering: backend " + b.name + "'s server ID " + to_hex(id) + " has " +
                                    std::to_string(id.size()) +
                                    " octets, which no QUIC-LB config's server_id_len matches");
      routes.emplace_back(id, b.slot);
    }
    // Draining and down backends take no new connection: they are not in
    // the hash at all, and only their server IDs and what the tables
    // learned still lead to them.
    if (b.state == BackendState::kActive) active.push_back({b.name, b.weight, b.slot});
  }
  if (active.empty()) throw std::invalid_argument("steering: no active backend");
  backend_hash_.emplace(std::move(active), key_, config.backend_table_size);
}

}  // namespace qs
