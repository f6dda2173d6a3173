// The profile's spelling of each setting, from the tables the decoder reads
// them by (enum_names.h).
#include "dataplane/config/enum_names.h"
#include "dataplane/config/yaml_reader.h"

namespace qs {

const char* flow_control_name(FlowControl fc) { return config::spelling_of(config::kFlowControlSpellings, fc); }
const char* policy_name(BackpressurePolicy p) { return config::spelling_of(config::kPolicySpellings, p); }
const char* action_name(OwnerAction a) { return config::spelling_of(config::kActionSpellings, a); }
const char* delivery_mode_name(DeliveryMode m) { return config::spelling_of(config::kDeliveryModeSpellings, m); }
const char* backend_state_name(BackendState s) { return config::spelling_of(config::kBackendStateSpellings, s); }

namespace config {

const char* steering_mode_name(SteeringMode mode) { return spelling_of(kSteeringModeSpellings, mode); }

}  // namespace config
}  // namespace qs

namespace qs {

std::string health_target_text(const HealthTarget& t) {
  std::string text;
  if (t.ipv6) {
    text.append("[").append(config::format_ipv6(t.address)).append("]");
  } else {
    text = config::format_ipv4({t.address[0], t.address[1], t.address[2], t.address[3]});
  }
  return text.append(":").append(std::to_string(t.udp_port));
}

}  // namespace qs
