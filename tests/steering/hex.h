// Hex helpers shared by the steering tests.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "steering/hex.h"

namespace qs::test {

inline std::vector<std::uint8_t> unhex(std::string_view text) {
  std::string digits;
  for (char c : text)
    if (c != ' ' && c != '\n' && c != ':') digits += c;
  if (digits.size() % 2 != 0) throw std::invalid_argument("odd hex length: " + digits);
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < digits.size(); i += 2)
    out.push_back(std::uint8_t(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

inline std::string hex(const std::uint8_t* data, std::size_t len) { return qs::to_hex(data, len); }

inline std::string hex(const std::vector<std::uint8_t>& v) { return hex(v.data(), v.size()); }

}  // namespace qs::test
