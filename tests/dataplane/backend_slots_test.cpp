// BackendSlots (no EAL): which slot a reload gives each backend, and when a
// removed backend's slot may be given to another.
#include <gtest/gtest.h>

#include <set>

#include "dataplane/runtime/backend_slots.h"

namespace qs::test {
namespace {

std::vector<BackendConfig> named(const std::vector<std::string>& names) {
  std::vector<BackendConfig> v(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) v[i].name = names[i];
  return v;
}

std::vector<BackendConfig> at_start(const std::vector<std::string>& names) {
  std::vector<BackendConfig> v = named(names);
  for (std::size_t i = 0; i < v.size(); ++i) v[i].slot = std::uint16_t(i);
  return v;
}

// prefix + i (GCC 12 warns of a false overlap in "x" + std::to_string(i)).
std::string numbered(const char* prefix, unsigned i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

const auto kNeverSwept = [](std::uint64_t) { return false; };
const auto kAllSwept = [](std::uint64_t) { return true; };

TEST(BackendSlots, AStayingBackendKeepsItsSlotAndANewOneTakesOneNeverUsed) {
  const std::vector<BackendConfig> running = at_start({"b0", "b1", "b2"});
  BackendSlots slots(running);
  std::vector<BackendConfig> next = named({"b2", "new", "b0"});
  ASSERT_TRUE(slots.assign(running, next, kAllSwept));
  EXPECT_EQ(next[0].slot, 2u);
  EXPECT_EQ(next[1].slot, 3u) << "b1's slot 1 is not given away at once";
  EXPECT_EQ(next[2].slot, 0u);
  EXPECT_EQ(slots.removed(), std::vector<std::uint16_t>{1});
  EXPECT_TRUE(slots.reused().empty());
  EXPECT_TRUE(slots.reclaimed().empty());
}

// A removed backend's slot stays out of use until the tables' sweep of it is
// done, then is given out again, longest free first, after every slot never
// used.
TEST(BackendSlots, ARemovedSlotIsReusedOnlyOnceSweptAndLast) {
  std::vector<BackendConfig> running = at_start({"a", "b"});
  BackendSlots slots(running);
  std::vector<BackendConfig> next = named({"a"});
  ASSERT_TRUE(slots.assign(running, next, kNeverSwept));
  slots.retire_removed(7);  // b's slot 1 waits for sweep generation 7
  running = next;
  EXPECT_EQ(slots.retiring([](std::uint64_t g) { return g < 7; }), 1u);
  EXPECT_EQ(slots.retiring([](std::uint64_t g) { return g <= 7; }), 0u);

  // Take every slot never used, one name at a time, while generation 7 is
  // not swept: slot 1 is never among them.
  std::set<std::uint16_t> given;
  for (unsigned i = 0; i < kMaxBackends - 2; ++i) {
    next = running;
    next.push_back(named({numbered("n", i)})[0]);
    ASSERT_TRUE(slots.assign(running, next, kNeverSwept)) << i;
    ASSERT_TRUE(given.insert(next.back().slot).second);
    ASSERT_NE(next.back().slot, 1u) << "a slot still being swept was given out";
    slots.retire_removed(0);
    running = next;
  }
  EXPECT_EQ(slots.free_slots(), 0u);
  next = running;
  next.push_back(named({"one more"})[0]);
  std::vector<BackendConfig> tried = next;
  EXPECT_FALSE(slots.assign(running, tried, kNeverSwept)) << "no slot is free while b's is being swept";
  // Once swept, it is the one given.
  ASSERT_TRUE(slots.assign(running, next, [](std::uint64_t g) { return g <= 7; }));
  EXPECT_EQ(next.back().slot, 1u);
  EXPECT_EQ(slots.reclaimed(), std::vector<std::uint16_t>{1});
  EXPECT_EQ(slots.reused(), std::vector<std::uint16_t>{1}) << "its counters must start again";
}

// Names that churn (a backend renamed at every reload) never run out of
// slots: 100,000 reloads, each removing one name and adding another.
TEST(BackendSlots, ChurningNamesNeverRunOut) {
  std::vector<BackendConfig> running = at_start({"a", "b", "x0"});
  BackendSlots slots(running);
  std::uint64_t generation = 0, swept_up_to = 0;
  const auto swept = [&](std::uint64_t g) { return g <= swept_up_to; };
  for (unsigned i = 1; i <= 100000; ++i) {
    std::vector<BackendConfig> next = named({"a", "b", numbered("x", i)});
    ASSERT_TRUE(slots.assign(running, next, swept)) << "reload " << i;
    EXPECT_EQ(next[0].slot, 0u);
    EXPECT_EQ(next[1].slot, 1u);
    ASSERT_EQ(slots.removed().size(), 1u);
    slots.retire_removed(++generation);
    // The sweep lags the reloads by 100 generations.
    if (generation > 100) swept_up_to = generation - 100;
    running = next;
  }
}

}  // namespace
}  // namespace qs::test
