#include "dataplane/runtime/port.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace qs {
namespace {

std::string err(int rc) { return std::string(rte_strerror(rc < 0 ? -rc : rc)); }

[[noreturn]] void fail(const PortConfig& cfg, const std::string& what) {
  throw PortError("port '" + cfg.name + "' (" + cfg.device + "): " + what);
}

std::string device_name(const PortConfig& cfg) {
  // devargs "net_pcap0,rx_pcap=a.pcap" name the device "net_pcap0".
  return cfg.device.substr(0, cfg.device.find(','));
}

// The value of `key=` in vdev devargs, or `otherwise`.
std::string devargs_value(const std::string& devargs, const std::string& key, const std::string& otherwise) {
  std::size_t at = devargs.find(',');
  while (at != std::string::npos) {
    const std::size_t next = devargs.find(',', at + 1);
    const std::string kv = devargs.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    at = next;
  }
  return otherwise;
}

void apply_flow_control(std::uint16_t port_id, const PortConfig& cfg) {
  if (cfg.flow_control == FlowControl::kNone) return;
  rte_eth_fc_conf fc{};
  int rc = rte_eth_dev_flow_ctrl_get(port_id, &fc);
  if (rc == 0) {
    switch (cfg.flow_control) {
      case FlowControl::kRxPause: fc.mode = RTE_ETH_FC_RX_PAUSE; break;
      case FlowControl::kTxPause: fc.mode = RTE_ETH_FC_TX_PAUSE; break;
      case FlowControl::kFull: fc.mode = RTE_ETH_FC_FULL; break;
      case FlowControl::kNone: fc.mode = RTE_ETH_FC_NONE; break;
    }
    fc.autoneg = 0;
    rc = rte_eth_dev_flow_ctrl_set(port_id, &fc);
  }
  if (rc == 0)
    std::printf("port %s: 802.3x flow control %s accepted by the driver\n", cfg.name.c_str(),
                flow_control_name(cfg.flow_control));
  else
    std::printf("port %s: 802.3x flow control %s NOT in force: the driver said %s\n",
                cfg.name.c_str(), flow_control_name(cfg.flow_control), err(rc).c_str());
}

// What a failed rte_eth_dev_start means, where the driver's code says little.
std::string start_failure(const PortConfig& cfg, int rc) {
  if (device_name(cfg).rfind("net_memif", 0) != 0) return err(rc);
  // net_memif's client connects to the server's socket at start; with no
  // server listening there it fails with -1 (EPERM).
  const std::string socket = devargs_value(cfg.device, "socket", "/run/memif.sock");
  if (devargs_value(cfg.device, "role", "client") != "client") return err(rc);
  return "no memif peer listening on socket " + socket + " (" + err(rc) +
         "): this port is the memif client; start the memif server (e.g. pktgen) on that socket first, or "
         "correct socket= in the port's device";
}

}  // namespace

std::string rss_note(const PortConfig& cfg, const std::string& driver_name, std::uint64_t rss_hf) {
  if (!cfg.rss || cfg.rx_queues <= 1) return "off";
  if (rss_hf != 0) return "on (IP/UDP 4-tuple)";
  // net_af_packet joins its queues' sockets in one PACKET_FANOUT_HASH group:
  // the kernel spreads the interface's flows over them by flow hash (and,
  // with the rollover flag the driver sets, moves a packet to another queue
  // when its own queue's ring is full).
  if (driver_name == "net_af_packet")
    return "requested; the driver has no RSS, but the kernel's fanout spreads flows over the queues by flow hash "
           "(a packet whose queue's ring is full rolls over to another queue)";
  return "requested, but the driver offers no RSS (each queue is fed by its own source)";
}

void check_descriptors(const PortConfig& cfg, const char* dir, std::uint16_t want,
                       const rte_eth_desc_lim& lim) {
  if (want > lim.nb_max || want < lim.nb_min)
    fail(cfg, std::string(dir) + "_descriptors " + std::to_string(want) + " is outside the driver's range " +
                  std::to_string(lim.nb_min) + ".." + std::to_string(lim.nb_max));
  if (lim.nb_align > 1 && want % lim.nb_align != 0)
    fail(cfg, std::string(dir) + "_descriptors " + std::to_string(want) + " is not a multiple of " +
                  std::to_string(lim.nb_align) + ", which the driver requires");
}

std::uint16_t find_or_probe_port(const PortConfig& cfg) {
  const std::string name = device_name(cfg);
  std::uint16_t port_id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) return port_id;
  if (!cfg.is_vdev()) {
    // EAL probes PCI devices itself; it did not find this one.
    const int rc = rte_dev_probe(cfg.device.c_str());
    if (rc != 0 || rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0)
      fail(cfg, "no such device (" + err(rc) +
                    "): is it bound to vfio-pci (dpdk-devbind.py --status), allowed by EAL (-a), "
                    "and is EAL running without --no-pci?");
    return port_id;
  }
  const int rc = rte_dev_probe(cfg.device.c_str());
  if (rc != 0) fail(cfg, "cannot create the virtual device: " + err(rc));
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0)
    fail(cfg, "the virtual device was created but is not an ethdev port");
  return port_id;
}

void configure_and_start_port(std::uint16_t port_id, const PortConfig& cfg, rte_mempool* pool) {
  configure_and_start_port(port_id, cfg, std::vector<rte_mempool*>(cfg.rx_queues, pool), true);
}

std::uint64_t tx_offloads(std::uint64_t tx_offload_capa, bool one_pool) {
  return one_pool ? tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE : 0;
}

void configure_and_start_port(std::uint16_t port_id, const PortConfig& cfg,
                              const std::vector<rte_mempool*>& rx_queue_pools, bool one_pool) {
  if (rx_queue_pools.size() != cfg.rx_queues) fail(cfg, "internal: one mbuf pool per RX queue expected");
  rte_eth_dev_info info{};
  int rc = rte_eth_dev_info_get(port_id, &info);
  if (rc != 0) fail(cfg, "cannot read device info: " + err(rc));
  if (cfg.rx_queues > info.max_rx_queues)
    fail(cfg, "rx_queues " + std::to_string(cfg.rx_queues) + " exceeds the driver's maximum of " +
                  std::to_string(info.max_rx_queues));
  if (cfg.tx_queues > info.max_tx_queues)
    fail(cfg, "tx_queues " + std::to_string(cfg.tx_queues) + " exceeds the driver's maximum of " +
                  std::to_string(info.max_tx_queues));
  // net_af_packet opens qpairs sockets at probe, all in one fanout group
  // that spreads the interface's flows over them: a socket no RX queue
  // polls takes its share of the flows and nobody reads them.
  if (std::string_view(info.driver_name) == "net_af_packet" && cfg.rx_queues > 0) {
    const std::string qpairs = devargs_value(cfg.device, "qpairs", "1");
    if (qpairs != std::to_string(cfg.rx_queues))
      fail(cfg, "net_af_packet qpairs=" + qpairs + " opens that many sockets, which share the interface's flows; "
                "rx_queues is " + std::to_string(cfg.rx_queues) +
                ": poll every one (rx_queues = qpairs) or the unpolled ones' flows are lost");
  }
  if (cfg.rx_queues > 0) check_descriptors(cfg, "rx", cfg.rx_descriptors, info.rx_desc_lim);
  if (cfg.tx_queues > 0) check_descriptors(cfg, "tx", cfg.tx_descriptors, info.tx_desc_lim);

  rte_eth_conf conf{};
  if (cfg.rss && cfg.rx_queues > 1) {
    const std::uint64_t want = RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP;
    const std::uint64_t hf = want & info.flow_type_rss_offloads;
    if (hf != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = hf;
    }
  }
  const std::string rss = rss_note(cfg, info.driver_name ? info.driver_name : "", conf.rx_adv_conf.rss_conf.rss_hf);
  conf.txmode.offloads = tx_offloads(info.tx_offload_capa, one_pool);
  // A zero-queue direction still needs one queue for rte_eth_dev_configure on
  // most drivers; the profile's counts are what the lcores use.
  rc = rte_eth_dev_configure(port_id, cfg.rx_queues, cfg.tx_queues, &conf);
  if (rc != 0) fail(cfg, "rte_eth_dev_configure failed: " + err(rc));

  if (cfg.mtu != RTE_ETHER_MTU) {
    rc = rte_eth_dev_set_mtu(port_id, cfg.mtu);
    // A virtual device that writes into a kernel interface (net_pcap) has no
    // MTU of its own: the interface's applies. quicsteer still keeps to the
    // profile's (what encapsulation may grow a frame to), so it says so and
    // goes on; a NIC that refuses an MTU stops start-up.
    if (rc == -ENOTSUP && cfg.is_vdev()) {
      std::printf("port '%s': the driver sets no MTU; quicsteer keeps frames within the profile's %u\n",
                  cfg.name.c_str(), unsigned(cfg.mtu));
    } else if (rc != 0) {
      fail(cfg, "cannot set MTU " + std::to_string(cfg.mtu) + ": " + err(rc));
    }
  }

  const int socket = rte_eth_dev_socket_id(port_id);
  const unsigned sock = socket < 0 ? 0u : unsigned(socket);
  rte_eth_rxconf rxconf = info.default_rxconf;
  rxconf.rx_drop_en = cfg.rx_drop_en ? 1 : 0;
  for (std::uint16_t q = 0; q < cfg.rx_queues; ++q) {
    // The descriptors sit with the mbufs they point to: on the pool's socket,
    // which is the port's, or the polling lcore's for a port on no socket.
    rte_mempool* pool = rx_queue_pools[q];
    rc = rte_eth_rx_queue_setup(port_id, q, cfg.rx_descriptors, unsigned(pool->socket_id), &rxconf, pool);
    if (rc != 0) fail(cfg, "RX queue " + std::to_string(q) + " setup failed: " + err(rc));
  }
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  for (std::uint16_t q = 0; q < cfg.tx_queues; ++q) {
    rc = rte_eth_tx_queue_setup(port_id, q, cfg.tx_descriptors, sock, &txconf);
    if (rc != 0) fail(cfg, "TX queue " + std::to_string(q) + " setup failed: " + err(rc));
  }
  apply_flow_control(port_id, cfg);

  rc = rte_eth_dev_start(port_id);
  if (rc != 0) fail(cfg, "cannot start: " + start_failure(cfg, rc));
  // Not every vdev supports these; harmless when not.
  if (cfg.promiscuous) {
    rte_eth_promiscuous_enable(port_id);
  } else {
    rte_eth_promiscuous_disable(port_id);
  }
  // The kernel behind a TAP listens to multicast groups the NIC's filter
  // does not know of (IPv6 solicited-node addresses for Neighbour
  // Discovery, all-nodes, LLDP's): the port takes every multicast frame,
  // and the exception path's police bounds what that lets in.
  if (!cfg.tap.empty()) rte_eth_allmulticast_enable(port_id);

  const char* fast_free = (conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) != 0 ? "on"
                          : !(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) ? "off (driver)"
                                                                                           : "off (several pools)";
  std::printf("port %s: id %u, driver %s, %u RX / %u TX queues, %u/%u descriptors, RSS %s, TX fast free %s\n",
              cfg.name.c_str(), port_id, info.driver_name, cfg.rx_queues, cfg.tx_queues,
              cfg.rx_descriptors, cfg.tx_descriptors, rss.c_str(), fast_free);
  if (cfg.rx_queues > 0) {
    if (cfg.rx_drop_en)
      std::printf("port %s: back-pressure: per-queue isolation (rx_drop_en on: a parked queue "
                  "drops in hardware, the others keep flowing; no PAUSE frames)\n",
                  cfg.name.c_str());
    else
      std::printf("port %s: back-pressure: port-wide lossless (rx_drop_en off: a full queue may "
                  "hold the whole port and, with flow control, sends PAUSE upstream)\n",
                  cfg.name.c_str());
  }
}

void stop_and_close_port(std::uint16_t port_id) {
  rte_eth_dev_stop(port_id);
  rte_eth_dev_info info{};
  const bool have_info = rte_eth_dev_info_get(port_id, &info) == 0;
  rte_eth_dev_close(port_id);
  // Hot-plugged vdevs are removed too, so that a test can create the same
  // name again in the same process.
  if (have_info && info.device != nullptr) rte_dev_remove(info.device);
}

void reap_tx_completions(std::uint16_t port_id, std::uint16_t tx_queues) {
  for (std::uint16_t q = 0; q < tx_queues; ++q) {
    if (rte_eth_tx_done_cleanup(port_id, q, 0) != -ENOTSUP) continue;
    rte_mbuf* none[1];
    rte_eth_tx_burst(port_id, q, none, 0);
  }
}

std::string port_driver_name(std::uint16_t port_id) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.driver_name == nullptr) return "";
  return info.driver_name;
}

std::string kernel_interface(std::uint16_t port_id) {
  rte_eth_dev_info info{};
  char name[IF_NAMESIZE] = {};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.if_index == 0 || if_indextoname(info.if_index, name) == nullptr)
    return "";
  return name;
}

bool kernel_link_up(const std::string& name) {
  ifreq ifr{};
  if (name.empty() || name.size() >= sizeof ifr.ifr_name) return false;
  std::memcpy(ifr.ifr_name, name.data(), name.size());
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int rc = ::ioctl(fd, SIOCGIFFLAGS, &ifr);
  ::close(fd);
  return rc == 0 && (ifr.ifr_flags & IFF_UP) != 0 && (ifr.ifr_flags & IFF_RUNNING) != 0;
}

unsigned free_mbufs_in_net_ring(std::uint16_t port_id) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.driver_name == nullptr ||
      std::strcmp(info.driver_name, "net_ring") != 0)
    return 0;
  char name[RTE_ETH_NAME_MAX_LEN];
  if (rte_eth_dev_get_name_by_port(port_id, name) != 0) return 0;
  unsigned freed = 0;
  // A net_ring vdev made from devargs ("net_ring0") creates its rings under
  // these names, queue i sending into ring i and receiving from it
  // (drivers/net/ring/rte_eth_ring.c). Rings a program passed to
  // rte_eth_from_rings have other names and stay the program's business.
  for (unsigned i = 0; i < RTE_PMD_RING_MAX_RX_RINGS; ++i) {
    const std::string ring_name = "ETH_RXTX" + std::to_string(i) + "_" + name;
    if (ring_name.size() >= RTE_RING_NAMESIZE) break;  // the driver could not have made it either
    rte_ring* ring = rte_ring_lookup(ring_name.c_str());
    if (ring == nullptr) continue;
    void* m;
    while (rte_ring_dequeue(ring, &m) == 0) {
      rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      ++freed;
    }
  }
  return freed;
}

}  // namespace qs
