// EAL start-up from a list of arguments, for every quicsteer program
// (the binary, the tests' EAL environment, the benchmarks). Control path.
#pragma once

#include <string>
#include <vector>

namespace qs {

// Runs rte_eal_init with argv = {program, args...}. Throws std::runtime_error
// naming the program and DPDK's reason when EAL refuses.
void init_eal(const std::string& program, const std::vector<std::string>& args);

}  // namespace qs
