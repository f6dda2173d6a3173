// HealthChecker: the thread that probes every backend through its own
// delivery and tells the control loop which ones answer (issue 39, profile
// key health_checks).
//
// Why through the delivery: a ping of a server's address proves that the
// host is up, not that it takes the service's traffic. The probe goes as
// the clients' packets go (the backend's l2, ipip or vxlan template, the
// TX port the owners use), to a service address, so an answer proves the
// path, the decapsulation, the address on the server and a QUIC server
// behind it. The probe is a QUIC packet of a reserved version
// (dataplane/fastpath/health_probe.h) that any QUIC server answers with
// Version Negotiation, with no handshake and no change to the server.
//
// The way out: this thread builds each probe into an mbuf and puts it on a
// bounded ring to the exception path's thread (KernelTaps), which sends it
// on the TX port's queue after the owners' (the one the kernel's frames
// use). The way back: the answer comes to the appliance's own address (the
// TAP's, the probes' source) through the routers; a receiver recognises it
// before the exception path (exception_rx.h), polices it, and puts it on
// its ring to this thread. Nothing of this runs on the per-packet path but
// that test, and a full ring drops and counts.
//
// What it decides (HealthBook): up, down and unchecked by rise and fall.
// The control loop (Dataplane::follow_health) takes a change and rebuilds
// the backend hash as a reload does, without the backends that are down.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/config/profile.h"
#include "dataplane/fastpath/counter.h"
#include "dataplane/fastpath/delivery.h"
#include "dataplane/fastpath/exception_path.h"  // HostAddresses
#include "dataplane/fastpath/lcore_context.h"   // MbufRing
#include "dataplane/runtime/health_book.h"

struct rte_mempool;

namespace qs {

class HealthChecker {
 public:
  // What the outputs show.
  struct View {
    std::vector<HealthBook::Row> rows;  // in the order of the last set_backends
    HealthBook::Totals totals;
    std::uint64_t probes_unsent = 0;     // no mbuf, no source address yet, or the ring to the port full
    bool any_answering = true;
    std::uint64_t epoch = 0;
  };

  // tx_port_id, tx_mac, tx_mtu: the action's TX port; source: the TAP's
  // addresses (the probes' source); to_port: the ring to the exception
  // thread; pool: where probes' mbufs come from.
  HealthChecker(const HealthChecksConfig& config, std::uint16_t tx_port_id,
                const std::array<std::uint8_t, 6>& tx_mac, std::uint16_t tx_mtu, const HostAddresses* source,
                MbufRing* to_port, rte_mempool* pool);
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // A receiving lcore's ring of answers to this thread, made before start().
  MbufRing* answer_ring_for_lcore(std::uint32_t size);

  // The backends to probe and their delivery (the operator's states and
  // the running delivery settings): at start and after each applied reload.
  // Control path; takes the book's lock.
  void set_backends(const std::vector<BackendConfig>& backends, const DeliveryConfig& delivery);

  void start();
  void stop();

  View view() const;
  // The names of the backends the checks find down, sorted.
  std::vector<std::string> down_names() const;
  std::uint64_t epoch() const;

 private:
  void run();
  void send(const HealthBook::Probe& p, std::uint64_t now_us);
  unsigned drain_answers(std::uint64_t now_us);
  bool has_sources() const;  // the TAP has an address of every target's family

  HealthChecksConfig config_;
  std::uint16_t tx_port_id_;
  std::array<std::uint8_t, 6> tx_mac_;
  std::uint16_t tx_mtu_;
  const HostAddresses* source_;
  MbufRing* to_port_;
  rte_mempool* pool_;
  std::vector<std::unique_ptr<MbufRing>> answer_rings_;

  mutable std::mutex mutex_;  // the book and the templates: this thread and the control loop
  HealthBook book_;
  std::vector<BackendTemplate> templates_;  // by the book's backend index
  std::uint64_t probes_unsent_ = 0;

  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace qs
