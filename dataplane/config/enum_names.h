// Each enum of the profile with its spellings, written once: the decoder
// reads a setting by its table (Decoder::choice) and the dump, --check and
// telemetry name a value by the same table (flow_control_name() and the
// others in profile.h).
//
// Internal to dataplane/config/.
#pragma once

#include <array>

#include "dataplane/config/modes.h"
#include "dataplane/config/profile.h"
#include "steering/steering_config.h"

namespace qs::config {

template <typename E>
struct Spelling {
  const char* name;
  E value;
};

inline constexpr std::array<Spelling<FlowControl>, 4> kFlowControlSpellings{{
    {"none", FlowControl::kNone},
    {"rx_pause", FlowControl::kRxPause},
    {"tx_pause", FlowControl::kTxPause},
    {"full", FlowControl::kFull},
}};

inline constexpr std::array<Spelling<SteeringMode>, 2> kSteeringModeSpellings{{
    {"cid", SteeringMode::kCid},
    {"four_tuple", SteeringMode::kFourTuple},
}};
inline constexpr std::array<Spelling<FallbackHash>, 3> kFallbackHashSpellings{{
    {"auto", FallbackHash::kAuto},
    {"tuple", FallbackHash::kTuple},
    {"dcid", FallbackHash::kDcid},
}};

inline constexpr std::array<Spelling<BackendState>, 3> kBackendStateSpellings{{
    {"active", BackendState::kActive},
    {"draining", BackendState::kDraining},
    {"down", BackendState::kDown},
}};

inline constexpr std::array<Spelling<BackpressurePolicy>, 3> kPolicySpellings{{
    {"park", BackpressurePolicy::kPark},
    {"drop", BackpressurePolicy::kDrop},
    {"shed-new", BackpressurePolicy::kShedNew},
}};

inline constexpr std::array<Spelling<OwnerAction>, 3> kActionSpellings{{
    {"forward", OwnerAction::kForward},
    {"reflect", OwnerAction::kReflect},
    {"sink", OwnerAction::kSink},
}};

inline constexpr std::array<Spelling<DeliveryMode>, 4> kDeliveryModeSpellings{{
    {"as_is", DeliveryMode::kAsIs},
    {"l2", DeliveryMode::kL2},
    {"ipip", DeliveryMode::kIpip},
    {"vxlan", DeliveryMode::kVxlan},
}};

// The spelling of `value`; a value outside the table (only a corrupted one)
// reads as the table's first, the default.
template <typename E, std::size_t N>
constexpr const char* spelling_of(const std::array<Spelling<E>, N>& spellings, E value) {
  for (const Spelling<E>& s : spellings) {
    if (s.value == value) return s.name;
  }
  return spellings.front().name;
}

const char* steering_mode_name(SteeringMode mode);

}  // namespace qs::config
