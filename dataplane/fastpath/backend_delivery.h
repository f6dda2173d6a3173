// What forward does with backends: the delivery plan (one header template
// per backend slot, built on the control path from the profile) and its
// per-mbuf steps. The bytes themselves are dataplane/fastpath/delivery.h's, which
// knows nothing of mbufs; here they meet the mbuf's headroom and lengths.
//
// A plan is immutable once built. A reload builds a new one and swaps it in
// with the classifier (Dataplane::reload_steering): owners load it once per
// burst, and the old one is freed after every lcore's next quiescent point.
#pragma once

#include <rte_mbuf.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/fastpath/delivery.h"
#include "dataplane/config/modes.h"
#include "steering/steering_config.h"  // BackendConfig
#include "dataplane/fastpath/steer_meta.h"

namespace qs {

// What the per-packet loop reads first for a slot, 16 octets: whether the
// backend takes packets and, for l2, the whole delivery (its 12 MAC
// octets), so that l2 touches one small array and not the templates.
struct DeliverySlot {
  std::array<std::uint8_t, 12> macs{};  // destination (the backend's), source (the TX port's)
  std::uint8_t usable = 0;              // active or draining; 0 where no backend is, or it is down
  std::uint8_t pad[3] = {};
};
static_assert(sizeof(DeliverySlot) == 16);

class DeliveryPlan {
 public:
  // port_mac and port_mtu: the forward action's TX port; rx_mtu: the largest
  // MTU of a port that receives (l2 checks a frame's length only when it
  // can exceed the TX port's). Throws std::invalid_argument (from the
  // template builders) when a backend lacks what the mode needs; the profile
  // loader has refused such profiles already, so this is a second line.
  DeliveryPlan(const DeliveryConfig& config, const std::vector<BackendConfig>& backends,
               const std::array<std::uint8_t, 6>& port_mac, std::uint16_t port_mtu, std::uint16_t rx_mtu)
      : mode_(config.mode),
        icmp_per_second_(config.icmp_too_big_per_s),
        icmp_per_client_(config.icmp_too_big_per_client_per_s),
        l2_checks_mtu_(rx_mtu > port_mtu) {
    std::size_t slots = 0;
    for (const BackendConfig& b : backends) slots = std::max<std::size_t>(slots, b.slot + 1u);
    templates_.resize(slots);
    slots_.resize(slots);
    for (const BackendConfig& b : backends) {
      templates_[b.slot] = build_backend_template(config, b, port_mac, port_mtu);
      slots_[b.slot].macs = templates_[b.slot].macs;
      slots_[b.slot].usable = b.state != BackendState::kDown;
    }
  }

  DeliveryMode mode() const { return mode_; }
  std::uint32_t icmp_per_second() const { return icmp_per_second_; }
  std::uint32_t icmp_per_client() const { return icmp_per_client_; }
  std::size_t slots() const { return slots_.size(); }
  const DeliverySlot* slot_table() const { return slots_.data(); }
  const BackendTemplate* templates() const { return templates_.data(); }
  // Whether l2 must check each frame against the TX port's MTU: only when a
  // receiving port's MTU is larger.
  bool l2_checks_mtu() const { return l2_checks_mtu_; }

 private:
  DeliveryMode mode_;
  std::uint32_t icmp_per_second_;
  std::uint32_t icmp_per_client_;
  bool l2_checks_mtu_;
  std::vector<BackendTemplate> templates_;  // by slot
  std::vector<DeliverySlot> slots_;         // by slot
};

// Applies the backend's delivery, whose mode is kMode, to m
// (dataplane/fastpath/delivery.h's deliver_as()): for ipip and vxlan the
// outer headers go into the mbuf's headroom, with no copy of the frame.
// Anything but kOk leaves m as it was, for the caller to drop under the
// status's reason.
// frame: m's data (rte_pktmbuf_mtod), which the caller has located already.
// Always inlined into the owner's burst loop: with one instantiation per
// inner and outer family, GCC kept it out of line, and the call with its
// spills cost ipip 2.6 and vxlan 2.3 cycles per packet (ring_loop).
template <DeliveryMode kMode>
[[gnu::always_inline]] inline DeliveryStatus deliver_mbuf(const BackendTemplate& t, rte_mbuf* m, std::uint8_t* frame,
                                                          const SteerMeta& meta, std::uint32_t flow_hash) {
  if (m->nb_segs != 1) [[unlikely]] {
    // The profile's data room holds a whole frame of the port's MTU, so a
    // frame in several segments is larger than the MTU already: l2 only
    // rewrites its MACs (in the first segment), the tunnels cannot carry it.
    if constexpr (kMode == DeliveryMode::kIpip || kMode == DeliveryMode::kVxlan) return DeliveryStatus::kTooBig;
    if constexpr (kMode == DeliveryMode::kL2) std::memcpy(frame, t.macs.data(), t.macs.size());
    return DeliveryStatus::kOk;
  }
  const DeliveryResult r = deliver_as<kMode>(t, frame, rte_pktmbuf_data_len(m), rte_pktmbuf_headroom(m),
                                   std::uint16_t(meta.l3_offset()), (meta.flags & kSteerMetaIpv6) != 0, flow_hash);
  if (r.status != DeliveryStatus::kOk) return r.status;
  // The frame now starts at r.frame (the prefix's length before the IP
  // header) and ends with the IP packet (any Ethernet padding left out).
  m->data_off = std::uint16_t(m->data_off - (frame - r.frame));
  m->data_len = std::uint16_t(r.len);
  m->pkt_len = r.len;
  return DeliveryStatus::kOk;
}

// An ICMP too-big reply to m in `reply` (an empty mbuf), from `source`
// (null: the VIP) and port_mac (the port m came in on) back to the client,
// announcing the largest packet the backend's delivery lets through.
// Returns false when none is due or can be built.
inline bool build_too_big_reply(const BackendTemplate& t, rte_mbuf* m, const SteerMeta& meta,
                                const std::array<std::uint8_t, 6>& port_mac, rte_mbuf* reply,
                                const std::uint8_t* source) {
  const bool ipv6 = (meta.flags & kSteerMetaIpv6) != 0;
  const std::uint32_t len = build_icmp_too_big(
      rte_pktmbuf_mtod(m, const std::uint8_t*), rte_pktmbuf_data_len(m), std::uint16_t(meta.l3_offset()), ipv6,
      t.next_hop_mtu(ipv6), port_mac, rte_pktmbuf_mtod(reply, std::uint8_t*), rte_pktmbuf_tailroom(reply), source);
  if (len == 0) return false;
  reply->data_len = std::uint16_t(len);
  reply->pkt_len = len;
  reply->port = m->port;
  return true;
}

}  // namespace qs
