// main() for test binaries that need EAL: EAL initialises once per process,
// so it is one global gtest environment, set up before any test runs. The
// lcores are oversubscribed (four on two CPUs), as on CI; the profiles the
// tests use turn on the idle back-off so that everything progresses.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::vector<std::string> args{"quicsteer-test", "--lcores", "(0-3)@(0,1)", "--no-huge", "-m", "1024",
                                  "--no-shconf", "--no-pci", "--log-level", "*:warning"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (rte_eal_init(int(args.size()), argv.data()) < 0) {
      std::fprintf(stderr, "EAL init failed: %s\n", rte_strerror(rte_errno));
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
