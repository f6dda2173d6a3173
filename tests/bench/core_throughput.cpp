// What one core of this host retires per TSC cycle, outside quicsteer: the
// yardstick for "quicsteer costs N TSC cycles a packet here and M on that
// host" (scripts/bench/ringloop.sh, issue 40). Cycles per packet are TSC
// cycles, and a TSC cycle is a different amount of core work on each host
// kind; a VM without a PMU cannot say how many core cycles a loop took.
// Two loops of register-to-register adds (inline assembly, so the compiler
// neither folds nor vectorises them) can:
//   clock     one chain of dependent adds: one add per core cycle, so adds
//             per TSC cycle are core cycles per TSC cycle. The addend is a
//             register, not an immediate: some cores (Intel's Golden Cove)
//             fold chains of add-immediate at rename, faster than a cycle;
//   peak      eight independent chains of adds with two loads from the L1
//             per eight adds, and the loop's own increment and branch: what
//             the core retires per TSC cycle when nothing waits, a ceiling
//             for any loop of simple integer instructions. Measured here
//             (Intel Xeon, KVM): about 5 per core cycle, which is the
//             allocation width of that core less a little.
// Each is the best of ROUNDS rounds of about 0.1 s (the least disturbed by
// the host). quicsteer's instructions per packet (callgrind) over the peak
// is then a floor in TSC cycles per packet for that instruction count on
// this host, and over its measured cycles the fraction of the peak it runs
// at: whether a shortfall is instructions or stalls.
//
// usage: core_throughput [--rounds N]   (pin it, e.g. taskset -c 1)
// prints one JSON object.
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr std::uint64_t kIterations = 10'000'000;

// 16 dependent adds an iteration, and the loop's decrement and branch
// (written here, so that their count is known), which retire beside them
// without lengthening the chain.
double clock_adds_per_tsc() {
  std::uint64_t a = 0, n = kIterations;
  const std::uint64_t one = 1;
  const std::uint64_t start = __rdtsc();
  asm volatile(
      "1:\n\t"
      "add %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\t"
      "add %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\t"
      "add %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\t"
      "add %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\tadd %[one], %[a]\n\t"
      "sub $1, %[n]\n\tjnz 1b"
      : [a] "+r"(a), [n] "+r"(n)
      : [one] "r"(one)
      : "cc");
  const std::uint64_t tsc = __rdtsc() - start;
  if (a != 16 * kIterations) std::abort();
  return double(16 * kIterations) / double(tsc);
}

// 32 adds on 8 chains and 8 loads per iteration, and the loop's decrement
// and branch (callgrind counts those two as two, as it does in quicsteer's
// loops, though the core fuses them).
constexpr double kPeakInstructions = 32 + 8 + 2;

double peak_instructions_per_tsc() {
  alignas(64) static std::uint64_t line[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0, x = 0, y = 0, n = kIterations;
  const std::uint64_t one = 1;
  const std::uint64_t* p = line;
  const std::uint64_t start = __rdtsc();
#define QS_EIGHT_ADDS                                                                                   \
  "add %[one], %[a]\n\tadd %[one], %[b]\n\tadd %[one], %[c]\n\tadd %[one], %[d]\n\t"                 \
  "add %[one], %[e]\n\tadd %[one], %[f]\n\tadd %[one], %[g]\n\tadd %[one], %[h]\n\t"                 \
  "mov (%[p]), %[x]\n\tmov 8(%[p]), %[y]\n\t"
  asm volatile("1:\n\t" QS_EIGHT_ADDS QS_EIGHT_ADDS QS_EIGHT_ADDS QS_EIGHT_ADDS "sub $1, %[n]\n\tjnz 1b"
               : [a] "+r"(a), [b] "+r"(b), [c] "+r"(c), [d] "+r"(d), [e] "+r"(e), [f] "+r"(f), [g] "+r"(g),
                 [h] "+r"(h), [x] "=&r"(x), [y] "=&r"(y), [n] "+r"(n)
               : [one] "r"(one), [p] "r"(p)
               : "cc", "memory");
#undef QS_EIGHT_ADDS
  const std::uint64_t tsc = __rdtsc() - start;
  if (a + b + c + d + e + f + g + h != 8 * 4 * kIterations || x + y != 3) std::abort();
  return kPeakInstructions * double(kIterations) / double(tsc);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 9;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: core_throughput [--rounds N]\n");
      return 2;
    }
  }
  if (rounds < 1) {
    std::fprintf(stderr, "core_throughput: --rounds wants a positive count\n");
    return 2;
  }
  double clock = 0, peak = 0;
  for (int r = 0; r < rounds; ++r) {
    clock = std::max(clock, clock_adds_per_tsc());
    peak = std::max(peak, peak_instructions_per_tsc());
  }
  std::printf(
      "{\"rounds\": %d, \"core_cycles_per_tsc_cycle\": %.3f, \"peak_instructions_per_tsc_cycle\": %.3f, "
      "\"peak_instructions_per_core_cycle\": %.3f}\n",
      rounds, clock, peak, peak / clock);
  return 0;
}
