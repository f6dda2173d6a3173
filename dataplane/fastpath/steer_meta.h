// What the receiving lcore learned about a packet, so that the owner does not
// parse the headers again. When the receiver is the owner it stays in the
// receive loop's burst array, and the mbuf is not written. A packet handed
// to another owner carries it in the mbuf.
//
// There it lives in the mbuf's RX `hash` field, on the first cache line: the line
// the PMD wrote on receive and that the owner reads anyway (buf_addr,
// data_off, pkt_len) and the TX path reads again. A dynamic field would sit
// on the second line, which the receiver would then dirty for every packet
// and the owner pull across cores. The field is free by then: quicsteer
// steers by the CID, not by the NIC's RSS hash (RSS has already chosen the
// queue), and no PMD reads `hash` on transmit (only the event TX adapter,
// which quicsteer does not use, keeps a queue id there).
#pragma once

#include <cstddef>
#include <cstdint>

#include <rte_mbuf.h>

namespace qs {

inline constexpr std::uint8_t kSteerMetaIpv6 = 1u << 0;
inline constexpr std::uint8_t kSteerMetaQuic = 1u << 1;  // dcid_* are valid
inline constexpr std::uint8_t kSteerMetaOpensConnection = 1u << 2;
inline constexpr std::uint8_t kSteerMetaLongHeader = 1u << 3;  // an SCID follows the DCID
// The top two bits count the frame's VLAN tags (the parser takes at most
// two), which place the IP header: Ethernet II is 14 octets, a tag 4 more.
inline constexpr unsigned kSteerMetaVlanShift = 6;

struct __attribute__((may_alias)) SteerMeta {
  std::uint16_t l4_offset;    // from the start of the frame
  std::uint16_t dcid_offset;
  // The backend slot steering chose (kNoBackend without backends): the
  // owner delivers to it (dataplane/fastpath/delivery.h).
  std::uint16_t backend;
  std::uint8_t dcid_len;
  std::uint8_t flags;         // kSteerMeta* above, and the VLAN tag count

  unsigned l3_offset() const { return 14u + 4u * (flags >> kSteerMetaVlanShift); }
  // The flags for an IP header at l3_offset (14, 18 or 22).
  static std::uint8_t vlan_flags(unsigned l3_offset) {
    return std::uint8_t((l3_offset - 14u) / 4u << kSteerMetaVlanShift);
  }
};

static_assert(sizeof(SteerMeta) == 8);
static_assert(sizeof(SteerMeta) <= sizeof(rte_mbuf::hash), "SteerMeta must fit the mbuf's RX hash field");
static_assert(alignof(SteerMeta) <= alignof(decltype(rte_mbuf::hash)));
static_assert(offsetof(rte_mbuf, hash) + sizeof(rte_mbuf::hash) <= RTE_CACHE_LINE_MIN_SIZE,
              "the RX hash field is on the mbuf's first cache line");

inline SteerMeta* steer_meta(rte_mbuf* m) { return reinterpret_cast<SteerMeta*>(&m->hash); }

}  // namespace qs
