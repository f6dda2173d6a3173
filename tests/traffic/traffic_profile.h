// quicgen --profile: traffic that a given quicsteer profile steers, i.e. the
// profile's QUIC-LB configuration, server IDs and QUIC port.
#pragma once

#include <cstdint>
#include <optional>

#include "dataplane/config/profile.h"
#include "tests/traffic/quic_traffic.h"

namespace qs::traffic {

// Sets options.quic_lb (the configuration with config_id, or the profile's
// first), options.server_ids (every server route whose ID has that
// configuration's length), options.routable_config_ids (all of the profile's
// configurations), options.port (the first QUIC port) and
// options.client_cid_len (short_dcid_len, so that server->client short headers
// parse with the length the profile assumes). Throws
// std::invalid_argument when the profile has no such configuration or servers.
void apply_profile(const Profile& profile, std::optional<std::uint8_t> config_id, TrafficOptions& options);

}  // namespace qs::traffic
