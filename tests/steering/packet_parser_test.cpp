// Parser and classifier over the fixture table: every fixture whole (verdict,
// header fields, offsets, tuple, route) and cut at every length (exact
// verdict per field, no read past the end: each cut lives in a heap buffer of
// exactly its size, so ASan flags any over-read).
#include "steering/packet_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "steering/packet_classifier.h"
#include "tests/steering/classify_burst.h"
#include "tests/steering/hex.h"
#include "tests/steering/packet_fixtures.h"

namespace qs {
namespace {

using test::hex;
using test::packet_fixtures;
using test::PacketFixture;
using test::unhex;

std::string outcome(const ParsedPacket& p) {
  if (p.verdict == Verdict::kMalformed) return "malformed:" + std::string(to_string(p.reason));
  return std::string(to_string(p.verdict));
}

std::string version_text(const ParsedPacket& p) {
  if (p.form != QuicForm::kLong) return "-";
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", p.version);
  return text;
}

// Start offset of the first field whose name starts with `prefix`, or -1.
int field_offset(const PacketFixture& f, const std::string& prefix) {
  int offset = 0;
  for (const auto& field : f.fields) {
    if (std::string(field.name).rfind(prefix, 0) == 0) return offset;
    offset += int(std::string(field.hex).size() / 2);
  }
  return -1;
}

const test::FixtureField* field(const PacketFixture& f, const std::string& name) {
  for (const auto& field : f.fields)
    if (name == field.name) return &field;
  return nullptr;
}

class Fixtures : public ::testing::Test {
 protected:
  Fixtures() : classifier_(test::fixture_steering_config()) {}
  PacketClassifier classifier_;
};

TEST_F(Fixtures, WholeFramesParseAsExpected) {
  const ParserConfig& config = classifier_.parser_config();
  for (const auto& f : packet_fixtures()) {
    SCOPED_TRACE(f.name);
    const auto bytes = f.bytes();
    const ParsedPacket p = parse_packet(bytes.data(), bytes.size(), config);
    EXPECT_EQ(outcome(p), f.outcome);
    EXPECT_EQ(to_string(p.form), f.form);
    EXPECT_EQ(to_string(p.type), f.type);
    EXPECT_EQ(version_text(p), f.version);
    if (p.is_quic()) {
      EXPECT_EQ(hex(p.dcid(bytes.data()), p.dcid_len), f.dcid);
      EXPECT_EQ(hex(p.scid(bytes.data()), p.scid_len), f.scid);
    }
    EXPECT_EQ(p.opens_connection, f.opens_connection);

    // Offsets and the 4-tuple, against the fields they come from.
    const int l3 = std::max(field_offset(f, "ipv4"), field_offset(f, "ipv6"));
    if (l3 >= 0 && p.verdict != Verdict::kMalformed) {
      EXPECT_EQ(p.l3_offset, l3);
      EXPECT_EQ(p.ip_version, field_offset(f, "ipv4") >= 0 ? 4 : 6);
      const auto ip = unhex(field(f, p.ip_version == 4 ? "ipv4" : "ipv6")->hex);
      const std::size_t a = p.ip_version == 4 ? 12 : 8, alen = p.addr_len();
      EXPECT_EQ(hex(p.src_addr(bytes.data()), alen), hex(ip.data() + a, alen));
      EXPECT_EQ(hex(p.dst_addr(bytes.data()), alen), hex(ip.data() + a + alen, alen));
    }
    if (const auto* udp = field(f, "udp"); udp && p.verdict != Verdict::kMalformed) {
      const auto u = unhex(udp->hex);
      EXPECT_EQ(p.l4_offset, field_offset(f, "udp"));
      EXPECT_EQ(p.ip_proto, 17);
      EXPECT_EQ(p.src_port, u[0] << 8 | u[1]);
      EXPECT_EQ(p.dst_port, u[2] << 8 | u[3]);
      const bool dst_quic = p.dst_port == 443 || p.dst_port == 4433;
      EXPECT_EQ(p.from_quic_port, p.is_quic() && !dst_quic);
    }
    if (p.is_quic()) {
      EXPECT_EQ(p.quic_offset, field_offset(f, "quic_first"));
      if (p.form == QuicForm::kLong) {
        EXPECT_EQ(p.dcid_offset, field_offset(f, "dcid_len") + 1);
        EXPECT_EQ(p.scid_offset, field_offset(f, "scid_len") + 1);
      } else {
        EXPECT_EQ(p.dcid_offset, field_offset(f, "dcid_first"));
      }
    }
    EXPECT_EQ(p.fragment, std::string(f.name).find("fragment") != std::string::npos);
  }
}

TEST_F(Fixtures, WholeFramesRouteAsExpected) {
  const OwnerResolver& resolver = classifier_.resolver();
  for (const auto& f : packet_fixtures()) {
    SCOPED_TRACE(f.name);
    const auto bytes = f.bytes();
    const Decision d = classifier_.classify(bytes.data(), bytes.size());
    const std::string route = f.route;
    if (route.rfind("lcore:", 0) == 0) {
      EXPECT_EQ(d.resolution.how, ResolveMethod::kQuicLb);
      ASSERT_TRUE(d.resolution.routed());
      EXPECT_EQ(resolver.owner_lcore(d.resolution.owner_index), std::stoul(route.substr(6)));
    } else if (route == "fallback_dcid") {
      EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackDcid);
      // Recomputed from the fixture's DCID, not from the parse.
      const auto dcid = unhex(f.dcid);
      EXPECT_EQ(d.resolution.owner_index,
                resolver.fallback_owner_for_dcid(dcid.data(), dcid.size()));
    } else if (route == "fallback_tuple") {
      EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackTuple);
      EXPECT_LT(d.resolution.owner_index, resolver.owner_count());
    } else {
      EXPECT_EQ(route, "none");
      EXPECT_EQ(d.resolution.how, ResolveMethod::kNone);
      EXPECT_FALSE(d.resolution.routed());
    }
  }
}

// The burst path (batched AES) decides exactly as classify() does, with
// AES-NI and with the OpenSSL fallback, whatever the order and mix.
TEST_F(Fixtures, BurstEqualsSingleFrames) {
  PacketClassifier openssl(test::fixture_steering_config(), QuicLbCodec::AesBackend::kOpenSsl);
  std::vector<std::vector<std::uint8_t>> frames;
  for (int round = 0; round < 3; ++round)  // > one 64-frame chunk
    for (const auto& f : packet_fixtures()) frames.push_back(f.bytes());
  for (PacketClassifier* c : {&classifier_, &openssl}) {
    const std::vector<Decision> out = test::classify_as_burst(*c, frames);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const Decision one = classifier_.classify(frames[i].data(), frames[i].size());
      EXPECT_EQ(out[i].packet.verdict, one.packet.verdict) << i;
      EXPECT_EQ(out[i].packet.dcid_offset, one.packet.dcid_offset) << i;
      EXPECT_EQ(out[i].resolution.owner_index, one.resolution.owner_index) << i;
      EXPECT_EQ(out[i].resolution.how, one.resolution.how) << i;
    }
  }
}

// Calls fn(fixture, field, cut, frame) for every length `cut` that ends in
// `field` of every fixture, with the fixture's first `cut` octets in a heap
// buffer of exactly that size: any read past them is an ASan error.
template <typename Fn>
void for_each_cut(Fn&& fn) {
  for (const auto& f : packet_fixtures()) {
    const auto bytes = f.bytes();
    std::size_t field_start = 0;
    for (const auto& fld : f.fields) {
      const std::size_t field_end = field_start + std::string(fld.hex).size() / 2;
      for (std::size_t cut = field_start; cut < field_end; ++cut) {
        std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[cut]);
        std::copy(bytes.begin(), bytes.begin() + std::ptrdiff_t(cut), buf.get());
        fn(f, fld, cut, buf.get());
      }
      field_start = field_end;
    }
    EXPECT_EQ(field_start, bytes.size()) << f.name;
  }
}

TEST_F(Fixtures, EveryTruncationHasItsExactVerdict) {
  for_each_cut([&](const PacketFixture& f, const test::FixtureField& fld, std::size_t cut, const std::uint8_t* frame) {
    const Decision d = classifier_.classify(frame, cut);
    EXPECT_EQ(outcome(d.packet), fld.cut_outcome) << f.name << " cut at " << cut << " (in field " << fld.name << ")";
    if (d.packet.verdict == Verdict::kMalformed) {
      EXPECT_FALSE(d.resolution.routed());
    }
  });
}

// Every field of a parse, for comparing two parses whole.
std::string fields_of(const ParsedPacket& p) {
  char text[256];
  std::snprintf(text, sizeof text,
                "verdict %d reason %d ip %u proto %u frag %d from_port %d form %d type %d opens %d "
                "dcid %u@%u scid %u@%u l3 %u l4 %u quic %u ports %u>%u version %08x",
                int(p.verdict), int(p.reason), p.ip_version, p.ip_proto, p.fragment, p.from_quic_port,
                int(p.form), int(p.type), p.opens_connection, p.dcid_len, p.dcid_offset, p.scid_len,
                p.scid_offset, p.l3_offset, p.l4_offset, p.quic_offset, p.src_port, p.dst_port,
                p.version);
  return text;
}

// parse_packet takes parse_plain_udp's fixed offsets for the common frame
// and parse_layers for the rest: the two must judge every frame the plain
// path accepts alike. Every fixture, every header octet (Ethernet to the
// first QUIC octets) set to values that matter to some check (0, 0xff, each
// bit flipped, one more, one less), then cut at its whole length, one octet
// short, and at the IP header's end, with and without a longer frame_len.
TEST(ParserPlainPath, AgreesWithTheGeneralParserOnEveryMutation) {
  const ParserConfig config(test::fixture_steering_config());
  unsigned plain = 0, declined = 0;
  const auto check = [&](const std::vector<std::uint8_t>& frame, std::size_t len, std::size_t frame_len,
                         const std::string& what) {
    std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[len + 1]);  // +1: len may be 0
    std::copy(frame.begin(), frame.begin() + std::ptrdiff_t(len), buf.get());
    ParsedPacket general;
    general = ParsedPacket{};
    parser_detail::parse_layers(buf.get(), len, config, general, frame_len);
    ParsedPacket probe{};
    if (parser_detail::parse_plain_udp(buf.get(), len, config, probe)) ++plain;
    else ++declined;
    ParsedPacket fast;
    parse_packet(buf.get(), len, config, fast, frame_len);
    ASSERT_EQ(fields_of(fast), fields_of(general)) << what << " len " << len << " frame_len " << frame_len;
  };
  for (const auto& f : packet_fixtures()) {
    const auto original = f.bytes();
    const int quic = field_offset(f, "quic_first");
    const std::size_t last = std::min(original.size(), std::size_t(quic < 0 ? 64 : quic + 8));
    for (std::size_t at = 12; at < last; ++at) {
      const std::uint8_t o = original[at];
      const std::uint8_t values[] = {0x00, 0xff, std::uint8_t(o + 1), std::uint8_t(o - 1), std::uint8_t(o ^ 0x01),
                                     std::uint8_t(o ^ 0x02), std::uint8_t(o ^ 0x04), std::uint8_t(o ^ 0x08),
                                     std::uint8_t(o ^ 0x10), std::uint8_t(o ^ 0x20), std::uint8_t(o ^ 0x40),
                                     std::uint8_t(o ^ 0x80)};
      for (const std::uint8_t v : values) {
        auto frame = original;
        frame[at] = v;
        const std::string what = std::string(f.name) + " octet " + std::to_string(at) + " = " + std::to_string(v);
        for (const std::size_t len : {frame.size(), frame.size() - 1, std::min(frame.size(), std::size_t(54)),
                                      std::min(frame.size(), std::size_t(42))}) {
          check(frame, len, 0, what);
          check(frame, len, frame.size() + 100, what);
        }
      }
    }
    check(original, original.size(), 0, f.name);
  }
  // Both paths were taken: the comparison says something about each.
  EXPECT_GT(plain, 1000u);
  EXPECT_GT(declined, 1000u);
}

// A multi-segment frame is parsed on its first segment with frame_len its
// whole length: every cut of every fixture, as a first segment of the whole
// frame, is judged on the octets it holds (the cut's own verdict), except
// that a payload beyond the cut is not missing. Each cut lives in a heap
// buffer of exactly its size: a read past the segment is an ASan error, and
// before the fix that this test came with, the QUIC header was read up to
// the IP packet's end rather than the segment's.
TEST(ParserMultiSegment, EveryCutIsJudgedOnItsFirstSegment) {
  const ParserConfig config(test::fixture_steering_config());
  for_each_cut([&](const PacketFixture& f, const test::FixtureField& fld, std::size_t cut, const std::uint8_t* frame) {
    ParsedPacket p;
    parse_packet(frame, cut, config, p, f.bytes().size());
    const std::string want =
        std::string(fld.cut_outcome) == "malformed:truncated_payload" ? f.outcome : fld.cut_outcome;
    EXPECT_EQ(outcome(p), want) << f.name << " first segment of " << cut << " octets (in field " << fld.name << ")";
  });
}

// Short-header DCID lengths per codepoint: configured length, self-encoded
// length, the reserved 0b111 (self-encoded once QUIC-LB is in use), default.
TEST(ParserConfigTest, ShortDcidLengthByCodepoint) {
  const ParserConfig lb(test::fixture_steering_config());
  EXPECT_EQ(lb.short_dcid_len(0x08), 9);         // cr0 self-encoded 8 + 1
  EXPECT_EQ(lb.short_dcid_len(0x0c), 13);        // cr0 self-encoded, whatever it says
  EXPECT_EQ(lb.short_dcid_len(0x20 | 0x13), 17); // cr1 fixed length, low bits random
  EXPECT_EQ(lb.short_dcid_len(0x40 | 0x08), 9);  // cr2 self-encoded
  EXPECT_EQ(lb.short_dcid_len(0x60 | 0x1f), 11); // cr3 fixed
  EXPECT_EQ(lb.short_dcid_len(0x80), 8);         // cr4: no config, default
  EXPECT_EQ(lb.short_dcid_len(0xe0 | 0x03), 4);  // 0b111 self-encoded
  SteeringConfig plain;
  plain.short_dcid_len = 12;
  const ParserConfig no_lb(plain);
  EXPECT_EQ(no_lb.short_dcid_len(0xe0 | 0x03), 12);  // no QUIC-LB: 0b111 is just random
  EXPECT_TRUE(no_lb.is_quic_port(443));
  EXPECT_FALSE(no_lb.is_quic_port(4433));
}

// Each of 0..16 ports, in every slot, is a QUIC port and its neighbours are
// not; nor is port 0, which the unused slots hold, nor any port with none
// configured.
TEST(ParserConfigTest, QuicPortsInEverySlot) {
  for (std::size_t count = 0; count <= ParserConfig::kMaxPorts; ++count) {
    SteeringConfig c;
    c.quic_ports.clear();
    for (std::size_t i = 0; i < count; ++i) c.quic_ports.push_back(std::uint16_t(1000 + 10 * i));
    const ParserConfig config(c);
    EXPECT_FALSE(config.is_quic_port(0)) << count;
    EXPECT_FALSE(config.is_quic_port(65535)) << count;
    for (std::size_t i = 0; i < count; ++i) {
      const auto port = std::uint16_t(1000 + 10 * i);
      EXPECT_TRUE(config.is_quic_port(port)) << count << " ports, slot " << i;
      EXPECT_FALSE(config.is_quic_port(std::uint16_t(port + 1))) << count;
      EXPECT_FALSE(config.is_quic_port(std::uint16_t(port + 256))) << count;  // the other octet
    }
  }
}

TEST(ParserConfigTest, RejectsBadConfigs) {
  SteeringConfig c;
  c.quic_ports.assign(17, 0);
  for (std::uint16_t i = 0; i < 17; ++i) c.quic_ports[i] = std::uint16_t(1000 + i);
  EXPECT_THROW(ParserConfig{c}, std::invalid_argument);
  c.quic_ports = {443, 0};
  EXPECT_THROW(ParserConfig{c}, std::invalid_argument);
  c.quic_ports = {443};
  c.short_dcid_len = 21;
  EXPECT_THROW(ParserConfig{c}, std::invalid_argument);
  c.short_dcid_len = 0;
  EXPECT_NO_THROW(ParserConfig{c});
}

// With zero-length server CIDs a short header's DCID is empty and legal; the
// packet then routes by its 4-tuple.
TEST(ParserZeroLengthCids, ShortHeaderWithEmptyDcidRoutesByTuple) {
  SteeringConfig c;
  c.short_dcid_len = 0;
  c.owner_lcores = {1, 2};
  PacketClassifier classifier(c);
  for (const auto& f : packet_fixtures()) {
    if (std::string(f.name) != "short_header_without_dcid") continue;
    const auto bytes = f.bytes();
    const Decision d = classifier.classify(bytes.data(), bytes.size());
    EXPECT_EQ(d.packet.verdict, Verdict::kQuic);
    EXPECT_EQ(d.packet.dcid_len, 0);
    EXPECT_EQ(d.resolution.how, ResolveMethod::kFallbackTuple);
    return;
  }
  FAIL() << "fixture short_header_without_dcid missing";
}

// A server -> client short header carries the client's CID, which QUIC-LB
// does not describe: a client CID that starts like 0b111 with a self-encoded
// length past 20 is still QUIC, measured by short_dcid_len. The same octets
// sent to the server are a QUIC-LB CID and are held to the draft's rules.
TEST(ParserDirections, ServerToClientShortHeaderIgnoresQuicLbLengthRules) {
  SteeringConfig c;
  c.short_dcid_len = 8;
  QuicLbConfig lb;
  lb.config_id = 0;
  lb.server_id_len = 2;
  lb.nonce_len = 6;
  c.quic_lb = {lb};
  const ParserConfig config(c);
  auto frame = [](std::uint16_t sport, std::uint16_t dport) {
    std::vector<std::uint8_t> f(14 + 20 + 8 + 1 + 8 + 16, 0);
    f[12] = 0x08;  // IPv4
    f[14] = 0x45;
    const std::size_t ip_len = f.size() - 14, udp_len = ip_len - 20;
    f[16] = std::uint8_t(ip_len >> 8);
    f[17] = std::uint8_t(ip_len);
    f[23] = 17;  // UDP
    f[34] = std::uint8_t(sport >> 8);
    f[35] = std::uint8_t(sport);
    f[36] = std::uint8_t(dport >> 8);
    f[37] = std::uint8_t(dport);
    f[38] = std::uint8_t(udp_len >> 8);
    f[39] = std::uint8_t(udp_len);
    f[42] = 0x40;                                   // short header
    for (std::size_t i = 43; i < 51; ++i) f[i] = 0xff;  // codepoint 0b111, "length 32"
    return f;
  };
  const auto s2c = frame(443, 50000);
  const ParsedPacket down = parse_packet(s2c.data(), s2c.size(), config);
  EXPECT_EQ(down.verdict, Verdict::kQuic);
  EXPECT_TRUE(down.from_quic_port);
  EXPECT_EQ(down.dcid_len, 8);
  const auto c2s = frame(50000, 443);
  const ParsedPacket up = parse_packet(c2s.data(), c2s.size(), config);
  EXPECT_EQ(up.verdict, Verdict::kMalformed);
  EXPECT_EQ(up.reason, MalformedReason::kCidTooLong);
}

TEST(ParserNames, EveryReasonHasAName) {
  for (int r = int(MalformedReason::kNone); r <= int(MalformedReason::kTruncatedPayload); ++r)
    EXPECT_NE(to_string(MalformedReason(r)), "?") << r;
  EXPECT_EQ(to_string(MalformedReason::kCidTooLong), "cid_too_long");
  EXPECT_EQ(to_string(MalformedReason::kTruncatedUdp), "truncated_udp");
}

}  // namespace
}  // namespace qs
