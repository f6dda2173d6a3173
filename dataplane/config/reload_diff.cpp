// The reload diff: whether a running data path can take a new profile.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "dataplane/config/profile.h"
#include "dataplane/config/yaml_reader.h"

namespace qs {

namespace {

// The first difference between two resolved profiles (as dump_profile writes
// them), as "KEY: was X, now Y"; `may_differ` says which keys may.
std::optional<std::string> first_difference(const YAML::Node& a, const YAML::Node& b, const std::string& key,
                                            const std::function<bool(const std::string&)>& may_differ) {
  if (may_differ(key)) return std::nullopt;
  const auto show = [](const YAML::Node& n) -> std::string {
    if (!n.IsDefined() || n.IsNull()) return "absent";
    if (n.IsScalar()) return "'" + n.Scalar() + "'";
    YAML::Emitter e;
    e << YAML::Flow << n;
    return e.c_str();
  };
  const auto differs = [&](const std::string& why) {
    return std::optional<std::string>(key + ": " + why +
                                      "; the running data path cannot take this change (a restart can)");
  };
  if (!a.IsDefined() || !b.IsDefined() || a.Type() != b.Type())
    return differs("was " + show(a) + ", now " + show(b));
  if (a.IsScalar()) {
    if (a.Scalar() != b.Scalar()) return differs("was " + show(a) + ", now " + show(b));
    return std::nullopt;
  }
  if (a.IsSequence()) {
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (auto d = first_difference(a[i], b[i], config::index_key(key, i), may_differ)) return d;
    if (a.size() != b.size())
      return differs("had " + std::to_string(a.size()) + " entries, now " + std::to_string(b.size()));
    return std::nullopt;
  }
  if (a.IsMap()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (auto d = first_difference(it->second, b[name], config::join_key(key, name), may_differ)) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (!a[name].IsDefined()) {
        if (auto d = first_difference(a[name], it->second, config::join_key(key, name), may_differ)) return d;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> reload_refusal(const Profile& running, const Profile& next) {
  // Compared as their resolved dumps, so that every key is compared (and a
  // key added later is covered without touching this) and named as the
  // profile spells it.
  const YAML::Node a = YAML::Load(dump_profile(running));
  const YAML::Node b = YAML::Load(dump_profile(next));
  const auto may_differ = [&](const std::string& key) {
    return key == "steering.quic_lb" || key == "steering.servers" || key == "backends" ||
           key == "steering.backend_table_size" || key == "action.delivery" ||
           key == "steering.fallback.rekey_on_reload" ||
           (key == "steering.fallback.key" && next.rekey_fallback_on_reload) ||
           // The list may change, not whether there is one: with services
           // every RX queue filters MACs and has an exception path.
           (key == "services" && !running.steering.services.empty() && !next.steering.services.empty());
  };
  if (running.steering.fallback_key != next.steering.fallback_key && !next.rekey_fallback_on_reload) {
    return std::string(
        "steering.fallback.key: changed; that moves every connection whose CID is not routable by QUIC-LB "
        "(client-chosen Initial DCIDs, unknown server IDs) to another owner. Set "
        "steering.fallback.rekey_on_reload: true in the new profile to change it anyway");
  }
  return first_difference(a, b, "", may_differ);
}

}  // namespace qs
