// What two instances that probe on their own cost when a backend dies
// (issue 39, README "Health checks"): the HealthBook of each, on one made-up
// clock, with its own random phase (each instance starts, and so schedules
// its rounds, when it does), and answers after a round-trip time. A backend
// dies at a random moment; each book finds it down after its own next
// `fall` rounds. Reported, over many trials: the detection time (death ->
// marked down, before the control loop's rebuild, which adds at most one
// 20 ms turn) and the disagreement window (one instance down, the other not
// yet), during which a new connection whose 4-tuple hashes to the dead
// backend on one instance hashes elsewhere on the other: 1/N of new
// connections, and only those whose packets cross instances within the
// window suffer. The same for a backend coming back (rise).
//
// usage: health_disagreement [TRIALS] [INTERVAL_MS TIMEOUT_MS RISE FALL]   (prints one JSON object)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "dataplane/runtime/health_book.h"

namespace {

using qs::BackendHealth;
using qs::HealthBook;

struct Instance {
  HealthBook book;
  std::uint64_t start_us;
  Instance(const qs::HealthChecksConfig& c, std::uint64_t seed, std::uint64_t start) : book(c, seed), start_us(start) {}
};

// Runs both books from 0 until each has seen `want` for backend 0 after
// `event_us` (alive before, dead after for kDown; the reverse for kUp).
// Returns each one's time of the change, in µs after the event.
std::pair<double, double> trial(const qs::HealthChecksConfig& c, std::mt19937_64& rng, BackendHealth want) {
  const std::uint64_t interval = c.interval_ms * 1000ull;
  std::uniform_int_distribution<std::uint64_t> phase(0, interval - 1);
  std::vector<qs::BackendConfig> backends(4);
  for (unsigned i = 0; i < 4; ++i) {
    backends[i].name = std::string("b").append(std::to_string(i));
    backends[i].slot = std::uint16_t(i);
  }
  Instance a(c, rng(), phase(rng)), b(c, rng(), phase(rng));
  const std::uint64_t event = 10 * interval + phase(rng);  // well after both settled
  const std::uint64_t rtt = 300;                           // µs, a LAN's
  std::uint64_t when[2] = {0, 0};
  Instance* both[2] = {&a, &b};
  for (Instance* x : both) x->book.set_backends(backends, x->start_us);
  struct Pending {
    std::uint64_t at;
    qs::ProbeAnswer answer;
    int who;
  };
  std::vector<Pending> pending;
  const auto alive = [&](std::uint64_t t) { return want == BackendHealth::kDown ? t < event : t >= event; };
  for (std::uint64_t now = 0; now < event + 200 * interval && (when[0] == 0 || when[1] == 0); now += 100) {
    for (int k = 0; k < 2; ++k) {
      Instance& x = *both[k];
      if (now < x.start_us) continue;
      for (auto it = pending.begin(); it != pending.end();) {
        if (it->who == k && it->at <= now) {
          x.book.answer(it->answer, now);
          it = pending.erase(it);
        } else {
          ++it;
        }
      }
      x.book.expire(now);
      x.book.start_due(now, [&](const HealthBook::Probe& p) {
        if (p.backend == 0 && !alive(now)) return;  // dead: no answer
        qs::ProbeAnswer ans;
        const qs::HealthTarget& t = c.targets[p.target];
        ans.ipv6 = t.ipv6;
        ans.source = t.address;
        ans.source_port = t.udp_port;
        ans.dcid_len = ans.scid_len = qs::kProbeCidLen;
        std::copy(p.scid.begin(), p.scid.end(), ans.dcid.begin());
        std::copy(p.dcid.begin(), p.dcid.end(), ans.scid.begin());
        pending.push_back({now + rtt, ans, k});
      });
      if (now >= event && when[k] == 0 && x.book.rows()[0].health == want) when[k] = now - event + 1;
    }
  }
  return {double(when[0]), double(when[1])};
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 400;
  qs::HealthChecksConfig c;
  c.enabled = true;
  if (argc > 5) {
    c.interval_ms = std::uint32_t(std::atoi(argv[2]));
    c.timeout_ms = std::uint32_t(std::atoi(argv[3]));
    c.rise = std::uint32_t(std::atoi(argv[4]));
    c.fall = std::uint32_t(std::atoi(argv[5]));
  }
  qs::HealthTarget t;
  t.address = {10, 0, 0, 1};
  t.udp_port = 443;
  c.targets = {t};
  std::mt19937_64 rng(42);
  std::printf("{\"interval_ms\": %u, \"timeout_ms\": %u, \"rise\": %u, \"fall\": %u, \"trials\": %d",
              c.interval_ms, c.timeout_ms, c.rise, c.fall, trials);
  for (const BackendHealth want : {BackendHealth::kDown, BackendHealth::kUp}) {
    std::vector<double> detect, window;
    for (int i = 0; i < trials; ++i) {
      const auto [x, y] = trial(c, rng, want);
      detect.push_back(x / 1000);
      detect.push_back(y / 1000);
      window.push_back(std::abs(x - y) / 1000);
    }
    const char* what = want == BackendHealth::kDown ? "down" : "up";
    std::printf(", \"%s\": {\"detect_ms_median\": %.0f, \"detect_ms_p99\": %.0f, \"detect_ms_max\": %.0f, "
                "\"window_ms_median\": %.0f, \"window_ms_p99\": %.0f, \"window_ms_max\": %.0f}",
                what, percentile(detect, 0.5), percentile(detect, 0.99), percentile(detect, 1.0),
                percentile(window, 0.5), percentile(window, 0.99), percentile(window, 1.0));
  }
  std::printf("}\n");
  return 0;
}
