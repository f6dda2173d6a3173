// ThreadSanitizer annotations for synchronisation it cannot see. DPDK's
// libraries are not instrumented, so the atomics that order two threads
// inside them are invisible:
//  - EAL handing a function to a worker lcore (rte_eal_remote_launch) and
//    reporting it finished (rte_eal_wait_lcore): annotated on the lcore's
//    context (dataplane.cpp);
//  - a packet crossing a PMD's rings: received (rte_eth_rx_burst) after the
//    thread that played the NIC wrote it, transmitted (rte_eth_tx_burst) to
//    a thread that reads it next. Annotated on the mbuf: released before it
//    goes into a device, acquired after it comes out of one.
// (The mempool's own hand-over between threads is made visible in the
// ThreadSanitizer test build by an instrumented mempool handler,
// tests/dataplane/eal_test_main.cpp.) Compiled to nothing without
// -fsanitize=thread.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define QS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QS_TSAN 1
#endif
#endif

#ifdef QS_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace qs {

// What one thread did before tsan_release(p) happens before what another
// does after a later tsan_acquire(p).
inline void tsan_release([[maybe_unused]] void* p) {
#ifdef QS_TSAN
  __tsan_release(p);
#endif
}
inline void tsan_acquire([[maybe_unused]] void* p) {
#ifdef QS_TSAN
  __tsan_acquire(p);
#endif
}

template <typename T>
inline void tsan_acquire_burst([[maybe_unused]] T* const* objs, [[maybe_unused]] unsigned n) {
#ifdef QS_TSAN
  for (unsigned i = 0; i < n; ++i) __tsan_acquire(objs[i]);
#endif
}

}  // namespace qs
