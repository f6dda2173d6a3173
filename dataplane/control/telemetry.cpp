#include "dataplane/control/telemetry.h"

#include <rte_telemetry.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>

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

void add_receive(rte_tel_data* d, const ReceiveTotals& rx) {
  rte_tel_data_add_dict_u64(d, "rx", rx.rx);
  rte_tel_data_add_dict_u64(d, "steered_self", rx.steered_self);
  rte_tel_data_add_dict_u64(d, "steered_other", rx.steered_other);
  rte_tel_data_add_dict_u64(d, "enqueued", rx.enqueued);
  rte_tel_data_add_dict_u64(d, "not_quic", rx.not_quic);
  rte_tel_data_add_dict_u64(d, "parks", rx.parks);
  rte_tel_data_add_dict_u64(d, "parked_packets", rx.parked_packets);
  rte_tel_data_add_dict_u64(d, "parked_us", rx.parked_us);
  for (std::size_t m = 0; m < kResolveMethods; ++m)
    rte_tel_data_add_dict_u64(d, ("routed_" + std::string(to_string(ResolveMethod(m)))).c_str(), rx.routed[m]);
  rte_tel_data_add_dict_u64(d, "learned", rx.learned);
  rte_tel_data_add_dict_u64(d, "setups", rx.setups);
  rte_tel_data_add_dict_u64(d, "setup_evicted", rx.setup_evicted);
  rte_tel_data_add_dict_u64(d, "table_full", rx.table_full);
}

void add_owner(rte_tel_data* d, const OwnerTotals& o) {
  rte_tel_data_add_dict_u64(d, "dequeued", o.dequeued);
  rte_tel_data_add_dict_u64(d, "processed", o.processed);
  rte_tel_data_add_dict_u64(d, "tx", o.tx);
  rte_tel_data_add_dict_u64(d, "sunk", o.sunk);
  rte_tel_data_add_dict_u64(d, "connections", o.connections);
  rte_tel_data_add_dict_u64(d, "connections_live", o.connections_live);
  rte_tel_data_add_dict_u64(d, "connections_expired", o.connections_expired);
  rte_tel_data_add_dict_u64(d, "cids", o.cids);
  rte_tel_data_add_dict_u64(d, "cids_live", o.cids_live);
  rte_tel_data_add_dict_u64(d, "migrations", o.migrations);
  rte_tel_data_add_dict_u64(d, "tx_holds", o.tx_holds);
  rte_tel_data_add_dict_u64(d, "tx_held_us", o.tx_held_us);
}

// DPDK accepts only letters, digits, '_' and '/' in names.
std::string telemetry_name(const std::string& text) {
  std::string out = text;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '/') c = '_';
  return out;
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
  add_owner(d, s.owner_total);
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
        rte_tel_data_add_dict_u64(e, "busy_cycles", l.busy_cycles);
        rte_tel_data_add_dict_u64(e, "idle_sleeps", l.idle_sleeps);
        rte_tel_data_add_dict_u64(e, "doorbell_wakes", l.doorbell_wakes);
        add_receive(e, l.rx);
        if (l.owner_index >= 0) add_owner(e, l.owner);
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
        rte_tel_data_add_dict_int(e, "parked_now", q.parked_now ? 1 : 0);
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
        rte_tel_data_add_dict_u64(e, "capacity", r.capacity);
        rte_tel_data_add_dict_u64(e, "occupancy", r.occupancy);
        rte_tel_data_add_dict_u64(e, "high_water", r.high_water);
        rte_tel_data_add_dict_u64(e, "full_events", r.full_events);
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
        rte_tel_data_add_dict_u64(e, "ipackets", p.ipackets);
        rte_tel_data_add_dict_u64(e, "opackets", p.opackets);
        rte_tel_data_add_dict_u64(e, "ibytes", p.ibytes);
        rte_tel_data_add_dict_u64(e, "obytes", p.obytes);
        rte_tel_data_add_dict_u64(e, "imissed", p.imissed);
        rte_tel_data_add_dict_u64(e, "ierrors", p.ierrors);
        rte_tel_data_add_dict_u64(e, "oerrors", p.oerrors);
        rte_tel_data_add_dict_u64(e, "rx_nombuf", p.rx_nombuf);
        rte_tel_data_add_dict_u64(e, "counter_resets", p.counter_resets);
      });
  return 0;
}

int cmd_backends(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const StatsSnapshot s = v->stats();
  dict_of_dicts(
      d, s.backends, [](const BackendSnapshot& b) { return b.name; },
      [](rte_tel_data* e, const BackendSnapshot& b) {
        rte_tel_data_add_dict_string(e, "state", b.state.c_str());
        rte_tel_data_add_dict_u64(e, "owner_lcore", b.owner_lcore);
        rte_tel_data_add_dict_u64(e, "weight", b.weight);
        for (const auto& f : kBackendCounterFields) rte_tel_data_add_dict_u64(e, f.name, b.*f.value);
      });
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
  rte_tel_data_add_dict_string(d, "profile", st.profile_path.c_str());
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
  // A string value is at most RTE_TEL_MAX_STRING_LEN; /quicsteer/reload
  // answers with the whole message.
  rte_tel_data_add_dict_string(d, "last_reload",
                               st.last_reload.substr(0, RTE_TEL_MAX_STRING_LEN - 1).c_str());
  return 0;
}

int cmd_health(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const Health h = v->health();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "healthy", h.healthy ? 1 : 0);
  rte_tel_data_add_dict_string(d, "reason", h.reason.substr(0, RTE_TEL_MAX_STRING_LEN - 1).c_str());
  return 0;
}

int cmd_profile(const char*, const char*, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const SteeringState st = v->steering();
  if (st.resolved_profile.size() < RTE_TEL_MAX_SINGLE_STRING_LEN) {
    rte_tel_data_string(d, st.resolved_profile.c_str());
  } else {
    const std::string note = "the resolved profile (" + std::to_string(st.resolved_profile.size()) +
                             " bytes) is longer than one telemetry answer; quicsteer --check " + st.profile_path +
                             " prints it";
    rte_tel_data_string(d, note.c_str());
  }
  return 0;
}

int cmd_reload(const char*, const char* params, rte_tel_data* d) {
  QS_VIEW_OR_FAIL();
  const std::string answer = v->request_reload(params != nullptr ? params : "", kReloadWait);
  rte_tel_data_string(d, answer.substr(0, RTE_TEL_MAX_SINGLE_STRING_LEN - 1).c_str());
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
    const Command commands[] = {
        {"/quicsteer/totals", cmd_totals, "Counters of the whole data path and the live steering generation. No parameters"},
        {"/quicsteer/lcores", cmd_lcores, "Counters per lcore (receive, owner, drops by reason). No parameters"},
        {"/quicsteer/queues", cmd_queues, "Counters per RX queue, named port/queue. No parameters"},
        {"/quicsteer/rings", cmd_rings, "Rings, named RECEIVER_to_OWNER lcore: capacity, occupancy, high water, full events. No parameters"},
        {"/quicsteer/ports", cmd_ports, "Port counters, totals across device counter resets. No parameters"},
        {"/quicsteer/backends", cmd_backends,
         "Per backend: state, owner lcore, weight, packets, bytes, connections, drops (backend_down, too_big), ICMP sent. No parameters"},
        {"/quicsteer/drops", cmd_drops, "Software drops by reason, in total. No parameters"},
        {"/quicsteer/steering", cmd_steering, "The live steering generation, its QUIC-LB configs, the last reload. No parameters"},
        {"/quicsteer/health", cmd_health,
         "healthy 1 while every lcore's loop makes progress and every port's link is up, else 0 and the reason. No parameters"},
        {"/quicsteer/profile", cmd_profile, "The live profile, resolved (every default filled in). No parameters"},
        {"/quicsteer/reload", cmd_reload,
         "Reloads the steering section. Parameter: a profile path (default: the one quicsteer started with)"},
    };
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
