// The steering part of a profile, as plain data. The profile loader
// (dataplane/config/profile_decoder.cpp) fills it from YAML and validates it; steering/ and
// the tools consume it. Nothing here depends on DPDK.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qs {

// One QUIC-LB configuration (draft-ietf-quic-load-balancers-21 section 3).
// The CID is: first octet (3 config-rotation bits, then 5 bits that are either
// random or, with len_self_encode, the length of the rest of the CID), then
// server_id_len + nonce_len octets (in the clear, or encrypted when a key is
// given).
struct QuicLbConfig {
  std::uint8_t config_id = 0;      // 0..6; 7 is reserved for unroutable CIDs
  std::uint8_t server_id_len = 0;  // 1..15
  std::uint8_t nonce_len = 0;      // 4..18, server_id_len + nonce_len <= 19
  bool len_self_encode = false;
  std::optional<std::array<std::uint8_t, 16>> key;  // absent: plaintext

  std::uint8_t cid_len() const { return std::uint8_t(1 + server_id_len + nonce_len); }
};

// A server ID (as QUIC-LB decodes it) and the lcore that owns its connections.
struct ServerRoute {
  std::vector<std::uint8_t> server_id;
  unsigned owner_lcore = 0;
};

// How QUIC packets find their owner. kCid: by the DCID (QUIC-LB, then the
// keyed DCID hash), which follows a connection across address changes.
// kFourTuple: by the keyed hash of addresses and ports alone, as RSS or
// SO_REUSEPORT would; a baseline that splits migrated connections.
enum class SteeringMode : std::uint8_t { kCid, kFourTuple };

// What routes a QUIC packet that QUIC-LB cannot and no forwarding table
// knows (a connection's first Initial; a short header with an unknown DCID).
// kTuple: the keyed hash of its 4-tuple, so that every appliance with the
// same profile picks the same target for every packet of a connection
// whose 4-tuple has not changed, whatever CIDs its server minted and
// whichever appliance saw its handshake: a tier change (a crash, a return,
// a drain) moves no such connection. kDcid: the keyed hash of the DCID,
// which follows a connection across a NAT rebinding on one appliance
// without tables, but changes during a random-CID handshake (the client's
// DCID, then the server's). kAuto: kTuple with backends, kDcid without
// (owners are one appliance's lcores; see steering/README.md).
enum class FallbackHash : std::uint8_t { kAuto, kTuple, kDcid };

// The forwarding tables (steering/forwarding_rules.h): what the load balancer
// learns from a connection's own packets so that a server's random CIDs and a
// NAT rebinding reach the owner of the connection's first Initial.
struct ForwardingConfig {
  bool enabled = true;
  // Learned DCIDs and 4-tuples of established connections (about two per
  // connection). When full, new connections fall back to the hash (counted);
  // entries go only when idle.
  std::uint32_t max_entries = 262144;
  // (4-tuple, client SCID) of connections being set up, one per first
  // Initial; the oldest entry of a bucket makes room for a new one, so a
  // flood of Initials churns this table and never the established one.
  std::uint32_t max_setup_entries = 65536;
  // What one source (an IPv4 address, an IPv6 /64) may add to the
  // established table per idle timeout (steering/source_budget.h); 0: no
  // bound. The profile's default: a sixteenth of max_entries.
  std::uint32_t max_entries_per_source = default_entries_per_source(262144);
  static constexpr std::uint32_t default_entries_per_source(std::uint32_t max_entries) {
    return max_entries / 16 < 16 ? 16 : max_entries / 16;
  }
  // Entries idle this long go (the connection idle timeout).
  std::uint32_t idle_timeout_ms = 30000;
};

// A backend: one server of the fleet that the appliance delivers
// connections to (dataplane/fastpath/delivery.h). Steering picks a backend for every
// connection (its QUIC-LB server ID, what the forwarding tables learned, or
// the backend hash over the active ones), and the backend's owner lcore
// keeps the connection's state and transmits towards it.
enum class BackendState : std::uint8_t {
  kActive,    // takes new connections (the hash may pick it)
  kDraining,  // keeps its connections (routable CIDs, learned entries), takes no new ones
  kDown,      // takes nothing: its packets are dropped (backend_down), new connections avoid it
};

struct BackendConfig {
  std::string name;  // unique; also what places it in the backend hash (steering/maglev.h)
  std::vector<std::vector<std::uint8_t>> server_ids;  // QUIC-LB server IDs it mints (may be none)
  std::optional<std::array<std::uint8_t, 4>> ipv4;    // its address, for ipip and vxlan
  std::optional<std::array<std::uint8_t, 16>> ipv6;
  std::array<std::uint8_t, 6> mac{};                  // the next hop towards it (itself on one L2 segment)
  std::optional<std::array<std::uint8_t, 6>> vxlan_mac;  // inner destination MAC of its VXLAN device
  std::uint32_t weight = 1;                           // share of new connections, relative
  BackendState state = BackendState::kActive;
  unsigned owner_lcore = 0;                           // the owner lcore that serves it (resolved)
  // Its index in every per-backend array of the data path (forwarding
  // tables, templates, counters). The loader numbers backends in profile
  // order; a reload keeps each surviving backend's slot (matched by name),
  // so that what the tables learned stays right.
  std::uint16_t slot = 0;
};

// A service the appliance offers: what the data path steers once the
// profile lists any (steering/service_table.h). Its addresses are the VIPs
// that routers send to the appliance.
struct ServiceConfig {
  std::string name;
  std::vector<std::array<std::uint8_t, 4>> ipv4;
  std::vector<std::array<std::uint8_t, 16>> ipv6;
  std::vector<std::uint16_t> udp_ports;
};

// The most backends one profile may list (and slots a data path has).
inline constexpr unsigned kMaxBackends = 4096;

struct SteeringConfig {
  SteeringMode mode = SteeringMode::kCid;
  std::vector<std::uint16_t> quic_ports{443};
  // DCID length of short-header packets whose first octet selects no QUIC-LB
  // config (and for every short header when no config is set).
  std::uint8_t short_dcid_len = 8;
  std::vector<QuicLbConfig> quic_lb;        // at most one per config_id
  std::vector<ServerRoute> server_routes;   // server ID -> owner lcore
  std::vector<unsigned> owner_lcores;       // every owner, in profile order
  std::array<std::uint8_t, 16> fallback_key{};  // keys the fallback hash
  unsigned fallback_vnodes = 128;           // points per owner on the hash ring
  FallbackHash fallback_hash = FallbackHash::kAuto;
  // What kAuto stands for in this configuration.
  FallbackHash resolved_fallback_hash() const {
    if (fallback_hash != FallbackHash::kAuto) return fallback_hash;
    return backends.empty() ? FallbackHash::kDcid : FallbackHash::kTuple;
  }
  ForwardingConfig forwarding;
  // The server fleet (empty: owners are the targets, as without backends).
  // With backends, server IDs live in them (server_routes stays empty) and
  // the hash picks among the active ones.
  std::vector<BackendConfig> backends;
  // Slots of the backend hash's Maglev table: a prime up to
  // kMaglevMaxTableSize, or 0 for maglev_default_table_size() of the active
  // backends' weights (backend_hash_table_size() says which).
  std::uint32_t backend_table_size = 0;
  // Empty: every UDP datagram is steered (the demo, the virtual-NIC tests).
  // Otherwise only UDP to a service is, and the rest is the appliance's own
  // (ServiceTable).
  std::vector<ServiceConfig> services;
};

}  // namespace qs
