// quicgen's library: wire pieces against RFC vectors, and generated traffic
// checked by independent re-parsing (checksums recomputed here, not with
// checksum.h; QUIC headers walked here, not with quic_wire.h).
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "steering/quic_lb.h"
#include "tests/traffic/checksum.h"
#include "tests/traffic/frame.h"
#include "tests/traffic/pcap_writer.h"
#include "tests/traffic/quic_traffic.h"
#include "tests/traffic/quic_wire.h"

namespace qs::traffic {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes from_hex(const std::string& text) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) out.push_back(std::uint8_t(std::stoul(text.substr(i, 2), nullptr, 16)));
  return out;
}

std::uint16_t be16(const std::uint8_t* p) { return std::uint16_t(p[0] << 8 | p[1]); }

// Plain one's-complement sum of 16-bit words, written out independently of
// checksum.h.
std::uint32_t word_sum(const std::uint8_t* p, std::size_t len) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < len; ++i) sum += (i % 2 == 0) ? std::uint64_t(p[i]) << 8 : p[i];
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >> 16);
  return std::uint32_t(sum);
}

// Every checksum in the frame verifies: the IPv4 header sums to 0xffff, the
// UDP datagram with its pseudo-header sums to 0xffff and its checksum is not
// zero (IPv6 forbids zero; we never omit it for IPv4 either).
::testing::AssertionResult checksums_verify(const Bytes& frame) {
  const UdpFrameView v = parse_udp_frame(frame);
  if (!v.ok) return ::testing::AssertionFailure() << "not an Ethernet/IP/UDP frame";
  const std::uint8_t* l3 = &frame[v.l3_offset];
  const std::uint8_t* udp = &frame[v.l4_offset];
  const std::size_t udp_len = be16(udp + 4);
  Bytes pseudo;
  if (!v.v6) {
    if (word_sum(l3, 20) != 0xffff) return ::testing::AssertionFailure() << "bad IPv4 header checksum";
    pseudo.assign(l3 + 12, l3 + 20);
    pseudo.insert(pseudo.end(), {0, 17, std::uint8_t(udp_len >> 8), std::uint8_t(udp_len)});
  } else {
    pseudo.assign(l3 + 8, l3 + 40);
    pseudo.insert(pseudo.end(), {0, 0, std::uint8_t(udp_len >> 8), std::uint8_t(udp_len), 0, 0, 0, 17});
  }
  if (be16(udp + 6) == 0) return ::testing::AssertionFailure() << "UDP checksum omitted";
  pseudo.insert(pseudo.end(), udp, udp + udp_len);
  if (word_sum(pseudo.data(), pseudo.size()) != 0xffff) return ::testing::AssertionFailure() << "bad UDP checksum";
  return ::testing::AssertionSuccess();
}

Bytes udp_payload(const Bytes& frame) {
  const UdpFrameView v = parse_udp_frame(frame);
  return Bytes(frame.begin() + std::ptrdiff_t(v.payload_offset),
               frame.begin() + std::ptrdiff_t(v.payload_offset + v.payload_len));
}

std::uint64_t read_varint(const Bytes& b, std::size_t& at, bool& ok) {
  if (at >= b.size()) return ok = false, 0;
  const std::size_t len = std::size_t(1) << (b[at] >> 6);
  if (at + len > b.size()) return ok = false, 0;
  std::uint64_t v = b[at] & 0x3f;
  for (std::size_t i = 1; i < len; ++i) v = v << 8 | b[at + i];
  at += len;
  return v;
}

struct LongPacketView {
  std::uint8_t first = 0;
  std::uint32_t version = 0;
  Bytes dcid, scid;
  std::size_t start = 0, pn_offset = 0, end = 0;
};

// Walks the coalesced long header packets of a datagram by their Length
// fields (RFC 9000 section 12.2); false if they do not tile it exactly.
bool walk_long_packets(const Bytes& d, std::vector<LongPacketView>& out) {
  std::size_t at = 0;
  while (at < d.size()) {
    LongPacketView p;
    p.start = at;
    if (d.size() < at + 7 || !(d[at] & 0x80)) return false;
    p.first = d[at];
    p.version = std::uint32_t(d[at + 1]) << 24 | std::uint32_t(d[at + 2]) << 16 | std::uint32_t(d[at + 3]) << 8 | d[at + 4];
    at += 5;
    const std::size_t dlen = d[at++];
    if (dlen > 20 || d.size() < at + dlen + 1) return false;
    p.dcid.assign(d.begin() + std::ptrdiff_t(at), d.begin() + std::ptrdiff_t(at + dlen));
    at += dlen;
    const std::size_t slen = d[at++];
    if (slen > 20 || d.size() < at + slen) return false;
    p.scid.assign(d.begin() + std::ptrdiff_t(at), d.begin() + std::ptrdiff_t(at + slen));
    at += slen;
    const std::uint8_t type = (p.first >> 4) & 3;
    const bool initial = p.version == kQuicV2 ? type == 1 : type == 0;
    bool ok = true;
    if (initial) at += read_varint(d, at, ok);
    const std::uint64_t length = read_varint(d, at, ok);
    if (!ok || at + length > d.size()) return false;
    p.pn_offset = at;
    at += length;
    p.end = at;
    out.push_back(p);
  }
  return true;
}

TrafficOptions small_options(std::uint32_t connections = 120) {
  TrafficOptions o = default_traffic_options();
  o.connections = connections;
  o.packets_per_connection = 12;
  o.ipv6 = 0.4;
  o.vlan = 0.2;
  o.qinq = 0.1;
  o.migrate = 0.15;
  o.nat_rebind = 0.15;
  o.coalesce = 0.5;
  o.v2 = 0.25;
  o.zero_rtt = 0.25;
  o.version_negotiation = 6;
  o.non_quic = 8;
  o.malformed = 10;
  o.seed = 42;
  return o;
}

// --- wire pieces ----------------------------------------------------------

TEST(Checksum, Ipv4HeaderKnownAnswer) {
  // A classic worked example: the header checksums to 0xb861.
  Bytes header = from_hex("450000730000400040110000c0a80001c0a800c7");
  EXPECT_EQ(ipv4_header_checksum(header.data(), header.size()), 0xb861);
}

TEST(QuicWire, InitialKeysMatchRfc9001AppendixA) {
  const Bytes dcid = from_hex("8394c8f03e515708");
  const PacketKeys client = derive_initial_keys(kQuicV1, dcid, false);
  EXPECT_EQ(Bytes(client.key.begin(), client.key.end()), from_hex("1f369613dd76d5467730efcbe3b1a22d"));
  EXPECT_EQ(Bytes(client.iv.begin(), client.iv.end()), from_hex("fa044b2f42a3fd3b46fb255c"));
  EXPECT_EQ(Bytes(client.hp.begin(), client.hp.end()), from_hex("9f50449e04a0e810283a1e9933adedd2"));
  const PacketKeys server = derive_initial_keys(kQuicV1, dcid, true);
  EXPECT_EQ(Bytes(server.key.begin(), server.key.end()), from_hex("cf3a5331653c364c88f0f379b6067e37"));
  EXPECT_EQ(Bytes(server.iv.begin(), server.iv.end()), from_hex("0ac1493ca1905853b0bba03e"));
  EXPECT_EQ(Bytes(server.hp.begin(), server.hp.end()), from_hex("c206b8d9b9f0f37644430b490eeaa314"));
}

TEST(QuicWire, V2ClientInitialKeysMatchRfc9369AppendixA) {
  const PacketKeys client = derive_initial_keys(kQuicV2, from_hex("8394c8f03e515708"), false);
  EXPECT_EQ(Bytes(client.key.begin(), client.key.end()), from_hex("8b1a0bc121284290a29e0971b5cd045d"));
  EXPECT_EQ(Bytes(client.iv.begin(), client.iv.end()), from_hex("91f73e2351d8fa91660e909f"));
  EXPECT_EQ(Bytes(client.hp.begin(), client.hp.end()), from_hex("45b95e15235d6f45a6b19cbcb0294ba9"));
}

TEST(QuicWire, ProtectsTheRfc9001ServerInitial) {
  // RFC 9001 appendix A.3: header and ServerHello payload in, protected packet out.
  const PacketKeys keys = derive_initial_keys(kQuicV1, from_hex("8394c8f03e515708"), true);
  LongHeader header;
  header.type = LongType::kInitial;
  const Bytes scid = from_hex("f067a5502a4262b5");
  header.scid = scid;
  header.pn_len = 2;
  header.pn = 1;
  const Bytes payload = from_hex(
      "02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf73988cfc79825df566dc5430b9a045a1200130100002e"
      "00330024001d00209d3c940d89690b84d08a60993c144eca684d1081287c834d5311bcf32bb9da1a002b00020304");
  std::size_t pn_offset = 0;
  Bytes packet = build_long_header(header, payload.size() + kAeadTagLen, &pn_offset);
  EXPECT_EQ(packet, from_hex("c1000000010008f067a5502a4262b50040750001"));
  packet.insert(packet.end(), payload.begin(), payload.end());
  protect_packet(packet, pn_offset, header.pn_len, header.pn, keys);
  EXPECT_EQ(packet, from_hex("cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a5816b6394100f37a1c6979755478"
                             "0bb38cc5a99f5ede4cf73c3ec2493a1839b3dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b56"
                             "2bfb19fb84022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc42158407dd074ee"));
  Bytes plain;
  std::uint64_t pn = 0;
  ASSERT_TRUE(unprotect_packet(packet, pn_offset, keys, plain, pn));
  EXPECT_EQ(pn, 1u);
  EXPECT_EQ(plain, payload);
  packet[30] ^= 1;  // any flipped bit fails the tag
  EXPECT_FALSE(unprotect_packet(packet, pn_offset, keys, plain, pn));
}

TEST(QuicWire, V2PermutesLongHeaderTypes) {
  EXPECT_EQ(long_type_bits(kQuicV1, LongType::kInitial), 0);
  EXPECT_EQ(long_type_bits(kQuicV1, LongType::kHandshake), 2);
  EXPECT_EQ(long_type_bits(kQuicV2, LongType::kInitial), 1);
  EXPECT_EQ(long_type_bits(kQuicV2, LongType::kZeroRtt), 2);
  EXPECT_EQ(long_type_bits(kQuicV2, LongType::kHandshake), 3);
  EXPECT_EQ(long_type_bits(kQuicV2, LongType::kRetry), 0);
}

TEST(Frame, BuildsParseableFramesWithTagsAndChecksums) {
  L2Header l2;
  l2.outer_vlan = 100;
  l2.vlan = 200;
  const Bytes payload(1001, 0xab);  // odd length exercises the checksum's tail octet
  const Bytes v4 = build_udp_frame(l2, IpAddress::v4(10, 0, 0, 1), 50000, IpAddress::v4(10, 0, 0, 2), 443, payload, 7, 0);
  const UdpFrameView view = parse_udp_frame(v4);
  ASSERT_TRUE(view.ok);
  EXPECT_EQ(view.vlan_ids, (std::vector<std::uint16_t>{100, 200}));
  EXPECT_EQ(be16(&v4[12]), kEtherTypeQinQ);
  EXPECT_EQ(view.dst_port, 443);
  EXPECT_EQ(view.payload_len, payload.size());
  EXPECT_TRUE(checksums_verify(v4));
  const Bytes v6 = build_udp_frame({}, TrafficOptions::ipv6_address("2001:db8::1"), 50000,
                                   TrafficOptions::ipv6_address("2001:db8::2"), 443, payload, 0, 0x12345);
  EXPECT_TRUE(parse_udp_frame(v6).v6);
  EXPECT_TRUE(checksums_verify(v6));
  Bytes corrupt = v6;
  corrupt.back() ^= 0x40;
  EXPECT_FALSE(checksums_verify(corrupt));
  EXPECT_THROW(build_udp_frame({}, IpAddress::v4(10, 0, 0, 1), 1, TrafficOptions::ipv6_address("::1"), 2, payload, 0, 0),
               std::invalid_argument);
}

// --- generated traffic ------------------------------------------------------

TEST(Traffic, SameSeedSameBytesOtherSeedOtherBytes) {
  const TrafficOptions o = small_options(40);
  const Traffic a = generate_traffic(o), b = generate_traffic(o);
  ASSERT_EQ(a.packets.size(), b.packets.size());
  for (std::size_t i = 0; i < a.packets.size(); ++i) {
    ASSERT_EQ(a.packets[i].frame, b.packets[i].frame) << "frame " << i;
    ASSERT_EQ(a.packets[i].timestamp_ns, b.packets[i].timestamp_ns);
    ASSERT_EQ(a.packets[i].connection, b.packets[i].connection);
    ASSERT_EQ(a.packets[i].kind, b.packets[i].kind);
  }
  TrafficOptions other = o;
  other.seed = 43;
  const Traffic c = generate_traffic(other);
  std::size_t same = 0;
  for (std::size_t i = 0; i < std::min(a.packets.size(), c.packets.size()); ++i) same += a.packets[i].frame == c.packets[i].frame;
  EXPECT_EQ(same, 0u);
}

TEST(Traffic, EveryChecksumVerifies) {
  const Traffic t = generate_traffic(small_options());
  ASSERT_GT(t.packets.size(), 1000u);
  for (std::size_t i = 0; i < t.packets.size(); ++i) ASSERT_TRUE(checksums_verify(t.packets[i].frame)) << "frame " << i;
}

TEST(Traffic, PropertiesGoToExactlyTheRequestedShare) {
  const TrafficOptions o = small_options(200);
  const Traffic t = generate_traffic(o);
  std::map<std::string, std::size_t> n;
  for (const Connection& c : t.connections) {
    n["ipv6"] += c.original.client_ip.v6;
    n["vlan"] += c.l2.vlan != 0 && c.l2.outer_vlan == 0;
    n["qinq"] += c.l2.outer_vlan != 0;
    n["v2"] += c.version == kQuicV2;
    n["migrate"] += c.migration == Migration::kActive;
    n["nat"] += c.migration == Migration::kNatRebinding;
    n["coalesce"] += c.coalesced;
    n["zero_rtt"] += c.zero_rtt;
  }
  EXPECT_EQ(n["ipv6"], 80u);
  EXPECT_EQ(n["vlan"], 40u);
  EXPECT_EQ(n["qinq"], 20u);
  EXPECT_EQ(n["v2"], 50u);
  EXPECT_EQ(n["migrate"], 30u);
  EXPECT_EQ(n["nat"], 30u);
  EXPECT_EQ(n["coalesce"], 100u);
  EXPECT_EQ(n["zero_rtt"], 50u);
  std::map<PacketKind, std::size_t> kinds;
  for (const Packet& p : t.packets) ++kinds[p.kind];
  EXPECT_EQ(kinds[PacketKind::kVersionProbe], 6u);
  EXPECT_EQ(kinds[PacketKind::kVersionNegotiation], 6u);
  EXPECT_EQ(kinds[PacketKind::kNonQuic], 8u);
  EXPECT_EQ(kinds[PacketKind::kMalformed], 10u);
  EXPECT_EQ(kinds[PacketKind::kOneRtt], 200u * o.packets_per_connection);
}

TEST(Traffic, FramesCarryTheirConnectionsAddressing) {
  const TrafficOptions o = small_options();
  const Traffic t = generate_traffic(o);
  for (const Packet& p : t.packets) {
    const UdpFrameView v = parse_udp_frame(p.frame);
    ASSERT_TRUE(v.ok);
    const bool c2s = p.direction == Direction::kClientToServer;
    if (p.kind == PacketKind::kNonQuic) {
      EXPECT_NE(v.dst_port, o.port);
      continue;
    }
    EXPECT_EQ(c2s ? v.dst_port : v.src_port, o.port);
    EXPECT_GE(c2s ? v.src_port : v.dst_port, 49152);
    if (p.connection < 0) continue;
    const Connection& c = t.connections[std::size_t(p.connection)];
    const FourTuple& tuple = p.post_migration ? c.migrated : c.original;
    const std::size_t alen = tuple.client_ip.size();
    const std::size_t src = v.l3_offset + (v.v6 ? 8 : 12), dst = src + alen;
    const IpAddress& want_src = c2s ? tuple.client_ip : tuple.server_ip;
    const IpAddress& want_dst = c2s ? tuple.server_ip : tuple.client_ip;
    EXPECT_TRUE(std::equal(want_src.bytes.begin(), want_src.bytes.begin() + std::ptrdiff_t(alen), p.frame.begin() + std::ptrdiff_t(src)));
    EXPECT_TRUE(std::equal(want_dst.bytes.begin(), want_dst.bytes.begin() + std::ptrdiff_t(alen), p.frame.begin() + std::ptrdiff_t(dst)));
    EXPECT_EQ(c2s ? v.src_port : v.dst_port, tuple.client_port);
    std::vector<std::uint16_t> tags;
    if (c.l2.outer_vlan) tags.push_back(c.l2.outer_vlan);
    if (c.l2.vlan || c.l2.outer_vlan) tags.push_back(c.l2.vlan);
    EXPECT_EQ(v.vlan_ids, tags);
  }
}

TEST(Traffic, InitialDatagramsAreFullSizeAndClientDcidsRandomLength) {
  const Traffic t = generate_traffic(small_options());
  std::size_t client_initials = 0;
  for (const Packet& p : t.packets) {
    const Bytes d = udp_payload(p.frame);
    const bool carries_initial = p.kind == PacketKind::kClientInitial || p.kind == PacketKind::kServerInitial ||
                                 p.kind == PacketKind::kVersionProbe;
    if (carries_initial) { EXPECT_GE(d.size(), kMinInitialDatagram) << to_string(p.kind); }
    if (p.first_flight() && p.kind == PacketKind::kClientInitial) {
      ++client_initials;
      EXPECT_GE(p.dcid.size(), 8u);
      EXPECT_LE(p.dcid.size(), 20u);
    }
  }
  EXPECT_EQ(client_initials, t.connections.size());
  std::set<std::size_t> lengths;
  for (const Connection& c : t.connections) lengths.insert(c.client_initial_dcid.size());
  EXPECT_EQ(*lengths.begin(), 8u);  // 120 draws over 13 lengths reach both ends
  EXPECT_EQ(*lengths.rbegin(), 20u);
}

TEST(Traffic, QuicHeadersMatchTheGroundTruth) {
  const TrafficOptions o = small_options();
  const Traffic t = generate_traffic(o);
  for (const Packet& p : t.packets) {
    if (p.kind == PacketKind::kNonQuic || p.kind == PacketKind::kMalformed) {
      EXPECT_TRUE(p.dcid.empty());
      continue;
    }
    const Bytes d = udp_payload(p.frame);
    ASSERT_FALSE(d.empty());
    if (p.kind == PacketKind::kOneRtt) {
      EXPECT_EQ(d[0] & 0xc0, 0x40);  // short header, fixed bit
      ASSERT_GT(d.size(), 1 + p.dcid.size());
      EXPECT_TRUE(std::equal(p.dcid.begin(), p.dcid.end(), d.begin() + 1));
      continue;
    }
    if (p.kind == PacketKind::kVersionProbe || p.kind == PacketKind::kVersionNegotiation) {
      EXPECT_EQ(d[0] & 0x80, 0x80);
      EXPECT_EQ(d[5], p.dcid.size());
      EXPECT_TRUE(std::equal(p.dcid.begin(), p.dcid.end(), d.begin() + 6));
      continue;
    }
    std::vector<LongPacketView> packets;
    ASSERT_TRUE(walk_long_packets(d, packets)) << to_string(p.kind);
    EXPECT_EQ(packets.size(), p.coalesced ? 2u : 1u);
    EXPECT_EQ(packets.front().dcid, p.dcid);
    EXPECT_EQ(packets.front().version, p.version);
    const Connection& c = t.connections[std::size_t(p.connection)];
    EXPECT_EQ(p.version, c.version);
    const std::uint8_t type = (packets.front().first >> 4) & 3;
    const bool initial_kind = p.kind == PacketKind::kClientInitial || p.kind == PacketKind::kServerInitial;
    EXPECT_EQ(type, long_type_bits(c.version, initial_kind ? LongType::kInitial
                                              : p.kind == PacketKind::kZeroRtt ? LongType::kZeroRtt
                                                                               : LongType::kHandshake));
    if (p.coalesced) { EXPECT_EQ((packets[1].first >> 4) & 3, long_type_bits(c.version, LongType::kHandshake)); }
    if (initial_kind) {
      // Decrypts with the keys of the client's first DCID, whoever sends it.
      const bool server = p.direction == Direction::kServerToClient;
      const PacketKeys keys = derive_initial_keys(c.version, c.client_initial_dcid, server);
      const Bytes first(d.begin(), d.begin() + std::ptrdiff_t(packets.front().end));
      Bytes plain;
      std::uint64_t pn = 0;
      ASSERT_TRUE(unprotect_packet(first, packets.front().pn_offset, keys, plain, pn));
      EXPECT_EQ(packets.front().scid, server ? c.server_cids[0] : c.client_cid);
    }
  }
}

// The steering ground truth: server-chosen DCIDs decode to the connection's
// server ID with the codec a load balancer would use; client-chosen ones are
// not even accepted by it, so they must take the fallback path.
class TrafficCids : public ::testing::TestWithParam<QuicLbConfig> {};

TEST_P(TrafficCids, ServerCidsDecodeToTheServerIdAndClientCidsDoNot) {
  TrafficOptions o = small_options();
  o.quic_lb = GetParam();
  o.server_ids.clear();
  for (std::uint8_t s = 1; s <= 5; ++s) {
    Bytes id(o.quic_lb.server_id_len, 0x5a);
    id.back() = s;
    o.server_ids.push_back(id);
  }
  const Traffic t = generate_traffic(o);
  const QuicLbCodec codec(o.quic_lb);
  Bytes decoded(o.quic_lb.server_id_len);
  std::set<std::size_t> servers_seen;
  for (const Connection& c : t.connections) {
    servers_seen.insert(c.server_index);
    EXPECT_EQ(c.server_id, o.server_ids[c.server_index]);
    ASSERT_EQ(c.server_cids.size(), c.migration == Migration::kActive ? 2u : 1u);
    for (const Bytes& cid : c.server_cids) {
      EXPECT_EQ(cid.size(), codec.cid_len());
      ASSERT_TRUE(codec.decode(cid.data(), cid.size(), decoded.data()));
      EXPECT_EQ(decoded, c.server_id);
    }
    EXPECT_FALSE(codec.accepts(c.client_initial_dcid.data(), c.client_initial_dcid.size()));
    EXPECT_EQ(c.client_cid.size(), o.client_cid_len);
    EXPECT_FALSE(codec.accepts(c.client_cid.data(), c.client_cid.size()));
  }
  EXPECT_EQ(servers_seen.size(), o.server_ids.size());
  std::size_t server_chosen = 0, first_flight = 0;
  for (const Packet& p : t.packets) {
    if (p.dcid_server_chosen) {
      ++server_chosen;
      ASSERT_EQ(p.direction, Direction::kClientToServer);
      ASSERT_TRUE(codec.decode(p.dcid.data(), p.dcid.size(), decoded.data()));
      EXPECT_EQ(decoded, p.server_id);
      EXPECT_EQ(p.server_id, t.connections[std::size_t(p.connection)].server_id);
    } else if (p.direction == Direction::kClientToServer && !p.dcid.empty()) {
      EXPECT_FALSE(codec.accepts(p.dcid.data(), p.dcid.size())) << to_string(p.kind);
    }
    if (p.first_flight()) {
      ++first_flight;
      EXPECT_EQ(p.dcid, t.connections[std::size_t(p.connection)].client_initial_dcid);
    }
  }
  EXPECT_GT(server_chosen, t.connections.size() * 5);
  EXPECT_GT(first_flight, t.connections.size());  // the Initials plus the 0-RTT packets
}

QuicLbConfig lb_config(std::uint8_t config_id, std::uint8_t sid, std::uint8_t nonce, bool keyed, bool self_encode) {
  QuicLbConfig config;
  config.config_id = config_id;
  config.server_id_len = sid;
  config.nonce_len = nonce;
  config.len_self_encode = self_encode;
  if (keyed) config.key = std::array<std::uint8_t, 16>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  return config;
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TrafficCids,
                         ::testing::Values(lb_config(0, 2, 6, false, false),   // plaintext
                                           lb_config(1, 2, 14, true, false),   // single-pass AES
                                           lb_config(2, 3, 10, true, true),    // four-pass, length self-encoded
                                           lb_config(6, 1, 4, true, false),    // four-pass, shortest
                                           default_quic_lb_config()));

TEST(Traffic, MigrationChangesTheTupleAndKeepsRoutableCids) {
  const Traffic t = generate_traffic(small_options());
  std::map<int, std::size_t> post_c2s;
  for (const Connection& c : t.connections) {
    if (c.migration == Migration::kNone) {
      EXPECT_EQ(c.migrated, c.original);
      continue;
    }
    EXPECT_NE(c.migrated.client_port, c.original.client_port);
    EXPECT_EQ(c.migrated.server_ip, c.original.server_ip);
    EXPECT_EQ(c.migrated.server_port, c.original.server_port);
    if (c.migration == Migration::kActive) {
      EXPECT_NE(c.migrated.client_ip, c.original.client_ip);
      EXPECT_NE(c.server_cids[1], c.server_cids[0]);
    }
  }
  std::map<int, bool> seen_post;
  for (const Packet& p : t.packets) {
    if (p.connection < 0) continue;
    const Connection& c = t.connections[std::size_t(p.connection)];
    if (c.migration == Migration::kNone) {
      EXPECT_FALSE(p.post_migration);
      continue;
    }
    // Once a connection has moved it never goes back, and the client moves first.
    if (seen_post[p.connection]) { EXPECT_TRUE(p.post_migration); }
    if (p.post_migration && !seen_post[p.connection]) { EXPECT_EQ(p.direction, Direction::kClientToServer); }
    seen_post[p.connection] = seen_post[p.connection] || p.post_migration;
    if (p.post_migration && p.direction == Direction::kClientToServer) {
      ++post_c2s[p.connection];
      EXPECT_TRUE(p.dcid_server_chosen);
      EXPECT_EQ(p.server_id, c.server_id);
      EXPECT_EQ(p.dcid, c.server_cids[c.migration == Migration::kActive ? 1 : 0]);
    }
  }
  for (const Connection& c : t.connections)
    if (c.migration != Migration::kNone) { EXPECT_GT(post_c2s[int(&c - t.connections.data())], 0u); }
}

TEST(Traffic, EachConnectionsPacketsAreInOrder) {
  const Traffic t = generate_traffic(small_options());
  std::map<int, std::vector<const Packet*>> by_connection;
  for (std::size_t i = 1; i < t.packets.size(); ++i) EXPECT_LE(t.packets[i - 1].timestamp_ns, t.packets[i].timestamp_ns);
  for (const Packet& p : t.packets)
    if (p.connection >= 0) by_connection[p.connection].push_back(&p);
  ASSERT_EQ(by_connection.size(), t.connections.size());
  bool interleaved = false;
  for (const auto& [index, packets] : by_connection) {
    EXPECT_TRUE(packets.front()->first_flight());
    EXPECT_EQ(packets.front()->kind, PacketKind::kClientInitial);
    for (std::size_t i = 1; i < packets.size(); ++i) EXPECT_LT(packets[i - 1]->timestamp_ns, packets[i]->timestamp_ns);
    // A packet of another connection lies between this one's first and last.
    interleaved = interleaved || packets.back() - packets.front() + 1 > std::ptrdiff_t(packets.size());
  }
  EXPECT_TRUE(interleaved);

  TrafficOptions sequential = small_options(20);
  sequential.interleave = false;
  sequential.version_negotiation = sequential.non_quic = sequential.malformed = 0;
  const Traffic s = generate_traffic(sequential);
  for (std::size_t i = 1; i < s.packets.size(); ++i) EXPECT_LE(s.packets[i - 1].connection, s.packets[i].connection);
}

TEST(Traffic, ClientToServerOnlyKeepsTheClientPacketsByteForByte) {
  TrafficOptions o = small_options(40);
  const Traffic full = generate_traffic(o);
  o.client_to_server_only = true;
  const Traffic c2s = generate_traffic(o);
  std::vector<const Packet*> expected;
  for (const Packet& p : full.packets)
    if (p.direction == Direction::kClientToServer) expected.push_back(&p);
  ASSERT_EQ(c2s.packets.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(c2s.packets[i].direction, Direction::kClientToServer);
    EXPECT_EQ(c2s.packets[i].frame, expected[i]->frame);
  }
}

TEST(Traffic, StandalonePacketsAreWhatTheySay) {
  const TrafficOptions o = small_options(0);
  const Traffic t = generate_traffic(o);
  EXPECT_TRUE(t.connections.empty());
  std::set<std::string> malformed_kinds;
  for (const Packet& p : t.packets) {
    EXPECT_EQ(p.connection, -1);
    const Bytes d = udp_payload(p.frame);
    switch (p.kind) {
      case PacketKind::kVersionNegotiation:
        ASSERT_GE(d.size(), 7u);
        EXPECT_EQ(d[1] | d[2] | d[3] | d[4], 0);  // version 0
        EXPECT_EQ((d.size() - 7 - d[5] - d[6 + d[5]]) % 4, 0u);  // whole list of versions
        break;
      case PacketKind::kVersionProbe:
        EXPECT_EQ(p.version & 0x0f0f0f0fu, 0x0a0a0a0au);
        break;
      case PacketKind::kMalformed: {
        malformed_kinds.insert(p.detail);
        std::vector<LongPacketView> packets;
        EXPECT_FALSE(!d.empty() && (d[0] & 0x80) && walk_long_packets(d, packets)) << p.detail;
        if (!d.empty() && !(d[0] & 0x80)) { EXPECT_LT(d.size(), 1u + default_quic_lb_config().cid_len()) << p.detail; }
        break;
      }
      case PacketKind::kNonQuic:
        EXPECT_NE(parse_udp_frame(p.frame).dst_port, o.port);
        break;
      default:
        ADD_FAILURE() << "unexpected " << to_string(p.kind);
    }
  }
  EXPECT_EQ(malformed_kinds.size(), 5u);
}

TEST(Traffic, RejectsInconsistentOptions) {
  auto rejects = [](auto change) {
    TrafficOptions o = small_options(10);
    change(o);
    EXPECT_THROW(generate_traffic(o), std::invalid_argument);
  };
  rejects([](TrafficOptions& o) { o.ipv6 = 1.5; });
  rejects([](TrafficOptions& o) { o.migrate = -0.1; });
  rejects([](TrafficOptions& o) { o.migrate = 0.6, o.nat_rebind = 0.6; });
  rejects([](TrafficOptions& o) { o.vlan = 0.7, o.qinq = 0.7; });
  rejects([](TrafficOptions& o) { o.server_ids = {{1, 2, 3}}; });
  rejects([](TrafficOptions& o) { o.server_ids = {{0, 1}, {0, 1}}; });
  rejects([](TrafficOptions& o) { o.server_ids.clear(); });
  rejects([](TrafficOptions& o) { o.quic_lb.nonce_len = 2; });
  rejects([](TrafficOptions& o) { o.routable_config_ids = {7}; });
  rejects([](TrafficOptions& o) { o.port = 0; });
  rejects([](TrafficOptions& o) { o.connections = 5'000'000; });
}

TEST(Pcap, RoundTripsThroughLibpcap) {
  const Traffic t = generate_traffic(small_options(30));
  char path[] = "/tmp/quicgen-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  write_pcap(path, t);
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* pcap = pcap_open_offline(path, err);
  ASSERT_NE(pcap, nullptr) << err;
  EXPECT_EQ(pcap_datalink(pcap), DLT_EN10MB);
  EXPECT_EQ(pcap_snapshot(pcap), int(PcapWriter::kSnapLen));
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  std::size_t n = 0;
  while (pcap_next_ex(pcap, &header, &data) == 1) {
    ASSERT_LT(n, t.packets.size());
    const Packet& p = t.packets[n++];
    EXPECT_EQ(header->caplen, p.frame.size());
    EXPECT_EQ(header->len, p.frame.size());
    EXPECT_EQ(std::uint64_t(header->ts.tv_sec) * 1000000000u + std::uint64_t(header->ts.tv_usec) * 1000u, p.timestamp_ns);
    EXPECT_TRUE(std::equal(p.frame.begin(), p.frame.end(), data));
  }
  pcap_close(pcap);
  std::remove(path);
  EXPECT_EQ(n, t.packets.size());
  EXPECT_THROW(PcapWriter("/nonexistent-dir/x.pcap"), std::runtime_error);
}

}  // namespace
}  // namespace qs::traffic
