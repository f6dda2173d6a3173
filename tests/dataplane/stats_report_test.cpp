// The live table and the summary as a person reads them: rates scaled to
// what flows, and the migration line naming owners only.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "dataplane/control/stats_snapshot.h"
#include "tests/dataplane/print_capture.h"

namespace qs {
namespace {

StatsSnapshot three_lcores() {
  StatsSnapshot s;
  s.elapsed_s = 1.0;
  s.tsc_hz = 1000000000;
  LcoreSnapshot main_lcore;  // the main lcore: no owner
  main_lcore.lcore = 0;
  LcoreSnapshot a, b;
  a.lcore = 1;
  a.owner_index = 0;
  b.lcore = 2;
  b.owner_index = 1;
  s.lcores = {main_lcore, a, b};
  PortSnapshot p;
  p.name = "wire";
  s.ports = {p};
  return s;
}

TEST(FormatRate, ScalesToWhatFlows) {
  EXPECT_EQ(format_rate(6652000), "6.652 Mpps");
  EXPECT_EQ(format_rate(1000000), "1.000 Mpps");
  EXPECT_EQ(format_rate(4372), "4.372 kpps");
  EXPECT_EQ(format_rate(999999), "999.999 kpps");
  EXPECT_EQ(format_rate(512), "512 pps");
  EXPECT_EQ(format_rate(0), "0 pps");
  EXPECT_EQ(format_rate(-3), "0 pps");
}

TEST(StatsTable, RealQuicRatesDoNotReadZero) {
  const StatsSnapshot prev = three_lcores();
  StatsSnapshot now = three_lcores();
  now.elapsed_s = 2.0;
  now.lcores[1].rx.rx = 4372;       // thousands of packets per second: real QUIC through veths
  now.lcores[1].owner.tx = 2186;
  now.ports[0].ipackets = 4372;
  const std::string out = capture([&](std::FILE* f) { print_stats_table(f, now, prev); });
  EXPECT_NE(out.find("4.372 kpps"), std::string::npos) << out;
  EXPECT_NE(out.find("2.186 kpps"), std::string::npos) << out;
  EXPECT_NE(out.find("rx 4.372 kpps"), std::string::npos) << out;
  EXPECT_EQ(out.find("0.000"), std::string::npos) << out;
}

// With health checks the live table names the backends down by health,
// and the health and last probe RTT of each backend it shows.
TEST(StatsTable, BackendsShowTheirHealth) {
  StatsSnapshot prev = three_lcores();
  BackendSnapshot a, b;
  a.name = "srv-a";
  a.state = "active";
  a.health = "up";
  a.probe_rtt_us = 412;
  b.name = "srv-b";
  b.state = "active";
  b.health = "down";
  prev.backends = {a, b};
  StatsSnapshot now = prev;
  now.elapsed_s = 2.0;
  now.backends[0].packets = 1000;
  now.health_checks.push_back(HealthChecksSnapshot{});
  const std::string out = capture([&](std::FILE* f) { print_stats_table(f, now, prev); });
  EXPECT_NE(out.find("health down 1 srv-b"), std::string::npos) << out;
  EXPECT_NE(out.find("srv-a 1.000 kpps (up, rtt 412 us)"), std::string::npos) << out;
  now.health_checks.clear();
  const std::string without = capture([&](std::FILE* f) { print_stats_table(f, now, prev); });
  EXPECT_EQ(without.find("health"), std::string::npos) << "no health words without health checks: " << without;
}

TEST(Summary, NoMigrationsNamesNoLcore) {
  const StatsSnapshot s = three_lcores();
  const std::string out = capture([&](std::FILE* f) { print_summary(f, s, 0); });
  EXPECT_NE(out.find("0 migrations followed\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("most on"), std::string::npos) << out;
  EXPECT_EQ(out.find("lcore 0"), std::string::npos) << out;
}

TEST(Summary, NamesTheOwnerWithMostMigrations) {
  StatsSnapshot s = three_lcores();
  s.lcores[1].owner.migrations = 3;
  s.lcores[2].owner.migrations = 5;
  s.owner_total.migrations = 8;
  s.rx_total.rx = 9000;
  s.elapsed_s = 2.0;
  const std::string out = capture([&](std::FILE* f) { print_summary(f, s, 0); });
  EXPECT_NE(out.find("8 migrations followed (most on owner lcore 2: 5)"), std::string::npos) << out;
  EXPECT_NE(out.find("9000 packets, 4.500 kpps"), std::string::npos) << out;
}

}  // namespace
}  // namespace qs
