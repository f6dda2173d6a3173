#include "tests/traffic/traffic_profile.h"

#include <stdexcept>
#include <string>

namespace qs::traffic {

void apply_profile(const Profile& profile, std::optional<std::uint8_t> config_id, TrafficOptions& options) {
  const SteeringConfig& steering = profile.steering;
  if (steering.quic_lb.empty()) throw std::invalid_argument(profile.path + ": profile has no quic_lb configuration");
  const QuicLbConfig* chosen = &steering.quic_lb.front();
  if (config_id) {
    chosen = nullptr;
    for (const auto& config : steering.quic_lb)
      if (config.config_id == *config_id) chosen = &config;
    if (!chosen)
      throw std::invalid_argument(profile.path + ": no quic_lb configuration with config_id " +
                                  std::to_string(*config_id));
  }
  std::vector<std::vector<std::uint8_t>> server_ids;
  for (const auto& route : steering.server_routes)
    if (route.server_id.size() == chosen->server_id_len) server_ids.push_back(route.server_id);
  // With backends the server IDs are theirs (a backend may mint several).
  for (const auto& backend : steering.backends)
    for (const auto& id : backend.server_ids)
      if (id.size() == chosen->server_id_len) server_ids.push_back(id);
  if (server_ids.empty())
    throw std::invalid_argument(profile.path + ": no server with a " + std::to_string(chosen->server_id_len) +
                                "-octet server ID for quic_lb config_id " + std::to_string(chosen->config_id));
  options.quic_lb = *chosen;
  options.server_ids = std::move(server_ids);
  options.routable_config_ids.clear();
  for (const auto& config : steering.quic_lb) options.routable_config_ids.push_back(config.config_id);
  if (!steering.quic_ports.empty()) options.port = steering.quic_ports.front();
  options.client_cid_len = steering.short_dcid_len;
}

}  // namespace qs::traffic
