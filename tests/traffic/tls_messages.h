// Minimal but well-formed TLS 1.3 ClientHello / ServerHello handshake
// messages for the CRYPTO frames of generated Initial packets, so that
// decrypted Initials dissect as the real thing (SNI, ALPN h3, QUIC transport
// parameters carrying the client's Source Connection ID).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tests/traffic/random.h"

namespace qs::traffic {

std::vector<std::uint8_t> build_client_hello(Rng& rng, std::string_view server_name,
                                             std::span<const std::uint8_t> client_scid);

// The server's transport parameters travel in EncryptedExtensions (Handshake
// space), so the ServerHello is only version, cipher suite and key share.
std::vector<std::uint8_t> build_server_hello(Rng& rng);

}  // namespace qs::traffic
