// main() for test binaries that need EAL: EAL initialises once per process,
// so it is one global gtest environment, set up before any test runs. The
// lcores are oversubscribed (four on two CPUs), as on CI; the profiles the
// tests use turn on the idle back-off so that everything progresses.
#include <gtest/gtest.h>
#include <rte_eal.h>

#include "dataplane/runtime/eal_init.h"
#include "dataplane/fastpath/tsan.h"

#ifdef QS_TSAN
#include <rte_mempool.h>

#include <cerrno>
#include <mutex>
#endif

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

#ifdef QS_TSAN
// Under ThreadSanitizer the mbuf pool's shared store is this mutex-guarded
// stack, compiled with the tests: DPDK's ring handler lives in an
// uninstrumented library (and its x86 ring uses inline-asm atomics TSan cannot
// see either), so an mbuf freed on one lcore and allocated on another would be
// reported as a race on every field. The per-lcore caches in front of it are
// DPDK's inline code, instrumented as usual.
struct TsanPool {
  std::mutex lock;
  std::vector<void*> objs;
};

int tsan_pool_alloc(rte_mempool* mp) {
  auto* pool = new (std::nothrow) TsanPool;
  if (pool == nullptr) return -ENOMEM;
  pool->objs.reserve(mp->size);
  mp->pool_data = pool;
  return 0;
}
void tsan_pool_free(rte_mempool* mp) { delete static_cast<TsanPool*>(mp->pool_data); }
int tsan_pool_enqueue(rte_mempool* mp, void* const* objs, unsigned n) {
  auto* pool = static_cast<TsanPool*>(mp->pool_data);
  const std::lock_guard<std::mutex> hold(pool->lock);
  pool->objs.insert(pool->objs.end(), objs, objs + n);
  return 0;
}
int tsan_pool_dequeue(rte_mempool* mp, void** objs, unsigned n) {
  auto* pool = static_cast<TsanPool*>(mp->pool_data);
  const std::lock_guard<std::mutex> hold(pool->lock);
  if (pool->objs.size() < n) return -ENOBUFS;
  for (unsigned i = 0; i < n; ++i) {
    objs[i] = pool->objs.back();
    pool->objs.pop_back();
  }
  return 0;
}
unsigned tsan_pool_count(const rte_mempool* mp) {
  auto* pool = static_cast<TsanPool*>(mp->pool_data);
  const std::lock_guard<std::mutex> hold(pool->lock);
  return unsigned(pool->objs.size());
}
// Constant-initialised: RTE_MEMPOOL_REGISTER_OPS registers it from a
// constructor that may run before the file's dynamic initialisers.
rte_mempool_ops tsan_pool_ops = {.name = "qs_tsan_stack",
                                 .alloc = tsan_pool_alloc,
                                 .free = tsan_pool_free,
                                 .enqueue = tsan_pool_enqueue,
                                 .dequeue = tsan_pool_dequeue,
                                 .get_count = tsan_pool_count,
                                 .calc_mem_size = nullptr,
                                 .populate = nullptr,
                                 .get_info = nullptr,
                                 .dequeue_contig_blocks = nullptr};
RTE_MEMPOOL_REGISTER_OPS(tsan_pool_ops);
#endif

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::vector<std::string> args = {"--lcores", "(0-3)@(0,1)", "--no-huge", "-m", "1024", "--no-shconf",
                                     "--no-pci", "--log-level", "*:warning"};
#ifdef QS_TSAN
    args.insert(args.end(), {"--mbuf-pool-ops-name", "qs_tsan_stack"});
#endif
    if (!qs::init_eal("quicsteer-test", args)) std::exit(1);
  }
  void TearDown() override { rte_eal_cleanup(); }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new EalEnvironment);
  return RUN_ALL_TESTS();
}
