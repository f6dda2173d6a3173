// KernelTaps: the kernel's side of the exception path. For every port the
// profile gives a `tap`, a net_tap device whose kernel interface carries the
// port's MAC and MTU, so that the kernel's ARP and ND replies, its BGP and
// BFD frames and its pings leave with the port's address; the operator
// gives that interface the appliance's addresses (README "Bare metal").
//
// One control-plane thread moves frames both ways, off the lcores (TAP
// reads and writes are system calls): from the receivers' rings
// (LcoreContext::kernel_rings; every control ring before any bulk one) to
// the TAP of the port each frame came in on, and from each TAP out of its
// port, on the TX queue after the owners' (check_taps in the profile
// decoder keeps it free). It also reads each TAP's addresses once a second
// for the ICMP errors owners send from the port (HostAddresses).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/config/profile.h"
#include "dataplane/fastpath/counter.h"
#include "dataplane/fastpath/exception_path.h"
#include "dataplane/fastpath/lcore_context.h"  // MbufRing

struct rte_mempool;

namespace qs {

class KernelTaps {
 public:
  // What the thread counts per TAP, per class (it is their only writer).
  struct Counters {
    std::array<Counter, kExceptionClasses> from_kernel;   // the kernel's frames sent out of the port
    std::array<Counter, kExceptionClasses> port_refused;  // the port's TX queue did not take them: dropped
    std::array<Counter, kExceptionClasses> tap_refused;   // the TAP did not take them (the kernel's queue full): dropped
  };
  struct Tap {
    std::size_t profile_port = 0;
    std::uint16_t port_id = 0;  // the data port
    std::uint16_t tap_id = 0;   // the net_tap device
    std::string iface;
    HostAddresses host;
    Counters counters;
  };

  // Creates and starts a TAP for every port with one; throws PortError
  // naming the port. port_ids: by profile port index. tx_queue: the data
  // ports' queue for the kernel's frames.
  KernelTaps(const Profile& profile, const std::vector<std::uint16_t>& port_ids, rte_mempool* pool,
             std::uint16_t tx_queue);
  ~KernelTaps();
  KernelTaps(const KernelTaps&) = delete;
  KernelTaps& operator=(const KernelTaps&) = delete;

  // A receiving lcore's pair of rings to the thread (control, bulk), made
  // before start().
  std::array<MbufRing*, 2> rings_for_lcore();
  // The ring on which the health checker hands this thread its probes,
  // each to go out of its mbuf's port on the kernel's TX queue; made
  // before start().
  MbufRing* probe_ring(std::uint32_t size);
  // Probes the port's TX queue did not take (dropped; the round fails).
  std::uint64_t probes_refused() const { return probes_refused_.get(); }
  // The TAP of a data port (by DPDK port id), or nullptr.
  const Tap* tap_of(std::uint16_t port_id) const;
  const std::vector<std::unique_ptr<Tap>>& taps() const { return taps_; }

  void start();
  // Stops the thread, then hands what the rings still hold to the TAPs: call
  // after the lcores stopped, so that nothing they received is lost.
  void stop();
  // Stops and closes the TAP devices (their kernel interfaces go with them).
  void close();

 private:
  void run();
  unsigned drain(MbufRing& ring);
  unsigned send_probes();
  unsigned from_kernel(Tap& t);
  void read_addresses();

  std::vector<std::unique_ptr<Tap>> taps_;
  std::vector<Tap*> tap_by_port_;  // by DPDK port id
  std::uint16_t tx_queue_ = 0;
  std::uint32_t ring_size_ = 0;
  std::vector<std::unique_ptr<MbufRing>> control_, bulk_;
  std::unique_ptr<MbufRing> probes_;
  Counter probes_refused_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  bool open_ = false;
};

}  // namespace qs
