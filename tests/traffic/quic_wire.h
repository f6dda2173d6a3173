// QUIC wire pieces the generator assembles packets from: variable-length
// integers, long-header packet layout (RFC 9000 section 17.2, RFC 9369 for
// v2) and Initial packet protection (RFC 9001 section 5, keys derived from the
// client's first Destination Connection ID) so that captures decrypt in
// Wireshark like real ones.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace qs::traffic {

inline constexpr std::uint32_t kQuicV1 = 0x00000001;
inline constexpr std::uint32_t kQuicV2 = 0x6b3343cf;
inline constexpr std::size_t kAeadTagLen = 16;
inline constexpr std::size_t kMinInitialDatagram = 1200;  // RFC 9000 section 14.1

enum class LongType : std::uint8_t { kInitial, kZeroRtt, kHandshake, kRetry };

// The two type bits of a long header for this version (v2 permutes them).
std::uint8_t long_type_bits(std::uint32_t version, LongType type);

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t value);  // shortest encoding
std::size_t varint_size(std::uint64_t value);

struct LongHeader {
  std::uint32_t version = kQuicV1;
  LongType type = LongType::kInitial;
  std::span<const std::uint8_t> dcid;
  std::span<const std::uint8_t> scid;
  std::span<const std::uint8_t> token;  // Initial only
  std::uint8_t pn_len = 1;              // 1..4
  std::uint64_t pn = 0;
  std::uint8_t reserved_bits = 0;       // the two reserved bits, before header protection
};

// Header bytes through the packet number. The Length field is always two
// octets (as most stacks write it, so a coalesced datagram can be sized before
// its payload is final) and covers pn_len + payload_len; payload_len includes
// the AEAD tag. pn_offset receives where the packet number starts.
std::vector<std::uint8_t> build_long_header(const LongHeader& header, std::size_t payload_len,
                                            std::size_t* pn_offset);

struct PacketKeys {
  std::array<std::uint8_t, 16> key{};
  std::array<std::uint8_t, 12> iv{};
  std::array<std::uint8_t, 16> hp{};
};

// Initial secrets for `version` from the client's original DCID.
PacketKeys derive_initial_keys(std::uint32_t version, std::span<const std::uint8_t> client_dcid, bool server_side);

// Encrypts an Initial packet in place with AES-128-GCM and applies header
// protection. `packet` holds the header (as build_long_header made it)
// followed by the plaintext payload; the 16-octet tag is appended, so the
// Length field must already count it. Throws std::runtime_error if libcrypto
// fails or the packet is too short to sample.
void protect_packet(std::vector<std::uint8_t>& packet, std::size_t pn_offset, std::size_t pn_len,
                    std::uint64_t pn, const PacketKeys& keys);

// Inverse of protect_packet for tests: removes header protection, decrypts and
// checks the tag. Returns the plaintext payload, or nothing if the tag fails.
bool unprotect_packet(std::span<const std::uint8_t> packet, std::size_t pn_offset, const PacketKeys& keys,
                      std::vector<std::uint8_t>& plaintext, std::uint64_t& pn);

}  // namespace qs::traffic
