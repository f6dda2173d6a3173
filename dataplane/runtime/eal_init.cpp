#include "dataplane/runtime/eal_init.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace qs {

bool init_eal(const std::string& program, const std::vector<std::string>& args) {
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
  if (rte_eal_init(int(kept.size()), argv.data()) < 0) {
    const int error = rte_errno;
    const std::string cause = explain_eal_failure(args);
    std::fprintf(stderr, "%s: EAL initialisation failed: %s\n", program.c_str(),
                 cause.empty() ? rte_strerror(error) : cause.c_str());
    return false;
  }
  return true;
}

std::string eal_config_path(const std::vector<std::string>& args) {
  std::string prefix = "rte";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--no-shconf" || a == "--in-memory") return "";
    if (a == "--file-prefix" && i + 1 < args.size()) prefix = args[i + 1];
    if (a.rfind("--file-prefix=", 0) == 0) prefix = a.substr(14);
  }
  // Where EAL puts its runtime directory (eal_create_runtime_dir in DPDK 22.11).
  std::string base = "/tmp";
  if (::getuid() == 0) {
    base = "/var/run";
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    base = xdg;
  }
  return base + "/dpdk/" + prefix + "/config";
}

std::string explain_eal_failure(const std::vector<std::string>& args) {
  // A primary process holds a write lock on its runtime directory's config
  // file for as long as it runs; EAL refuses a second one on the same prefix
  // without setting rte_errno.
  const std::string config = eal_config_path(args);
  if (config.empty()) return "";
  const int fd = ::open(config.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  const bool held = ::fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  ::close(fd);
  if (!held) return "";
  const std::string prefix = config.substr(0, config.size() - 7);  // ".../dpdk/PREFIX"
  return "another DPDK process (pid " + std::to_string(lock.l_pid) + ") is running with the same --file-prefix '" +
         prefix.substr(prefix.rfind('/') + 1) + "' (it holds " + config +
         "); stop it, or give this process its own --file-prefix (or --no-shconf) in the EAL arguments";
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
