#include "dataplane/fastpath/connection_table.h"

#include <bit>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <stdexcept>

namespace qs {

namespace {

std::uint32_t slot_count_for(std::uint32_t max_connections, unsigned slots_per_connection) {
  if (max_connections == 0 || max_connections > (1u << 28))
    throw std::invalid_argument("connection table: max_connections must be 1..2^28");
  if (slots_per_connection != 2 && slots_per_connection != 4 && slots_per_connection != 8)
    throw std::invalid_argument("connection table: slots_per_connection must be 2, 4 or 8");
  // At most 2^31 slots: the index and the mask stay 32-bit.
  return std::uint32_t(std::bit_ceil(std::uint64_t(max_connections) * slots_per_connection));
}

}  // namespace

std::size_t ConnectionTable::memory_bytes(std::uint32_t max_connections, unsigned slots_per_connection) {
  return std::size_t(slot_count_for(max_connections, slots_per_connection)) * sizeof(Connection);
}

ConnectionTable::ConnectionTable(std::uint32_t max_connections, SlotMemory memory, unsigned slots_per_connection)
    : memory_(memory), max_(max_connections) {
  const std::uint32_t slots = slot_count_for(max_connections, slots_per_connection);
  void* raw = memory_.allocate(std::size_t(slots) * sizeof(Connection), memory_.context);
  if (raw == nullptr) throw std::bad_alloc();
  slots_ = static_cast<Connection*>(raw);
  for (std::uint32_t i = 0; i < slots; ++i) ::new (static_cast<void*>(slots_ + i)) Connection{};
  mask_ = slots - 1;
}

ConnectionTable::~ConnectionTable() {
  static_assert(std::is_trivially_destructible_v<Connection>);
  memory_.release(slots_, memory_.context);
}

void ConnectionTable::erase_slot(std::uint32_t slot) {
  // Backward-shift deletion: pull later members of the probe run into the
  // hole when their home slot does not lie cyclically in (hole, i].
  std::uint32_t hole = slot;
  for (std::uint32_t i = (slot + 1) & mask_;; i = (i + 1) & mask_) {
    Connection& c = slots_[i];
    if (!c.used) break;
    const std::uint32_t home = c.hash & mask_;
    const bool home_in_range = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (home_in_range) continue;
    slots_[hole] = c;
    hole = i;
  }
  slots_[hole].used = false;
  --size_;
}

unsigned ConnectionTable::expire(std::uint64_t now_tsc, std::uint64_t idle_tsc, unsigned max_slots) {
  unsigned removed = 0;
  for (unsigned n = 0; n < max_slots && n <= mask_; ++n) {
    const std::uint32_t i = sweep_;
    Connection& c = slots_[i];
    if (c.used && now_tsc - c.last_seen_tsc > idle_tsc) {
      erase_slot(i);
      ++removed;
      // A shifted-in entry now sits at i: look at the same slot again.
      if (slots_[i].used) continue;
    }
    sweep_ = (sweep_ + 1) & mask_;
  }
  return removed;
}

}  // namespace qs
