// quicsteer [EAL args] -- --profile FILE [--duration SECONDS] [--stats-json FILE]
// quicsteer --check PROFILE
//
// With no EAL arguments the profile's `eal` list is used. The main lcore runs
// the control loop (signals, the duration, the live table); the profile's
// lcores run the data path.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/dataplane.h"
#include "dataplane/eal_init.h"
#include "dataplane/profile.h"

namespace {

std::atomic<bool> g_signalled{false};

void on_signal(int) { g_signalled.store(true); }

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: quicsteer [EAL args] -- --profile FILE [--duration SECONDS] [--stats-json FILE]\n"
               "       quicsteer --check PROFILE\n"
               "  --profile FILE      the deployment profile (YAML); its `eal` list is used when no EAL\n"
               "                      arguments come before --\n"
               "  --duration SECONDS  stop by itself after this long (overrides duration_s)\n"
               "  --stats-json FILE   write the end-of-run statistics here (overrides stats.json)\n"
               "  --check PROFILE     validate the profile, print it resolved, start nothing\n");
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
      char* end = nullptr;
      out.duration = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || out.duration < 0) {
        std::fprintf(stderr, "quicsteer: --duration wants a number of seconds >= 0, not '%s'\n", v->c_str());
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

long free_hugepages() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long value = 0;
  while (in >> key >> value) {
    if (key == "HugePages_Free:") return value;
    in.ignore(256, '\n');
  }
  return 0;
}

// Virtual-device profiles also run where no hugepages are reserved.
void fall_back_to_no_huge(const qs::Profile& p, std::vector<std::string>& eal) {
  if (has_arg(eal, "--no-huge") || free_hugepages() > 0) return;
  for (const auto& port : p.ports)
    if (!port.is_vdev()) return;
  std::printf("no free hugepages: running the virtual-device profile with --no-huge\n");
  eal.push_back("--no-huge");
  if (!has_arg(eal, "-m") && !has_arg(eal, "--socket-mem")) {
    eal.push_back("-m");
    eal.push_back("1024");
  }
  if (!has_arg(eal, "--no-shconf")) eal.push_back("--no-shconf");
}

int run(const qs::Profile& profile, std::vector<std::string> eal_args, const AppArgs& args) {
  fall_back_to_no_huge(profile, eal_args);
  try {
    qs::init_eal("quicsteer", eal_args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  int status = 0;
  try {
    qs::Dataplane dp(profile);
    const double duration = args.duration >= 0 ? args.duration : profile.duration_s;
    const std::string json_path = args.stats_json_set ? args.stats_json : profile.stats.json_path;
    std::printf("quicsteer: %zu lcores, %zu owners, policy %s, %s\n", profile.lcores.size(),
                profile.steering.owner_lcores.size(),
                qs::policy_name(profile.backpressure.policy),
                duration > 0 ? ("running for " + std::to_string(duration) + " s").c_str() : "running until SIGINT/SIGTERM");
    dp.launch();
    const auto start = std::chrono::steady_clock::now();
    auto last_table = start;
    qs::StatsSnapshot prev = dp.snapshot();
    while (!g_signalled.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      dp.sample_port_counters();  // so that a device's counter reset is seen
      const auto now = std::chrono::steady_clock::now();
      if (duration > 0 && std::chrono::duration<double>(now - start).count() >= duration) break;
      if (profile.stats.period_ms != 0 &&
          now - last_table >= std::chrono::milliseconds(profile.stats.period_ms)) {
        last_table = now;
        qs::StatsSnapshot snap = dp.snapshot();
        qs::print_stats_table(stdout, snap, prev);
        prev = std::move(snap);
      }
    }
    dp.stop();
    const qs::StatsSnapshot final_stats = dp.snapshot();
    const std::int64_t leaked = dp.close_ports_and_count_leaks();
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
  rte_eal_cleanup();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
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
  return run(profile, eal, args);
}
