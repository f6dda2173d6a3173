// Internet checksum (RFC 1071) for the IPv4 header and the UDP pseudo-header
// (RFC 768 for IPv4, RFC 8200 section 8.1 for IPv6).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qs::traffic {

// Adds 16-bit big-endian words to a running 32-bit sum (odd tail padded with
// zero); fold with checksum_fold.
inline std::uint32_t checksum_add(std::uint32_t sum, const std::uint8_t* data, std::size_t len) {
  std::size_t i = 0;
  for (; i + 1 < len; i += 2) sum += std::uint32_t(data[i]) << 8 | data[i + 1];
  if (i < len) sum += std::uint32_t(data[i]) << 8;
  // Fold early so that long inputs cannot overflow 32 bits.
  return (sum & 0xffff) + (sum >> 16);
}

inline std::uint16_t checksum_fold(std::uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return std::uint16_t(~sum);
}

// Checksum of a whole IPv4 header (checksum field zeroed beforehand when
// computing; when verifying, a correct header yields 0).
inline std::uint16_t ipv4_header_checksum(const std::uint8_t* header, std::size_t len) {
  return checksum_fold(checksum_add(0, header, len));
}

// UDP checksum over the pseudo-header and the UDP header + payload (checksum
// field zeroed when computing; a correct datagram yields 0 when verifying).
// addr_len is 4 (IPv4) or 16 (IPv6).
inline std::uint16_t udp_checksum(const std::uint8_t* src, const std::uint8_t* dst, std::size_t addr_len,
                                  const std::uint8_t* udp, std::size_t udp_len) {
  std::uint32_t sum = 0;
  sum = checksum_add(sum, src, addr_len);
  sum = checksum_add(sum, dst, addr_len);
  sum += 17;  // protocol / next header
  sum += std::uint32_t(udp_len & 0xffff) + std::uint32_t(udp_len >> 16);
  sum = checksum_add(sum, udp, udp_len);
  return checksum_fold(sum);
}

}  // namespace qs::traffic
