// Ports as the profile describes them: found or hot-plugged, configured,
// started, and stopped again. Control path only; errors are exceptions whose
// message names the profile's port and what the driver said.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/config/profile.h"

struct rte_mempool;
struct rte_eth_desc_lim;

namespace qs {

class PortError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The DPDK port id for cfg.device. A vdev that does not exist yet is probed
// from its devargs; a PCI device must have been probed by EAL.
std::uint16_t find_or_probe_port(const PortConfig& cfg);

// Configures queues, descriptors, RSS, MTU, flow control and per-queue drop
// on port_id and starts it. Prints one line per port saying what is in force
// (RSS hash types, flow control accepted or not, the back-pressure mode).
// RX queue q fills from rx_queue_pools[q] and has its descriptors on that
// pool's socket (one entry per RX queue of cfg). `one_pool`: every mbuf the
// port will transmit comes from a single pool, with a reference count of 1,
// which lets the driver free them in bulk (tx_fast_free).
void configure_and_start_port(std::uint16_t port_id, const PortConfig& cfg,
                              const std::vector<rte_mempool*>& rx_queue_pools, bool one_pool);
// Every RX queue from the one pool (tools that make a single pool).
void configure_and_start_port(std::uint16_t port_id, const PortConfig& cfg, rte_mempool* pool);

// The TX offloads to ask for: RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE when the
// driver offers it (`tx_offload_capa`) and every mbuf a TX queue sees comes
// from one pool with a reference count of 1, which is what the offload asks
// the application to guarantee. quicsteer transmits the mbufs it received
// and never shares one; with one pool per NUMA socket, a queue may see
// mbufs of several pools, so the offload then stays off.
std::uint64_t tx_offloads(std::uint64_t tx_offload_capa, bool one_pool);

// Throws PortError unless `want` descriptors (dir: "rx" or "tx") lie in the
// driver's range and meet its alignment. Used by configure_and_start_port.
void check_descriptors(const PortConfig& cfg, const char* dir, std::uint16_t want,
                       const rte_eth_desc_lim& lim);

// What start-up says about spreading flows over RX queues: RSS in force
// (the hash types), a driver that spreads flows by other means
// (net_af_packet: the kernel's fanout), or queues that each have their own
// source. `rss_hf` is what was asked of the driver (0: no RSS).
std::string rss_note(const PortConfig& cfg, const std::string& driver_name, std::uint64_t rss_hf);

// Stops and closes the port; a vdev that was hot-plugged is removed too.
void stop_and_close_port(std::uint16_t port_id);

// For a net_ring port: frees the mbufs still in the rings of a net_ring vdev
// made from devargs (what its TX queues sent and nobody received), which
// rte_eth_dev_close would free with the rings still holding them. Returns
// how many; 0 for every other driver. Call after the lcores stopped.
unsigned free_mbufs_in_net_ring(std::uint16_t port_id);

// Has the port's TX queues 0 .. tx_queues-1 give back the mbufs of frames
// they sent and the device has finished with. DPDK 22.11's net_af_xdp keeps
// each frame's mbuf until its completion comes back from the kernel and
// frees it only from the next TX burst (pull_umem_cq in
// drivers/net/af_xdp/rte_eth_af_xdp.c); stop does nothing with the rings and
// close deletes the socket and UMEM with the completions still in the ring,
// so the last frames' mbufs never return. It has no tx_done_cleanup
// (rte_eth_tx_done_cleanup: -ENOTSUP), so an empty TX burst is what reaps
// them: the driver's TX burst always pulls the completion ring and kicks
// the kernel (kick_tx) before it returns. Drivers with tx_done_cleanup get
// that instead. Call after the lcores stopped and before the port stops
// (a stopped port's TX burst is a dummy); the kernel may complete frames a
// little later, so a caller that waits for them calls this again.
void reap_tx_completions(std::uint16_t port_id, std::uint16_t tx_queues);

// The port's driver name ("net_af_xdp", "net_pcap", ...), "" if unknown.
std::string port_driver_name(std::uint16_t port_id);

// The kernel network interface the port's driver works through (net_af_packet,
// net_af_xdp, net_tap, net_pcap on an iface: rte_eth_dev_info's if_index),
// by name; "" for a device the kernel does not see. Read at start-up: a
// name, unlike an index, says what was meant should the interface go.
std::string kernel_interface(std::uint16_t port_id);

// Whether the kernel interface `name`, in quicsteer's network namespace, is
// administratively up and has its operational state up (IFF_UP and
// IFF_RUNNING from SIOCGIFFLAGS: a veth whose peer went down, or a cable
// pulled, clears IFF_RUNNING); false when it is gone. Some drivers report
// their link up whatever the interface does (DPDK 22.11's net_af_packet and
// net_af_xdp set it at start), so health asks the kernel as well. Control
// path (a socket and an ioctl).
bool kernel_link_up(const std::string& name);

}  // namespace qs
