// main() for test binaries that need EAL: EAL initialises once per process,
// so it is one global gtest environment, set up before any test runs. The
// lcores are oversubscribed (four on two CPUs), as on CI; the profiles the
// tests use turn on the idle back-off so that everything progresses.
#include <gtest/gtest.h>
#include <rte_eal.h>

#include "dataplane/eal_init.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      qs::init_eal("quicsteer-test", {"--lcores", "(0-3)@(0,1)", "--no-huge", "-m", "1024", "--no-shconf",
                                      "--no-pci", "--log-level", "*:warning"});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::exit(1);
    }
  }
  void TearDown() override { rte_eal_cleanup(); }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new EalEnvironment);
  return RUN_ALL_TESTS();
}
