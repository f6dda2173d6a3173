#include "dataplane/runtime/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace qs {

namespace {

// A decimal number with nothing else, 1..2^63; 0 otherwise.
unsigned long long positive_decimal(const char* text) {
  if (!text || *text < '0' || *text > '9') return 0;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > (1ull << 63)) return 0;
  return v;
}

}  // namespace

ServiceNotifier ServiceNotifier::from_environment(std::string* problem) {
  ServiceNotifier n;
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket && *socket) {
    // sun_path holds the name; an abstract one's '@' becomes its leading NUL.
    if ((socket[0] != '/' && socket[0] != '@') || std::strlen(socket) >= sizeof(sockaddr_un::sun_path)) {
      if (problem) *problem = std::string("NOTIFY_SOCKET '") + socket + "' is not an absolute path or @name: ignored";
      return n;
    }
    n.socket_path_ = socket;
  }
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec && *usec) {
    const char* pid = std::getenv("WATCHDOG_PID");
    const unsigned long long for_pid = positive_decimal(pid);
    const unsigned long long v = positive_decimal(usec);
    if (v == 0) {
      if (problem) *problem = std::string("WATCHDOG_USEC '") + usec + "' is not a positive number: ignored";
    } else if (!pid || for_pid == static_cast<unsigned long long>(::getpid())) {
      n.watchdog_ = std::chrono::microseconds(v);
    }
  }
  return n;
}

bool ServiceNotifier::notify(const std::string& state, std::string* error) const {
  if (socket_path_.empty()) return true;
  sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error) *error = std::strerror(errno);
    return false;
  }
  const ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), len);
  const int saved = errno;
  ::close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    if (error) *error = sent < 0 ? std::strerror(saved) : "short send";
    return false;
  }
  return true;
}

}  // namespace qs
