// What the data path steers once the profile lists services (ServiceTable,
// PacketClassifier::destination) and how the appliance's own frames are
// classed for the exception path (exception_class).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "steering/exception_class.h"
#include "steering/packet_classifier.h"
#include "steering/service_table.h"

namespace qs {
namespace {

using Frame = std::vector<std::uint8_t>;

Frame ethernet(std::uint16_t type, std::uint8_t dst0 = 0x02) {
  Frame f = {dst0, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
  f.push_back(std::uint8_t(type >> 8));
  f.push_back(std::uint8_t(type));
  return f;
}

// IPv4 to dst with protocol proto and a transport header of ports (sport, dport).
Frame ipv4(const std::array<std::uint8_t, 4>& dst, std::uint8_t proto, std::uint16_t sport, std::uint16_t dport,
           std::uint16_t frag = 0x4000) {
  Frame f = ethernet(0x0800);
  const std::uint16_t total = 20 + 20;
  const std::uint8_t ip[20] = {0x45, 0, std::uint8_t(total >> 8), std::uint8_t(total), 0, 1,
                               std::uint8_t(frag >> 8), std::uint8_t(frag), 64, proto, 0, 0, 10, 0, 0, 1,
                               dst[0], dst[1], dst[2], dst[3]};
  f.insert(f.end(), std::begin(ip), std::end(ip));
  Frame l4(20, 0);
  l4[0] = std::uint8_t(sport >> 8), l4[1] = std::uint8_t(sport), l4[2] = std::uint8_t(dport >> 8),
  l4[3] = std::uint8_t(dport);
  if (proto == 17) l4[4] = 0, l4[5] = 20;  // UDP length
  f.insert(f.end(), l4.begin(), l4.end());
  return f;
}

Frame ipv6(const std::array<std::uint8_t, 16>& dst, std::uint8_t next, const Frame& l4, bool hop_by_hop = false) {
  Frame f = ethernet(0x86dd, 0x33);
  Frame ext;
  if (hop_by_hop) ext = {next, 0, 5, 2, 0, 0, 1, 0};  // router alert (MLD)
  const std::size_t payload = ext.size() + l4.size();
  Frame ip = {0x60, 0, 0, 0, std::uint8_t(payload >> 8), std::uint8_t(payload), hop_by_hop ? std::uint8_t(0) : next,
              255};
  for (int i = 0; i < 16; ++i) ip.push_back(i == 0 ? 0xfe : i == 1 ? 0x80 : std::uint8_t(i == 15));
  ip.insert(ip.end(), dst.begin(), dst.end());
  f.insert(f.end(), ip.begin(), ip.end());
  f.insert(f.end(), ext.begin(), ext.end());
  f.insert(f.end(), l4.begin(), l4.end());
  return f;
}

const std::array<std::uint8_t, 4> kHost4 = {10, 0, 0, 2};
const std::array<std::uint8_t, 4> kVip4 = {192, 0, 2, 10};
const std::array<std::uint8_t, 16> kVip6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
const std::array<std::uint8_t, 16> kHost6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

ExceptionClass class_of(const Frame& f) { return exception_class(f.data(), f.size()); }

TEST(ExceptionClass, EachControlProtocolHasItsClass) {
  Frame arp = ethernet(0x0806, 0xff);
  arp.resize(60, 0);
  EXPECT_EQ(class_of(arp), ExceptionClass::kArp);
  EXPECT_EQ(class_of(ipv4(kHost4, 6, 40000, 179)), ExceptionClass::kBgp);
  EXPECT_EQ(class_of(ipv4(kHost4, 6, 179, 40000)), ExceptionClass::kBgp) << "the peer that listens answers from 179";
  EXPECT_EQ(class_of(ipv4(kHost4, 17, 49152, 3784)), ExceptionClass::kBfd);
  EXPECT_EQ(class_of(ipv4(kHost4, 17, 49152, 4784)), ExceptionClass::kBfd);
  EXPECT_EQ(class_of(ipv4(kHost4, 17, 3784, 9)), ExceptionClass::kOther) << "BFD goes to 3784, it does not come from it";
  EXPECT_EQ(class_of(ipv4(kHost4, 1, 0x0800, 0)), ExceptionClass::kIcmp);
  EXPECT_EQ(class_of(ipv4(kHost4, 6, 40000, 22)), ExceptionClass::kOther);
  EXPECT_EQ(class_of(ipv4(kHost4, 6, 40000, 179, 0x0010)), ExceptionClass::kOther) << "a later fragment has no ports";
  Frame ns(24, 0);
  ns[0] = 135;
  EXPECT_EQ(class_of(ipv6(kHost6, 58, ns)), ExceptionClass::kNd);
  Frame echo(8, 0);
  echo[0] = 128;
  EXPECT_EQ(class_of(ipv6(kHost6, 58, echo)), ExceptionClass::kIcmp);
  Frame mld(24, 0);
  mld[0] = 143;
  EXPECT_EQ(class_of(ipv6(kHost6, 58, mld, true)), ExceptionClass::kIcmp) << "MLD rides a hop-by-hop header";
  ns[0] = 136;
  EXPECT_EQ(class_of(ipv6(kHost6, 58, ns, true)), ExceptionClass::kNd);
  Frame lacp = ethernet(0x8809, 0x01);
  lacp.resize(60, 0);
  EXPECT_EQ(class_of(lacp), ExceptionClass::kLink);
  Frame lldp = {0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc};
  EXPECT_EQ(class_of(lldp), ExceptionClass::kLink);
  // Tagged: the class of what the tags carry.
  Frame tagged = ethernet(0x8100);
  const Frame bgp = ipv4(kHost4, 6, 40000, 179);
  tagged.insert(tagged.end(), {0x00, 0x0a, 0x08, 0x00});
  tagged.insert(tagged.end(), bgp.begin() + 14, bgp.end());
  EXPECT_EQ(class_of(tagged), ExceptionClass::kBgp);
}

TEST(ExceptionClass, NeverReadsPastTheFrame) {
  const std::vector<Frame> frames = {ipv4(kHost4, 6, 40000, 179), ipv6(kHost6, 58, Frame(24, 135), true),
                                     ethernet(0x8100)};
  for (const Frame& whole : frames) {
    for (std::size_t len = 0; len <= whole.size(); ++len) {
      // A copy of exactly len octets: ASan reports a read past it.
      std::vector<std::uint8_t> cut(whole.begin(), whole.begin() + std::ptrdiff_t(len));
      const ExceptionClass c = exception_class(cut.data(), cut.size());
      EXPECT_LE(unsigned(c), unsigned(ExceptionClass::kOther));
    }
  }
}

SteeringConfig with_services() {
  SteeringConfig c;
  c.owner_lcores = {1};
  ServiceConfig web;
  web.name = "web";
  web.ipv4 = {kVip4};
  web.ipv6 = {kVip6};
  web.udp_ports = {443};
  c.services = {web};
  return c;
}

TEST(ServiceTable, OnlyAServicesAddressAndPortIsAService) {
  const ServiceTable t(with_services().services);
  ASSERT_TRUE(t.active());
  EXPECT_EQ(t.classify(4, kVip4.data(), 443), Destination::kService);
  EXPECT_EQ(t.classify(4, kVip4.data(), 80), Destination::kNotService);
  EXPECT_EQ(t.classify(4, kVip4.data(), 0), Destination::kNotService) << "not UDP, to the VIP";
  EXPECT_EQ(t.classify(4, kHost4.data(), 443), Destination::kHost);
  EXPECT_EQ(t.classify(6, kVip6.data(), 443), Destination::kService);
  EXPECT_EQ(t.classify(6, kHost6.data(), 443), Destination::kHost);
  EXPECT_EQ(t.classify(0, nullptr, 0), Destination::kHost);
  EXPECT_FALSE(ServiceTable(std::vector<ServiceConfig>{}).active());
}

TEST(ServiceTable, HoldsItsLargestProfile) {
  std::vector<ServiceConfig> many(1);
  many[0].udp_ports = {443};
  for (unsigned i = 0; i < ServiceTable::kMaxEntries / 2; ++i)
    many[0].ipv4.push_back({10, std::uint8_t(i >> 16), std::uint8_t(i >> 8), std::uint8_t(i)});
  const ServiceTable t(many);
  for (unsigned i = 0; i < ServiceTable::kMaxEntries / 2; ++i) {
    const std::array<std::uint8_t, 4> a = many[0].ipv4[i];
    ASSERT_EQ(t.classify(4, a.data(), 443), Destination::kService) << i;
  }
  many[0].udp_ports.push_back(80);
  EXPECT_THROW(ServiceTable{many}, std::invalid_argument);
}

// With services, the appliance's own traffic and the VIP's other ports get
// no owner and teach the forwarding tables nothing; without services, every
// frame is the service's, as before.
TEST(ServiceTable, TheClassifierRoutesOnlyServices) {
  SteeringConfig c = with_services();
  PacketClassifier with(c);
  const Frame to_host = ipv4(kHost4, 17, 40000, 443);
  const Frame to_vip_other = ipv4(kVip4, 17, 40000, 80);
  const Frame to_service = ipv4(kVip4, 17, 40000, 443);
  EXPECT_EQ(with.classify(to_host.data(), to_host.size()).destination, Destination::kHost);
  EXPECT_FALSE(with.classify(to_host.data(), to_host.size()).resolution.routed());
  EXPECT_EQ(with.classify(to_vip_other.data(), to_vip_other.size()).destination, Destination::kNotService);
  EXPECT_EQ(with.classify(to_service.data(), to_service.size()).destination, Destination::kService);
  c.services.clear();
  PacketClassifier without(c);
  EXPECT_EQ(without.classify(to_host.data(), to_host.size()).destination, Destination::kService);
  // The burst form agrees.
  const std::uint8_t* frames[] = {to_host.data(), to_vip_other.data(), to_service.data()};
  const std::uint16_t lens[] = {std::uint16_t(to_host.size()), std::uint16_t(to_vip_other.size()),
                                std::uint16_t(to_service.size())};
  Decision out[3];
  with.classify_burst(frames, lens, 3, out);
  EXPECT_EQ(out[0].destination, Destination::kHost);
  EXPECT_EQ(out[1].destination, Destination::kNotService);
  EXPECT_EQ(out[2].destination, Destination::kService);
  EXPECT_FALSE(out[0].resolution.routed());
}

}  // namespace
}  // namespace qs
