// Profiles and quicgen: the pktgen profiles this area ships pass the loader,
// and traffic generated from any shipped profile (quicgen --profile) is
// steerable by that profile's own QUIC-LB configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "dataplane/config/profile.h"
#include "steering/quic_lb.h"
#include "tests/shipped_profile.h"
#include "tests/traffic/quic_traffic.h"
#include "tests/traffic/traffic_profile.h"

namespace qs::traffic {
namespace {

std::filesystem::path source_root() {
  const char* root = std::getenv("QS_SOURCE_ROOT");
  return root ? root : ".";
}

bool has(const std::vector<std::string>& args, const std::string& arg) {
  return std::find(args.begin(), args.end(), arg) != args.end();
}

TEST(MemifPktgenProfile, LoadsAndSuitsAMemifPairWithReflect) {
  const Profile p = load_profile((source_root() / "configs" / "memif-pktgen.yaml").string());
  ASSERT_EQ(p.ports.size(), 1u);
  EXPECT_EQ(p.ports[0].device.rfind("net_memif0,role=client,", 0), 0u) << p.ports[0].device;
  EXPECT_NE(p.ports[0].device.find("socket=/run/quicsteer-memif.sock"), std::string::npos);
  EXPECT_EQ(p.action.type, OwnerAction::kReflect);
  const auto owners = std::count_if(p.lcores.begin(), p.lcores.end(), [](const LcoreConfig& l) { return l.owner; });
  EXPECT_EQ(p.ports[0].tx_queues, owners);  // pktgen's memif side mirrors these counts
  // memif registers an EAL multi-process action: a shared config is needed.
  EXPECT_FALSE(has(p.eal, "--no-shconf"));
  EXPECT_FALSE(has(p.eal, "--in-memory"));
  EXPECT_TRUE(has(p.eal, "--file-prefix"));
  EXPECT_GT(p.polling.idle_sleep_us, 0u);  // shares 2 CPUs with pktgen

  // Its QUIC-LB configuration is quicgen's default, so a default capture steers.
  ASSERT_EQ(p.steering.quic_lb.size(), 1u);
  const QuicLbConfig& lb = p.steering.quic_lb[0];
  const QuicLbConfig def = default_quic_lb_config();
  EXPECT_EQ(lb.config_id, def.config_id);
  EXPECT_EQ(lb.server_id_len, def.server_id_len);
  EXPECT_EQ(lb.nonce_len, def.nonce_len);
  EXPECT_EQ(lb.len_self_encode, def.len_self_encode);
  EXPECT_EQ(lb.key, def.key);
  std::vector<std::vector<std::uint8_t>> servers;
  for (const auto& route : p.steering.server_routes) servers.push_back(route.server_id);
  EXPECT_EQ(servers, default_server_ids());
  EXPECT_EQ(p.steering.short_dcid_len, TrafficOptions{}.client_cid_len);
}

TEST(BaremetalPktgenProfile, LoadsAndReflectsOnItsOnePciPort) {
  const Profile p = load_profile((source_root() / "configs" / "baremetal-pktgen.yaml").string());
  ASSERT_EQ(p.ports.size(), 1u);
  EXPECT_FALSE(p.ports[0].is_vdev());
  EXPECT_TRUE(has(p.eal, p.ports[0].device));  // the one device EAL is allowed to probe
  EXPECT_EQ(p.action.type, OwnerAction::kReflect);
  // Same QUIC-LB setup as the memif profile: one quicgen capture suits both.
  const Profile memif = load_profile((source_root() / "configs" / "memif-pktgen.yaml").string());
  ASSERT_EQ(p.steering.quic_lb.size(), 1u);
  EXPECT_EQ(p.steering.quic_lb[0].key, memif.steering.quic_lb[0].key);
  EXPECT_EQ(p.steering.quic_lb[0].nonce_len, memif.steering.quic_lb[0].nonce_len);
  EXPECT_EQ(p.steering.server_routes.size(), memif.steering.server_routes.size());
}

TEST(ProfileTraffic, EveryShippedProfilesTrafficDecodesWithItsOwnConfig) {
  std::size_t profiles = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_root() / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const Profile p = qs::test::load_shipped_profile(entry.path().string());
    if (p.steering.quic_lb.empty()) continue;
    SCOPED_TRACE(entry.path().string());
    ++profiles;
    TrafficOptions o = default_traffic_options();
    o.connections = 40;
    o.packets_per_connection = 4;
    apply_profile(p, std::nullopt, o);
    EXPECT_EQ(o.port, p.steering.quic_ports.front());
    const Traffic t = generate_traffic(o);
    std::vector<QuicLbCodec> codecs;
    for (const auto& config : p.steering.quic_lb) codecs.emplace_back(config);
    std::vector<std::uint8_t> id(16);
    for (const Connection& c : t.connections) {
      EXPECT_EQ(c.original.server_port, p.steering.quic_ports.front());
      EXPECT_EQ(c.client_cid.size(), p.steering.short_dcid_len);
      ASSERT_TRUE(codecs.front().decode(c.server_cids[0].data(), c.server_cids[0].size(), id.data()));
      id.resize(codecs.front().server_id_len());
      EXPECT_EQ(id, c.server_id);
      id.resize(16);
      const bool routed =
          std::any_of(p.steering.server_routes.begin(), p.steering.server_routes.end(),
                      [&](const ServerRoute& r) { return r.server_id == c.server_id; }) ||
          std::any_of(p.steering.backends.begin(), p.steering.backends.end(), [&](const BackendConfig& b) {
            return std::find(b.server_ids.begin(), b.server_ids.end(), c.server_id) != b.server_ids.end();
          });
      EXPECT_TRUE(routed);
      for (const QuicLbCodec& codec : codecs) {
        EXPECT_FALSE(codec.accepts(c.client_initial_dcid.data(), c.client_initial_dcid.size()));
        EXPECT_FALSE(codec.accepts(c.client_cid.data(), c.client_cid.size()));
      }
    }
  }
  EXPECT_GE(profiles, 1u);
}

TEST(ProfileTraffic, ApplyProfileRejectsWhatItCannotUse) {
  Profile p = load_profile((source_root() / "configs" / "memif-pktgen.yaml").string());
  TrafficOptions o = default_traffic_options();
  EXPECT_THROW(apply_profile(p, std::uint8_t(5), o), std::invalid_argument);  // no such config_id
  Profile no_lb = p;
  no_lb.steering.quic_lb.clear();
  EXPECT_THROW(apply_profile(no_lb, std::nullopt, o), std::invalid_argument);
  Profile no_servers = p;
  no_servers.steering.server_routes.clear();
  EXPECT_THROW(apply_profile(no_servers, std::nullopt, o), std::invalid_argument);
}

}  // namespace
}  // namespace qs::traffic
