// The largest burst the fast path moves at once (RX, hand-off, TX): the size
// of every per-burst array on an lcore's stack and in its parking ticket.
#pragma once

namespace qs {

inline constexpr unsigned kMaxBurst = 64;

}  // namespace qs
