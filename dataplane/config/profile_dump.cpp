// The resolved profile as YAML: every default filled in, in the profile's
// own spelling.
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <stdexcept>
#include <string>

#include "dataplane/config/enum_names.h"
#include "dataplane/config/profile.h"
#include "dataplane/config/yaml_reader.h"
#include "steering/hex.h"
#include "steering/owner_resolver.h"

namespace qs {

namespace {
std::string fingerprint_of(const std::uint8_t* key, std::size_t len) {
  std::array<std::uint8_t, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(key, len, digest.data(), &length, EVP_sha256(), nullptr) != 1 || length < 4) {
    throw std::runtime_error("SHA-256 is not available from libcrypto");
  }
  return "sha256:" + to_hex(digest.data(), 4);
}
}  // namespace

std::string key_fingerprint(const std::array<std::uint8_t, 16>& key) { return fingerprint_of(key.data(), key.size()); }
std::string key_fingerprint(const std::array<std::uint8_t, 32>& key) { return fingerprint_of(key.data(), key.size()); }

std::string services_summary(const Profile& p) {
  if (p.steering.services.empty())
    return "services: none; every UDP datagram is steered (no exception path, no MAC filter)";
  std::string out = "services:";
  for (std::size_t i = 0; i < p.steering.services.size(); ++i) {
    const ServiceConfig& svc = p.steering.services[i];
    // Appended piece by piece: GCC 12 warns (-Wrestrict) on "x" + string here.
    out.append(i ? "; " : " ").append(svc.name);
    for (const auto& a : svc.ipv4) out.append(" ").append(config::format_ipv4(a));
    for (const auto& a : svc.ipv6) out.append(" ").append(config::format_ipv6(a));
    out.append(" udp");
    for (std::size_t k = 0; k < svc.udp_ports.size(); ++k)
      out.append(k ? "," : " ").append(std::to_string(svc.udp_ports[k]));
  }
  out += "; only their traffic is steered, the rest is the appliance's own";
  return out;
}

std::string dump_profile(const Profile& p, DumpKeys keys) {
  const auto show = [keys](const std::array<std::uint8_t, 16>& key) {
    return keys == DumpKeys::kInFull ? to_hex(key.data(), key.size()) : key_fingerprint(key);
  };
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::Comment("quicsteer profile, resolved: every default filled in") << YAML::Newline;
  out << YAML::BeginMap;

  out << YAML::Key << "eal" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& arg : p.eal) out << YAML::DoubleQuoted << arg;
  out << YAML::EndSeq;

  out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
  for (const PortConfig& port : p.ports) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << port.name;
    out << YAML::Key << "device" << YAML::Value << YAML::DoubleQuoted << port.device;
    out << YAML::Key << "rx_queues" << YAML::Value << port.rx_queues;
    out << YAML::Key << "tx_queues" << YAML::Value << port.tx_queues;
    out << YAML::Key << "rx_descriptors" << YAML::Value << port.rx_descriptors;
    out << YAML::Key << "tx_descriptors" << YAML::Value << port.tx_descriptors;
    out << YAML::Key << "rss" << YAML::Value << YAML::TrueFalseBool << port.rss;
    out << YAML::Key << "mtu" << YAML::Value << port.mtu;
    out << YAML::Key << "flow_control" << YAML::Value << flow_control_name(port.flow_control);
    out << YAML::Key << "rx_drop_en" << YAML::Value << YAML::TrueFalseBool << port.rx_drop_en;
    out << YAML::Key << "promiscuous" << YAML::Value << YAML::TrueFalseBool << port.promiscuous;
    if (!port.tap.empty()) out << YAML::Key << "tap" << YAML::Value << YAML::DoubleQuoted << port.tap;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "mempool" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mbufs" << YAML::Value << p.mempool.mbufs;
  out << YAML::Key << "cache" << YAML::Value << p.mempool.cache;
  out << YAML::Key << "data_room" << YAML::Value << p.mempool.data_room;
  out << YAML::EndMap;

  out << YAML::Key << "lcores" << YAML::Value << YAML::BeginSeq;
  for (const LcoreConfig& lcore : p.lcores) {
    out << YAML::BeginMap;
    out << YAML::Key << "id" << YAML::Value << lcore.id;
    out << YAML::Key << "rx" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const RxQueueRef& ref : lcore.rx) {
      const std::string port = ref.port < p.ports.size() ? p.ports[ref.port].name : "?";
      out << YAML::DoubleQuoted << (port + ":" + std::to_string(ref.queue));
    }
    out << YAML::EndSeq;
    out << YAML::Key << "owner" << YAML::Value << YAML::TrueFalseBool << lcore.owner;
    if (lcore.cost_cycles) out << YAML::Key << "cost_cycles" << YAML::Value << *lcore.cost_cycles;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "rings" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "size" << YAML::Value << p.rings.size;
  out << YAML::Key << "burst" << YAML::Value << p.rings.burst;
  out << YAML::EndMap;

  const SteeringConfig& s = p.steering;
  out << YAML::Key << "steering" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mode" << YAML::Value << config::steering_mode_name(s.mode);
  out << YAML::Key << "quic_ports" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (std::uint16_t port : s.quic_ports) out << port;
  out << YAML::EndSeq;
  out << YAML::Key << "short_dcid_len" << YAML::Value << unsigned(s.short_dcid_len);
  out << YAML::Key << "quic_lb" << YAML::Value << YAML::BeginSeq;
  for (const QuicLbConfig& c : s.quic_lb) {
    out << YAML::BeginMap;
    out << YAML::Key << "config_id" << YAML::Value << unsigned(c.config_id);
    out << YAML::Key << "server_id_len" << YAML::Value << unsigned(c.server_id_len);
    out << YAML::Key << "nonce_len" << YAML::Value << unsigned(c.nonce_len);
    if (c.key) out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted << show(*c.key);
    out << YAML::Key << "len_self_encode" << YAML::Value << YAML::TrueFalseBool << c.len_self_encode;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "servers" << YAML::Value << YAML::BeginSeq;
  for (const ServerRoute& r : s.server_routes) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "server_id" << YAML::Value << YAML::DoubleQuoted
        << to_hex(r.server_id.data(), r.server_id.size());
    out << YAML::Key << "owner" << YAML::Value << r.owner_lcore;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "fallback" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted << show(s.fallback_key);
  out << YAML::Key << "vnodes" << YAML::Value << s.fallback_vnodes;
  out << YAML::Key << "hash" << YAML::Value
      << config::spelling_of(config::kFallbackHashSpellings, s.fallback_hash);
  out << YAML::Key << "rekey_on_reload" << YAML::Value << YAML::TrueFalseBool << p.rekey_fallback_on_reload;
  out << YAML::EndMap;
  out << YAML::Key << "forwarding" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << YAML::TrueFalseBool << s.forwarding.enabled;
  out << YAML::Key << "max_entries" << YAML::Value << s.forwarding.max_entries;
  out << YAML::Key << "max_setup_entries" << YAML::Value << s.forwarding.max_setup_entries;
  out << YAML::Key << "max_entries_per_source" << YAML::Value << s.forwarding.max_entries_per_source;
  out << YAML::EndMap;
  // As given (0: automatic), so that the dump reads back to the same rule;
  // with backends, the size it comes to in a comment (for --check).
  out << YAML::Key << "backend_table_size" << YAML::Value << s.backend_table_size;
  if (const std::uint32_t slots = backend_hash_table_size(s); slots != 0) {
    out << YAML::Comment((s.backend_table_size == 0 ? "automatic: " : "") + std::to_string(slots) + " slots, " +
                         std::to_string((std::uint64_t(slots) * 2 + 512) >> 10) + " KiB");
  }
  out << YAML::EndMap;

  // Resolved: every owner filled in. The slot is the position, not written.
  if (!s.backends.empty()) {
    out << YAML::Key << "backends" << YAML::Value << YAML::BeginSeq;
    for (const BackendConfig& b : s.backends) {
      out << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << b.name;
      out << YAML::Key << "server_ids" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& id : b.server_ids) out << YAML::DoubleQuoted << to_hex(id);
      out << YAML::EndSeq;
      if (b.ipv4) out << YAML::Key << "ipv4" << YAML::Value << YAML::DoubleQuoted << config::format_ipv4(*b.ipv4);
      if (b.ipv6) out << YAML::Key << "ipv6" << YAML::Value << YAML::DoubleQuoted << config::format_ipv6(*b.ipv6);
      out << YAML::Key << "mac" << YAML::Value << YAML::DoubleQuoted << config::format_mac(b.mac);
      if (b.vxlan_mac) out << YAML::Key << "vxlan_mac" << YAML::Value << YAML::DoubleQuoted << config::format_mac(*b.vxlan_mac);
      out << YAML::Key << "weight" << YAML::Value << b.weight;
      out << YAML::Key << "state" << YAML::Value << backend_state_name(b.state);
      out << YAML::Key << "owner" << YAML::Value << b.owner_lcore;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }

  // Without services every UDP datagram is steered: the key stays out, and
  // a comment says so.
  if (p.steering.services.empty()) out << YAML::Newline << YAML::Comment(services_summary(p));
  if (!p.steering.services.empty()) {
    out << YAML::Key << "services" << YAML::Value << YAML::BeginSeq;
    for (const ServiceConfig& svc : p.steering.services) {
      out << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << svc.name;
      out << YAML::Key << "addresses" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& a : svc.ipv4) out << YAML::DoubleQuoted << config::format_ipv4(a);
      for (const auto& a : svc.ipv6) out << YAML::DoubleQuoted << config::format_ipv6(a);
      out << YAML::EndSeq;
      out << YAML::Key << "udp_ports" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (std::uint16_t port : svc.udp_ports) out << port;
      out << YAML::EndSeq;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }

  out << YAML::Key << "exception_path" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "ring_size" << YAML::Value << p.exception_path.ring_size;
  out << YAML::Key << "police" << YAML::Value << YAML::BeginMap;
  for (unsigned c = 0; c < kExceptionClasses; ++c) {
    out << YAML::Key << std::string(exception_class_name(ExceptionClass(c))) << YAML::Value << YAML::Flow
        << YAML::BeginMap;
    out << YAML::Key << "packets_per_s" << YAML::Value << p.exception_path.police[c].packets_per_s;
    out << YAML::Key << "bytes_per_s" << YAML::Value << p.exception_path.police[c].bytes_per_s;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  out << YAML::EndMap;

  if (p.peer_sync.enabled) {
    const PeerSyncConfig& x = p.peer_sync;
    const auto spell = [](const ListenAddress& a) {
      std::string text = a.ipv6 ? std::string("[").append(a.host).append("]") : a.host;
      return text.append(":").append(std::to_string(a.port));
    };
    out << YAML::Key << "peer_sync" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "listen" << YAML::Value << YAML::DoubleQuoted << spell(x.listen);
    out << YAML::Key << "peers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const ListenAddress& a : x.peers) out << YAML::DoubleQuoted << spell(a);
    out << YAML::EndSeq;
    out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted
        << (keys == DumpKeys::kInFull ? to_hex(x.key.data(), x.key.size()) : key_fingerprint(x.key));
    out << YAML::Key << "max_peer_share" << YAML::Value << x.max_peer_share;
    out << YAML::Key << "entries_per_s" << YAML::Value << x.entries_per_s;
    out << YAML::Key << "max_skew_ms" << YAML::Value << x.max_skew_ms;
    out << YAML::Key << "resync_timeout_ms" << YAML::Value << x.resync_timeout_ms;
    out << YAML::Key << "ring_size" << YAML::Value << x.ring_size;
    out << YAML::EndMap;
  }

  if (p.health_checks.enabled) {
    const HealthChecksConfig& x = p.health_checks;
    out << YAML::Key << "health_checks" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "interval_ms" << YAML::Value << x.interval_ms;
    out << YAML::Key << "timeout_ms" << YAML::Value << x.timeout_ms;
    out << YAML::Key << "rise" << YAML::Value << x.rise;
    out << YAML::Key << "fall" << YAML::Value << x.fall;
    out << YAML::Key << "probes_per_s" << YAML::Value << x.probes_per_s;
    out << YAML::Key << "probe_udp_port" << YAML::Value << x.probe_udp_port;
    out << YAML::Key << "targets" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const HealthTarget& t : x.targets) out << YAML::DoubleQuoted << health_target_text(t);
    out << YAML::EndSeq;
    out << YAML::Key << "tap_port" << YAML::Value << p.ports[std::size_t(x.tap_port)].name;
    out << YAML::EndMap;
  }

  out << YAML::Key << "backpressure" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "policy" << YAML::Value << policy_name(p.backpressure.policy);
  out << YAML::Key << "high_watermark" << YAML::Value << p.backpressure.high_watermark;
  out << YAML::Key << "low_watermark" << YAML::Value << p.backpressure.low_watermark;
  out << YAML::Key << "park_timeout_us" << YAML::Value << p.backpressure.park_timeout_us;
  out << YAML::EndMap;

  out << YAML::Key << "action" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "type" << YAML::Value << action_name(p.action.type);
  if (p.action.tx_port >= 0 && std::size_t(p.action.tx_port) < p.ports.size()) {
    out << YAML::Key << "tx_port" << YAML::Value << YAML::DoubleQuoted << p.ports[p.action.tx_port].name;
  }
  if (p.action.type == OwnerAction::kForward) {
    const DeliveryConfig& d = p.action.delivery;
    out << YAML::Key << "delivery" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "mode" << YAML::Value << delivery_mode_name(d.mode);
    if (d.source_ipv4) {
      out << YAML::Key << "source_ipv4" << YAML::Value << YAML::DoubleQuoted << config::format_ipv4(*d.source_ipv4);
    }
    if (d.source_ipv6) {
      out << YAML::Key << "source_ipv6" << YAML::Value << YAML::DoubleQuoted << config::format_ipv6(*d.source_ipv6);
    }
    out << YAML::Key << "vxlan_vni" << YAML::Value << d.vxlan_vni;
    out << YAML::Key << "vxlan_port" << YAML::Value << d.vxlan_port;
    if (d.vxlan_mac) out << YAML::Key << "vxlan_mac" << YAML::Value << YAML::DoubleQuoted << config::format_mac(*d.vxlan_mac);
    out << YAML::Key << "ttl" << YAML::Value << unsigned(d.ttl);
    out << YAML::Key << "icmp_too_big_per_s" << YAML::Value << d.icmp_too_big_per_s;
    out << YAML::Key << "icmp_too_big_per_client_per_s" << YAML::Value << d.icmp_too_big_per_client_per_s;
    out << YAML::EndMap;
  }
  out << YAML::Key << "cost_cycles" << YAML::Value << p.action.cost_cycles;
  out << YAML::Key << "tx_drain_us" << YAML::Value << p.action.tx_drain_us;
  out << YAML::Key << "max_connections" << YAML::Value << p.action.max_connections;
  out << YAML::Key << "slots_per_connection" << YAML::Value << p.action.slots_per_connection;
  out << YAML::Key << "idle_timeout_ms" << YAML::Value << p.action.idle_timeout_ms;
  out << YAML::EndMap;

  out << YAML::Key << "polling" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "idle_sleep_us" << YAML::Value << p.polling.idle_sleep_us;
  out << YAML::Key << "idle_polls_before_sleep" << YAML::Value << p.polling.idle_polls_before_sleep;
  out << YAML::Key << "doorbell_spin_us" << YAML::Value << p.polling.doorbell_spin_us;
  out << YAML::EndMap;

  out << YAML::Key << "stats" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "period_ms" << YAML::Value << p.stats.period_ms;
  out << YAML::Key << "json" << YAML::Value << YAML::DoubleQuoted << p.stats.json_path;
  out << YAML::EndMap;

  out << YAML::Key << "telemetry" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "prometheus_listen" << YAML::Value << YAML::DoubleQuoted << p.telemetry.prometheus_listen;
  out << YAML::EndMap;

  // Shortest text that reads back as the same double (here and below).
  out << YAML::Key << "drain" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "grace_s" << YAML::Value << config::format_real(p.drain.grace_s);
  out << YAML::EndMap;

  out << YAML::Key << "duration_s" << YAML::Value << config::format_real(p.duration_s);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace qs
