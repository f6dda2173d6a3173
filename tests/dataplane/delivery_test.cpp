// Delivery (dataplane/fastpath/delivery.h) on byte buffers, no EAL: the bytes of each
// mode for both inner families and both outer families, VLAN-tagged input,
// the headroom and MTU limits, the VXLAN entropy port, the outer DF, the
// template builder's refusals, and the ICMP "too big" replies. Checksums are
// verified with tests/traffic/checksum.h, independently of delivery.h's own.
#include "dataplane/fastpath/delivery.h"
#include "dataplane/fastpath/icmp_limiter.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "tests/dataplane/delivery_fixtures.h"
#include "tests/steering/hex.h"
#include "tests/traffic/checksum.h"

namespace qs {
namespace {

using test::Buffer;
using test::client_frame;
using test::hex;
using test::l3_offset_of;
using test::unhex;

constexpr std::uint32_t kHeadroom = 128;
constexpr std::uint32_t kHash = 0x9e3779b9;

BackendTemplate make(DeliveryMode mode, bool v4 = true, bool v6 = true, std::uint16_t mtu = 1500) {
  return build_backend_template(test::delivery_config(mode), test::backend(v4, v6), test::kPortMac, mtu);
}

std::string hex_range(const std::uint8_t* p, std::size_t from, std::size_t to) { return hex(p + from, to - from); }

// The inner IP packet follows the prefix octet for octet.
void expect_inner_intact(const DeliveryResult& r, std::uint32_t prefix_len, const std::vector<std::uint8_t>& frame) {
  const std::uint16_t l3 = l3_offset_of(frame);
  ASSERT_EQ(r.len, prefix_len + frame.size() - l3);
  EXPECT_EQ(hex(r.frame + prefix_len, r.len - prefix_len), hex(frame.data() + l3, frame.size() - l3));
}

bool ipv4_header_ok(const std::uint8_t* ip) { return traffic::ipv4_header_checksum(ip, 20) == 0; }

TEST(Delivery, AsIsLeavesTheFrameAlone) {
  const auto frame = client_frame(false, 100);
  Buffer b(frame, 0);
  const auto r = b.deliver(make(DeliveryMode::kAsIs), false, 14, kHash);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(r.frame, b.frame());
  EXPECT_EQ(hex(r.frame, r.len), hex(frame));
}

TEST(Delivery, L2RewritesOnlyTheMacs) {
  for (const bool v6 : {false, true}) {
    const auto frame = client_frame(v6, 200, 100);  // VLAN-tagged: the tag stays
    Buffer b(frame, 0);
    const auto r = b.deliver(make(DeliveryMode::kL2), v6, 18, kHash);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    EXPECT_EQ(r.frame, b.frame());
    EXPECT_EQ(r.len, frame.size());
    EXPECT_EQ(hex_range(r.frame, 0, 12), "020000000002" "020000000001");
    EXPECT_EQ(hex_range(r.frame, 12, r.len), hex_range(frame.data(), 12, frame.size()));
  }
}

TEST(Delivery, IpipIpv4InIpv4Bytes) {
  const auto frame = client_frame(false, 100);
  Buffer b(frame, kHeadroom);
  const auto r = b.deliver(make(DeliveryMode::kIpip), false, 14, kHash);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(r.frame, b.frame() + 14 - 34);
  // Checksum by hand: 4500+0078+0000+4000+2004+0a00+0001+0a00+0002 = b97f, ~ = 4680.
  EXPECT_EQ(hex_range(r.frame, 0, 34),
            "020000000002" "020000000001" "0800"
            "45000078" "00004000" "20044680" "0a000001" "0a000002");
  expect_inner_intact(r, 34, frame);
}

TEST(Delivery, IpipIpv6InIpv6Bytes) {
  const auto frame = client_frame(true, 100);
  Buffer b(frame, kHeadroom);
  const auto r = b.deliver(make(DeliveryMode::kIpip), true, 14, 0x12345678);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(r.frame, b.frame() + 14 - 54);
  // Flow label: the hash's low 20 bits (45678); payload length 100; next
  // header 41; hop limit 32.
  EXPECT_EQ(hex_range(r.frame, 0, 54),
            "020000000002" "020000000001" "86dd"
            "60045678" "00642920"
            "fd000000000000000000000000000001" "fd000000000000000000000000000002");
  expect_inner_intact(r, 54, frame);
}

TEST(Delivery, IpipMixedFamiliesUseTheBackendsAddress) {
  {  // IPv4 inner, a backend with IPv6 only: over IPv6, next header 4.
    const auto frame = client_frame(false, 100);
    Buffer b(frame, kHeadroom);
    const auto t = make(DeliveryMode::kIpip, false, true);
    EXPECT_EQ(t.overhead(false), 40u);
    const auto r = b.deliver(t, false, 14, 0);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    EXPECT_EQ(hex_range(r.frame, 12, 14 + 8), "86dd" "60000000" "00640420");
    EXPECT_EQ(hex_range(r.frame, 14 + 24, 14 + 40), "fd000000000000000000000000000002");
    expect_inner_intact(r, 54, frame);
  }
  {  // IPv6 inner, a backend with IPv4 only: over IPv4, protocol 41, DF.
    const auto frame = client_frame(true, 100);
    Buffer b(frame, kHeadroom);
    const auto t = make(DeliveryMode::kIpip, true, false);
    EXPECT_EQ(t.overhead(true), 20u);
    const auto r = b.deliver(t, true, 14, 0);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    EXPECT_EQ(hex_range(r.frame, 12, 14 + 10), "0800" "45000078" "00004000" "2029");
    EXPECT_EQ(hex_range(r.frame, 14 + 16, 14 + 20), "0a000002");
    EXPECT_TRUE(ipv4_header_ok(r.frame + 14));
    expect_inner_intact(r, 34, frame);
  }
}

// The outer header carries the inner packet's DSCP and ECN (RFC 6040's
// normal mode), in every tunnel and family pair (issue 38: the outer class
// was 0 and a congested hop's CE mark could not reach the backend).
TEST(Delivery, TheOuterHeaderCarriesTheInnerDscpAndEcn) {
  constexpr std::uint8_t kTos = 0xb9;  // DSCP 46 (EF), ECN 01 (ECT(1))
  for (const DeliveryMode mode : {DeliveryMode::kIpip, DeliveryMode::kVxlan}) {
    for (const bool inner_v6 : {false, true}) {
      for (const bool outer_v6 : {false, true}) {
        auto frame = client_frame(inner_v6, 300);
        if (inner_v6) {
          frame[14] = std::uint8_t(0x60 | kTos >> 4);
          frame[15] = std::uint8_t((kTos & 0x0f) << 4 | (frame[15] & 0x0f));
        } else {
          frame[15] = kTos;
        }
        Buffer b(frame, kHeadroom);
        // A backend of the outer family only: inner packets of the other go
        // over it.
        const auto r = b.deliver(make(mode, !outer_v6, outer_v6), inner_v6, 14, kHash);
        ASSERT_EQ(r.status, DeliveryStatus::kOk);
        const std::uint8_t* oip = r.frame + 14;
        const std::string what = std::string(mode == DeliveryMode::kIpip ? "ipip" : "vxlan") +
                                 (inner_v6 ? " 6" : " 4") + " in" + (outer_v6 ? " 6" : " 4");
        if (outer_v6) {
          EXPECT_EQ(std::uint8_t(oip[0] << 4 | oip[1] >> 4), kTos) << what;
          EXPECT_EQ(oip[0] >> 4, 6) << what;
          EXPECT_EQ(oip[1] & 0x0f, (kHash >> 16) & 0x0f) << what << ": the flow label's top nibble stays";
        } else {
          EXPECT_EQ(oip[1], kTos) << what;
          EXPECT_TRUE(ipv4_header_ok(oip)) << what;
        }
      }
    }
  }
}

// The outer IPv4 header's ID is always 0, so it must never be fragmentable
// (RFC 6864): DF set whatever the inner packet's (issue 38: an inner packet
// without DF went out as a fragmentable outer one with ID 0).
TEST(Delivery, IpipSetsDfWhateverTheInner) {
  auto frame = client_frame(false, 300);
  for (const bool df : {true, false}) {
    frame[14 + 6] = df ? 0x40 : 0x00;
    Buffer b(frame, kHeadroom);
    const auto r = b.deliver(make(DeliveryMode::kIpip), false, 14, kHash);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    EXPECT_EQ(hex_range(r.frame, 14 + 4, 14 + 8), "00004000") << "ID 0, DF, inner df " << df;
    EXPECT_TRUE(ipv4_header_ok(r.frame + 14)) << "df " << df;
    EXPECT_EQ(r.frame[14 + 20 + 6], df ? 0x40 : 0x00) << "the inner header as it was";
  }
}

TEST(Delivery, VxlanIpv4InIpv4Bytes) {
  const auto frame = client_frame(false, 100);
  Buffer b(frame, kHeadroom);
  const auto r = b.deliver(make(DeliveryMode::kVxlan), false, 14, kHash);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(r.frame, b.frame() + 14 - 64);
  // 4500+0096+4000+2011+0a00+0001+0a00+0002 = b9aa, ~ = 4655.
  EXPECT_EQ(hex_range(r.frame, 0, 34),
            "020000000002" "020000000001" "0800"
            "45000096" "00004000" "20114655" "0a000001" "0a000002");
  // UDP (source port below) to 4789, length 130, checksum 0; VXLAN: I flag,
  // VNI 123456 in network order; the inner Ethernet header.
  EXPECT_EQ(hex_range(r.frame, 36, 64),
            "12b5" "0082" "0000" "08000000" "12345600" "02000000aa02" "020000000001" "0800");
  expect_inner_intact(r, 64, frame);
}

// The outer UDP checksum over IPv6, verified over the pseudo-header.
void expect_udp6_checksum_ok(const std::uint8_t* ip6) {
  const std::uint32_t udp_len = std::uint32_t(ip6[4]) << 8 | ip6[5];
  EXPECT_NE(std::uint32_t(ip6[40 + 6]) << 8 | ip6[40 + 7], 0u);
  EXPECT_EQ(traffic::udp_checksum(ip6 + 8, ip6 + 24, 16, ip6 + 40, udp_len), 0);
}

TEST(Delivery, VxlanIpv6InIpv6Bytes) {
  const auto frame = client_frame(true, 100);
  Buffer b(frame, kHeadroom);
  const auto r = b.deliver(make(DeliveryMode::kVxlan), true, 14, 0x12345678);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(r.frame, b.frame() + 14 - 84);
  // Payload length 8 + 8 + 14 + 100 = 130, next header 17, hop limit 32.
  EXPECT_EQ(hex_range(r.frame, 0, 54),
            "020000000002" "020000000001" "86dd"
            "60045678" "00821120"
            "fd000000000000000000000000000001" "fd000000000000000000000000000002");
  EXPECT_EQ(hex_range(r.frame, 56, 60), "12b5" "0082");
  EXPECT_EQ(hex_range(r.frame, 62, 84), "08000000" "12345600" "02000000aa02" "020000000001" "86dd");
  expect_udp6_checksum_ok(r.frame + 14);
  expect_inner_intact(r, 84, frame);
}

TEST(Delivery, VxlanMixedFamilies) {
  {  // IPv6 inner over IPv4 (backend with IPv4 only): checksum 0, DF.
    const auto frame = client_frame(true, 100);
    Buffer b(frame, kHeadroom);
    const auto t = make(DeliveryMode::kVxlan, true, false);
    EXPECT_EQ(t.overhead(true), 50u);
    const auto r = b.deliver(t, true, 14, kHash);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    EXPECT_EQ(hex_range(r.frame, 12, 14 + 10), "0800" "45000096" "00004000" "2011");
    EXPECT_TRUE(ipv4_header_ok(r.frame + 14));
    EXPECT_EQ(hex_range(r.frame, 36, 64),
              "12b5" "0082" "0000" "08000000" "12345600" "02000000aa02" "020000000001" "86dd");
    expect_inner_intact(r, 64, frame);
  }
  {  // IPv4 inner over IPv6 (backend with IPv6 only): checksum computed.
    const auto frame = client_frame(false, 101);  // odd: the checksum pads
    Buffer b(frame, kHeadroom);
    const auto t = make(DeliveryMode::kVxlan, false, true);
    EXPECT_EQ(t.overhead(false), 70u);
    const auto r = b.deliver(t, false, 14, kHash);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    EXPECT_EQ(hex_range(r.frame, 12, 14), "86dd");
    EXPECT_EQ(hex_range(r.frame, 62, 84), "08000000" "12345600" "02000000aa02" "020000000001" "0800");
    expect_udp6_checksum_ok(r.frame + 14);
    expect_inner_intact(r, 84, frame);
  }
}

// The inner datagram's own UDP checksum, written anew after its bytes were
// changed.
void set_inner_udp_checksum(std::vector<std::uint8_t>& frame, bool v6) {
  std::uint8_t* ip = frame.data() + 14;
  std::uint8_t* udp = ip + (v6 ? 40 : 20);
  const std::size_t udp_len = frame.size() - 14 - (v6 ? 40 : 20);
  udp[6] = udp[7] = 0;
  std::uint16_t c = traffic::udp_checksum(ip + (v6 ? 8 : 12), ip + (v6 ? 24 : 16), v6 ? 16 : 4, udp, udp_len);
  if (c == 0) c = 0xffff;
  udp[6] = std::uint8_t(c >> 8);
  udp[7] = std::uint8_t(c);
}

// A backend reached over IPv6 only: every inner family leaves in an IPv6
// outer header, with a UDP checksum.
BackendTemplate make_vxlan_over_ipv6() { return make(DeliveryMode::kVxlan, false, true); }

TEST(Delivery, VxlanUdp6ChecksumOverManyLengthsAndHashes) {
  std::mt19937 rng(7);
  const auto t = make_vxlan_over_ipv6();
  for (std::uint32_t ip_len = 48; ip_len < 1400; ip_len += 1 + rng() % 97) {
    for (const bool v6 : {false, true}) {
      auto frame = client_frame(v6, ip_len);
      for (std::size_t i = 14 + (v6 ? 48 : 28); i < frame.size(); ++i) frame[i] = std::uint8_t(rng());
      set_inner_udp_checksum(frame, v6);
      Buffer b(frame, kHeadroom);
      const auto r = b.deliver(t, v6, 14, std::uint32_t(rng()));
      ASSERT_EQ(r.status, DeliveryStatus::kOk);
      expect_udp6_checksum_ok(r.frame + 14);
      expect_inner_intact(r, 84, frame);
    }
  }
}

// The outer UDP checksum over IPv6 is derived from the inner datagram's own
// (its payload is not read): a datagram corrupted on the way to quicsteer
// leaves with an outer checksum that fails too, and the backend's VXLAN
// device drops it where its UDP socket would have.
TEST(Delivery, VxlanUdp6ChecksumFollowsTheInnerOne) {
  const auto t = make_vxlan_over_ipv6();
  for (const bool v6 : {false, true}) {
    auto frame = client_frame(v6, 300);
    frame[14 + (v6 ? 40 : 20) + 8 + 50] ^= 0x5a;  // a payload octet, after its checksum was written
    Buffer b(frame, kHeadroom);
    const auto r = b.deliver(t, v6, 14, kHash);
    ASSERT_EQ(r.status, DeliveryStatus::kOk);
    const std::uint8_t* oip = r.frame + 14;
    const std::uint32_t udp_len = std::uint32_t(oip[4]) << 8 | oip[5];
    EXPECT_NE(traffic::udp_checksum(oip + 8, oip + 24, 16, oip + 40, udp_len), 0) << (v6 ? "IPv6" : "IPv4");
  }
}

// Where the inner datagram's checksum says nothing of its payload, the whole
// inner packet is summed: an IPv4 datagram without a checksum (0), a UDP
// length short of the IP packet (octets after the datagram), and a fragment.
TEST(Delivery, VxlanUdp6ChecksumSumsWhatTheInnerOneDoesNotCover) {
  const auto t = make_vxlan_over_ipv6();
  std::mt19937 rng(11);
  for (int kase = 0; kase < 3; ++kase) {
    for (const bool v6 : {false, true}) {
      if (v6 && kase != 1) continue;  // IPv6 always has a checksum, and fragments carry a header of their own
      auto frame = client_frame(v6, 333);
      std::uint8_t* ip = frame.data() + 14;
      std::uint8_t* udp = ip + (v6 ? 40 : 20);
      for (std::size_t i = 14 + (v6 ? 48 : 28); i < frame.size(); ++i) frame[i] = std::uint8_t(rng());
      if (kase == 0) udp[6] = udp[7] = 0;
      if (kase == 1) {
        udp[5] = std::uint8_t(udp[5] - 8);  // the datagram ends 8 octets before the IP packet does
        set_inner_udp_checksum(frame, v6);
        frame[frame.size() - 3] ^= 0xff;  // after the datagram: its checksum does not cover it
      }
      if (kase == 2) {
        ip[6] = 0x20;  // more fragments
        set_inner_udp_checksum(frame, v6);
        frame[frame.size() - 5] ^= 0xff;
      }
      Buffer b(frame, kHeadroom);
      const auto r = b.deliver(t, v6, 14, kHash);
      ASSERT_EQ(r.status, DeliveryStatus::kOk);
      SCOPED_TRACE(kase);
      expect_udp6_checksum_ok(r.frame + 14);
      expect_inner_intact(r, 84, frame);
    }
  }
}

TEST(Delivery, VxlanFleetMacWhenTheBackendHasNone) {
  auto d = test::delivery_config(DeliveryMode::kVxlan);
  d.vxlan_mac = test::kFleetVxlanMac;
  auto be = test::backend();
  be.vxlan_mac.reset();
  const auto t = build_backend_template(d, be, test::kPortMac, 1500);
  const auto frame = client_frame(false, 100);
  Buffer b(frame, kHeadroom);
  const auto r = b.deliver(t, false, 14, kHash);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(hex_range(r.frame, 50, 62), "02000000bbbb" "020000000001");
  // The backend's own wins over the fleet's.
  const auto own = build_backend_template(d, test::backend(), test::kPortMac, 1500);
  Buffer b2(frame, kHeadroom);
  const auto r2 = b2.deliver(own, false, 14, kHash);
  EXPECT_EQ(hex_range(r2.frame, 50, 56), "02000000aa02");
}

TEST(Delivery, VlanTagsAreLeftBehindByIpipAndVxlan) {
  for (const auto mode : {DeliveryMode::kIpip, DeliveryMode::kVxlan}) {
    for (const bool v6 : {false, true}) {
      const auto frame = client_frame(v6, 120, 100, 200);  // QinQ: IP at 22
      ASSERT_EQ(l3_offset_of(frame), 22);
      const auto t = make(mode);
      const std::uint32_t prefix = 14 + t.overhead(v6);
      Buffer b(frame, kHeadroom);
      const auto r = b.deliver(t, v6, 22, kHash);
      ASSERT_EQ(r.status, DeliveryStatus::kOk);
      EXPECT_EQ(r.frame, b.frame() + 22 - prefix);
      EXPECT_EQ(hex_range(r.frame, 12, 14), v6 ? "86dd" : "0800");
      if (mode == DeliveryMode::kVxlan) {
        EXPECT_EQ(hex_range(r.frame, prefix - 2, prefix), v6 ? "86dd" : "0800");
      }
      expect_inner_intact(r, prefix, frame);
    }
  }
}

TEST(Delivery, EthernetPaddingIsNotEncapsulated) {
  auto frame = client_frame(false, 36);  // 50 octets: padded to 60 on the wire
  frame.resize(60, 0);
  Buffer b(frame, kHeadroom);
  const auto r = b.deliver(make(DeliveryMode::kIpip), false, 14, kHash);
  ASSERT_EQ(r.status, DeliveryStatus::kOk);
  EXPECT_EQ(r.len, 34u + 36u);
  EXPECT_EQ(hex_range(r.frame, 16, 18), "0038");  // 20 + 36
}

TEST(Delivery, HeadroomExactlyEnoughAndOneShort) {
  for (const auto mode : {DeliveryMode::kIpip, DeliveryMode::kVxlan}) {
    for (const bool v6 : {false, true}) {
      const auto frame = client_frame(v6, 100, 7);
      const auto t = make(mode);
      const std::uint32_t need = 14 + t.overhead(v6) - 18;
      Buffer enough(frame, need);
      const auto fits = enough.deliver(t, v6, 18, kHash);
      EXPECT_EQ(fits.status, DeliveryStatus::kOk);
      EXPECT_EQ(fits.frame, enough.bytes.data()) << "starts at the buffer";
      Buffer shortb(frame, need - 1);
      const auto r = shortb.deliver(t, v6, 18, kHash);
      EXPECT_EQ(r.status, DeliveryStatus::kNoHeadroom);
      EXPECT_EQ(r.frame, nullptr);
      EXPECT_EQ(hex(shortb.frame(), frame.size()), hex(frame)) << "untouched";
    }
  }
}

// An IP packet leaving of exactly the MTU goes; one octet more does not.
TEST(Delivery, TooBigAtMtuPlusOne) {
  constexpr std::uint16_t kMtu = 1400;
  for (const auto mode : {DeliveryMode::kAsIs, DeliveryMode::kL2, DeliveryMode::kIpip, DeliveryMode::kVxlan}) {
    for (const auto& [v4, v6] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
      for (const bool inner_v6 : {false, true}) {
        const auto t = make(mode, v4, v6, kMtu);
        const std::uint32_t fits = kMtu - t.overhead(inner_v6);
        EXPECT_EQ(t.next_hop_mtu(inner_v6), fits);
        const auto ok_frame = client_frame(inner_v6, fits);
        Buffer ok(ok_frame, kHeadroom);
        const auto r = ok.deliver(t, inner_v6, 14, kHash);
        ASSERT_EQ(r.status, DeliveryStatus::kOk);
        EXPECT_EQ(r.len, kMtu + 14u) << "the IP packet leaving is the MTU";
        const auto big_frame = client_frame(inner_v6, fits + 1);
        Buffer big(big_frame, kHeadroom);
        EXPECT_EQ(big.deliver(t, inner_v6, 14, kHash).status, DeliveryStatus::kTooBig);
        EXPECT_EQ(hex(big.frame(), big_frame.size()), hex(big_frame)) << "untouched";
      }
    }
  }
}

TEST(Delivery, MalformedIpLengths) {
  const auto t = make(DeliveryMode::kIpip);
  auto frame = client_frame(false, 100);
  frame[16] = 0x00, frame[17] = 101;  // one octet past the frame
  Buffer b(frame, kHeadroom);
  EXPECT_EQ(b.deliver(t, false, 14, kHash).status, DeliveryStatus::kMalformed);
  frame[17] = 19;  // below the header
  Buffer b2(frame, kHeadroom);
  EXPECT_EQ(b2.deliver(t, false, 14, kHash).status, DeliveryStatus::kMalformed);
  Buffer b3(std::vector<std::uint8_t>(frame.begin(), frame.begin() + 33), kHeadroom);
  EXPECT_EQ(b3.deliver(t, false, 14, kHash).status, DeliveryStatus::kMalformed);
  auto frame6 = client_frame(true, 100);
  frame6[19] = 61;  // payload length 61: one past
  Buffer b4(frame6, kHeadroom);
  EXPECT_EQ(b4.deliver(t, true, 14, kHash).status, DeliveryStatus::kMalformed);
}

// RFC 7348 section 5: 49152..65535, a function of the flow, spread over the range.
TEST(Delivery, VxlanSourcePortFromTheFlowHash) {
  const auto t = make(DeliveryMode::kVxlan);
  const auto frame = client_frame(false, 100);
  std::set<std::uint32_t> ports;
  std::mt19937 rng(11);
  for (int i = 0; i < 4096; ++i) {
    const std::uint32_t h = i < 2048 ? std::uint32_t(rng()) : std::uint32_t(i);  // random, and sequential
    Buffer b(frame, kHeadroom);
    const auto r = b.deliver(t, false, 14, h);
    const std::uint32_t port = std::uint32_t(r.frame[34]) << 8 | r.frame[35];
    ASSERT_GE(port, 49152u);
    ASSERT_LE(port, 65535u);
    ports.insert(port);
    Buffer again(frame, kHeadroom);
    const auto r2 = again.deliver(t, false, 14, h);
    ASSERT_EQ(hex_range(r2.frame, 34, 36), hex_range(r.frame, 34, 36)) << "the same flow, the same port";
  }
  EXPECT_GT(ports.size(), 3000u);
  EXPECT_LT(*ports.begin(), 49152u + 64) << "the bottom of the range is reached";
  EXPECT_GT(*ports.rbegin(), 65535u - 64) << "the top of the range is reached";
}

TEST(Delivery, OverheadPerModeAndOuterFamily) {
  EXPECT_EQ(delivery_overhead(DeliveryMode::kAsIs, false), 0u);
  EXPECT_EQ(delivery_overhead(DeliveryMode::kL2, true), 0u);
  EXPECT_EQ(delivery_overhead(DeliveryMode::kIpip, false), 20u);
  EXPECT_EQ(delivery_overhead(DeliveryMode::kIpip, true), 40u);
  EXPECT_EQ(delivery_overhead(DeliveryMode::kVxlan, false), 50u);
  EXPECT_EQ(delivery_overhead(DeliveryMode::kVxlan, true), 70u);
  const auto t = make(DeliveryMode::kVxlan, false, true, 1500);
  EXPECT_EQ(t.next_hop_mtu(false), 1430);
  EXPECT_EQ(t.next_hop_mtu(true), 1430);
  EXPECT_EQ(make(DeliveryMode::kIpip, true, true, 1500).next_hop_mtu(false), 1480);
  EXPECT_EQ(make(DeliveryMode::kIpip, true, true, 1500).next_hop_mtu(true), 1460);
}

void expect_refused(DeliveryConfig d, const BackendConfig& b, const std::string& words, std::uint16_t mtu = 1500) {
  try {
    build_backend_template(d, b, test::kPortMac, mtu);
    ADD_FAILURE() << "accepted; expected a refusal naming " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'b1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Delivery, BuilderRefusesWhatTheBackendLacks) {
  using test::backend;
  using test::delivery_config;
  EXPECT_NO_THROW(build_backend_template(delivery_config(DeliveryMode::kAsIs), BackendConfig{}, test::kPortMac, 1500));
  auto no_mac = backend();
  no_mac.mac = {};
  expect_refused(delivery_config(DeliveryMode::kL2), no_mac, "no mac");
  expect_refused(delivery_config(DeliveryMode::kIpip), backend(false, false), "no address");
  expect_refused(delivery_config(DeliveryMode::kVxlan), backend(false, false), "no address");
  auto d = delivery_config(DeliveryMode::kIpip);
  d.source_ipv4.reset();
  expect_refused(d, backend(true, false), "source_ipv4");
  // IPv6 inner packets go over IPv4 to an IPv4-only backend: that source too.
  expect_refused(d, backend(true, true), "source_ipv4");
  d = delivery_config(DeliveryMode::kVxlan);
  d.source_ipv6.reset();
  expect_refused(d, backend(false, true), "source_ipv6");
  auto no_vxlan_mac = backend();
  no_vxlan_mac.vxlan_mac.reset();
  expect_refused(delivery_config(DeliveryMode::kVxlan), no_vxlan_mac, "vxlan_mac");
  d = delivery_config(DeliveryMode::kVxlan);
  d.vxlan_vni = 1u << 24;
  expect_refused(d, backend(), "vxlan_vni");
  expect_refused(delivery_config(DeliveryMode::kVxlan), backend(), "MTU", 70 + 67);
  // IPv6 needs 1280 octets past the overhead (RFC 8200): vxlan over IPv6
  // adds 70, ipip over IPv6 40 (issue 38: 1250 was accepted).
  expect_refused(delivery_config(DeliveryMode::kVxlan), backend(), "leaves under 1280 octets for IPv6", 70 + 1279);
  expect_refused(delivery_config(DeliveryMode::kIpip), backend(), "leaves under 1280 octets for IPv6", 40 + 1279);
  EXPECT_NO_THROW(make(DeliveryMode::kVxlan, true, true, 70 + 1280));
  EXPECT_NO_THROW(make(DeliveryMode::kIpip, true, true, 40 + 1280));
}

// --- ICMP too big ---

std::uint16_t icmp_checksum_residue(const std::uint8_t* icmp, std::uint32_t len) {
  return traffic::checksum_fold(traffic::checksum_add(0, icmp, len));
}

std::uint16_t icmpv6_checksum_residue(const std::uint8_t* ip6) {
  const std::uint32_t len = std::uint32_t(ip6[4]) << 8 | ip6[5];
  std::uint32_t sum = traffic::checksum_add(0, ip6 + 8, 32);
  sum += len + 58;
  return traffic::checksum_fold(traffic::checksum_add(sum, ip6 + 40, len));
}

TEST(IcmpTooBig, Ipv4FragmentationNeeded) {
  const auto frame = client_frame(false, 1400, 100);
  std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
  const std::uint32_t n = build_icmp_too_big(frame.data(), std::uint32_t(frame.size()), 18, false, 1430,
                                             test::kRxPortMac, out.data(), std::uint32_t(out.size()));
  ASSERT_EQ(n, 18u + 576u);
  // MACs swapped, the VLAN tag kept.
  EXPECT_EQ(hex_range(out.data(), 0, 12), hex_range(frame.data(), 6, 12) + hex_range(frame.data(), 0, 6));
  EXPECT_EQ(hex_range(out.data(), 12, 18), hex_range(frame.data(), 12, 18));
  const std::uint8_t* ip = out.data() + 18;
  EXPECT_EQ(hex_range(ip, 0, 10), "45c00240" "00000000" "4001");  // 576, TTL 64, ICMP
  EXPECT_TRUE(ipv4_header_ok(ip));
  EXPECT_EQ(hex_range(ip, 12, 20), "cb00710a" "c6336407");  // from the VIP to the client
  EXPECT_EQ(hex_range(ip, 20, 21), "03");
  EXPECT_EQ(hex_range(ip, 21, 22), "04");
  EXPECT_EQ(hex_range(ip, 24, 28), "00000596");  // next-hop MTU 1430
  EXPECT_EQ(icmp_checksum_residue(ip + 20, 556), 0);
  EXPECT_EQ(hex_range(ip, 28, 576), hex_range(frame.data(), 18, 18 + 548)) << "the original, cut at 576";
}

TEST(IcmpTooBig, Ipv6PacketTooBig) {
  const auto frame = client_frame(true, 1500);
  std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
  const std::uint32_t n = build_icmp_too_big(frame.data(), std::uint32_t(frame.size()), 14, true, 1430,
                                             test::kRxPortMac, out.data(), std::uint32_t(out.size()));
  ASSERT_EQ(n, 14u + 1280u);
  EXPECT_EQ(hex_range(out.data(), 0, 14), "02000000cc07" "020000000009" "86dd");
  const std::uint8_t* ip = out.data() + 14;
  EXPECT_EQ(hex_range(ip, 0, 8), "60000000" "04d83a40");  // payload 1240, ICMPv6, hop limit 64
  EXPECT_EQ(hex_range(ip, 8, 40), hex_range(frame.data(), 14 + 24, 14 + 40) + hex_range(frame.data(), 14 + 8, 14 + 24));
  EXPECT_EQ(hex_range(ip, 40, 42), "0200");
  EXPECT_EQ(hex_range(ip, 44, 48), "00000596");
  EXPECT_EQ(icmpv6_checksum_residue(ip), 0);
  EXPECT_EQ(hex_range(ip, 48, 1280), hex_range(frame.data(), 14, 14 + 1232));
}

// With a TAP the reply leaves from the appliance's own address, never from
// the VIP the frame was sent to (issue 36); checksums follow the source.
TEST(IcmpTooBig, FromTheAppliancesAddressWhenOneIsGiven) {
  const std::uint8_t appliance4[4] = {10, 77, 1, 2};
  const auto frame = client_frame(false, 1400, 100);
  std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
  ASSERT_GT(build_icmp_too_big(frame.data(), std::uint32_t(frame.size()), 18, false, 1430, test::kRxPortMac,
                               out.data(), std::uint32_t(out.size()), appliance4),
            0u);
  const std::uint8_t* ip = out.data() + 18;
  EXPECT_EQ(hex_range(ip, 12, 20), "0a4d0102" "c6336407");  // from the appliance to the client
  EXPECT_TRUE(ipv4_header_ok(ip));
  EXPECT_EQ(icmp_checksum_residue(ip + 20, 556), 0);

  const std::uint8_t appliance6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2};
  const auto frame6 = client_frame(true, 1500);
  ASSERT_GT(build_icmp_too_big(frame6.data(), std::uint32_t(frame6.size()), 14, true, 1430, test::kRxPortMac,
                               out.data(), std::uint32_t(out.size()), appliance6),
            0u);
  const std::uint8_t* ip6 = out.data() + 14;
  EXPECT_EQ(hex_range(ip6, 8, 24), hex_range(appliance6, 0, 16));
  EXPECT_EQ(hex_range(ip6, 24, 40), hex_range(frame6.data(), 14 + 8, 14 + 24)) << "to the client";
  EXPECT_EQ(icmpv6_checksum_residue(ip6), 0);
}

TEST(IcmpTooBig, ShortOriginalsAreQuotedWhole) {
  for (const bool v6 : {false, true}) {
    const auto frame = client_frame(v6, 200);
    std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
    const std::uint32_t n = build_icmp_too_big(frame.data(), std::uint32_t(frame.size()), 14, v6, 100,
                                               test::kRxPortMac, out.data(), std::uint32_t(out.size()));
    ASSERT_EQ(n, 14u + (v6 ? 40u : 20u) + 8u + 200u);
    const std::uint8_t* ip = out.data() + 14;
    if (v6) {
      EXPECT_EQ(icmpv6_checksum_residue(ip), 0);
    } else {
      EXPECT_TRUE(ipv4_header_ok(ip));
      EXPECT_EQ(icmp_checksum_residue(ip + 20, 208), 0);
    }
  }
}

TEST(IcmpTooBig, NoneWhenNotDue) {
  std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
  auto build = [&](const std::vector<std::uint8_t>& f, bool v6, std::uint32_t cap = kMaxIcmpTooBigFrame) {
    return build_icmp_too_big(f.data(), std::uint32_t(f.size()), 14, v6, 1400, test::kRxPortMac, out.data(), cap);
  };
  auto f = client_frame(false, 1400);
  EXPECT_GT(build(f, false), 0u);
  EXPECT_EQ(build(f, false, 14 + 575), 0u) << "out_cap";
  auto no_df = f;
  no_df[14 + 6] = 0;
  EXPECT_EQ(build(no_df, false), 0u) << "no DF";
  auto frag = f;
  frag[14 + 7] = 1;
  EXPECT_EQ(build(frag, false), 0u) << "a non-first fragment";
  auto icmp = f;
  icmp[14 + 9] = 1;
  EXPECT_EQ(build(icmp, false), 0u) << "ICMP";
  auto mcast = f;
  mcast[14 + 12] = 224;
  EXPECT_EQ(build(mcast, false), 0u) << "multicast source";
  auto f6 = client_frame(true, 1400);
  EXPECT_GT(build(f6, true), 0u);
  auto icmp6 = f6;
  icmp6[14 + 6] = 58;
  EXPECT_EQ(build(icmp6, true), 0u) << "ICMPv6";
  auto unspec = f6;
  std::fill(unspec.begin() + 14 + 8, unspec.begin() + 14 + 24, 0);
  EXPECT_EQ(build(unspec, true), 0u) << "unspecified source";
  EXPECT_EQ(build(std::vector<std::uint8_t>(f6.begin(), f6.begin() + 53), true), 0u) << "truncated header";
}

// A promiscuous port sees frames flooded towards other hosts: only a frame
// sent to the port's own MAC is answered, from that MAC, and never one to a
// group MAC or to an address that is not unicast (issue 38: a reply in
// another host's name poisoned the switch's table).
TEST(IcmpTooBig, OnlyAFrameSentToThePortIsAnsweredFromThePort) {
  std::vector<std::uint8_t> out(kMaxIcmpTooBigFrame);
  for (const bool v6 : {false, true}) {
    auto build = [&](const std::vector<std::uint8_t>& f) {
      return build_icmp_too_big(f.data(), std::uint32_t(f.size()), 14, v6, 1400, test::kRxPortMac, out.data(),
                                std::uint32_t(out.size()));
    };
    const auto f = client_frame(v6, 1400);
    ASSERT_GT(build(f), 0u);
    EXPECT_EQ(hex_range(out.data(), 0, 12), hex_range(test::kClientMac.data(), 0, 6) +
                                                hex_range(test::kRxPortMac.data(), 0, 6));
    auto other_host = f;
    other_host[5] ^= 0x10;  // another unicast MAC
    EXPECT_EQ(build(other_host), 0u) << "flooded towards another host";
    auto broadcast = f;
    std::fill(broadcast.begin(), broadcast.begin() + 6, 0xff);
    EXPECT_EQ(build(broadcast), 0u) << "broadcast";
    auto multicast = f;
    multicast[0] = 0x01, multicast[1] = 0x00, multicast[2] = 0x5e;
    EXPECT_EQ(build(multicast), 0u) << "multicast MAC";
    auto group_ip = f;
    group_ip[14 + (v6 ? 24 : 16)] = v6 ? 0xff : 239;
    EXPECT_EQ(build(group_ip), 0u) << "to a multicast address";
    if (!v6) {
      auto limited = f;
      std::fill(limited.begin() + 14 + 16, limited.begin() + 14 + 20, 0xff);
      EXPECT_EQ(build(limited), 0u) << "to the limited broadcast";
    }
  }
}

// The owner's ICMP limiter, on a clock of 1,000,000 ticks a second: a token
// bucket of per_second replies (a tenth of a second's worth at once), and a
// bound per destination, so that one sender of oversized frames does not
// take every other client's share (issue 38: a fixed window let 100 bogus
// packets starve real clients for the rest of the second).
TEST(IcmpLimiter, SpreadsRepliesAndBoundsEachDestination) {
  constexpr std::uint64_t kHz = 1000000;
  IcmpLimiter l;
  l.configure(100, 10, kHz);
  auto reply = [&](std::uint64_t now, std::uint64_t dest) {
    if (!l.permits(now, dest)) return false;
    l.spend(now, dest);
    return true;
  };
  const std::uint64_t t0 = 5 * kHz;
  // One destination at once: one reply, then none until 1/10 s later.
  EXPECT_TRUE(reply(t0, 1));
  for (std::uint64_t t = 1; t < 100; ++t) EXPECT_FALSE(reply(t0 + t, 1)) << t;
  // Others still get theirs: the burst is a tenth of a second's worth (10).
  unsigned others = 0;
  for (std::uint64_t d = 2; d < 100; ++d) others += reply(t0 + 100, d);
  EXPECT_EQ(others, 9u) << "the bucket's burst, less the first reply";
  // Then one per 1/100 s.
  EXPECT_FALSE(reply(t0 + 101, 500));
  EXPECT_TRUE(reply(t0 + 101 + kHz / 100, 500));
  EXPECT_FALSE(reply(t0 + 102 + kHz / 100, 501));
  EXPECT_FALSE(reply(t0 + kHz / 10 - 1, 1)) << "destination 1 within its tenth of a second";
  EXPECT_TRUE(reply(t0 + kHz / 10, 1)) << "destination 1 again, a tenth of a second later";
  // permits() alone takes nothing.
  IcmpLimiter fresh;
  fresh.configure(1, 0, kHz);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(fresh.permits(t0, 7));
  fresh.spend(t0, 7);
  EXPECT_FALSE(fresh.permits(t0, 8));
  // No per-destination bound with 0, and none at all with a rate of 0.
  IcmpLimiter unbounded;
  unbounded.configure(1000000, 0, kHz);
  unsigned same = 0;
  for (int i = 0; i < 1000; ++i) same += unbounded.permits(t0 + std::uint64_t(i), 9) && (unbounded.spend(t0 + std::uint64_t(i), 9), true);
  EXPECT_EQ(same, 1000u);
  IcmpLimiter off;
  off.configure(0, 10, kHz);
  EXPECT_FALSE(off.permits(t0, 1));
}

// delivery.h's fast sum against RFC 1071 done the plain way.
TEST(Delivery, FastChecksumMatchesTheReference) {
  std::mt19937 rng(3);
  std::vector<std::uint8_t> data(3000);
  for (auto& x : data) x = std::uint8_t(rng());
  for (std::uint32_t len = 0; len < 200; ++len) {
    const std::uint16_t fast = delivery_detail::sum_be16(data.data() + 2 * len, len);
    const std::uint16_t ref = std::uint16_t(~traffic::checksum_fold(traffic::checksum_add(0, data.data() + 2 * len, len)));
    // 0 and 0xffff are the same one's-complement number.
    EXPECT_EQ(fast % 0xffff, ref % 0xffff) << len;
  }
  std::fill(data.begin(), data.end(), 0xff);
  EXPECT_EQ(delivery_detail::sum_be16(data.data(), 3000) % 0xffff, 0);
}

}  // namespace
}  // namespace qs
