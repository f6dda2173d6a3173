// The one list of reasons for which the data path lets go of a packet. Every
// drop is counted where it happens under one of these, in the dropping lcore's
// own counters (VPP-style: no shared counters, no logging on the data path).
#pragma once

#include <cstddef>
#include <string_view>

namespace qs {

enum class DropReason : unsigned {
  kMalformed,    // steering could not parse the headers it needs
  kNotUdp,       // not UDP over IPv4/IPv6 (ARP, ICMP, TCP, non-first fragments...)
  kRingFull,     // policy drop: the owner's ring rejected the packet
  kShedNew,      // policy shed-new: a connection-opening packet for an owner over its high watermark
  kParkTimeout,  // a parked packet waited longer than park_timeout
  kTxFull,       // policy drop: the TX queue did not take the packet
  kTxTimeout,    // park/shed-new: the TX queue took nothing for longer than park_timeout
  kShutdown,     // still in a ticket, ring or TX stage when the lcores stopped
  kBackendDown,  // steered to a backend whose state is down (or that a reload removed)
  kTooBig,       // larger than the TX port's MTU once encapsulated for its backend
  kNoOwner,      // the classifier named no owner of this data path (never expected: checked, not trusted)
  kOwnFrame,     // from the port's own MAC: the host's (or quicsteer's) frame out of an interface the driver reads
  // With services (steering/service_table.h):
  kForeignMac,     // the destination MAC is another host's (neither the port's, broadcast nor multicast)
  kNotService,     // to a service address, but not UDP to one of its ports
  kNoTap,          // for the appliance's own host, on a port without a TAP (ports[].tap)
  kPoliced,        // for the host, over its class's rate (exception_path.police)
  kKernelRingFull, // for the host, the ring to the exception thread was full
  kProbeRingFull,  // a health probe's answer, and the ring to the health checker was full
  kCount
};

inline constexpr std::size_t kDropReasonCount = static_cast<std::size_t>(DropReason::kCount);

constexpr std::string_view drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kMalformed: return "malformed";
    case DropReason::kNotUdp: return "not_udp";
    case DropReason::kRingFull: return "ring_full";
    case DropReason::kShedNew: return "shed_new";
    case DropReason::kParkTimeout: return "park_timeout";
    case DropReason::kTxFull: return "tx_full";
    case DropReason::kTxTimeout: return "tx_timeout";
    case DropReason::kShutdown: return "shutdown";
    case DropReason::kBackendDown: return "backend_down";
    case DropReason::kTooBig: return "too_big";
    case DropReason::kNoOwner: return "no_owner";
    case DropReason::kOwnFrame: return "own_frame";
    case DropReason::kForeignMac: return "foreign_mac";
    case DropReason::kNotService: return "not_service";
    case DropReason::kNoTap: return "no_tap";
    case DropReason::kPoliced: return "policed";
    case DropReason::kKernelRingFull: return "kernel_ring_full";
    case DropReason::kProbeRingFull: return "probe_ring_full";
    case DropReason::kCount: break;
  }
  return "?";
}

}  // namespace qs
