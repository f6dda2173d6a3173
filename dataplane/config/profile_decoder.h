// The profile decoder (profile_decoder.cpp): the schema and its cross-checks
// over a parsed YAML document. Internal to dataplane/config/; parse_profile()
// and load_profile() (profile.h) are its callers.
#pragma once

#include <yaml-cpp/yaml.h>

#include "dataplane/config/profile.h"
#include "dataplane/config/yaml_reader.h"

namespace qs::config {

// Fills `profile` (default-constructed, its path set) from `root`; throws
// ProfileError through `decoder` at the first problem.
void decode_profile(const Decoder& decoder, const YAML::Node& root, Profile& profile);

}  // namespace qs::config
