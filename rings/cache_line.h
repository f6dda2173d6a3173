// The project's one cache-line constant.
//
// 128 rather than 64: x86 (and the EPYC this runs on) prefetches the adjacent
// 64-byte line in pairs, so two hot variables 64 bytes apart still ping-pong
// between cores. Padding to 128 keeps producer and consumer state truly apart.
#pragma once

#include <cstddef>

namespace qs {

inline constexpr std::size_t kCacheLine = 128;

}  // namespace qs
