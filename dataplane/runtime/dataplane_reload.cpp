// Dataplane's hot reload of the steering section (and with it the
// backends): checking a new profile against the running one, building the
// new classifier and delivery plan, the backend slots (backend_slots.h), and
// putting it all live between bursts under RCU.
#include "dataplane/runtime/dataplane.h"

#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/config/profile.h"
#include "dataplane/control/counter_fields.h"

namespace qs {

bool Dataplane::swept(std::uint64_t generation) const { return !forwarding_ || forwarding_->swept(generation); }

BackendSnapshot Dataplane::backend_counter_sums(std::uint16_t slot) const {
  BackendSnapshot sums;
  for (const auto& c : lcores_) {
    if (c->backend_counters.empty()) continue;
    const BackendCounters& k = c->backend_counters[slot];
    for (const auto& f : kBackendCounterFields) sums.*f.value += (k.*f.source).get();
  }
  return sums;
}

Dataplane::PreparedSteering::PreparedSteering(PreparedSteering&&) noexcept = default;
Dataplane::PreparedSteering& Dataplane::PreparedSteering::operator=(PreparedSteering&&) noexcept = default;
Dataplane::PreparedSteering::~PreparedSteering() = default;

Dataplane::SteeringReload Dataplane::reload_steering(const Profile& next) {
  return apply_steering(prepare_steering(next));
}

namespace {

// The backends as the hash and the delivery plan take them: those the
// health checks find down as if the operator had set them down. When that
// would leave no active backend, the operator's states stand (fail open: a
// fault common to every probe, such as the TAP losing its address, must not
// black-hole the service; /healthz then says no backend answers).
std::vector<BackendConfig> with_health(std::vector<BackendConfig> backends, const std::vector<std::string>& down) {
  if (down.empty()) return backends;
  const auto is_down = [&](const BackendConfig& b) { return std::binary_search(down.begin(), down.end(), b.name); };
  const bool some_active = std::any_of(backends.begin(), backends.end(), [&](const BackendConfig& b) {
    return b.state == BackendState::kActive && !is_down(b);
  });
  if (!some_active) return backends;
  for (BackendConfig& b : backends)
    if (is_down(b)) b.state = BackendState::kDown;
  return backends;
}

}  // namespace

Dataplane::PreparedSteering Dataplane::prepare_steering(const Profile& next) const {
  return prepare(next, health_down_);
}

Dataplane::PreparedSteering Dataplane::prepare_health(const std::vector<std::string>& health_down) const {
  PreparedSteering p = prepare(profile_, health_down);
  p.health_only_ = true;
  return p;
}

std::optional<std::string> Dataplane::follow_health() {
  if (!health_) return std::nullopt;
  const std::uint64_t epoch = health_->epoch();
  if (epoch == health_epoch_seen_) return std::nullopt;
  health_epoch_seen_ = epoch;
  std::vector<std::string> down = health_->down_names();
  if (down == health_down_) return std::nullopt;
  std::string names;
  for (const std::string& n : down) names.append(names.empty() ? "" : ", ").append(n);
  SteeringReload r = apply_steering(prepare_health(down));
  if (r.applied) ++health_rebuilds_;
  // Failing open: some backend the checks find down still takes new
  // connections, because leaving them all out would leave none.
  const std::vector<BackendConfig>& operator_set = profile_.steering.backends;
  const std::vector<BackendConfig> hashed = with_health(operator_set, health_down_);
  bool fail_open = false;
  for (std::size_t i = 0; i < hashed.size(); ++i)
    fail_open = fail_open || (hashed[i].state == BackendState::kActive &&
                              std::binary_search(down.begin(), down.end(), hashed[i].name));
  return "health: backends down by their probes [" + names + "]" +
         (fail_open ? " (every active one: the hash keeps the operator's set, failing open)" : "") + ": " + r.message;
}

Dataplane::PreparedSteering Dataplane::prepare(const Profile& next, std::vector<std::string> health_down) const {
  PreparedSteering p;
  p.health_down_ = std::move(health_down);
  p.base_generation_ = generation_;
  if (auto refusal = reload_refusal(profile_, next)) {
    p.refusal_ = *refusal;
    return p;
  }
  if (profile_.steering.backends.empty() != next.steering.backends.empty()) {
    // The forwarding tables name owners without backends and backends with
    // them: what they learned would be read as the other.
    p.refusal_ = profile_.steering.backends.empty()
                     ? "backends: a running data path without backends cannot take some (restart)"
                     : "backends: a running data path with backends cannot drop them all (restart)";
    return p;
  }
  // Each backend that stays keeps its slot, so that what the tables learned
  // for it still names it; a new one takes a free slot, never one whose
  // entries the tables may still hold (backend_slots.h).
  Profile placed = profile_;
  placed.steering = next.steering;
  placed.action.delivery = next.action.delivery;
  placed.rekey_fallback_on_reload = next.rekey_fallback_on_reload;
  p.slots_ = backend_slots_;
  if (!p.slots_.assign(profile_.steering.backends, placed.steering.backends,
                       [this](std::uint64_t g) { return swept(g); })) {
    p.refusal_ = "backends: no free backend slot (" + std::to_string(kMaxBackends) +
                 " backends, and those removed whose forwarding-table entries are still being swept, at once)";
    return p;
  }
  try {
    if (placed.peer_sync.enabled) PeerSync::check_backend_ids(placed.peer_sync, placed.steering.backends);
    // The hash and the plan see the health checks' verdicts; the profile
    // kept (placed) the operator's states.
    Profile effective = placed;
    effective.steering.backends = with_health(placed.steering.backends, p.health_down_);
    p.classifier_ = std::make_unique<MbufClassifier>(effective.steering);
    p.delivery_ = make_delivery_plan(effective);
  } catch (const std::exception& e) {
    p.refusal_ = std::string("steering: ") + e.what();
    p.classifier_.reset();
    return p;
  }
  // The forwarding tables carry over: what they learned names owners by
  // index, which no reload can change, and their keys do not depend on the
  // configuration (a new fallback key leaves learned connections where they
  // are).
  p.classifier_->use_tables(forwarding_.get());
  p.profile_ = std::move(placed);
  return p;
}

Dataplane::SteeringReload Dataplane::apply_steering(PreparedSteering prepared) {
  SteeringReload r;
  r.generation = generation_;
  if (prepared.refused()) {
    r.message = std::move(prepared.refusal_);
    return r;
  }
  if (prepared.base_generation_ != generation_ || !prepared.classifier_) {
    r.message = "steering changed while this reload was prepared; nothing changed (reload again)";
    return r;
  }
  // Reclaimed slots leave the tables' retiring set before a classifier may
  // route to them, and a reused slot's counters start from here (nothing
  // has counted on it since its sweep).
  if (forwarding_) forwarding_->forget(prepared.slots_.reclaimed());
  if (!prepared.slots_.reused().empty()) {
    counter_base_.resize(kMaxBackends);
    for (const std::uint16_t slot : prepared.slots_.reused()) counter_base_[slot] = backend_counter_sums(slot);
  }
  // The plan first: a packet the new classifier sends to a new backend
  // finds the backend's template in place.
  if (prepared.delivery_) live_delivery_.store(prepared.delivery_.get(), std::memory_order_release);
  live_classifier_.store(prepared.classifier_.get(), std::memory_order_release);
  // The delivery's ICMP set-up follows the reload like the rest of it.
  for (auto& c : lcores_) c->icmp_replies.store(sends_icmp_replies(prepared.profile_), std::memory_order_relaxed);
  // Every lcore reports a quiescent state after this token (or is offline):
  // none holds the old classifier any more. Lcores pass one every iteration,
  // so this waits for microseconds; a stopped data path is all offline.
  const std::uint64_t token = rte_rcu_qsbr_start(rcu_);
  rte_rcu_qsbr_check(rcu_, token, true);
  // No lcore resolves to the removed backends' slots now, nor learns new
  // entries naming them: their entries can be swept. A data path whose
  // lcores are not running sweeps here.
  const std::vector<std::uint16_t> removed = prepared.slots_.removed();
  // Peers' entries name backends by their names' ids: from here on none of
  // a removed backend is written (set_backends waits for an absorb under
  // way), so that the sweep below leaves none behind.
  if (peer_sync_) peer_sync_->set_backends(prepared.profile_.steering.backends);
  if (health_ && !prepared.health_only_)
    health_->set_backends(prepared.profile_.steering.backends, prepared.profile_.action.delivery);
  health_down_ = std::move(prepared.health_down_);
  if (forwarding_ && !removed.empty()) {
    prepared.slots_.retire_removed(forwarding_->retire(removed));
    if (!running_)
      while (forwarding_->retirement_pending()) forwarding_->sweep_retired(~0u);
  } else {
    prepared.slots_.retire_removed(0);
  }
  // Only now are the old classifier and plan freed (into `prepared`, which
  // frees them on return): a test that reloads under traffic with the wait
  // above removed reads freed memory, which AddressSanitizer reports.
  std::swap(classifier_, prepared.classifier_);
  if (prepared.delivery_) std::swap(delivery_, prepared.delivery_);
  std::swap(backend_slots_, prepared.slots_);
  const std::size_t backends_before = profile_.steering.backends.size();
  const std::size_t configs_before = profile_.steering.quic_lb.size();
  const std::size_t servers_before = profile_.steering.server_routes.size();
  const bool rekeyed = profile_.steering.fallback_key != prepared.profile_.steering.fallback_key;
  std::swap(profile_, prepared.profile_);
  r.generation = ++generation_;
  r.applied = true;
  std::string ids;
  for (const QuicLbConfig& c : profile_.steering.quic_lb) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(c.config_id);
  }
  r.message = "steering generation " + std::to_string(generation_) + " is live: QUIC-LB configs [" + ids + "] (" +
              std::to_string(configs_before) + " -> " + std::to_string(profile_.steering.quic_lb.size()) +
              "), servers " + std::to_string(servers_before) + " -> " +
              std::to_string(profile_.steering.server_routes.size()) + (rekeyed ? ", new fallback key" : "");
  if (backends_before != 0 || !profile_.steering.backends.empty()) {
    unsigned draining = 0, down = 0;
    for (const BackendConfig& b : profile_.steering.backends) {
      draining += b.state == BackendState::kDraining;
      down += b.state == BackendState::kDown;
    }
    r.message += ", backends " + std::to_string(backends_before) + " -> " +
                 std::to_string(profile_.steering.backends.size()) + " (" + std::to_string(draining) + " draining, " +
                 std::to_string(down) + " down" +
                 (health_ ? ", " + std::to_string(health_down_.size()) + " down by health" : std::string()) +
                 "), backend hash " +
                 std::to_string(backend_hash_table_size(profile_.steering)) + " slots, delivery " +
                 delivery_mode_name(profile_.action.delivery.mode);
  }
  return r;
}

}  // namespace qs
