// QUIC packets for the steering tests, as the UDP payload each test wraps in
// a frame of its own (build_udp_frame in frame.h). Only the headers matter to
// steering, so the payload is filler and nothing is protected (encrypted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "tests/traffic/quic_wire.h"

namespace qs::traffic {

// A long-header packet (QUIC v1) with 40 octets of payload. An Initial is
// padded to `initial_datagram` octets, as RFC 9000 section 14.1 asks of a
// client's first datagram (a smaller one opens no connection in the
// forwarding tables); pass less to make an undersized one.
std::vector<std::uint8_t> long_header_packet(LongType type, std::span<const std::uint8_t> dcid,
                                             std::span<const std::uint8_t> scid,
                                             std::size_t initial_datagram = kMinInitialDatagram);

// A short-header packet: the first octet (0x41: the fixed bit, a two-octet
// packet number), the DCID, `payload_len` octets of payload.
std::vector<std::uint8_t> short_header_packet(std::span<const std::uint8_t> dcid, std::size_t payload_len = 30);

// A connection ID of `len` random octets, such as a server that mints
// random CIDs (no QUIC-LB) gives out.
std::vector<std::uint8_t> random_cid(std::mt19937_64& rng, std::size_t len);

}  // namespace qs::traffic
