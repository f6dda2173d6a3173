// bench_backpressure: park vs drop under an offered load one owner cannot
// carry, with the offered load independent of whether anybody polls.
//
//   bench_backpressure [--runs N] [--seconds S] [--cost CYCLES] [--overload X]
//                      [--idle-sleep-us N] [--memory auto|hugepages|no-huge] [--json FILE]
//
// net_pcap replays only when polled, so it cannot show what a parked queue
// costs. Here the main lcore is the wire: it offers quicgen frames at a fixed
// rate (overload x the owner's capacity) into the RX rte_ring of a ring port,
// the stand-in for the NIC's RX descriptors. A frame that finds the ring full
// is missed at the RX queue, exactly what a NIC counts as imissed: dropped
// before any CPU touched it, and never retried. The generator also empties the
// TX ring: what arrives there is the goodput.
//
// Layout (fixed, named in the output): lcore 1 receives (no owner), lcore 2
// is the only owner, made slow by its per-lcore cost_cycles; the generator
// (main lcore 0) and the receiver share CPU 1, the owner has CPU 0 to itself.
// Per run and policy, over a window after a warm-up: offered, missed at RX,
// software drops (the dataplane's counters), delivered, and CPU cycles per
// offered packet twice: the lcores' busy_cycles (TSC time of iterations that
// moved packets; a preempted lcore's wait is counted too) and the kernel's CPU
// time of the lcore threads (idle polling counted too). Runs alternate park
// and drop; medians and min..max are reported.
//
// EAL memory as the other benchmarks choose it (scripts/bench/lib/memory.sh,
// quicsteer's choose_memory): with --memory auto (the default), hugepages
// when the 1024 MB that -m asks for are free on a mounted hugetlbfs, ordinary
// pages (--no-huge) otherwise; hugepages insists on them, no-huge on ordinary
// pages. The output and the JSON's scenario.memory say which.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/runtime/eal_init.h"
#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"

namespace {

using qs::test::RingPort;

constexpr unsigned kRxRingSize = 1024;  // the "NIC's" RX descriptors
constexpr unsigned kTxRingSize = 1 << 14;
constexpr unsigned kHandoffRing = 256;
constexpr unsigned kHighWatermark = 224;
constexpr unsigned kLowWatermark = 64;
constexpr unsigned kGenBurst = 64;

struct Options {
  unsigned runs = 3;
  double seconds = 2.0;
  double warmup = 0.3;
  unsigned cost = 3000;   // owner's synthetic cycles per packet (as in configs/lossless.yaml, drop.yaml)
  double overload = 2.0;  // offered / owner capacity
  unsigned idle_sleep_us = 50;  // the shipped profiles' idle back-off
  std::string memory = "auto";  // asked: auto, hugepages or no-huge
  std::string json;
};

constexpr long kMemoryMb = 1024;  // EAL -m

// The EAL memory run on: "hugepages" or "no-huge", and a line that says why.
struct Memory {
  std::string kind;
  std::string text;
};

// MB of hugepages of the default size free, 0 without a mounted hugetlbfs
// (scripts/bench/lib/memory.sh's measure).
long free_hugepage_mb() {
  bool mounted = false;
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type, rest;
  while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) mounted = mounted || type == "hugetlbfs";
  if (!mounted) return 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  long value = 0, free_pages = 0, page_kb = 0;
  while (in >> key >> value) {
    if (key == "HugePages_Free:") free_pages = value;
    if (key == "Hugepagesize:") page_kb = value;
    in.ignore(256, '\n');
  }
  return free_pages * page_kb / 1024;
}

std::string profile_yaml(const std::string& policy, unsigned cost, unsigned idle_sleep_us) {
  return "ports:\n"
         "  - {name: wire, device: \"{DEVICE}\", rx_queues: 1, tx_queues: 1, rss: false}\n"
         "mempool: {mbufs: 16383, cache: 256}\n"
         "lcores:\n"
         "  - {id: 1, rx: [\"wire:0\"]}\n"
         "  - {id: 2, owner: true, cost_cycles: " + std::to_string(cost) + "}\n"
         "rings: {size: " + std::to_string(kHandoffRing) + ", burst: 32}\n" +
         qs::test::steering_yaml({2}) +
         "backpressure: {policy: " + policy + ", high_watermark: " + std::to_string(kHighWatermark) +
         ", low_watermark: " + std::to_string(kLowWatermark) + ", park_timeout_us: 10000}\n"
         "action: {type: forward, tx_port: wire}\n"
         "polling: {idle_sleep_us: " + std::to_string(idle_sleep_us) + ", idle_polls_before_sleep: 256}\n"
         "stats: {period_ms: 0}\n";
}

// What the wire side counts, cumulative over a run.
struct WireCounts {
  std::uint64_t offered = 0, missed_rx = 0, no_mbuf = 0, delivered = 0;
};

// CPU time the kernel charged to an lcore's thread (EAL names it
// rte-worker-<id>), in ns: unlike busy_cycles, which is TSC time between two
// iterations and so also counts the time a preempted lcore waited for its CPU.
std::uint64_t lcore_cpu_ns(unsigned lcore) {
  const std::string want = "rte-worker-" + std::to_string(lcore);
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != want) continue;
    std::ifstream sched(task.path() / "schedstat");
    std::uint64_t on_cpu_ns = 0;
    if (sched >> on_cpu_ns) return on_cpu_ns;
  }
  throw std::runtime_error("no thread " + want + " with a readable /proc/self/task/*/schedstat");
}

struct Sample {
  WireCounts wire;
  qs::StatsSnapshot stats;
  std::uint64_t tsc = 0;
  std::uint64_t cpu_ns_receiver = 0, cpu_ns_owner = 0;
};

Sample sample(const WireCounts& w, const qs::Dataplane& dp) {
  Sample s{w, dp.snapshot(), rte_rdtsc()};
  s.cpu_ns_receiver = lcore_cpu_ns(1);
  s.cpu_ns_owner = lcore_cpu_ns(2);
  return s;
}

struct RunResult {
  std::string policy;
  double window_s = 0;
  std::uint64_t offered = 0, missed_rx = 0, no_mbuf = 0, received = 0, delivered = 0, parks = 0;
  std::uint64_t sw_drops = 0;        // back-pressure losses in software: ring_full, park_timeout, shed_new
  std::uint64_t unclassifiable = 0;  // malformed / not UDP: dropped whatever the policy
  std::uint64_t other_drops = 0;     // tx_full, shutdown
  std::uint64_t busy_total = 0, busy_receiver = 0, busy_owner = 0;
  double cpu_cycles_receiver = 0, cpu_cycles_owner = 0;  // kernel CPU time, in TSC cycles
  // Whole-run accounting: every frame the RX ring accepted was delivered,
  // dropped (counted, any reason) or left in the RX ring at the stop.
  bool accounted = false;
  std::int64_t mbufs_leaked = -1;

  double offered_mpps() const { return double(offered) / window_s / 1e6; }
  double goodput_mpps() const { return double(delivered) / window_s / 1e6; }
  double missed_rx_pct() const { return offered ? 100.0 * double(missed_rx + no_mbuf) / double(offered) : 0; }
  double sw_drop_pct() const { return offered ? 100.0 * double(sw_drops) / double(offered) : 0; }
  double unclassifiable_pct() const { return offered ? 100.0 * double(unclassifiable) / double(offered) : 0; }
  double cycles_per_offered() const { return offered ? double(busy_total) / double(offered) : 0; }
  double receiver_cycles_per_offered() const { return offered ? double(busy_receiver) / double(offered) : 0; }
  double owner_cycles_per_offered() const { return offered ? double(busy_owner) / double(offered) : 0; }
  double cpu_time_cycles_per_offered() const {
    return offered ? (cpu_cycles_receiver + cpu_cycles_owner) / double(offered) : 0;
  }
  double receiver_cpu_time_cycles_per_offered() const { return offered ? cpu_cycles_receiver / double(offered) : 0; }
};

std::uint64_t busy_of(const qs::StatsSnapshot& s, unsigned lcore) {
  for (const auto& l : s.lcores)
    if (l.lcore == lcore) return l.busy_cycles;
  return 0;
}

RunResult run_once(const std::string& policy, const Options& opt, double offered_pps,
                   const std::vector<std::vector<std::uint8_t>>& frames) {
  RingPort port(1, kRxRingSize, 1, kTxRingSize);
  const qs::Profile profile = qs::test::parse_test_profile(profile_yaml(policy, opt.cost, opt.idle_sleep_us), port.device());
  qs::Dataplane dp(profile);
  rte_mempool* pool = dp.pool();
  rte_ring* rx = port.rx(0);
  rte_ring* tx = port.tx(0);

  const double hz = double(rte_get_tsc_hz());
  const double pkts_per_tsc = offered_pps / hz;
  WireCounts w;
  std::size_t next_frame = 0;
  rte_mbuf* mbufs[kGenBurst];
  void* taken[kGenBurst];

  auto empty_tx = [&] {
    unsigned n, total = 0;
    while ((n = rte_ring_dequeue_burst(tx, taken, kGenBurst, nullptr)) != 0) {
      rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(taken), n);
      w.delivered += n;
      total += n;
    }
    return total;
  };

  dp.launch();
  const std::uint64_t t0 = rte_rdtsc();
  const std::uint64_t window_start = t0 + std::uint64_t(opt.warmup * hz);
  const std::uint64_t window_end = window_start + std::uint64_t(opt.seconds * hz);
  Sample a, b;
  bool have_a = false;
  for (;;) {
    const std::uint64_t now = rte_rdtsc();
    if (!have_a && now >= window_start) {
      a = sample(w, dp);
      have_a = true;
    }
    if (now >= window_end) {
      b = sample(w, dp);
      break;
    }
    // Frames due by now at the offered rate; the wire does not wait for us.
    const std::uint64_t due = std::uint64_t(double(now - t0) * pkts_per_tsc);
    while (w.offered < due) {
      const unsigned want = unsigned(std::min<std::uint64_t>(due - w.offered, kGenBurst));
      const unsigned room = std::min(want, rte_ring_free_count(rx));
      unsigned built = 0;
      if (room > 0 && rte_pktmbuf_alloc_bulk(pool, mbufs, room) == 0) {
        for (; built < room; ++built) {
          const auto& f = frames[next_frame];
          next_frame = next_frame + 1 == frames.size() ? 0 : next_frame + 1;
          std::memcpy(rte_pktmbuf_append(mbufs[built], std::uint16_t(f.size())), f.data(), f.size());
        }
      } else if (room > 0) {
        w.no_mbuf += room;
      }
      // Single producer: the free count checked above can only have grown.
      const unsigned enq = rte_ring_enqueue_burst(rx, reinterpret_cast<void**>(mbufs), built, nullptr);
      if (enq < built) rte_pktmbuf_free_bulk(mbufs + enq, built - enq);
      w.missed_rx += want - room + (built - enq);
      w.offered += want;
    }
    empty_tx();
    // Always, even when frames were due: a generator that never sleeps would
    // take the receiver's CPU away in timeslices of milliseconds. The rate
    // stays exact (what is due is computed from the TSC); a batch is ~100 us
    // of traffic (the sleep plus the kernel's 50 us timer slack), well under
    // the RX ring at these rates.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  dp.stop();
  empty_tx();
  std::uint64_t never_received = 0;
  void* m;
  while (rte_ring_dequeue(rx, &m) == 0) {
    rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    ++never_received;
  }
  const qs::StatsSnapshot final_stats = dp.snapshot();

  RunResult r;
  r.policy = policy;
  r.window_s = double(b.tsc - a.tsc) / hz;
  r.offered = b.wire.offered - a.wire.offered;
  r.missed_rx = b.wire.missed_rx - a.wire.missed_rx;
  r.no_mbuf = b.wire.no_mbuf - a.wire.no_mbuf;
  r.delivered = b.wire.delivered - a.wire.delivered;
  r.received = b.stats.rx_total.rx - a.stats.rx_total.rx;
  auto dropped = [&](std::initializer_list<qs::DropReason> why) {
    std::uint64_t n = 0;
    for (qs::DropReason d : why) n += b.stats.drops_total[std::size_t(d)] - a.stats.drops_total[std::size_t(d)];
    return n;
  };
  using qs::DropReason;
  r.sw_drops = dropped({DropReason::kRingFull, DropReason::kParkTimeout, DropReason::kShedNew});
  r.unclassifiable = dropped({DropReason::kMalformed, DropReason::kNotUdp});
  r.other_drops = dropped({DropReason::kTxFull, DropReason::kShutdown});
  r.parks = b.stats.rx_total.parks - a.stats.rx_total.parks;
  r.busy_total = b.stats.busy_cycles_total - a.stats.busy_cycles_total;
  r.busy_receiver = busy_of(b.stats, 1) - busy_of(a.stats, 1);
  r.busy_owner = busy_of(b.stats, 2) - busy_of(a.stats, 2);
  r.cpu_cycles_receiver = double(b.cpu_ns_receiver - a.cpu_ns_receiver) * hz / 1e9;
  r.cpu_cycles_owner = double(b.cpu_ns_owner - a.cpu_ns_owner) * hz / 1e9;
  const std::uint64_t accepted = w.offered - w.missed_rx - w.no_mbuf;
  r.accounted = accepted == w.delivered + final_stats.drops_sum() + never_received;
  r.mbufs_leaked = dp.close_ports_and_count_leaks();
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Metric {
  const char* name;
  std::function<double(const RunResult&)> get;
};

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {
      {"offered_mpps", [](const RunResult& r) { return r.offered_mpps(); }},
      {"goodput_mpps", [](const RunResult& r) { return r.goodput_mpps(); }},
      {"missed_at_rx_pct", [](const RunResult& r) { return r.missed_rx_pct(); }},
      {"software_drop_pct", [](const RunResult& r) { return r.sw_drop_pct(); }},
      {"unclassifiable_pct", [](const RunResult& r) { return r.unclassifiable_pct(); }},
      {"cycles_per_offered", [](const RunResult& r) { return r.cycles_per_offered(); }},
      {"receiver_cycles_per_offered", [](const RunResult& r) { return r.receiver_cycles_per_offered(); }},
      {"owner_cycles_per_offered", [](const RunResult& r) { return r.owner_cycles_per_offered(); }},
      {"cpu_time_cycles_per_offered", [](const RunResult& r) { return r.cpu_time_cycles_per_offered(); }},
      {"receiver_cpu_time_cycles_per_offered",
       [](const RunResult& r) { return r.receiver_cpu_time_cycles_per_offered(); }},
  };
  return m;
}

struct Summary {
  std::map<std::string, double> med, lo, hi;
};

Summary summarise(const std::vector<RunResult>& runs) {
  Summary s;
  for (const auto& m : metrics()) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(m.get(r));
    s.med[m.name] = median(v);
    s.lo[m.name] = *std::min_element(v.begin(), v.end());
    s.hi[m.name] = *std::max_element(v.begin(), v.end());
  }
  return s;
}

std::string run_json(const RunResult& r) {
  std::ostringstream o;
  o << "{\"window_s\": " << r.window_s << ", \"offered\": " << r.offered << ", \"missed_at_rx\": " << r.missed_rx
    << ", \"no_mbuf\": " << r.no_mbuf << ", \"received\": " << r.received << ", \"software_drops\": " << r.sw_drops
    << ", \"unclassifiable\": " << r.unclassifiable << ", \"other_drops\": " << r.other_drops
    << ", \"delivered\": " << r.delivered << ", \"parks\": " << r.parks << ", \"busy_cycles\": " << r.busy_total
    << ", \"busy_cycles_receiver\": " << r.busy_receiver << ", \"busy_cycles_owner\": " << r.busy_owner;
  for (const auto& m : metrics()) o << ", \"" << m.name << "\": " << m.get(r);
  o << ", \"accounted\": " << (r.accounted ? "true" : "false") << ", \"mbufs_leaked\": " << r.mbufs_leaked << "}";
  return o.str();
}

std::string summary_json(const Summary& s) {
  std::ostringstream o;
  o << "{";
  bool first = true;
  for (const auto& m : metrics()) {
    o << (first ? "" : ", ") << "\"" << m.name << "\": {\"median\": " << s.med.at(m.name)
      << ", \"min\": " << s.lo.at(m.name) << ", \"max\": " << s.hi.at(m.name) << "}";
    first = false;
  }
  o << "}";
  return o.str();
}

[[noreturn]] void usage_exit(const std::string& why) {
  std::fprintf(stderr,
               "bench_backpressure: %s\n"
               "usage: bench_backpressure [--runs N] [--seconds S] [--cost CYCLES] [--overload X]\n"
               "                          [--idle-sleep-us N] [--memory auto|hugepages|no-huge] [--json FILE]\n",
               why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage_exit(a + " needs a value");
    const std::string v = argv[++i];
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    const bool number = end != v.c_str() && *end == '\0' && x >= 0;
    if (a == "--json") {
      o.json = v;
      continue;
    }
    if (a == "--memory") {
      if (v != "auto" && v != "hugepages" && v != "no-huge") usage_exit("--memory wants auto, hugepages or no-huge");
      o.memory = v;
      continue;
    }
    if (!number) usage_exit(a + " wants a number > 0, not '" + v + "'");
    if (a == "--runs") o.runs = unsigned(x);
    else if (a == "--seconds") o.seconds = x;
    else if (a == "--cost") o.cost = unsigned(x);
    else if (a == "--overload") o.overload = x;
    else if (a == "--idle-sleep-us") o.idle_sleep_us = unsigned(x);
    else usage_exit("unknown argument '" + a + "'");
  }
  if (o.runs == 0) usage_exit("--runs must be at least 1");
  if (o.cost == 0 || o.seconds <= 0) usage_exit("--cost and --seconds must be above 0");
  if (o.overload <= 1) usage_exit("--overload must exceed 1: the point is more than the owner can take");
  return o;
}

int bench(const Options& opt, const Memory& memory) {
  qs::traffic::TrafficOptions to = qs::test::traffic_options(2000, 1, 7);
  to.malformed = 0;  // software drops then mean back-pressure only
  const qs::traffic::Traffic traffic = qs::traffic::generate_traffic(to);
  std::vector<std::vector<std::uint8_t>> frames;
  std::uint64_t bytes = 0;
  for (const auto& p : traffic.packets) {
    frames.push_back(p.frame);
    bytes += p.frame.size();
  }

  const double hz = double(rte_get_tsc_hz());
  // The owner cannot do better than one packet per cost_cycles.
  const double capacity_pps = hz / double(opt.cost);
  const double offered_pps = opt.overload * capacity_pps;
  std::printf("back-pressure: %u CPUs, lcores 0 (generator) and 1 (receiver) on CPU 1, 2 (owner) on CPU 0\n",
              std::thread::hardware_concurrency());
  std::printf("  owner cost %u TSC cycles/packet (TSC %.3f GHz): capacity at most %.3f Mpps; offered %.3f Mpps "
              "(%.2fx), %zu quicgen frames of %.0f bytes on average\n",
              opt.cost, hz / 1e9, capacity_pps / 1e6, offered_pps / 1e6, opt.overload, frames.size(),
              double(bytes) / double(frames.size()));
  std::printf("  RX ring %u, hand-off ring %u (park: high %u / low %u), idle back-off %u us; %u run(s) of %.1f s "
              "after %.1f s warm-up\n",
              kRxRingSize, kHandoffRing, kHighWatermark, kLowWatermark, opt.idle_sleep_us, opt.runs, opt.seconds,
              opt.warmup);

  std::map<std::string, std::vector<RunResult>> results;
  const char* policies[] = {"park", "drop"};
  bool ok = true;
  for (unsigned run = 0; run < opt.runs; ++run) {
    for (const char* policy : policies) {
      RunResult r = run_once(policy, opt, offered_pps, frames);
      std::printf("  run %u %-4s offered %.3f Mpps, goodput %.3f Mpps, missed at RX %5.1f%%, software drops "
                  "%5.1f%% (+%.1f%% unclassifiable),\n"
                  "             per offered packet: busy cycles %.0f (receiver %.0f), CPU time %.0f cycles "
                  "(receiver %.0f)%s\n",
                  run + 1, policy, r.offered_mpps(), r.goodput_mpps(), r.missed_rx_pct(), r.sw_drop_pct(),
                  r.unclassifiable_pct(), r.cycles_per_offered(), r.receiver_cycles_per_offered(),
                  r.cpu_time_cycles_per_offered(), r.receiver_cpu_time_cycles_per_offered(),
                  r.accounted && r.mbufs_leaked == 0 ? "" : "  [NOT ACCOUNTED FOR]");
      ok = ok && r.accounted && r.mbufs_leaked == 0;
      results[policy].push_back(std::move(r));
    }
  }
  const Summary park = summarise(results["park"]);
  const Summary drop = summarise(results["drop"]);
  const double goodput_ratio = park.med.at("goodput_mpps") / drop.med.at("goodput_mpps");
  const double cycles_ratio = park.med.at("cycles_per_offered") / drop.med.at("cycles_per_offered");
  const double rx_cycles_ratio =
      park.med.at("receiver_cycles_per_offered") / drop.med.at("receiver_cycles_per_offered");
  const double cpu_ratio = park.med.at("cpu_time_cycles_per_offered") / drop.med.at("cpu_time_cycles_per_offered");
  const double rx_cpu_ratio =
      park.med.at("receiver_cpu_time_cycles_per_offered") / drop.med.at("receiver_cpu_time_cycles_per_offered");

  std::printf("\n  %-6s %9s %9s %10s %9s %10s %10s %10s %10s\n", "policy", "offered", "goodput", "missed@RX",
              "sw drops", "busy/off", "rx busy", "cpu/off", "rx cpu");
  for (const auto& [name, s] : {std::pair<const char*, const Summary&>{"park", park}, {"drop", drop}}) {
    std::printf("  %-6s %7.3f M %7.3f M %9.1f%% %8.1f%% %10.0f %10.0f %10.0f %10.0f\n", name,
                s.med.at("offered_mpps"), s.med.at("goodput_mpps"), s.med.at("missed_at_rx_pct"),
                s.med.at("software_drop_pct"), s.med.at("cycles_per_offered"), s.med.at("receiver_cycles_per_offered"),
                s.med.at("cpu_time_cycles_per_offered"), s.med.at("receiver_cpu_time_cycles_per_offered"));
  }
  std::printf("  medians of %u runs; cycles are TSC cycles per offered packet: busy = the lcores' busy_cycles,\n"
              "  cpu = the kernel's CPU time of the lcore threads. park/drop: goodput %.3f (target >= 0.95),\n"
              "  busy cycles %.3f (target < 1; receiver %.3f), CPU time %.3f (receiver %.3f)\n",
              opt.runs, goodput_ratio, cycles_ratio, rx_cycles_ratio, cpu_ratio, rx_cpu_ratio);

  if (!opt.json.empty()) {
    std::ostringstream o;
    o << "{\n  \"scenario\": {\"cpus\": " << std::thread::hardware_concurrency()
      << ", \"pinning\": \"lcore 0 generator @ CPU 1, lcore 1 receiver @ CPU 1, lcore 2 owner @ CPU 0\""
      << ", \"owner_cost_cycles\": " << opt.cost << ", \"tsc_hz\": " << std::uint64_t(hz)
      << ", \"owner_capacity_mpps_bound\": " << capacity_pps / 1e6 << ", \"offered_mpps\": " << offered_pps / 1e6
      << ", \"memory\": \"" << memory.kind << "\", \"overload\": " << opt.overload << ", \"idle_sleep_us\": " << opt.idle_sleep_us << ", \"rx_ring\": " << kRxRingSize << ", \"handoff_ring\": " << kHandoffRing
      << ", \"high_watermark\": " << kHighWatermark << ", \"low_watermark\": " << kLowWatermark
      << ", \"runs\": " << opt.runs << ", \"window_s\": " << opt.seconds << ", \"warmup_s\": " << opt.warmup
      << ", \"frames\": " << frames.size() << ", \"mean_frame_bytes\": " << double(bytes) / double(frames.size())
      << "},\n";
    for (const char* policy : policies) {
      o << "  \"" << policy << "\": {\"median\": " << summary_json(policy == std::string("park") ? park : drop)
        << ",\n    \"runs\": [";
      const auto& runs = results[policy];
      for (std::size_t i = 0; i < runs.size(); ++i) o << (i ? ",\n      " : "\n      ") << run_json(runs[i]);
      o << "]},\n";
    }
    o << "  \"ratios\": {\"park_vs_drop_goodput\": " << goodput_ratio
      << ", \"park_vs_drop_cycles_per_offered\": " << cycles_ratio
      << ", \"park_vs_drop_receiver_cycles_per_offered\": " << rx_cycles_ratio
      << ", \"park_vs_drop_cpu_time_per_offered\": " << cpu_ratio
      << ", \"park_vs_drop_receiver_cpu_time_per_offered\": " << rx_cpu_ratio << "},\n"
      << "  \"accounted\": " << (ok ? "true" : "false") << "\n}\n";
    std::ofstream f(opt.json);
    f << o.str();
    if (!f) {
      std::fprintf(stderr, "bench_backpressure: cannot write %s\n", opt.json.c_str());
      return 1;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "bench_backpressure: a run lost track of packets or mbufs (see [NOT ACCOUNTED FOR])\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  const long free_mb = free_hugepage_mb();
  Memory memory;
  if (opt.memory == "hugepages" && free_mb < kMemoryMb) {
    std::fprintf(stderr,
                 "bench_backpressure: hugepages wanted, %ld MB free on a mounted hugetlbfs, %ld MB needed "
                 "(scripts/setup.sh reserves them as root)\n",
                 free_mb, kMemoryMb);
    return 1;
  }
  if (opt.memory == "hugepages" || (opt.memory == "auto" && free_mb >= kMemoryMb)) {
    memory = {"hugepages", "hugepages (" + std::to_string(free_mb) + " MB free, -m " + std::to_string(kMemoryMb) +
                               " reserves its amount at start)"};
  } else if (opt.memory == "no-huge") {
    memory = {"no-huge", "ordinary pages (--no-huge, as asked)"};
  } else {
    memory = {"no-huge", "ordinary pages (--no-huge): " + std::to_string(free_mb) + " MB of hugepages free, " +
                             std::to_string(kMemoryMb) + " MB wanted"};
  }
  std::printf("back-pressure: EAL memory: %s\n", memory.text.c_str());
  // Three lcores on the two CPUs, placed so that the owner has a CPU to
  // itself and the light ones (generator, receiver) share the other. On
  // hugepages --huge-unlink: no other process maps them (--no-shconf), and
  // files left in hugetlbfs would keep them from the next run.
  if (!qs::init_eal("bench_backpressure",
                    {"--lcores", "0@1,1@1,2@0", memory.kind == "hugepages" ? "--huge-unlink" : "--no-huge", "-m",
                     std::to_string(kMemoryMb), "--no-shconf", "--no-pci", "--log-level", "*:warning"}))
    return 1;
  int status = 1;
  try {
    status = bench(opt, memory);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_backpressure: %s\n", e.what());
  }
  rte_eal_cleanup();
  return status;
}
