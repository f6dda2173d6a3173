// Random octets for secrets and hash keys, from the kernel (getrandom(2)).
//
// DPDK's rte_rand() is a fast generator for the data path's own use (it is
// seeded from the clock, not the kernel): whoever can guess its state can
// predict every key drawn from it, and aim DCIDs at one bucket of a table
// keyed with it. Keys are drawn at start-up only, so the kernel's generator
// costs nothing per packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace qs {

// Fills `out` from getrandom(2), waiting (at boot) until the kernel's pool
// is initialised. Throws std::runtime_error saying what `purpose` needed
// them when the kernel gives none (no getrandom, or a seccomp policy that
// refuses it): quicsteer does not start with keys anyone could guess.
void kernel_random(std::span<std::uint8_t> out, const char* purpose);

}  // namespace qs
