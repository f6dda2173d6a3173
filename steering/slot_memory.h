// Where a table's slots live: the C++ heap by default (tools, tests); the
// dataplane passes EAL memory on the right NUMA socket (hugepages on bare
// metal), because every lookup in a large table is a cache miss and should be
// neither a remote-socket access nor a TLB miss.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace qs {

// allocate returns `bytes` of zeroed or unzeroed memory aligned to 64 bytes,
// or nullptr; release gives it back.
struct SlotMemory {
  void* (*allocate)(std::size_t bytes, void* context);
  void (*release)(void* memory, void* context);
  void* context = nullptr;
};

inline SlotMemory heap_slot_memory() {
  return SlotMemory{[](std::size_t bytes, void*) -> void* {
                      // aligned_alloc wants a multiple of the alignment.
                      return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
                    },
                    [](void* memory, void*) { std::free(memory); }, nullptr};
}

}  // namespace qs
