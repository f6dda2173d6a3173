#include "dataplane/control/telemetry.h"

#include <rte_telemetry.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "dataplane/control/counter_fields.h"
#include "dataplane/control/telemetry_guard.h"
#include "dataplane/fastpath/drop_reason.h"

namespace qs {
namespace {

// DPDK 22.11's callbacks take no user argument: the view is process-wide.
std::mutex g_view_mutex;
std::shared_ptr<LiveView> g_view;

std::shared_ptr<LiveView> view() {
  std::lock_guard lock(g_view_mutex);
  return g_view;
}

// How long /quicsteer/reload waits for the control loop, which looks at its
// mailbox every few tens of milliseconds and reloads in well under a second.
constexpr std::chrono::seconds kReloadWait{10};

void add_drops(rte_tel_data* d, const DropArray& drops, const char* prefix) {
  for (std::size_t r = 0; r < kDropReasonCount; ++r) {
    const std::string name = std::string(prefix) + std::string(drop_reason_name(DropReason(r)));
    rte_tel_data_add_dict_u64(d, name.c_str(), drops[r]);
  }
}

// A table of counter_fields.h, each counter under its name.
template <typename Snapshot, typename Field, std::size_t N>
void add_fields(rte_tel_data* d, const Field (&fields)[N], const Snapshot& s) {
  for (const Field& f : fields) rte_tel_data_add_dict_u64(d, f.name, s.*f.value);
}

void add_receive(rte_tel_data* d, const ReceiveTotals& rx) {
  add_fields(d, kReceiveFields, rx);
  for (std::size_t m = 0; m < kResolveMethods; ++m)
    rte_tel_data_add_dict_u64(d, ("routed_" + std::string(to_string(ResolveMethod(m)))).c_str(), rx.routed[m]);
}

// Every string value goes through one of these two (telemetry_text: DPDK
// 22.11 must never see a byte >= 0x80 or a control character). A value in a
// dict is at most RTE_TEL_MAX_STRING_LEN with its NUL, a whole answer
// RTE_TEL_MAX_SINGLE_STRING_LEN.
constexpr std::size_t kDictStringLimit = RTE_TEL_MAX_STRING_LEN - 1;
constexpr std::size_t kAnswerLimit = RTE_TEL_MAX_SINGLE_STRING_LEN - 1;

void add_dict_text(rte_tel_data* d, const char* name, std::string_view text) {
  rte_tel_data_add_dict_string(d, name, telemetry_text(text, kDictStringLimit).c_str());
}

void answer_text(rte_tel_data* d, std::string_view text, Newlines newlines = Newlines::kEscape) {
  rte_tel_data_string(d, telemetry_text(text, kAnswerLimit, newlines).c_str());
}

// One entry per item, each a dict; DPDK caps a dict's entries, the rest are
// counted under "not_shown".
template <typename Items, typename Name, typename Fill>
void dict_of_dicts(rte_tel_data* d, const Items& items, Name name, Fill fill) {
  rte_tel_data_start_dict(d);
  std::size_t shown = 0;
  for (const auto& item : items) {
    if (shown + 1 >= RTE_TEL_MAX_DICT_ENTRIES) break;
    rte_tel_data* inner = rte_tel_data_alloc();
    if (inner == nullptr) return;
    rte_tel_data_start_dict(inner);
    fill(inner, item);
    rte_tel_data_add_dict_container(d, telemetry_name(name(item)).c_str(), inner, 0);
    ++shown;
  }
  if (shown < items.size()) rte_tel_data_add_dict_u64(d, "not_shown", items.size() - shown);
}

#define QS_VIEW_OR_FAIL()       \
  const auto v = view();        \
  if (!v) return -ENODEV

int cmd_totals(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "steering_generation", s.steering_generation);
  rte_tel_data_add_dict_u64(d, "elapsed_ms", std::uint64_t(s.elapsed_s * 1000));
  add_receive(d, s.rx_total);
  add_fields(d, kOwnerFields, s.owner_total);
  rte_tel_data_add_dict_u64(d, "drops", s.drops_sum());
  rte_tel_data_add_dict_u64(d, "busy_cycles", s.busy_cycles_total);
  rte_tel_data_add_dict_u64(d, "tsc_hz", s.tsc_hz);
  return 0;
}

int cmd_lcores(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.lcores, [](const LcoreSnapshot& l) { return std::to_string(l.lcore); },
      [](rte_tel_data* e, const LcoreSnapshot& l) {
        rte_tel_data_add_dict_int(e, "owner_index", l.owner_index);
        add_fields(e, kLcoreFields, l);
        add_receive(e, l.rx);
        if (l.owner_index >= 0) add_fields(e, kOwnerFields, l.owner);
        DropArray drops = l.rx.drops;
        for (std::size_t r = 0; r < kDropReasonCount; ++r) drops[r] += l.owner.drops[r];
        add_drops(e, drops, "drops_");
      });
  return 0;
}

int cmd_queues(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.queues, [](const QueueSnapshot& q) { return q.port + "/" + std::to_string(q.queue); },
      [](rte_tel_data* e, const QueueSnapshot& q) {
        rte_tel_data_add_dict_u64(e, "lcore", q.lcore);
        add_fields(e, kQueueFields, q);
        add_receive(e, q.rx);
        add_drops(e, q.rx.drops, "drops_");
      });
  return 0;
}

int cmd_rings(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.rings, [](const RingSnapshot& r) { return std::to_string(r.from_lcore) + "_to_" + std::to_string(r.to_lcore); },
      [](rte_tel_data* e, const RingSnapshot& r) {
        add_fields(e, kRingFields, r);
      });
  return 0;
}

int cmd_ports(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.ports, [](const PortSnapshot& p) { return p.name; },
      [](rte_tel_data* e, const PortSnapshot& p) {
        rte_tel_data_add_dict_u64(e, "port_id", p.port_id);
        add_fields(e, kPortFields, p);
      });
  return 0;
}

int cmd_exception(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.exception, [](const ExceptionSnapshot& x) { return x.port + "/" + x.cls; },
      [](rte_tel_data* e, const ExceptionSnapshot& x) { add_fields(e, kExceptionFields, x); });
  return 0;
}

int cmd_peer_sync(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.peer_sync, [](const PeerSyncSnapshot&) { return std::string("peer_sync"); },
      [](rte_tel_data* e, const PeerSyncSnapshot& x) { add_fields(e, kPeerSyncFields, x); });
  return 0;
}

int cmd_health_checks(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.health_checks, [](const HealthChecksSnapshot&) { return std::string("health_checks"); },
      [](rte_tel_data* e, const HealthChecksSnapshot& x) { add_fields(e, kHealthChecksFields, x); });
  return 0;
}

int cmd_backends(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.backends, [](const BackendSnapshot& b) { return b.name; },
      [](rte_tel_data* e, const BackendSnapshot& b) {
        add_dict_text(e, "state", b.state);
        add_dict_text(e, "health", b.health);
        rte_tel_data_add_dict_u64(e, "owner_lcore", b.owner_lcore);
        rte_tel_data_add_dict_u64(e, "weight", b.weight);
        add_fields(e, kBackendCounterFields, b);
        add_fields(e, kBackendHealthFields, b);
      });
  return 0;
}

int cmd_forwarding(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "enabled", s.forwarding.enabled ? 1 : 0);
  add_fields(d, kForwardingFields, s.forwarding);
  return 0;
}

int cmd_drops(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  rte_tel_data_start_dict(d);
  add_drops(d, s.drops_total, "");
  return 0;
}

int cmd_steering(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const SteeringState st = v->steering();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "generation", st.generation);
  add_dict_text(d, "profile", st.profile_path);
  rte_tel_data* ids = rte_tel_data_alloc();
  if (ids != nullptr) {
    rte_tel_data_start_array(ids, RTE_TEL_INT_VAL);
    for (unsigned id : st.quic_lb_config_ids) rte_tel_data_add_array_int(ids, int(id));
    rte_tel_data_add_dict_container(d, "quic_lb_config_ids", ids, 0);
  }
  rte_tel_data_add_dict_u64(d, "servers", st.servers);
  rte_tel_data_add_dict_u64(d, "reloads_applied", st.reloads_applied);
  rte_tel_data_add_dict_u64(d, "reloads_refused", st.reloads_refused);
  rte_tel_data_add_dict_u64(d, "reload_running", st.reload_running ? 1 : 0);
  // Cut to a dict's string; /quicsteer/reload answers with the whole
  // message (both without the content of a refused file).
  add_dict_text(d, "last_reload", without_file_content(st.last_reload));
  return 0;
}

int cmd_health(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const Health h = v->health();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "healthy", h.healthy ? 1 : 0);
  add_dict_text(d, "reason", h.reason);
  return 0;
}

int cmd_profile(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const SteeringState st = v->steering();
  // Kept multi-line (DPDK escapes '\n'); shown only when the whole of it fits.
  const std::string profile = telemetry_text(st.resolved_profile, std::string::npos, Newlines::kKeep);
  if (telemetry_json_length(profile) <= kAnswerLimit) {
    rte_tel_data_string(d, profile.c_str());
  } else {
    answer_text(d, "the resolved profile (" + std::to_string(st.resolved_profile.size()) +
                       " bytes) is longer than one telemetry answer; quicsteer --check " + st.profile_path +
                       " prints it");
  }
  return 0;
}

int cmd_reload(const char*, const char* params, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  std::string path;  // empty: the profile quicsteer started with
  FileDescriptor file;
  if (params != nullptr && *params != '\0') {
    ReloadPath confined = confine_reload_path(params, v->steering().profile_path);
    if (!confined.refusal.empty()) {
      // Refused here, the control loop never sees it: counted in
      // reloads_refused from this thread, and quicsteer's log gets it from
      // here too (the path escaped as for telemetry, so that it cannot forge
      // log lines).
      const std::string answer = "refused: " + confined.refusal + "; steering generation " +
                                 std::to_string(v->steering().generation) + " stays live";
      v->count_reload(false);
      std::fprintf(stderr, "quicsteer: reload (/quicsteer/reload) %s\n", telemetry_text(answer, kAnswerLimit).c_str());
      answer_text(d, answer);
      return 0;
    }
    path = std::move(confined.path);
    file = std::move(confined.file);
  }
  answer_text(d, without_file_content(v->request_reload(path, std::move(file), kReloadWait)));
  return 0;
}

void register_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct Command {
      const char* name;
      telemetry_cb fn;
      const char* help;
    };
    static constexpr Command commands[] = {
        {"/quicsteer/totals", cmd_totals, "Counters of the whole data path and the live steering generation. No parameters"},
        {"/quicsteer/lcores", cmd_lcores, "Counters per lcore (receive, owner, drops by reason). No parameters"},
        {"/quicsteer/queues", cmd_queues, "Counters per RX queue, named port/queue. No parameters"},
        {"/quicsteer/rings", cmd_rings, "Rings, named RECEIVER_to_OWNER lcore: capacity, occupancy, high water, full events. No parameters"},
        {"/quicsteer/ports", cmd_ports, "Port counters, totals across device counter resets. No parameters"},
        {"/quicsteer/backends", cmd_backends,
         "Per backend: state, health, owner lcore, weight, packets, bytes, connections, drops, ICMP sent, probes. No parameters"},
        {"/quicsteer/forwarding", cmd_forwarding,
         "Forwarding tables: enabled, entries, slots, setup_entries, setup_slots, expired, retired, retiring_slots. No parameters"},
        {"/quicsteer/exception", cmd_exception,
         "The exception path to the kernel, named port/class: to and from the TAP, policed, refused. No parameters"},
        {"/quicsteer/health_checks", cmd_health_checks,
         "Health checks: backends up/down/unchecked, probes, rounds deferred, answers, hash rebuilds. No parameters"},
        {"/quicsteer/peer_sync", cmd_peer_sync,
         "Peer sync: ready, messages, entries, refusals. No parameters"},
        {"/quicsteer/drops", cmd_drops, "Software drops by reason, in total. No parameters"},
        {"/quicsteer/steering", cmd_steering, "The live steering generation, its QUIC-LB configs, the last reload. No parameters"},
        {"/quicsteer/health", cmd_health,
         "healthy 1 while every lcore runs, every link is up and every TX queue takes packets, else 0 and why. No parameters"},
        {"/quicsteer/profile", cmd_profile, "The live profile, resolved (every default filled in). No parameters"},
        {"/quicsteer/reload", cmd_reload,
         "Reloads the steering section. Parameter: a profile path in the profile's directory (default: the live one)"},
    };
    // DPDK refuses a help text of RTE_TEL_MAX_STRING_LEN or more, and the
    // command would then not exist.
    static_assert(std::ranges::all_of(
        commands, [](const Command& c) { return std::string_view(c.help).size() < RTE_TEL_MAX_STRING_LEN; }));
    for (const Command& c : commands) rte_telemetry_register_cmd(c.name, c.fn, c.help);
  });
}

}  // namespace

void attach_telemetry(std::shared_ptr<LiveView> view) {
  register_once();
  std::lock_guard lock(g_view_mutex);
  g_view = std::move(view);
}

}  // namespace qs
