// quicsteer [EAL args] -- --profile FILE [--duration SECONDS] [--stats-json FILE]
// quicsteer --check PROFILE
// quicsteer --list-counters
//
// With no EAL arguments the profile's `eal` list is used. The main lcore runs
// the control loop (signals, the duration, the live table, steering reloads
// on SIGHUP or /quicsteer/reload (read and built on a thread of their own,
// put live here), what telemetry and Prometheus read, the
// health check, the drain, the service manager's notifications); the
// profile's lcores run the data path.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_pdump.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "dataplane/runtime/dataplane.h"
#include "dataplane/runtime/eal_init.h"
#include "dataplane/control/counter_fields.h"
#include "dataplane/control/health_monitor.h"
#include "dataplane/control/live_view.h"
#include "dataplane/config/profile.h"
#include "dataplane/control/prometheus.h"
#include "dataplane/control/telemetry_guard.h"
#include "dataplane/runtime/service_notify.h"
#include "dataplane/runtime/steering_reloader.h"
#include "dataplane/control/telemetry.h"

namespace {

std::atomic<bool> g_interrupted{false};  // SIGINT: stop at once
std::atomic<bool> g_terminated{false};   // SIGTERM: drain (drain.grace_s), then stop
std::atomic<bool> g_reload_asked{false};  // SIGHUP: reload the steering section

void on_signal(int signo) { (signo == SIGTERM ? g_terminated : g_interrupted).store(true); }

void on_hangup(int) { g_reload_asked.store(true); }

// SIGINT and SIGTERM ask for a stop from the first instruction of main() on
// (SIGTERM drains first, once quicsteer has been ready; see run()):
// a stop during EAL start-up or port set-up still runs the data path's stop
// and prints the summary. They are unblocked too, in case the parent started
// quicsteer with them blocked (a blocked stop signal would never arrive).
void handle_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // SIGHUP asks for a steering reload (its default would end the process).
  struct sigaction hup {};
  hup.sa_handler = on_hangup;
  sigemptyset(&hup.sa_mask);
  hup.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &hup, nullptr);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  sigprocmask(SIG_UNBLOCK, &stop, nullptr);
}

// What /quicsteer/steering and /quicsteer/profile show of the live steering;
// `resolved` is dump_profile(dp.profile()) (from the reload thread when a
// reload changed it: a large profile takes long to write out).
qs::SteeringState steering_state(const qs::Dataplane& dp, const std::string& path, std::string resolved,
                                 qs::SteeringState previous) {
  qs::SteeringState s = std::move(previous);
  s.generation = dp.steering_generation();
  s.profile_path = path;
  s.resolved_profile = std::move(resolved);
  s.quic_lb_config_ids.clear();
  for (const auto& c : dp.profile().steering.quic_lb) s.quic_lb_config_ids.push_back(c.config_id);
  s.servers = dp.profile().steering.server_routes.size();
  return s;
}

// The service manager (systemd, Type=notify), when there is one: a failed
// send is reported once (the manager may be gone; quicsteer runs on).
class Manager {
 public:
  explicit Manager(qs::ServiceNotifier n) : notifier_(std::move(n)) {}
  const qs::ServiceNotifier& notifier() const { return notifier_; }
  void tell(const std::string& state) {
    std::string error;
    if (!notifier_.notify(state, &error) && !failed_) {
      failed_ = true;
      std::fprintf(stderr, "quicsteer: cannot notify the service manager (NOTIFY_SOCKET): %s\n", error.c_str());
    }
  }
  // Around a steering reload, once ready and until stopping (sd_notify(3):
  // RELOADING=1 carries the monotonic clock; READY=1 ends it). After
  // STOPPING=1 the manager is told nothing of reloads: a READY=1 then would
  // tell it that the stop was over.
  void reloading() {
    if (!ready_ || stopping_) return;
    timespec ts {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    tell("RELOADING=1\nMONOTONIC_USEC=" +
         std::to_string(std::uint64_t(ts.tv_sec) * 1000000u + std::uint64_t(ts.tv_nsec) / 1000u));
  }
  void reloaded(const std::string& answer) {
    if (ready_ && !stopping_) tell("READY=1\nSTATUS=reload " + answer);
  }
  // STOPPING=1 with `more` (further assignments, "" for none), once.
  void stopping(const std::string& more) {
    if (stopping_) return;
    stopping_ = true;
    tell("STOPPING=1" + (more.empty() ? "" : "\n" + more));
  }
  bool ready_ = false;  // READY=1 was sent: the ports came up and every lcore ran

 private:
  qs::ServiceNotifier notifier_;
  bool failed_ = false;
  bool stopping_ = false;  // STOPPING=1 was sent
};

// Starts a steering reload from `path` on the reload thread; the control
// loop goes on and finishes it (finish_reload) once it is prepared.
void start_reload(qs::SteeringReloader& reloader, const std::string& path, const char* asked_by, bool telemetry,
                  qs::LiveView& live, Manager& manager) {
  manager.reloading();
  qs::SteeringState state = live.steering();
  state.reload_running = true;
  live.publish(state);
  reloader.start(path, asked_by, telemetry, telemetry ? live.take_reload_file() : qs::FileDescriptor{});
  // The log gets what telemetry gets: escaped, so that a path cannot carry
  // terminal control sequences into an operator's terminal or journal.
  std::printf("quicsteer: reload (%s) reading %s\n", asked_by, qs::telemetry_text(path, std::string::npos).c_str());
  std::fflush(stdout);
}

// Puts a prepared reload live (or reports why not); the answer says what
// happened ("applied: ..." or "refused: ..."), and is printed.
std::string finish_reload(qs::Dataplane& dp, qs::SteeringReloader::Prepared prepared, qs::LiveView& live,
                          std::string& live_path, Manager& manager) {
  qs::SteeringState state = live.steering();
  state.reload_running = false;
  std::string answer;
  std::string resolved = state.resolved_profile;
  if (!prepared.load_error.empty()) {
    answer = "refused: " + prepared.load_error + "; steering generation " + std::to_string(dp.steering_generation()) +
             " stays live";
    live.count_reload(false);
  } else {
    const auto outcome = dp.apply_steering(std::move(prepared.steering));
    if (outcome.applied) {
      answer = "applied: " + outcome.message;
      live_path = prepared.path;
      resolved = std::move(prepared.resolved_profile);
      live.count_reload(true);
    } else {
      answer = "refused: " + prepared.path + ": " + outcome.message + "; steering generation " +
               std::to_string(outcome.generation) + " stays live";
      live.count_reload(false);
    }
  }
  state.last_reload = answer;
  live.publish(steering_state(dp, live_path, std::move(resolved), std::move(state)));
  std::printf("quicsteer: reload (%s) %s\n", prepared.asked_by.c_str(),
              qs::telemetry_text(answer, std::string::npos).c_str());
  std::fflush(stdout);
  manager.reloaded(answer);
  if (prepared.telemetry) live.answer_reload(answer);
  return answer;
}

// The statistics file is opened (and created) at start-up, before EAL, so
// that an unwritable path is an error before the run, not after it. A file
// that did not exist is removed again; the run writes it at the end.
bool check_output_path(const std::string& path, const char* what) {
  if (path.empty()) return true;
  bool created = true;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
  }
  if (fd < 0) {
    std::fprintf(stderr, "quicsteer: cannot write the statistics file %s (%s): %s; fix the path or its directory\n",
                 path.c_str(), what, std::strerror(errno));
    return false;
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (created) ::unlink(path.c_str());
  if (!regular) {
    std::fprintf(stderr, "quicsteer: the statistics file %s (%s) is not a regular file; name a file\n", path.c_str(),
                 what);
    return false;
  }
  return true;
}

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: quicsteer [EAL args] -- --profile FILE [--duration SECONDS] [--stats-json FILE]\n"
               "       quicsteer --check PROFILE\n"
               "       quicsteer --list-counters\n"
               "  --profile FILE      the deployment profile (YAML); its `eal` list is used when no EAL\n"
               "                      arguments come before --\n"
               "  --duration SECONDS  stop by itself after this long (overrides duration_s)\n"
               "  --stats-json FILE   write the end-of-run statistics here (overrides stats.json)\n"
               "  --check PROFILE     validate the profile, print it resolved, start nothing\n"
               "  --list-counters     every counter quicsteer reports, one a line: scope, name, Prometheus\n"
               "                      sample, kind, unit, what it counts (tab-separated)\n");
}

struct AppArgs {
  std::string profile;
  double duration = -1;
  std::string stats_json;
  bool stats_json_set = false;
};

bool parse_app_args(const std::vector<std::string>& a, AppArgs& out) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto value = [&](const char* name) -> const std::string* {
      if (i + 1 >= a.size()) {
        std::fprintf(stderr, "quicsteer: %s needs a value\n", name);
        return nullptr;
      }
      return &a[++i];
    };
    if (a[i] == "--profile") {
      const auto* v = value("--profile");
      if (!v) return false;
      out.profile = *v;
    } else if (a[i] == "--duration") {
      const auto* v = value("--duration");
      if (!v) return false;
      // The profile's rule for duration_s: decimal, finite, 0..86400.
      try {
        out.duration = qs::parse_seconds(*v, "quicsteer: --duration", 0, 86400);
      } catch (const qs::ProfileError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return false;
      }
    } else if (a[i] == "--stats-json") {
      const auto* v = value("--stats-json");
      if (!v) return false;
      out.stats_json = *v;
      out.stats_json_set = true;
    } else if (a[i] == "--help" || a[i] == "-h") {
      usage(stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "quicsteer: unknown argument '%s'\n", a[i].c_str());
      usage(stderr);
      return false;
    }
  }
  if (out.profile.empty()) {
    std::fprintf(stderr, "quicsteer: --profile FILE is required\n");
    usage(stderr);
    return false;
  }
  return true;
}

bool has_arg(const std::vector<std::string>& v, const char* a) {
  for (const auto& s : v)
    if (s == a || s.rfind(std::string(a) + "=", 0) == 0) return true;
  return false;
}

// Free hugepages, in MB, of the default size (/proc/meminfo).
long free_hugepage_mb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long value = 0;
  long free_pages = 0;
  long page_kb = 0;
  while (in >> key >> value) {
    if (key == "HugePages_Free:") free_pages = value;
    if (key == "Hugepagesize:") page_kb = value;
    in.ignore(256, '\n');
  }
  return free_pages * page_kb / 1024;
}

// The memory the EAL arguments ask for up front, in MB: -m N, or the sum of
// --socket-mem's list; 0 when neither is given (EAL then takes hugepages as
// it needs them).
long requested_mb(const std::vector<std::string>& eal) {
  for (std::size_t i = 0; i < eal.size(); ++i) {
    std::string list;
    if ((eal[i] == "-m" || eal[i] == "--socket-mem") && i + 1 < eal.size())
      list = eal[i + 1];
    else if (eal[i].rfind("--socket-mem=", 0) == 0)
      list = eal[i].substr(std::strlen("--socket-mem="));
    else
      continue;
    long sum = 0;
    for (const char* c = list.c_str(); *c != '\0';) {
      char* end = nullptr;
      sum += std::strtol(c, &end, 10);
      if (end == c) break;
      c = *end == ',' ? end + 1 : end;
    }
    return sum;
  }
  return 0;
}

// What a profile that asks for no amount gets on ordinary pages, and so what
// must be free for it to run on hugepages, of which it then takes what it needs.
constexpr long kDefaultMemoryMb = 1024;

// EAL memory: hugepages when the profile leaves the choice open and enough
// are free (what -m asks for, kDefaultMemoryMb when it asks for nothing);
// ordinary memory (--no-huge) otherwise for a profile whose ports are all
// virtual devices (a PCI port needs hugepages: EAL then says what is
// missing). Says which it used. Without shared configuration (--no-shconf) no
// other process can attach to the memory, so its hugepage files are unlinked
// at once (--huge-unlink) and the pages go back when quicsteer ends; with it,
// the files stay for dpdk-dumpcap and stay after exit (EAL removes them when
// a process with the same --file-prefix starts).
void choose_memory(const qs::Profile& p, std::vector<std::string>& eal) {
  if (has_arg(eal, "--no-huge")) {
    std::printf("memory: ordinary pages (--no-huge in the EAL arguments)\n");
    return;
  }
  const long free_mb = free_hugepage_mb();
  const long asked_mb = requested_mb(eal);
  const long wanted_mb = asked_mb > 0 ? asked_mb : kDefaultMemoryMb;
  const bool all_vdev = std::all_of(p.ports.begin(), p.ports.end(), [](const auto& port) { return port.is_vdev(); });
  if (free_mb >= wanted_mb || !all_vdev) {
    if (has_arg(eal, "--no-shconf") && !has_arg(eal, "--huge-unlink") && !has_arg(eal, "--in-memory"))
      eal.push_back("--huge-unlink");
    std::printf("memory: hugepages (%ld MB free; %s)\n", free_mb,
                asked_mb > 0 ? "-m reserves its amount at start" : "taken as needed");
    return;
  }
  std::printf("memory: ordinary pages (--no-huge): %ld MB of hugepages free, %ld MB wanted\n", free_mb, wanted_mb);
  eal.push_back("--no-huge");
  if (asked_mb == 0) {
    eal.push_back("-m");
    eal.push_back(std::to_string(kDefaultMemoryMb));
  }
  if (!has_arg(eal, "--no-shconf")) eal.push_back("--no-shconf");
}

std::string stats_json_path(const qs::Profile& profile, const AppArgs& args) {
  return args.stats_json_set ? args.stats_json : profile.stats.json_path;
}

// "2", "0.5": drain.grace_s for a person.
std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// The stop after a drain (the lcores quiesce for at most 200 ms, the ports
// close, the summary and the statistics file are written) takes far less.
constexpr std::chrono::seconds kStopAllowance{30};

// EXTEND_TIMEOUT_USEC (sd_notify(3)): the stop may take `left` of the drain
// plus the stop after it; the manager waits that long from now for the
// next extension or the exit, beyond TimeoutStopSec.
std::string extend_timeout(std::chrono::steady_clock::duration left) {
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(left + kStopAllowance);
  return "EXTEND_TIMEOUT_USEC=" + std::to_string(std::max<std::int64_t>(0, usec.count()));
}

// How often the control loop checks health (and feeds the watchdog when it
// passes): twice per watchdog interval when the manager set a shorter one.
std::chrono::milliseconds health_period(const qs::ServiceNotifier& n) {
  const auto half = std::chrono::duration_cast<std::chrono::milliseconds>(n.watchdog_interval() / 2);
  constexpr std::chrono::milliseconds kDefault{500};
  if (n.watchdog_interval().count() == 0 || half >= kDefault) return kDefault;
  return std::max(half, std::chrono::milliseconds(20));  // the loop's own step
}

int run(const qs::Profile& profile, std::vector<std::string> eal_args, const AppArgs& args) {
  std::string notify_problem;
  Manager manager(qs::ServiceNotifier::from_environment(&notify_problem));
  if (!notify_problem.empty()) std::fprintf(stderr, "quicsteer: %s\n", notify_problem.c_str());
  choose_memory(profile, eal_args);
  if (!qs::init_eal("quicsteer", eal_args)) return 1;
  // dpdk-dumpcap attaches as a secondary process, which needs shared
  // hugepage memory and the shared configuration: with both, quicsteer
  // serves its capture requests (an RX/TX callback on the captured queues
  // only while a capture runs; nothing otherwise).
  const bool pdump = rte_eal_has_hugepages() != 0 && !has_arg(eal_args, "--no-shconf") &&
                     !has_arg(eal_args, "--in-memory") && rte_eal_process_type() == RTE_PROC_PRIMARY;
  if (pdump && rte_pdump_init() != 0) {
    std::fprintf(stderr, "quicsteer: rte_pdump_init: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  if (pdump) std::printf("capture: dpdk-dumpcap can attach (rte_pdump_init)\n");
  int status = 0;
  try {
    qs::Dataplane dp(profile);
    const double duration = args.duration >= 0 ? args.duration : profile.duration_s;
    const std::string json_path = stats_json_path(profile, args);
    // The operator's live view: rte_telemetry commands always, Prometheus
    // when the profile gives an address. Both read what this loop publishes.
    auto live = std::make_shared<qs::LiveView>();
    std::string live_path = profile.path;
    live->publish(steering_state(dp, live_path, qs::dump_profile(dp.profile()), {}));
    live->publish(dp.snapshot());
    qs::attach_telemetry(live);
    if (has_arg(eal_args, "--no-telemetry"))
      std::printf("quicsteer: EAL runs with --no-telemetry: the /quicsteer/* commands are off (SIGHUP still reloads)\n");
    std::unique_ptr<qs::PrometheusEndpoint> prometheus;
    if (!profile.telemetry.prometheus_listen.empty()) {
      qs::ListenAddress address;
      qs::parse_listen_address(profile.telemetry.prometheus_listen, address);  // validated by the loader
      prometheus = std::make_unique<qs::PrometheusEndpoint>(address, live);
      std::printf("prometheus: http://%s/metrics (port %u), /healthz; up to %u clients at once\n",
                  profile.telemetry.prometheus_listen.c_str(), unsigned(prometheus->port()), prometheus->max_clients());
    }
    std::printf("quicsteer: %zu lcores, %zu owners, policy %s, steering generation %llu (QUIC-LB configs: %zu, servers: %zu), %s\n",
                profile.lcores.size(), profile.steering.owner_lcores.size(),
                qs::policy_name(profile.backpressure.policy),
                static_cast<unsigned long long>(dp.steering_generation()), profile.steering.quic_lb.size(),
                profile.steering.server_routes.size(),
                duration > 0 ? ("running for " + std::to_string(duration) + " s").c_str() : "running until SIGINT/SIGTERM");
    std::fflush(stdout);  // a supervisor reading a pipe sees the start at once
    qs::SteeringReloader reloader(dp);
    dp.launch();
    const auto start = std::chrono::steady_clock::now();
    auto last_table = start;
    auto last_health = start;
    // Telemetry reads the snapshot the live table takes; with the table off,
    // one is taken this often for it (the same cost as a table at that period).
    const auto publish_period = std::chrono::milliseconds(profile.stats.period_ms != 0 ? profile.stats.period_ms : 1000);
    const auto check_period = health_period(manager.notifier());
    const auto grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(profile.drain.grace_s));
    // Set from SIGTERM on while the drain runs: every snapshot says so, and
    // health with it (the route is withdrawn) while the data path forwards.
    bool draining = false;
    std::chrono::steady_clock::time_point drain_end;
    const auto take_snapshot = [&] {
      qs::StatsSnapshot snap = dp.snapshot();
      snap.draining = draining;
      return snap;
    };
    qs::StatsSnapshot prev = take_snapshot();
    // Health (/healthz, /quicsteer/health) and the service manager's READY
    // and WATCHDOG are judged every turn from the lcores' heartbeats, the
    // links and the TX queues: cheap reads, no snapshot needed.
    qs::HealthMonitor health(qs::stall_threshold(profile.action.tx_drain_us, profile.polling.idle_sleep_us));
    // /healthz has said 200 at least once: a route may have been announced,
    // so SIGTERM drains. Set in the turn that first publishes it healthy.
    bool been_healthy = false;
    qs::Health shown{false, "not checked yet"};  // what the log and STATUS= last said
    const char* stopping = "stopping: the duration is over";
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      dp.sample_port_counters();  // so that a device's counter reset is seen
      const qs::Health verdict = health.judge(dp.health_sample(), std::chrono::steady_clock::now());
      // READY=1 once the ports are started and every lcore runs, whatever
      // the links say: the manager restarts a service that does not get
      // ready, and a restart brings no link back (it only loses the
      // forwarding tables). Sent before this turn publishes anything, so
      // that /healthz never says 200 before READY=1.
      if (verdict.progressing && !manager.ready_) {
        manager.ready_ = true;
        manager.tell("READY=1\nSTATUS=" + std::string(verdict.healthy ? "forwarding: every port up, every lcore running"
                                                                       : "running, unhealthy: " + verdict.reason));
      }
      // Healthy is the verdict and not draining (a drain withdraws the route
      // while the data path forwards).
      const qs::Health published = draining && verdict.healthy ? qs::Health{false, "draining", true} : verdict;
      live->publish(published);
      been_healthy = been_healthy || published.healthy;
      // Steering reloads are read and built on the reload thread; this loop
      // only starts one and puts it live once prepared. One at a time: a
      // SIGHUP while one is under way is left pending (g_reload_asked stays
      // set), so any number of them during a reload make exactly one more
      // reload after it, which reads the profile as it is then. A telemetry
      // request waits in its mailbox (up to its own time limit) likewise.
      // Without a path, both reload the live profile's file: the one the
      // last applied reload read (a profile chosen over telemetry stays
      // chosen), else the --profile file.
      if (auto prepared = reloader.take()) finish_reload(dp, std::move(*prepared), *live, live_path, manager);
      // A change of health rebuilds the backend hash here, between reloads
      // (a reload being prepared reads what the rebuild writes; it applies
      // the health in force when it was prepared, and the next turn
      // follows any change since).
      if (!reloader.busy()) {
        if (auto change = dp.follow_health()) {
          std::printf("quicsteer: %s\n", change->c_str());
          std::fflush(stdout);
        }
      }
      if (!reloader.busy()) {
        if (auto path = live->take_reload_request())
          start_reload(reloader, path->empty() ? live_path : *path, "/quicsteer/reload", true, *live, manager);
        else if (g_reload_asked.exchange(false))
          start_reload(reloader, live_path, "SIGHUP", false, *live, manager);
      }
      const auto now = std::chrono::steady_clock::now();
      if (g_interrupted.load()) {
        stopping = "stopping on SIGINT";
        break;
      }
      if (g_terminated.load() && !draining) {
        // Before /healthz ever said 200 no route was announced: nothing to drain.
        if (grace.count() == 0 || !been_healthy) {
          stopping = "stopping on SIGTERM";
          break;
        }
        draining = true;
        drain_end = now + grace;
        // The manager allows TimeoutStopSec (90 s) for a stop; a longer
        // grace extends it, and every health check extends it again.
        manager.stopping(extend_timeout(drain_end - now) + "\nSTATUS=draining: forwarding for " +
                         seconds_text(profile.drain.grace_s) + " s more, then stopping");
        std::printf("quicsteer: draining on SIGTERM: health is false (draining); forwarding for %s s more, then "
                    "stopping (SIGINT stops at once)\n",
                    seconds_text(profile.drain.grace_s).c_str());
        std::fflush(stdout);
        live->publish(take_snapshot());
        live->publish(qs::Health{false, "draining", verdict.progressing});  // whoever reads health sees the drain now
        last_health = std::chrono::steady_clock::time_point{};  // and so does the next check
      }
      if (draining && now >= drain_end) {
        stopping = "stopping on SIGTERM, the drain is over";
        break;
      }
      if (duration > 0 && std::chrono::duration<double>(now - start).count() >= duration) break;
      if (now - last_health >= check_period) {
        last_health = now;
        // The watchdog follows progress alone (this loop's, which sends it,
        // and every lcore's), through a drain too (a stop under way, not a
        // fault): a lost link or a dead TX queue is for the router to route
        // around (health), not for a restart.
        if (verdict.progressing) manager.tell("WATCHDOG=1");
        if (draining) manager.tell(extend_timeout(drain_end - now));
        const qs::Health now_health = draining ? qs::Health{false, verdict.healthy ? "draining" : verdict.reason} : verdict;
        if (now_health.healthy != shown.healthy || now_health.reason != shown.reason) {
          if (now_health.healthy) std::printf("quicsteer: health: true\n");
          else std::printf("quicsteer: health: false (%s)\n", now_health.reason.c_str());
          std::fflush(stdout);
          if (!draining) manager.tell(now_health.healthy ? "STATUS=forwarding" : "STATUS=unhealthy: " + now_health.reason);
          shown = now_health;
        }
      }
      if (now - last_table >= publish_period) {
        last_table = now;
        qs::StatsSnapshot snap = take_snapshot();
        live->publish(snap);
        if (profile.stats.period_ms != 0) qs::print_stats_table(stdout, snap, prev);
        prev = std::move(snap);
      }
    }
    // A reload still being read is waited for (it cannot be interrupted) and
    // dropped; a telemetry request waiting on it is answered by close().
    reloader.abandon();
    live->close();
    live->publish(qs::Health{false, "stopping"});
    manager.stopping("");
    std::printf("quicsteer: %s\n", stopping);
    dp.stop();
    qs::StatsSnapshot final_stats = dp.snapshot();
    live->publish(final_stats);
    const std::int64_t leaked = dp.close_ports_and_count_leaks();
    final_stats.mbufs_held_by_devices = dp.mbufs_held_by_devices();
    final_stats.mbufs_kept_by_drivers = dp.mbufs_kept_by_drivers();
    qs::print_summary(stdout, final_stats, leaked);
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << qs::stats_json(final_stats, profile.path, leaked, dp.pool_size());
      if (!out) {
        std::fprintf(stderr, "quicsteer: cannot write %s\n", json_path.c_str());
        status = 1;
      } else {
        std::printf("  statistics written to %s\n", json_path.c_str());
      }
    }
    if (leaked != 0) {
      std::fprintf(stderr, "quicsteer: %lld mbufs were not returned to the pool\n", static_cast<long long>(leaked));
      status = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quicsteer: %s\n", e.what());
    status = 1;
  }
  qs::attach_telemetry(nullptr);
  if (pdump) rte_pdump_uninit();
  rte_eal_cleanup();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  handle_stop_signals();
  std::vector<std::string> all(argv + 1, argv + argc);
  if (!all.empty() && all[0] == "--check") {
    if (all.size() != 2) {
      usage(stderr);
      return 2;
    }
    const auto profile = qs::load_profile_or_report(all[1]);
    if (!profile) return 1;
    std::fputs(qs::dump_profile(*profile).c_str(), stdout);
    return 0;
  }
  if (all.size() == 1 && all[0] == "--list-counters") {
    qs::print_counter_list(stdout);
    return 0;
  }
  if (!all.empty() && (all[0] == "--help" || all[0] == "-h")) {
    usage(stdout);
    return 0;
  }
  auto [eal, app, has_separator] = qs::split_eal_args(all);
  if (!has_separator) {
    // No "--": everything is for the application.
    app = eal;
    eal.clear();
  }
  AppArgs args;
  if (!parse_app_args(app, args)) return 2;
  const auto loaded = qs::load_profile_or_report(args.profile);
  if (!loaded) return 1;
  const qs::Profile& profile = *loaded;
  if (eal.empty()) eal = profile.eal;
  if (!check_output_path(stats_json_path(profile, args), args.stats_json_set ? "--stats-json" : "stats.json"))
    return 1;
  return run(profile, eal, args);
}
