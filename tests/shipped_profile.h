// A shipped profile (configs/*.yaml) as tests load it: the template for real
// NICs (baremetal-2port.yaml) ships no fallback key and is refused until an
// operator sets one, so it is loaded as an operator completes it, with its
// commented key set; every other profile as it is.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "dataplane/config/profile.h"

namespace qs::test {

inline constexpr const char* kKeyPlaceholder = "# key: \"<the 32 hex digits it printed>\"";

inline Profile load_shipped_profile(const std::string& path) {
  if (path.size() < 20 || path.compare(path.size() - 20, 20, "baremetal-2port.yaml") != 0) return load_profile(path);
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const auto at = text.find(kKeyPlaceholder);
  if (at == std::string::npos) throw std::runtime_error(path + " lost its key placeholder");
  text.replace(at, std::string(kKeyPlaceholder).size(), "key: \"5f0c9a7e21d34b8e96a1c07d3e45f218\"");
  return parse_profile(text, path);
}

}  // namespace qs::test
