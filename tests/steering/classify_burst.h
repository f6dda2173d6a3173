// Frames classified as one burst, for the steering tests: the pointer and
// length arrays PacketClassifier::classify_burst takes, built from whole
// frames.
#pragma once

#include <cstdint>
#include <vector>

#include "steering/packet_classifier.h"

namespace qs::test {

inline std::vector<Decision> classify_as_burst(PacketClassifier& classifier,
                                               const std::vector<std::vector<std::uint8_t>>& frames,
                                               std::uint32_t now_ms = 0, LearnCounts* counts = nullptr) {
  std::vector<const std::uint8_t*> ptrs;
  std::vector<std::uint16_t> lens;
  for (const auto& f : frames) {
    ptrs.push_back(f.data());
    lens.push_back(std::uint16_t(f.size()));
  }
  std::vector<Decision> out(frames.size());
  classifier.classify_burst(ptrs.data(), lens.data(), unsigned(frames.size()), out.data(), nullptr, now_ms, counts);
  return out;
}

}  // namespace qs::test
