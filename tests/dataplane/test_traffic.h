// Traffic for the dataplane integration tests: quicgen's connections with
// their ground truth, spread over RX queues the way RSS spreads them (by the
// frame's 4-tuple), and the steering decision the profile implies for each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "steering/packet_classifier.h"
#include "steering/steering_config.h"
#include "tests/traffic/quic_traffic.h"

namespace qs::test {

// The steering section every integration profile uses: quicgen's default
// QUIC-LB config (single-pass AES), server i+1 owned by owner_lcores[i].
// Forwarding tables off unless asked for: prepare()'s reference decisions
// are frame by frame, and the tables' depend on the packets before.
// The steering section's keys every test profile shares: port 443, 17-octet
// short DCIDs, QUIC-LB config 0 (two-octet server IDs, encrypted).
inline std::string steering_head_yaml() {
  return "steering:\n"
         "  quic_ports: [443]\n"
         "  short_dcid_len: 17\n"
         "  quic_lb:\n"
         "    - {config_id: 0, server_id_len: 2, nonce_len: 14, key: \"7175696373746565722064656d6f2121\"}\n";
}

inline std::string steering_yaml(const std::vector<unsigned>& server_owner_lcores, bool forwarding_tables = false) {
  std::string y = steering_head_yaml() + "  servers:\n";
  for (std::size_t i = 0; i < server_owner_lcores.size(); ++i) {
    char id[24];
    std::snprintf(id, sizeof id, "%04zx", i + 1);
    y += "    - {server_id: \"" + std::string(id) + "\", owner: " + std::to_string(server_owner_lcores[i]) + "}\n";
  }
  y += "  fallback: {key: \"000102030405060708090a0b0c0d0e0f\"}\n";
  if (!forwarding_tables) y += "  forwarding: {enabled: false}\n";
  return y;
}

inline traffic::TrafficOptions traffic_options(std::uint32_t connections, unsigned servers, std::uint64_t seed) {
  traffic::TrafficOptions o = traffic::default_traffic_options();
  o.seed = seed;
  o.connections = connections;
  o.server_ids.clear();
  for (unsigned i = 1; i <= servers; ++i) o.server_ids.push_back({std::uint8_t(i >> 8), std::uint8_t(i)});
  return o;
}

// A software stand-in for RSS: the queue follows the frame's IP addresses and
// UDP ports, so a connection that migrates usually changes queue.
inline unsigned rss_queue(const std::vector<std::uint8_t>& frame, unsigned queues) {
  const ParsedPacket p = parse_packet(frame.data(), frame.size(), ParserConfig{});
  if (p.ip_version == 0 || p.l4_offset == 0) return 0;
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::uint8_t* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  mix(p.src_addr(frame.data()), p.addr_len());
  mix(p.dst_addr(frame.data()), p.addr_len());
  mix(frame.data() + p.l4_offset, 4);
  return unsigned(h % queues);
}

struct PreparedTraffic {
  traffic::Traffic traffic;
  std::vector<const std::vector<std::uint8_t>*> frames;
  std::vector<unsigned> queue_of;
  std::vector<Decision> decision;  // what steering/ decides for each frame
};

inline PreparedTraffic prepare(const traffic::TrafficOptions& options, unsigned rx_queues,
                               const SteeringConfig& steering) {
  PreparedTraffic t;
  t.traffic = traffic::generate_traffic(options);
  PacketClassifier classifier(steering);
  for (const auto& p : t.traffic.packets) {
    t.frames.push_back(&p.frame);
    t.queue_of.push_back(rss_queue(p.frame, rx_queues));
    t.decision.push_back(classifier.classify(p.frame.data(), p.frame.size()));
  }
  return t;
}

}  // namespace qs::test
