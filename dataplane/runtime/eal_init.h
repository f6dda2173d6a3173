// EAL start-up from a list of arguments, for every quicsteer program
// (the binary, the tests' EAL environment, the benchmarks). Control path.
#pragma once

#include <string>
#include <vector>

namespace qs {

// Runs rte_eal_init with argv = {program, args...}. When EAL refuses, prints
// a line naming the program and the reason (DPDK's, or the cause it did not
// report) to stderr and returns false: every caller then stops.
bool init_eal(const std::string& program, const std::vector<std::string>& args);

// The shared-config file EAL locks for these arguments ("" with --no-shconf
// or --in-memory), and, after rte_eal_init failed, the cause it did not
// report: another process holding that lock ("" when that is not it).
std::string eal_config_path(const std::vector<std::string>& args);
std::string explain_eal_failure(const std::vector<std::string>& args);

// A command line "EAL arguments -- the program's arguments", split at the
// first "--". has_separator says whether there was one.
struct SplitArgs {
  std::vector<std::string> eal, app;
  bool has_separator = false;
};
SplitArgs split_eal_args(const std::vector<std::string>& args);

}  // namespace qs
