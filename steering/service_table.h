// ServiceTable: which datagrams the data path steers once the profile lists
// services (VIP addresses and their UDP ports), and what everything else is.
//
// An appliance on a routed network receives more than its services'
// traffic: ARP and Neighbour Discovery for its own addresses, its BGP and
// BFD sessions, pings, whatever else a router sends its way. Only UDP to a
// service (address, port) goes to the owners; the rest of the traffic to a
// service address is nobody's (dropped, counted); everything else belongs
// to the appliance's own host, its kernel (the exception path).
//
// An open-addressing table of (address, port) entries, port 0 standing for
// "any other port of this address", sized at four slots per entry or more,
// so that a lookup is one hash and a probe or two. Built on the control
// path; lookups are const and may run on every lcore at once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "steering/steering_config.h"

namespace qs {

enum class Destination : std::uint8_t {
  kService,     // UDP to a service's address and port: steered (every frame, without services)
  kNotService,  // to a service address, but not UDP to one of its ports: dropped
  kHost,        // neither: the appliance's own traffic, for the exception path
};

class ServiceTable {
 public:
  // The most (address, port) pairs a profile may list (and addresses).
  static constexpr std::size_t kMaxEntries = 4096;

  ServiceTable() = default;
  // Throws std::invalid_argument over kMaxEntries entries or on port 0.
  explicit ServiceTable(const std::vector<ServiceConfig>& services) {
    std::size_t entries = 0;
    for (const auto& s : services) entries += (s.ipv4.size() + s.ipv6.size()) * (s.udp_ports.size() + 1);
    if (entries > kMaxEntries)
      throw std::invalid_argument("services: " + std::to_string(entries) + " address and port pairs, over " +
                                  std::to_string(kMaxEntries));
    if (entries == 0) return;
    std::size_t slots = 16;
    while (slots < entries * 4) slots <<= 1;
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
    for (const auto& s : services) {
      for (std::uint16_t port : s.udp_ports)
        if (port == 0) throw std::invalid_argument("services: UDP port 0");
      for (const auto& a : s.ipv4) {
        std::array<std::uint8_t, 16> key{};
        std::memcpy(key.data(), a.data(), 4);
        insert(key, 4, 0);
        for (std::uint16_t port : s.udp_ports) insert(key, 4, port);
      }
      for (const auto& a : s.ipv6) {
        insert(a, 6, 0);
        for (std::uint16_t port : s.udp_ports) insert(a, 6, port);
      }
    }
  }

  // False: no services, every frame is kService.
  bool active() const { return !slots_.empty(); }

  // dst: the destination address (4 or 16 octets as ip_version says);
  // udp_port: the UDP destination port, 0 for anything that is not UDP
  // with a header (another protocol, a later fragment).
  Destination classify(std::uint8_t ip_version, const std::uint8_t* dst, std::uint16_t udp_port) const {
    if (ip_version != 4 && ip_version != 6) return Destination::kHost;
    std::array<std::uint8_t, 16> key{};
    std::memcpy(key.data(), dst, ip_version == 6 ? 16 : 4);
    if (udp_port != 0 && find(key, ip_version, udp_port)) return Destination::kService;
    return find(key, ip_version, 0) ? Destination::kNotService : Destination::kHost;
  }

 private:
  struct Slot {
    std::array<std::uint8_t, 16> address{};
    std::uint16_t port = 0;
    std::uint8_t family = 0;  // 0: empty
  };

  static std::uint64_t hash(const std::array<std::uint8_t, 16>& a, std::uint8_t family, std::uint16_t port) {
    std::uint64_t lo, hi;
    std::memcpy(&lo, a.data(), 8);
    std::memcpy(&hi, a.data() + 8, 8);
    std::uint64_t h = (lo * 0x9e3779b97f4a7c15ull) ^ (hi * 0xc2b2ae3d27d4eb4full) ^
                      (std::uint64_t(port) << 8 | family) * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
  }

  void insert(const std::array<std::uint8_t, 16>& a, std::uint8_t family, std::uint16_t port) {
    for (std::size_t i = hash(a, family, port) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.family == 0) {
        s = Slot{a, port, family};
        return;
      }
      if (s.family == family && s.port == port && s.address == a) return;  // listed twice
    }
  }

  bool find(const std::array<std::uint8_t, 16>& a, std::uint8_t family, std::uint16_t port) const {
    for (std::size_t i = hash(a, family, port) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.family == 0) return false;
      if (s.family == family && s.port == port && s.address == a) return true;
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

}  // namespace qs
