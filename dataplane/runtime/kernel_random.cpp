#include "dataplane/runtime/kernel_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace qs {

void kernel_random(std::span<std::uint8_t> out, const char* purpose) {
  std::size_t filled = 0;
  while (filled < out.size()) {
    // Up to 256 octets come whole; more may come in pieces, and a signal may
    // interrupt the wait for the pool at boot.
    const ssize_t n = ::getrandom(out.data() + filled, out.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      throw std::runtime_error(std::string("cannot draw random octets from the kernel (getrandom: ") +
                               std::strerror(error) + ") for " + purpose +
                               "; quicsteer does not start with keys that could be guessed");
    }
    filled += std::size_t(n);
  }
}

}  // namespace qs
