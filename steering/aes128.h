// AES-128 block encryption for QUIC-LB, on a key fixed at construction.
//
// The block cipher itself always comes from somewhere maintained: the CPU's
// AES-NI instructions (through compiler intrinsics, with a key schedule
// expanded once by AESKEYGENASSIST) or, on CPUs without them, OpenSSL's
// libcrypto. OpenSSL's EVP interface costs tens of nanoseconds per call and an
// EVP_CIPHER_CTX may not be shared between threads, so the fallback uses the
// low-level AES_KEY schedule, which is read-only after set-up and therefore
// safe to use from every RX lcore at once.
//
// The *_many calls take several independent blocks so that their AES rounds
// overlap in the pipeline: one block is latency-bound (~4 cycles per round),
// eight interleaved blocks approach the AES unit's throughput.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace qs {

class Aes128 {
 public:
  using Block = std::uint8_t[16];
  enum class Backend : std::uint8_t { kAesNi, kOpenSsl };

  // prefer_aes_ni = false forces OpenSSL (tests compare the two backends).
  explicit Aes128(const std::uint8_t key[16], bool prefer_aes_ni = true);
  ~Aes128();
  Aes128(const Aes128&) = delete;
  Aes128& operator=(const Aes128&) = delete;

  Backend backend() const { return backend_; }
  static bool cpu_has_aes_ni();

  void encrypt(const std::uint8_t in[16], std::uint8_t out[16]) const;
  void decrypt(const std::uint8_t in[16], std::uint8_t out[16]) const;
  // In place, n independent blocks.
  void encrypt_many(Block* blocks, std::size_t n) const;
  void decrypt_many(Block* blocks, std::size_t n) const;

 private:
  struct OpenSslKeys;
  Backend backend_;
  alignas(16) std::uint8_t enc_keys_[11][16];  // AES-NI encryption schedule
  alignas(16) std::uint8_t dec_keys_[11][16];  // AES-NI equivalent-inverse schedule
  std::unique_ptr<OpenSslKeys> openssl_;       // only for Backend::kOpenSsl
};

}  // namespace qs
