// What the receiving lcore learned about a packet, carried to the owner in an
// mbuf dynamic field so that the owner does not parse the headers again.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

namespace qs {

struct SteerMeta {
  std::uint16_t l3_offset;  // from the start of the frame
  std::uint16_t l4_offset;
  std::uint16_t dcid_offset;
  std::uint8_t dcid_len;
  std::uint8_t flags;       // kSteerMeta* below
  std::uint8_t reserved;
};

inline constexpr std::uint8_t kSteerMetaIpv6 = 1u << 0;
inline constexpr std::uint8_t kSteerMetaQuic = 1u << 1;  // dcid_* are valid
inline constexpr std::uint8_t kSteerMetaOpensConnection = 1u << 2;
inline constexpr std::uint8_t kSteerMetaLongHeader = 1u << 3;  // an SCID follows the DCID

// Registers the dynamic field (control path, idempotent); throws on failure.
void register_steer_meta();
extern int g_steer_meta_offset;

inline SteerMeta* steer_meta(rte_mbuf* m) {
  return RTE_MBUF_DYNFIELD(m, g_steer_meta_offset, SteerMeta*);
}

}  // namespace qs
