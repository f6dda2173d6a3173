// udp_flood: one sender of small UDP datagrams, as fast as one thread and the
// kernel's UDP stack can go: batches of 64 with sendmmsg on one unconnected
// socket (unconnected: the ICMP port unreachable the target answers with
// would otherwise come back as ECONNREFUSED on the next send), for the
// exception-path test's flood at the appliance's own address
// (tests/scaleout/exception_path_test.sh).
//
//   udp_flood ADDRESS PORT SECONDS [PAYLOAD_OCTETS]
//
// ADDRESS is IPv4 or IPv6; PAYLOAD_OCTETS defaults to 18 (a 60-octet
// Ethernet frame over IPv4). Ends after SECONDS, or at SIGINT / SIGTERM, and
// prints one line:
//   udp_flood: sent=N seconds=S pps=R errors=E
// sent counts the datagrams the kernel accepted (sendmmsg's result), not
// what reached the wire: a veth drops what its peer's backlog has no room for,
// and counts that on its own interface. errors counts failed sendmmsg calls
// (ENOBUFS and the like; the flood goes on after them). Exit 0 once it sent
// anything, 1 otherwise or on bad arguments.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t stop = 0;
void on_signal(int) { stop = 1; }

constexpr unsigned kBatch = 64;

bool parse_uint(const char* s, unsigned long max, unsigned long& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoul(s, &end, 10);
  return errno == 0 && end != s && *end == '\0' && out <= max;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long port = 0, seconds = 0, payload = 18;
  if (argc < 4 || argc > 5 || !parse_uint(argv[2], 65535, port) || port == 0 ||
      !parse_uint(argv[3], 86400, seconds) || seconds == 0 ||
      (argc == 5 && !parse_uint(argv[4], 65507, payload))) {
    std::fprintf(stderr, "usage: udp_flood ADDRESS PORT SECONDS [PAYLOAD_OCTETS]\n");
    return 1;
  }
  sockaddr_storage dst{};
  socklen_t dst_len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&dst);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&dst);
  if (inet_pton(AF_INET, argv[1], &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    dst_len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, argv[1], &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    dst_len = sizeof(*v6);
  } else {
    std::fprintf(stderr, "udp_flood: '%s' is no IPv4 or IPv6 address\n", argv[1]);
    return 1;
  }
  int fd = socket(dst.ss_family, SOCK_DGRAM, 0);
  if (fd < 0) {
    std::fprintf(stderr, "udp_flood: socket: %s\n", std::strerror(errno));
    return 1;
  }
  // A send buffer of a few batches: sendmmsg blocks for room instead of
  // failing, and the kernel frees a datagram's room once the veth took it.
  int sndbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));

  std::vector<char> data(payload, 'f');
  std::array<iovec, kBatch> iov{};
  std::array<mmsghdr, kBatch> msgs{};
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = {data.data(), data.size()};
    msgs[i].msg_hdr.msg_name = &dst;
    msgs[i].msg_hdr.msg_namelen = dst_len;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto end = t0 + std::chrono::seconds(seconds);
  uint64_t sent = 0, errors = 0;
  // The clock is read once per batch: at a million datagrams a second that
  // is ~16k reads, nothing beside the syscalls.
  while (!stop && clock::now() < end) {
    int n = sendmmsg(fd, msgs.data(), kBatch, 0);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
    } else if (errno != EINTR) {
      ++errors;
      if (errors == 1) std::fprintf(stderr, "udp_flood: sendmmsg: %s (the flood goes on)\n", std::strerror(errno));
    }
  }
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  close(fd);
  std::printf("udp_flood: sent=%llu seconds=%.3f pps=%.0f errors=%llu\n", static_cast<unsigned long long>(sent), secs,
              secs > 0 ? static_cast<double>(sent) / secs : 0.0, static_cast<unsigned long long>(errors));
  return sent > 0 ? 0 : 1;
}
