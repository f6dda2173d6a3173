// The keyed hash of a DCID that the fallback ring routes by: AES-128 in
// CBC-MAC mode over an encoding of the DCID that states its length in the
// first block.
//
// Why AES and why this encoding: the owner of a DCID no rule routes must be
// unpredictable without the key, or a flood of chosen DCIDs could land on one
// owner. Under a secret key AES-128 is a pseudorandom permutation, and CBC-MAC
// is a pseudorandom function on any set of messages of which none is a prefix
// of another (Bellare, Kilian and Rogaway, "The security of the cipher block
// chaining message authentication code", 2000). The length in the first block
// makes the set prefix-free: two encodings that share a first block have the
// same length and so the same number of blocks. SipHash-1-3 made the same
// promise in about 110 instructions per DCID; AES-NI needs 11 per block, and
// a burst's blocks go through the rounds side by side (Aes128::encrypt_many),
// as QUIC-LB's decoding does.
//
// The encoding of a DCID of len octets (0..255), in 16-octet blocks:
//   block 0: octets 0..14 of the DCID, zero past its end; octet 15: len
//   block k (k >= 1, while 15 + 16(k-1) < len): the next 16 octets, zero past the end
// The hash is the last block's ciphertext, its first eight octets read
// little-endian. The AES key is derived from the profile's fallback key with
// SipHash-2-4 under two labels (not the key itself: the 4-tuple fallback and
// the consistent-hash ring use that key with SipHash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "steering/siphash.h"

namespace qs {

class Aes128;

class CidHash {
 public:
  // prefer_aes_ni = false forces OpenSSL's AES (tests compare the two).
  explicit CidHash(const SipHashKey& key, bool prefer_aes_ni = true);
  ~CidHash();
  CidHash(CidHash&&) noexcept;
  CidHash& operator=(CidHash&&) noexcept;

  std::uint64_t hash(const std::uint8_t* cid, std::size_t len) const;

  // hash() of n DCIDs at once. readable[i] (at least lens[i]) is how many
  // octets from cids[i] on may be read: with 16 more than a block needs, the
  // block is loaded whole and masked instead of copied octet by octet.
  void hash_many(const std::uint8_t* const* cids, const std::uint8_t* lens,
                 const std::uint16_t* readable, std::size_t n, std::uint64_t* out) const;

  bool uses_aes_ni() const;

 private:
  std::unique_ptr<Aes128> aes_;
};

}  // namespace qs
