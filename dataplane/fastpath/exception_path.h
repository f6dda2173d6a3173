// The receiving side of the exception path: what an RX queue of a port with
// services (steering/service_table.h) does with the frames that are not a
// service's. A frame for another host's MAC is dropped (foreign_mac); one
// for the appliance's own host is classed (exception_class.h), policed per
// class, and put on one of the receiving lcore's two rings to the kernel:
// control (ARP, ND, BGP, BFD, link) or bulk (ICMP, the rest). The exception
// thread (dataplane/runtime/exception_thread.h) drains the control rings
// first and writes to the port's TAP; it is the only one that makes system
// calls. A full ring drops and counts: a receiver never waits for the kernel.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "dataplane/config/modes.h"
#include "dataplane/fastpath/counter.h"
#include "steering/exception_class.h"
#include "rings/cache_line.h"

namespace qs {

// A token bucket on the TSC: tokens in units of 1 / tsc_hz, refilled by
// `per_second` a cycle, so that nothing divides on the way.
class TokenBucket {
 public:
  // burst: what may go at once after a quiet spell (at least one unit).
  void configure(std::uint64_t per_second, std::uint64_t burst, std::uint64_t tsc_hz) {
    rate_ = per_second;
    hz_ = tsc_hz == 0 ? 1 : tsc_hz;
    cap_ = (burst == 0 ? 1 : burst) * hz_;
    full_after_ = rate_ == 0 ? ~std::uint64_t(0) : cap_ / rate_;
    tokens_ = cap_;
  }
  void refill(std::uint64_t now) {
    const std::uint64_t elapsed = now - last_;
    last_ = now;
    if (rate_ == 0) return;
    tokens_ = elapsed >= full_after_ ? cap_ : tokens_ + elapsed * rate_;
    if (tokens_ > cap_) tokens_ = cap_;
  }
  bool has(std::uint64_t amount) const { return rate_ != 0 && tokens_ >= amount * hz_; }
  void spend(std::uint64_t amount) { tokens_ -= amount * hz_; }

 private:
  std::uint64_t rate_ = 0, hz_ = 1, cap_ = 0, full_after_ = 0, tokens_ = 0, last_ = 0;
};

// Both bounds of every class, for one RX queue (its share of the port's
// rates: a port's N queues each let through 1/N).
class ExceptionPolicer {
 public:
  // Bursts of a tenth of a second's worth: a BGP update train or an ARP
  // sweep passes whole, a flood does not.
  void configure(const std::array<PoliceRate, kExceptionClasses>& port_rates, unsigned queues, std::uint64_t tsc_hz) {
    const unsigned n = queues == 0 ? 1 : queues;
    for (unsigned c = 0; c < kExceptionClasses; ++c) {
      const std::uint64_t pps = port_rates[c].packets_per_s / n, bps = port_rates[c].bytes_per_s / n;
      packets_[c].configure(pps, pps / 10 > 4 ? pps / 10 : 4, tsc_hz);
      bytes_[c].configure(bps, bps / 10 > kMaxFrame * 4 ? bps / 10 : kMaxFrame * 4, tsc_hz);
    }
  }
  bool admit(ExceptionClass c, std::uint32_t len, std::uint64_t now) {
    TokenBucket& p = packets_[unsigned(c)];
    TokenBucket& b = bytes_[unsigned(c)];
    p.refill(now);
    b.refill(now);
    if (!p.has(1) || !b.has(len)) return false;
    p.spend(1);
    b.spend(len);
    return true;
  }

 private:
  static constexpr std::uint64_t kMaxFrame = 9216;
  std::array<TokenBucket, kExceptionClasses> packets_, bytes_;
};

// Per RX queue, per class: written by the receiving lcore only.
struct alignas(kCacheLine) ExceptionRxStats {
  std::array<Counter, kExceptionClasses> to_kernel;  // on a ring to the kernel
  std::array<Counter, kExceptionClasses> policed;    // over the class's rate: dropped
  std::array<Counter, kExceptionClasses> ring_full;  // the ring to the kernel was full: dropped
};

// What one RX queue of a port with services needs (RxQueueContext::exception).
struct ExceptionRx {
  // The port's MAC in the low 48 bits as a little-endian load of the
  // frame's first six octets reads it.
  std::uint64_t port_mac = 0;
  bool has_tap = false;  // false: frames for the host are dropped (no_tap)
  // Health checks (exception_rx.h): the probes' UDP port (0: none), and
  // the bound on their answers, twice the probes' budget (this queue's
  // share): a flood to the port cannot crowd the checker's ring.
  std::uint16_t probe_udp_port = 0;
  TokenBucket probe_answers_police;
  ExceptionPolicer policer;
  ExceptionRxStats stats;
  Counter probe_answers;  // to the health checker

  // Whether the frame's destination MAC is this port's, broadcast or multicast.
  bool accepts(const std::uint8_t* frame) const {
    if (frame[0] & 1) return true;  // the group bit: broadcast and multicast
    std::uint64_t dst = 0;
    std::memcpy(&dst, frame, 6);
    return dst == port_mac;
  }
};

inline std::uint64_t mac_to_u64(const std::array<std::uint8_t, 6>& mac) {
  std::uint64_t v = 0;
  std::memcpy(&v, mac.data(), 6);
  return v;
}

// The appliance's own addresses on a port (its TAP's, as the kernel has
// them): the source of the ICMP errors quicsteer sends there. Written by
// the exception thread when the kernel's addresses change, read by owners;
// a sequence lock, every field atomic.
class HostAddresses {
 public:
  void publish(const std::uint8_t* ipv4, const std::uint8_t* ipv6) {
    seq_.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    std::uint32_t v4 = 0;
    std::uint64_t v6[2] = {0, 0};
    if (ipv4) std::memcpy(&v4, ipv4, 4);
    if (ipv6) std::memcpy(v6, ipv6, 16);
    // Release stores, acquire loads in read(): a reader that sees any of
    // these sees the odd count before them too (no fence: ThreadSanitizer
    // knows none).
    v4_.store(v4, std::memory_order_release);
    v6_[0].store(v6[0], std::memory_order_release);
    v6_[1].store(v6[1], std::memory_order_release);
    has_.store(unsigned(ipv4 != nullptr) | unsigned(ipv6 != nullptr) << 1, std::memory_order_release);
    seq_.fetch_add(1, std::memory_order_release);
  }
  // Copies the address of the family (4 or 16 octets) into out; false when
  // the port has none of it.
  bool read(bool ipv6, std::uint8_t* out) const {
    for (;;) {
      const std::uint32_t before = seq_.load(std::memory_order_acquire);
      if (before & 1) continue;
      const unsigned has = has_.load(std::memory_order_acquire);
      const std::uint32_t v4 = v4_.load(std::memory_order_acquire);
      const std::uint64_t v6[2] = {v6_[0].load(std::memory_order_acquire), v6_[1].load(std::memory_order_acquire)};
      if (seq_.load(std::memory_order_relaxed) != before) continue;
      if (!(has & (ipv6 ? 2u : 1u))) return false;
      if (ipv6) std::memcpy(out, v6, 16); else std::memcpy(out, &v4, 4);
      return true;
    }
  }

 private:
  std::atomic<std::uint32_t> seq_{0};
  std::atomic<unsigned> has_{0};
  std::atomic<std::uint32_t> v4_{0};
  std::atomic<std::uint64_t> v6_[2] = {};
};

}  // namespace qs
