// What a random cache line costs this host, outside quicsteer: the floor
// under quicsteer's cost at scale (scripts/bench/scale.sh, issue 40). A live
// connection's lookup in a shard far larger than the caches reads one
// random 64-octet slot; this loop does the same with nothing else of
// quicsteer around it, so that "1M connections cost N cycles more than 1k"
// can be set against what the machine charges for the line.
//
// Shaped like an owner's burst: for each of B packets, W rounds of
// arithmetic on four independent chains (the classification's work, in
// registers) and a prefetch of one random slot of a table of SIZE MB; then,
// for each packet, a read of the slot's key and a store into it (the
// connection stage's lookup and its last-seen time). Three ways per size:
//   prefetched   as above, each prefetch after its packet's work;
//   together     the burst's prefetches first, back to back, then the
//                work (quicsteer's receiver hashes a chunk's DCIDs and
//                prefetches their slots in one loop right after parsing it):
//                more misses asked for at once than the core has fill
//                buffers, if that costs here;
//   plain        the same without the prefetches (the out-of-order core
//                alone overlaps what it can);
//   chase        each slot names the next: one miss at a time, the latency.
//   --near-loads L [--near-kb K]: each packet's work also loads L random
//                lines of a buffer of K KB (default 1024: more than the
//                L1, less than the L2), its result feeding the work: what
//                else of the owner's misses the L1 while the table's lines
//                are on their way, and whether the lines streaming through
//                the L2 push it out.
// TSC cycles per packet (per slot for chase). A size that fits the L1 is the
// base: another size's cycles above it are what a random line costs there.
//
// usage: random_line_cost [--hugepages [--hugepage-mb 2|1024]] [--work W] [--burst B]
//                         [--near-loads L [--near-kb K]] [--seconds S] SIZE_MB...
// --hugepage-mb 1024 maps 1 GB pages (reserve them first:
// /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages): whether a
// line's cost at a size comes from the guest's page tables (one 1 GB page
// covers what 512 of 2 MB take) or from beyond them.
// prints one JSON object.
#include <sys/mman.h>
#include <x86intrin.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace {

struct alignas(64) Slot {
  std::uint64_t key;
  std::uint64_t next;  // chase: the index of the next slot
  std::uint64_t last_seen;
  std::uint64_t pad[5];
};
static_assert(sizeof(Slot) == 64);

struct Options {
  bool hugepages = false;
  unsigned hugepage_mb = 2;  // 2 or 1024
  unsigned work = 24;
  unsigned burst = 32;
  unsigned near_loads = 0;  // per packet, loads of random lines of a buffer in the L2, beyond the L1
  unsigned near_kb = 1024;  // that buffer's size
  double seconds = 1.0;
  std::vector<double> sizes_mb;
};

std::uint64_t xorshift(std::uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Four independent multiply-add chains, W rounds: work the core can overlap
// with outstanding misses, as the classification's is.
inline std::uint64_t work(unsigned rounds, std::uint64_t seed) {
  std::uint64_t a = seed, b = seed ^ 1, c = seed ^ 2, d = seed ^ 3;
  for (unsigned i = 0; i < rounds; ++i) {
    a = a * 0x9e3779b97f4a7c15ull + i;
    b = b * 0xc2b2ae3d27d4eb4full + i;
    c = c * 0x165667b19e3779f9ull + i;
    d = d * 0xd6e8feb86659fd93ull + i;
    asm volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
  }
  return a ^ b ^ c ^ d;
}

constexpr const char* kUsage =
    "usage: random_line_cost [--hugepages [--hugepage-mb 2|1024]] [--work W] [--burst B]\n"
    "                        [--near-loads L [--near-kb K]] [--seconds S] SIZE_MB...\n";

enum class Way { kPrefetched, kTogether, kPlain, kChase };

// Cycles per packet over about `seconds` (tsc_hz estimated by the caller).
double run(Slot* table, std::uint64_t mask, Way way, const Options& o, std::uint64_t tsc_budget) {
  std::uint64_t rng = 0x2545f4914f6cdd1dull, near_rng = 0x9e3779b97f4a7c15ull, sink = 0, packets = 0;
  std::vector<std::uint64_t> idx(o.burst);
  // Eight words a line; the loads pick a line at random (a power of two of
  // lines, the size rounded down to one).
  std::uint64_t near_lines = 1;
  while (near_lines * 2 * 64 <= std::uint64_t(o.near_kb) * 1024) near_lines *= 2;
  static std::vector<std::uint64_t> near;
  near.assign(near_lines * 8, 1);
  const std::uint64_t near_line_mask = near_lines - 1;
  const auto packet_work = [&](std::uint64_t seed) {
    for (unsigned l = 0; l < o.near_loads; ++l) seed ^= near[(xorshift(near_rng) & near_line_mask) * 8];
    return work(o.work, seed);
  };
  const std::uint64_t start = __rdtsc();
  std::uint64_t now = start;
  if (way == Way::kChase) {
    std::uint64_t at = 0;
    while (now - start < tsc_budget) {
      for (unsigned i = 0; i < 4096; ++i) {
        at = table[at].next;
        sink += at;
      }
      packets += 4096;
      now = __rdtsc();
    }
  } else {
    while (now - start < tsc_budget) {
      for (unsigned round = 0; round < 64; ++round) {
        if (way == Way::kTogether) {
          for (unsigned i = 0; i < o.burst; ++i) {
            idx[i] = xorshift(rng) & mask;
            __builtin_prefetch(&table[idx[i]]);
          }
          for (unsigned i = 0; i < o.burst; ++i) sink += packet_work(idx[i]);
        } else {
          for (unsigned i = 0; i < o.burst; ++i) {
            idx[i] = xorshift(rng) & mask;
            sink += packet_work(idx[i]);
            if (way == Way::kPrefetched) __builtin_prefetch(&table[idx[i]]);
          }
        }
        for (unsigned i = 0; i < o.burst; ++i) {
          Slot& s = table[idx[i]];
          sink += s.key == idx[i];
          s.last_seen = packets + i;
        }
        packets += o.burst;
      }
      now = __rdtsc();
    }
  }
  asm volatile("" : : "r"(sink));
  return double(now - start) / double(packets);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "random_line_cost: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--hugepages") o.hugepages = true;
    else if (a == "--hugepage-mb") o.hugepage_mb = unsigned(std::stoul(value()));
    else if (a == "--work") o.work = unsigned(std::stoul(value()));
    else if (a == "--burst") o.burst = unsigned(std::stoul(value()));
    else if (a == "--near-loads") o.near_loads = unsigned(std::stoul(value()));
    else if (a == "--near-kb") o.near_kb = unsigned(std::stoul(value()));
    else if (a == "--seconds") o.seconds = std::stod(value());
    else if (!a.empty() && a[0] != '-') o.sizes_mb.push_back(std::stod(a));
    else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (o.sizes_mb.empty() || o.burst == 0 || o.burst > 1024 || o.seconds <= 0 ||
      (o.hugepage_mb != 2 && o.hugepage_mb != 1024) || o.near_kb == 0) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  // The TSC's rate, over 100 ms of the monotonic clock.
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const std::uint64_t c0 = __rdtsc();
  do clock_gettime(CLOCK_MONOTONIC, &t1);
  while ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec) < 1e8);
  const double tsc_hz = double(__rdtsc() - c0) / ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
  const auto budget = std::uint64_t(tsc_hz * o.seconds);

  std::printf("{\"tsc_hz\": %.0f, \"hugepages\": %s, \"page_kb\": %u, \"work\": %u, \"burst\": %u, \"near_loads\": %u, "
              "\"near_kb\": %u, \"sizes\": [",
              tsc_hz, o.hugepages ? "true" : "false", o.hugepages ? o.hugepage_mb * 1024 : 4, o.work, o.burst,
              o.near_loads, o.near_kb);
  for (std::size_t k = 0; k < o.sizes_mb.size(); ++k) {
    // A power of two of slots, so that a mask picks one at random.
    std::uint64_t slots = 1;
    while (double(slots * 2 * sizeof(Slot)) <= o.sizes_mb[k] * 1048576.0) slots *= 2;
    const std::size_t page = o.hugepages ? std::size_t(o.hugepage_mb) << 20 : 4096;
    const std::size_t bytes = (slots * sizeof(Slot) + page - 1) / page * page;
    // MAP_HUGE_1GB: log2 of the page size in the flags' top bits.
    const int huge = !o.hugepages ? 0 : MAP_HUGETLB | (o.hugepage_mb == 1024 ? 30 << MAP_HUGE_SHIFT : 0);
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | huge, -1, 0);
    if (mem == MAP_FAILED) {
      std::fprintf(stderr, "random_line_cost: cannot map %zu bytes%s: %s\n", bytes,
                   !o.hugepages               ? ""
                   : o.hugepage_mb == 1024 ? " of 1 GB hugepages (reserve them: "
                                             "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages)"
                                           : " of 2 MB hugepages (reserve them: /proc/sys/vm/nr_hugepages)",
                   std::strerror(errno));
      return 1;
    }
    if (!o.hugepages) madvise(mem, bytes, MADV_NOHUGEPAGE);
    auto* table = static_cast<Slot*>(mem);
    // The chase's order: one cycle through every slot (Sattolo's shuffle).
    std::vector<std::uint64_t> order(slots);
    for (std::uint64_t i = 0; i < slots; ++i) order[i] = i;
    std::uint64_t rng = 88172645463325252ull;
    for (std::uint64_t i = slots - 1; i > 0; --i) std::swap(order[i], order[xorshift(rng) % i]);
    for (std::uint64_t i = 0; i < slots; ++i) {
      table[i].key = i;
      table[i].next = order[i];
    }
    const double prefetched = run(table, slots - 1, Way::kPrefetched, o, budget);
    const double together = run(table, slots - 1, Way::kTogether, o, budget);
    const double plain = run(table, slots - 1, Way::kPlain, o, budget);
    const double chase = run(table, slots - 1, Way::kChase, o, budget);
    std::printf("%s{\"mb\": %.4g, \"slots\": %llu, \"prefetched\": %.1f, \"together\": %.1f, \"plain\": %.1f, "
                "\"chase\": %.1f}",
                k ? ", " : "", double(slots * sizeof(Slot)) / 1048576.0, static_cast<unsigned long long>(slots),
                prefetched, together, plain, chase);
    std::fflush(stdout);
    munmap(mem, bytes);
  }
  std::printf("]}\n");
  return 0;
}
