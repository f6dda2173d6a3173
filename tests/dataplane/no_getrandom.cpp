// LD_PRELOAD shim for quicsteer_cli: getrandom(2) as a kernel or a seccomp
// policy without it answers (ENOSYS), so that the test sees quicsteer refuse
// to start rather than key its tables with guessable numbers.
#include <sys/types.h>

#include <cerrno>
#include <cstddef>

extern "C" ssize_t getrandom(void*, std::size_t, unsigned int) {
  errno = ENOSYS;
  return -1;
}
