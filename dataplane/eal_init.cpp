#include "dataplane/eal_init.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <stdexcept>

namespace qs {

void init_eal(const std::string& program, const std::vector<std::string>& args) {
  // rte_eal_init may keep pointers into argv (and permutes it): the strings
  // live as long as the process.
  static std::vector<std::string> kept;
  kept.clear();
  kept.push_back(program);
  kept.insert(kept.end(), args.begin(), args.end());
  static std::vector<char*> argv;
  argv.clear();
  for (auto& a : kept) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(int(kept.size()), argv.data()) < 0)
    throw std::runtime_error(program + ": EAL initialisation failed: " + rte_strerror(rte_errno));
}

SplitArgs split_eal_args(const std::vector<std::string>& args) {
  SplitArgs out;
  for (const auto& a : args) {
    if (!out.has_separator && a == "--") {
      out.has_separator = true;
      continue;
    }
    (out.has_separator ? out.app : out.eal).push_back(a);
  }
  return out;
}

}  // namespace qs
