#include "tests/traffic/quic_traffic.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string_view>

#include "steering/quic_lb.h"
#include "tests/traffic/pcap_writer.h"
#include "tests/traffic/quic_wire.h"
#include "tests/traffic/random.h"
#include "tests/traffic/tls_messages.h"

namespace qs::traffic {

namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr std::uint64_t kMicro = 1000;  // ns per µs; every timestamp is whole µs, as pcap stores it

// Random streams (Rng::derive): one per purpose so that options do not shift
// each other's draws.
enum Stream : std::uint64_t {
  kStreamSelect = 1,      // which connections get which property
  kStreamConnection = 2,  // one per connection index
  kStreamVn = 3,
  kStreamNonQuic = 4,
  kStreamMalformed = 5,
};

constexpr std::array<std::uint16_t, 4> kClientDatagramSizes = {1200, 1232, 1250, 1252};
constexpr std::array<std::uint16_t, 3> kServerDatagramSizes = {1232, 1252, 1350};
constexpr std::array<std::string_view, 5> kServerNames = {"example.com", "www.example.net", "cdn.example.org",
                                                          "api.example.com", "video.example.net"};

// One UDP datagram before it gets its Ethernet/IP/UDP headers.
struct Datagram {
  Direction direction = Direction::kClientToServer;
  PacketKind kind = PacketKind::kClientInitial;
  Bytes payload;
  std::uint64_t time_ns = 0;
  bool coalesced = false;
  Bytes dcid;
  bool server_chosen = false;
  bool post_migration = false;
  std::uint32_t version = 0;
  std::uint16_t ip_id = 0;
  std::uint32_t flow_label = 0;
  const char* detail = "";
};

void check_fraction(double value, const char* name) {
  if (!std::isfinite(value) || value < 0 || value > 1)
    throw std::invalid_argument(std::string(name) + " must be a fraction between 0 and 1");
}

std::size_t count_of(double fraction, std::uint32_t total) {
  return std::size_t(std::llround(fraction * double(total)));
}

template <std::size_t N>
std::uint16_t pick(Rng& rng, const std::array<std::uint16_t, N>& choices) {
  return choices[rng.uniform(0, N - 1)];
}

void append(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }

Bytes ack_frame(std::uint64_t largest, std::uint64_t delay) {
  Bytes out{0x02};
  put_varint(out, largest);
  put_varint(out, delay);
  put_varint(out, 0);  // ACK Range Count
  put_varint(out, 0);  // First ACK Range: just `largest`
  return out;
}

Bytes crypto_frame(const Bytes& data) {
  Bytes out{0x06};
  put_varint(out, 0);  // offset
  put_varint(out, data.size());
  append(out, data);
  return out;
}

// A protected Initial packet carrying `frames`, padded with PADDING frames to
// at least `min_size` octets.
Bytes initial_packet(std::uint32_t version, const Bytes& dcid, const Bytes& scid, std::uint64_t pn,
                     std::uint8_t pn_len, Bytes frames, std::size_t min_size, const PacketKeys& keys) {
  LongHeader header;
  header.version = version;
  header.type = LongType::kInitial;
  header.dcid = dcid;
  header.scid = scid;
  header.pn_len = pn_len;
  header.pn = pn;
  std::size_t pn_offset = 0;
  // The Length field is two octets whatever the payload, so the header size
  // is known before the padding is.
  const std::size_t header_len = build_long_header(header, 0, &pn_offset).size();
  const std::size_t unpadded = header_len + frames.size() + kAeadTagLen;
  if (unpadded < min_size) frames.resize(frames.size() + (min_size - unpadded), 0x00);
  // Header protection samples 16 octets starting 4 after the packet number.
  const std::size_t min_payload = 4 + 16 - pn_len;
  if (frames.size() + kAeadTagLen < min_payload) frames.resize(min_payload - kAeadTagLen, 0x00);
  Bytes packet = build_long_header(header, frames.size() + kAeadTagLen, &pn_offset);
  append(packet, frames);
  protect_packet(packet, pn_offset, pn_len, pn, keys);
  return packet;
}

// A long header packet whose payload we cannot produce for real (0-RTT,
// Handshake: their keys come from the TLS exchange): random octets stand in
// for the ciphertext, and random bits for the protected header bits, as an
// observer without keys sees them.
Bytes opaque_long_packet(Rng& rng, std::uint32_t version, LongType type, const Bytes& dcid, const Bytes& scid,
                         std::size_t packet_size) {
  LongHeader header;
  header.version = version;
  header.type = type;
  header.dcid = dcid;
  header.scid = scid;
  header.pn_len = 2;
  std::size_t pn_offset = 0;
  const std::size_t header_len = build_long_header(header, 0, &pn_offset).size();
  const std::size_t payload_len = std::max<std::size_t>(packet_size > header_len ? packet_size - header_len : 0,
                                                        4 + 16 - header.pn_len);
  Bytes packet = build_long_header(header, payload_len, &pn_offset);
  const std::size_t start = packet.size();
  packet.resize(start + payload_len);
  rng.fill(packet.data() + start, payload_len);
  packet[0] ^= rng.byte() & 0x0f;
  for (std::size_t i = 0; i < header.pn_len; ++i) packet[pn_offset + i] ^= rng.byte();
  return packet;
}

std::size_t opaque_long_header_len(const Bytes& dcid, const Bytes& scid) {
  return 1 + 4 + 1 + dcid.size() + 1 + scid.size() + 2 + 2;  // two-octet Length, two-octet pn
}

// A 1-RTT packet of `size` octets (at least the header plus a sampleable payload).
Bytes short_packet(Rng& rng, const Bytes& dcid, std::size_t size) {
  const std::size_t min_size = 1 + dcid.size() + 2 + 18;
  size = std::max(size, min_size);
  Bytes packet;
  packet.reserve(size);
  packet.push_back(std::uint8_t(0x40 | (rng.byte() & 0x3f)));  // fixed bit; spin, key phase, pn length protected
  append(packet, dcid);
  const std::size_t start = packet.size();
  packet.resize(size);
  rng.fill(packet.data() + start, size - start);
  return packet;
}

IpAddress random_client_ipv4(Rng& rng) {
  // 198.18.0.0/15 without the network, broadcast and server (.0.1) addresses.
  const auto host = std::uint32_t(rng.uniform(2, (1u << 17) - 2));
  return IpAddress::v4(198, std::uint8_t(18 + (host >> 16)), std::uint8_t(host >> 8), std::uint8_t(host));
}

IpAddress random_client_ipv6(Rng& rng) {
  IpAddress ip = TrafficOptions::ipv6_address("2001:db8:c1::");
  rng.fill(ip.bytes.data() + 8, 8);
  return ip;
}

std::uint16_t ephemeral_port(Rng& rng) { return std::uint16_t(rng.uniform(49152, 65535)); }

class Generator {
 public:
  explicit Generator(const TrafficOptions& options) : options_(options), codec_(options.quic_lb) {
    validate();
    routable_.fill(false);
    routable_[options.quic_lb.config_id] = true;
    for (auto id : options.routable_config_ids) routable_[id] = true;
    for (std::uint8_t id = 0; id < 8; ++id)
      if (!routable_[id]) free_config_ids_.push_back(id);
  }

  Traffic run() {
    Traffic traffic;
    plan_connections(traffic);
    std::uint64_t clock = options_.start_time_ns;  // end of the latest connection so far
    for (std::size_t i = 0; i < traffic.connections.size(); ++i) {
      const Connection& c = traffic.connections[i];
      const std::uint64_t start = options_.interleave ? starts_[i] : clock;
      for (const Datagram& d : play_connection(streams_[i], c, start)) {
        const FourTuple& tuple = d.post_migration ? c.migrated : c.original;
        emit(traffic, d, int(i), c.l2, tuple, c.server_id);
        clock = std::max(clock, d.time_ns + 100 * kMicro);
      }
    }
    add_standalone(traffic, std::max(clock, options_.start_time_ns + 1000 * kMicro));
    // Stable: packets with equal timestamps keep generation order, so each
    // connection's packets stay in sequence.
    std::stable_sort(traffic.packets.begin(), traffic.packets.end(),
                     [](const Packet& a, const Packet& b) { return a.timestamp_ns < b.timestamp_ns; });
    if (options_.client_to_server_only)
      std::erase_if(traffic.packets, [](const Packet& p) { return p.direction == Direction::kServerToClient; });
    return traffic;
  }

 private:
  void validate() const {
    const auto& o = options_;
    check_fraction(o.ipv6, "ipv6");
    check_fraction(o.vlan, "vlan");
    check_fraction(o.qinq, "qinq");
    check_fraction(o.migrate, "migrate");
    check_fraction(o.nat_rebind, "nat-rebind");
    check_fraction(o.coalesce, "coalesce");
    check_fraction(o.v2, "v2");
    check_fraction(o.zero_rtt, "zero-rtt");
    if (count_of(o.vlan, o.connections) + count_of(o.qinq, o.connections) > o.connections)
      throw std::invalid_argument("vlan + qinq must not exceed 1");
    if (count_of(o.migrate, o.connections) + count_of(o.nat_rebind, o.connections) > o.connections)
      throw std::invalid_argument("migrate + nat-rebind must not exceed 1");
    const std::uint64_t budget = 20'000'000;  // frames; keeps the capture in memory within a few GB
    if (std::uint64_t(o.connections) * (std::uint64_t(o.packets_per_connection) + 12) + o.version_negotiation * 2ull +
            o.non_quic + o.malformed >
        budget)
      throw std::invalid_argument("too much traffic: at most about 20 million frames per capture");
    if (o.port == 0) throw std::invalid_argument("port must be 1..65535");
    if (o.client_cid_len > 20) throw std::invalid_argument("client CID length must be 0..20");
    if (o.connections > 0 && o.server_ids.empty()) throw std::invalid_argument("at least one server ID is needed");
    std::set<std::string> seen;
    for (const auto& id : o.server_ids) {
      if (id.size() != o.quic_lb.server_id_len)
        throw std::invalid_argument("server ID of " + std::to_string(id.size()) +
                                    " octets, but the QUIC-LB config has server_id_len " +
                                    std::to_string(o.quic_lb.server_id_len));
      if (!seen.insert(std::string(id.begin(), id.end())).second) throw std::invalid_argument("duplicate server ID");
    }
    for (auto id : o.routable_config_ids)
      if (id >= kUnroutableConfigId) throw std::invalid_argument("routable config IDs are 0..6");
    if (o.server_ipv4.v6 || !o.server_ipv6.v6) throw std::invalid_argument("server address of the wrong family");
  }

  // Exactly round(fraction * N) connections get each property.
  std::vector<bool> select(Rng& rng, std::size_t count) const {
    std::vector<std::uint32_t> order(options_.connections);
    std::iota(order.begin(), order.end(), 0u);
    rng.shuffle(order);
    std::vector<bool> chosen(options_.connections, false);
    for (std::size_t i = 0; i < count; ++i) chosen[order[i]] = true;
    return chosen;
  }

  void plan_connections(Traffic& traffic) {
    const auto& o = options_;
    const std::uint32_t n = o.connections;
    Rng rng = Rng::derive(o.seed, kStreamSelect, 0);
    // Migration and VLAN kinds are exclusive: draw them from one permutation.
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    rng.shuffle(order);
    std::vector<Migration> migration(n, Migration::kNone);
    const std::size_t migrating = count_of(o.migrate, n), rebinding = count_of(o.nat_rebind, n);
    for (std::size_t i = 0; i < migrating + rebinding; ++i)
      migration[order[i]] = i < migrating ? Migration::kActive : Migration::kNatRebinding;
    rng.shuffle(order);
    std::vector<int> tags(n, 0);
    const std::size_t single = count_of(o.vlan, n), double_tagged = count_of(o.qinq, n);
    for (std::size_t i = 0; i < single + double_tagged; ++i) tags[order[i]] = i < single ? 1 : 2;
    const auto ipv6 = select(rng, count_of(o.ipv6, n));
    const auto coalesce = select(rng, count_of(o.coalesce, n));
    const auto v2 = select(rng, count_of(o.v2, n));
    const auto zero_rtt = select(rng, count_of(o.zero_rtt, n));

    // Interleaved: connections start at random times over a span that keeps a
    // few hundred of them open at once; sequential: each starts when the
    // previous one ends (start 0 = "follow the previous").
    starts_.assign(n, 0);
    if (o.interleave)
      for (auto& start : starts_) start = o.start_time_ns + rng.uniform(0, std::uint64_t(n) * 500) * kMicro;

    traffic.connections.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      Connection& c = traffic.connections[i];
      // Identity draws come from the connection's own stream.
      Rng crng = Rng::derive(o.seed, kStreamConnection, i);
      c.version = v2[i] ? kQuicV2 : kQuicV1;
      c.migration = migration[i];
      c.coalesced = coalesce[i];
      c.zero_rtt = zero_rtt[i];
      c.client_initial_dcid = unique_cid([&] { return client_chosen_cid(crng, crng.uniform(8, 20)); });
      c.client_cid = unique_cid([&] { return client_chosen_cid(crng, o.client_cid_len); });
      c.server_index = std::size_t(crng.uniform(0, o.server_ids.size() - 1));
      c.server_id = o.server_ids[c.server_index];
      const std::size_t server_cids = c.migration == Migration::kActive ? 2 : 1;
      for (std::size_t k = 0; k < server_cids; ++k)
        c.server_cids.push_back(unique_cid([&] {
          return o.random_server_cids ? random_server_cid(crng) : server_cid(crng, c.server_id);
        }));

      c.l2.src = o.client_mac;
      c.l2.dst = o.server_mac;
      if (tags[i] == 2) c.l2.outer_vlan = std::uint16_t(crng.uniform(1, 4094));
      if (tags[i] >= 1) c.l2.vlan = std::uint16_t(crng.uniform(1, 4094));

      c.original.client_ip = ipv6[i] ? random_client_ipv6(crng) : random_client_ipv4(crng);
      c.original.client_port = ephemeral_port(crng);
      c.original.server_ip = ipv6[i] ? o.server_ipv6 : o.server_ipv4;
      c.original.server_port = o.port;
      c.migrated = c.original;
      if (c.migration != Migration::kNone) {
        do c.migrated.client_port = ephemeral_port(crng);
        while (c.migrated.client_port == c.original.client_port);
        // Active migration is a new network (new address); NAT rebinding
        // mostly keeps the public address and only picks a new port.
        if (c.migration == Migration::kActive || crng.chance(0.25)) {
          do c.migrated.client_ip = ipv6[i] ? random_client_ipv6(crng) : random_client_ipv4(crng);
          while (c.migrated.client_ip == c.original.client_ip);
        }
      }
      streams_.push_back(crng);
    }
  }

  template <typename Draw>
  Bytes unique_cid(Draw draw) {
    for (;;) {
      Bytes cid = draw();
      // Very short CIDs (a client may use 0..3 octets) cannot all differ.
      if (cid.size() < 4 || used_cids_.insert(std::string(cid.begin(), cid.end())).second) return cid;
    }
  }

  // A random CID of `len` octets whose config-rotation bits name no routable
  // configuration.
  Bytes client_chosen_cid(Rng& rng, std::size_t len) const {
    Bytes cid = rng.bytes(len);
    if (len == 0) return cid;
    const std::uint8_t config = free_config_ids_[rng.uniform(0, free_config_ids_.size() - 1)];
    cid[0] = std::uint8_t(config << 5 | (cid[0] & 0x1f));
    return cid;
  }

  Bytes random_server_cid(Rng& rng) const {
    for (;;) {
      Bytes cid = client_chosen_cid(rng, codec_.cid_len());
      if (cid[0] >> 5 != 7) return cid;
    }
  }

  Bytes server_cid(Rng& rng, const Bytes& server_id) const {
    const Bytes nonce = rng.bytes(codec_.nonce_len());
    Bytes cid(codec_.cid_len());
    codec_.encode(server_id.data(), nonce.data(), cid.data(), std::uint8_t(rng.byte() & 0x1f));
    return cid;
  }

  std::vector<Datagram> play_connection(Rng& rng, const Connection& c, std::uint64_t start) {
    std::vector<Datagram> out;
    const auto c2s = Direction::kClientToServer, s2c = Direction::kServerToClient;
    const std::uint64_t owd = rng.uniform(2000, 40000) * kMicro;  // one-way delay, 2..40 ms
    auto gap = [&] { return rng.uniform(5, 60) * kMicro; };       // back-to-back sends
    auto think = [&] { return rng.uniform(50, 400) * kMicro; };   // endpoint processing
    const std::array<std::uint32_t, 2> flow_labels = {std::uint32_t(rng.next() & 0xfffff),
                                                      std::uint32_t(rng.next() & 0xfffff)};
    std::uint64_t t = start;
    auto push = [&](Direction direction, PacketKind kind, Bytes payload, bool coalesced, const Bytes& dcid,
                    bool post_migration, std::uint32_t version) {
      Datagram d;
      d.direction = direction;
      d.kind = kind;
      d.payload = std::move(payload);
      d.time_ns = t;
      d.coalesced = coalesced;
      d.dcid = dcid;
      // Everything the client sends after the server's first flight goes to
      // a server-issued CID; the server always addresses the client's CID.
      d.server_chosen = direction == c2s && dcid != c.client_initial_dcid;
      d.post_migration = post_migration;
      d.version = version;
      d.ip_id = std::uint16_t(rng.next());
      d.flow_label = flow_labels[direction == c2s ? 0 : 1];
      out.push_back(std::move(d));
    };

    const std::uint32_t v = c.version;
    const std::uint8_t pn_len = std::uint8_t(rng.uniform(1, 4));
    const PacketKeys client_keys = derive_initial_keys(v, c.client_initial_dcid, false);
    const PacketKeys server_keys = derive_initial_keys(v, c.client_initial_dcid, true);
    const Bytes& server_cid = c.server_cids[0];

    // Client's first flight: Initial (ClientHello), maybe 0-RTT, all to its random DCID.
    // One draw per statement throughout: the order in which a call's
    // arguments are evaluated differs between compilers, the captures must not.
    const auto sni = kServerNames[rng.uniform(0, kServerNames.size() - 1)];
    Bytes hello = crypto_frame(build_client_hello(rng, sni, c.client_cid));
    const std::size_t first_datagram = pick(rng, kClientDatagramSizes);
    push(c2s, PacketKind::kClientInitial,
         initial_packet(v, c.client_initial_dcid, c.client_cid, 0, pn_len, std::move(hello), first_datagram,
                        client_keys),
         false, c.client_initial_dcid, false, v);
    if (c.zero_rtt) {
      for (std::uint64_t k = 0, n = rng.uniform(1, 2); k < n; ++k) {
        t += gap();
        push(c2s, PacketKind::kZeroRtt,
             opaque_long_packet(rng, v, LongType::kZeroRtt, c.client_initial_dcid, c.client_cid,
                                rng.uniform(200, 1200)),
             false, c.client_initial_dcid, false, v);
      }
    }

    // Server: Initial (ACK + ServerHello) and the Handshake flight
    // (EncryptedExtensions, Certificate, CertificateVerify, Finished).
    t += owd + think();
    const std::size_t server_datagram = pick(rng, kServerDatagramSizes);
    Bytes server_frames = ack_frame(0, rng.uniform(0, 50));
    append(server_frames, crypto_frame(build_server_hello(rng)));
    std::size_t handshake_left = rng.uniform(1500, 4500);
    const std::size_t server_hs_header = opaque_long_header_len(c.client_cid, server_cid);
    if (c.coalesced) {
      Bytes initial = initial_packet(v, c.client_cid, server_cid, 0, pn_len, server_frames, 0, server_keys);
      const std::size_t chunk = std::min(handshake_left, server_datagram - initial.size() - server_hs_header);
      Bytes handshake =
          opaque_long_packet(rng, v, LongType::kHandshake, c.client_cid, server_cid, server_hs_header + chunk);
      handshake_left -= chunk;
      if (initial.size() + handshake.size() < kMinInitialDatagram)
        initial = initial_packet(v, c.client_cid, server_cid, 0, pn_len, server_frames,
                                 kMinInitialDatagram - handshake.size(), server_keys);
      append(initial, handshake);
      push(s2c, PacketKind::kServerInitial, std::move(initial), true, c.client_cid, false, v);
    } else {
      push(s2c, PacketKind::kServerInitial,
           initial_packet(v, c.client_cid, server_cid, 0, pn_len, server_frames, kMinInitialDatagram, server_keys),
           false, c.client_cid, false, v);
    }
    while (handshake_left > 0) {
      t += gap();
      const std::size_t chunk = std::min(handshake_left, server_datagram - server_hs_header);
      push(s2c, PacketKind::kServerHandshake,
           opaque_long_packet(rng, v, LongType::kHandshake, c.client_cid, server_cid, server_hs_header + chunk), false,
           c.client_cid, false, v);
      handshake_left -= chunk;
    }

    // Client: Initial ACK and Handshake (Finished), now to the server's CID.
    t += owd + think();
    const std::size_t client_datagram = pick(rng, kClientDatagramSizes);
    Bytes client_handshake = opaque_long_packet(rng, v, LongType::kHandshake, server_cid, c.client_cid,
                                                opaque_long_header_len(server_cid, c.client_cid) + rng.uniform(50, 90));
    const Bytes client_ack = ack_frame(0, rng.uniform(0, 50));
    if (c.coalesced) {
      Bytes initial = initial_packet(v, server_cid, c.client_cid, 1, pn_len, client_ack,
                                     client_datagram - client_handshake.size(), client_keys);
      append(initial, client_handshake);
      push(c2s, PacketKind::kClientInitial, std::move(initial), true, server_cid, false, v);
    } else {
      push(c2s, PacketKind::kClientInitial,
           initial_packet(v, server_cid, c.client_cid, 1, pn_len, client_ack, client_datagram, client_keys), false,
           server_cid, false, v);
      t += gap();
      push(c2s, PacketKind::kClientHandshake, std::move(client_handshake), false, server_cid, false, v);
    }

    // 1-RTT: the client asks, the server mostly sends full datagrams, the
    // client acknowledges. A migrating client moves halfway through, and its
    // first packet from the new path is what the server sees first.
    const std::uint32_t n = options_.packets_per_connection;
    const std::uint32_t migrate_at = c.migration != Migration::kNone && n >= 2 ? n / 2 : n;
    Direction previous = c2s;
    bool migrated = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      const Direction direction = (i == 0 || i == migrate_at) ? c2s : rng.chance(0.65) ? s2c : c2s;
      if (i == migrate_at) migrated = true;
      t += direction == previous ? gap() : owd + think();
      previous = direction;
      if (direction == c2s) {
        const Bytes& dcid = migrated && c.migration == Migration::kActive ? c.server_cids[1] : c.server_cids[0];
        const std::size_t size = rng.chance(0.7) ? rng.uniform(35, 60) : rng.uniform(80, 600);
        push(c2s, PacketKind::kOneRtt, short_packet(rng, dcid, size), false, dcid, migrated, 0);
      } else {
        const std::size_t size =
            rng.chance(0.8) ? rng.uniform(server_datagram - 100, server_datagram) : rng.uniform(40, 200);
        push(s2c, PacketKind::kOneRtt, short_packet(rng, c.client_cid, size), false, c.client_cid, migrated, 0);
      }
    }
    return out;
  }

  // One frame for a datagram on `tuple`, with its ground truth.
  void emit(Traffic& traffic, const Datagram& d, int connection, const L2Header& client_l2, const FourTuple& tuple,
            const Bytes& server_id) const {
    Packet p;
    const bool c2s = d.direction == Direction::kClientToServer;
    L2Header l2 = client_l2;
    if (!c2s) std::swap(l2.src, l2.dst);
    p.frame = c2s ? build_udp_frame(l2, tuple.client_ip, tuple.client_port, tuple.server_ip, tuple.server_port,
                                    d.payload, d.ip_id, d.flow_label)
                  : build_udp_frame(l2, tuple.server_ip, tuple.server_port, tuple.client_ip, tuple.client_port,
                                    d.payload, d.ip_id, d.flow_label);
    p.timestamp_ns = d.time_ns;
    p.connection = connection;
    p.direction = d.direction;
    p.kind = d.kind;
    p.coalesced = d.coalesced;
    p.dcid = d.dcid;
    p.dcid_server_chosen = d.server_chosen;
    if (d.server_chosen && !options_.random_server_cids) p.server_id = server_id;
    p.post_migration = d.post_migration;
    p.version = d.version;
    p.detail = d.detail;
    traffic.packets.push_back(std::move(p));
  }

  // A random client (address family and tags per the options' fractions)
  // for a packet that belongs to no connection.
  void random_client(Rng& rng, L2Header& l2, FourTuple& tuple) const {
    const bool v6 = rng.chance(options_.ipv6);
    l2 = L2Header{};
    l2.src = options_.client_mac;
    l2.dst = options_.server_mac;
    const double tags = rng.unit();
    if (tags < options_.qinq) l2.outer_vlan = std::uint16_t(rng.uniform(1, 4094));
    if (tags < options_.qinq + options_.vlan) l2.vlan = std::uint16_t(rng.uniform(1, 4094));
    tuple.client_ip = v6 ? random_client_ipv6(rng) : random_client_ipv4(rng);
    tuple.client_port = ephemeral_port(rng);
    tuple.server_ip = v6 ? options_.server_ipv6 : options_.server_ipv4;
    tuple.server_port = options_.port;
  }

  void add_standalone(Traffic& traffic, std::uint64_t end) {
    const std::uint64_t start = options_.start_time_ns;
    auto when = [&](Rng& rng) { return start + rng.uniform(0, (end - start) / kMicro) * kMicro; };
    L2Header l2;
    FourTuple tuple;

    for (std::uint32_t k = 0; k < options_.version_negotiation; ++k) {
      Rng rng = Rng::derive(options_.seed, kStreamVn, k);
      random_client(rng, l2, tuple);
      Datagram probe;
      probe.kind = PacketKind::kVersionProbe;
      probe.time_ns = when(rng);
      // A reserved version (0x?a?a?a?a, RFC 9000 section 15) that no server speaks.
      probe.version = std::uint32_t(rng.next() & 0xf0f0f0f0u) | 0x0a0a0a0au;
      probe.dcid = unique_cid([&] { return client_chosen_cid(rng, rng.uniform(8, 20)); });
      const Bytes scid = rng.bytes(8);
      // Laid out like an Initial (as a client that speaks only that version
      // would send it), padded to a full first-flight datagram; the payload
      // means nothing to a v1 server, which answers from the invariant header.
      LongHeader header;
      header.version = probe.version;
      header.dcid = probe.dcid;
      header.scid = scid;
      header.pn_len = 4;
      std::size_t pn_offset = 0;
      const std::size_t size = pick(rng, kClientDatagramSizes);
      const std::size_t header_len = build_long_header(header, 0, &pn_offset).size();
      probe.payload = build_long_header(header, size - header_len, &pn_offset);
      probe.payload.resize(pn_offset);  // the packet number is as opaque as the rest
      append(probe.payload, rng.bytes(size - pn_offset));
      probe.ip_id = std::uint16_t(rng.next());
      emit(traffic, probe, -1, l2, tuple, {});

      Datagram vn;
      vn.direction = Direction::kServerToClient;
      vn.kind = PacketKind::kVersionNegotiation;
      vn.time_ns = probe.time_ns + rng.uniform(2000, 40000) * kMicro;
      vn.dcid = scid;  // echoes the probe's CIDs, swapped (RFC 9000 section 17.2.1)
      vn.payload.push_back(std::uint8_t(0xc0 | (rng.byte() & 0x3f)));  // only the top bit is defined
      vn.payload.insert(vn.payload.end(), 4, 0);                        // version 0
      vn.payload.push_back(std::uint8_t(scid.size()));
      append(vn.payload, scid);
      vn.payload.push_back(std::uint8_t(probe.dcid.size()));
      append(vn.payload, probe.dcid);
      for (std::uint32_t version : {kQuicV2, kQuicV1})
        for (int shift = 24; shift >= 0; shift -= 8) vn.payload.push_back(std::uint8_t(version >> shift));
      vn.ip_id = std::uint16_t(rng.next());
      emit(traffic, vn, -1, l2, tuple, {});
    }

    for (std::uint32_t k = 0; k < options_.non_quic; ++k) {
      Rng rng = Rng::derive(options_.seed, kStreamNonQuic, k);
      random_client(rng, l2, tuple);
      Datagram d;
      d.kind = PacketKind::kNonQuic;
      d.time_ns = when(rng);
      d.ip_id = std::uint16_t(rng.next());
      const bool dns = rng.chance(0.5);
      // Never the QUIC port: the point is traffic the appliance must not steer.
      tuple.server_port = dns ? (options_.port == 53 ? 123 : 53) : (options_.port == 123 ? 53 : 123);
      if (tuple.server_port == 53) {
        d.detail = "DNS query";
        d.payload = dns_query(rng);
      } else {
        d.detail = "NTP client request";
        d.payload = ntp_request(rng);
      }
      emit(traffic, d, -1, l2, tuple, {});
    }

    for (std::uint32_t k = 0; k < options_.malformed; ++k) {
      Rng rng = Rng::derive(options_.seed, kStreamMalformed, k);
      random_client(rng, l2, tuple);
      Datagram d;
      d.kind = PacketKind::kMalformed;
      d.time_ns = when(rng);
      d.ip_id = std::uint16_t(rng.next());
      malformed_payload(rng, k, d);
      emit(traffic, d, -1, l2, tuple, {});
    }
  }

  static Bytes dns_query(Rng& rng) {
    Bytes out;
    out.push_back(rng.byte()), out.push_back(rng.byte());  // ID
    out.push_back(0x01), out.push_back(0x00);                // standard query, recursion desired
    out.push_back(0), out.push_back(1);                      // QDCOUNT
    out.insert(out.end(), 6, 0);                             // AN, NS, AR counts
    const auto name = kServerNames[rng.uniform(0, kServerNames.size() - 1)];
    std::size_t label = 0;
    while (label <= name.size()) {
      const std::size_t dot = std::min(name.find('.', label), name.size());
      out.push_back(std::uint8_t(dot - label));
      out.insert(out.end(), name.begin() + std::ptrdiff_t(label), name.begin() + std::ptrdiff_t(dot));
      label = dot + 1;
    }
    out.push_back(0);
    out.push_back(0), out.push_back(rng.chance(0.5) ? 1 : 28);  // QTYPE A or AAAA
    out.push_back(0), out.push_back(1);                           // QCLASS IN
    return out;
  }

  static Bytes ntp_request(Rng& rng) {
    Bytes out(48, 0);
    out[0] = 0x23;  // LI 0, version 4, mode 3 (client)
    rng.fill(out.data() + 40, 8);  // transmit timestamp
    return out;
  }

  // Cycles through datagrams whose QUIC header a parser must reject.
  void malformed_payload(Rng& rng, std::uint32_t k, Datagram& d) const {
    Bytes& p = d.payload;
    auto long_start = [&] {
      p.push_back(std::uint8_t(0xc0 | (rng.byte() & 0x3f)));
      for (int shift = 24; shift >= 0; shift -= 8) p.push_back(std::uint8_t(kQuicV1 >> shift));
    };
    switch (k % 5) {
      case 0:
        d.detail = "empty datagram";
        break;
      case 1:
        d.detail = "long header truncated inside the version";
        p.push_back(std::uint8_t(0xc0 | (rng.byte() & 0x3f)));
        p.push_back(0x00), p.push_back(0x00);
        break;
      case 2: {
        d.detail = "v1 long header with a DCID longer than 20 octets";
        long_start();
        const std::size_t len = rng.uniform(21, 255);
        p.push_back(std::uint8_t(len));
        append(p, rng.bytes(len));
        p.push_back(8);
        append(p, rng.bytes(8));
        p.resize(std::max<std::size_t>(p.size(), kMinInitialDatagram), 0);
        break;
      }
      case 3:
        d.detail = "long header whose DCID runs past the datagram";
        long_start();
        p.push_back(20);
        append(p, rng.bytes(rng.uniform(0, 19)));
        break;
      default: {
        d.detail = "short header shorter than its DCID";
        p.push_back(std::uint8_t(0x40 | (rng.byte() & 0x3f)));
        // The first octet names the real configuration, so a load balancer
        // knows how long the CID must be, and it is cut short.
        const std::size_t len = rng.uniform(1, codec_.cid_len() - 1u);
        Bytes cid = rng.bytes(len);
        cid[0] = std::uint8_t(options_.quic_lb.config_id << 5 | (cid[0] & 0x1f));
        append(p, cid);
        break;
      }
    }
  }

  const TrafficOptions& options_;
  QuicLbCodec codec_;
  std::array<bool, 8> routable_{};
  std::vector<std::uint8_t> free_config_ids_;
  std::set<std::string> used_cids_;  // CIDs as strings: GCC 12 misreads std::set<vector> compares
  std::vector<std::uint64_t> starts_;
  std::vector<Rng> streams_;  // each connection's stream, after its identity draws
};

}  // namespace

const char* to_string(PacketKind kind) {
  switch (kind) {
    case PacketKind::kClientInitial: return "client_initial";
    case PacketKind::kZeroRtt: return "zero_rtt";
    case PacketKind::kServerInitial: return "server_initial";
    case PacketKind::kServerHandshake: return "server_handshake";
    case PacketKind::kClientHandshake: return "client_handshake";
    case PacketKind::kOneRtt: return "one_rtt";
    case PacketKind::kVersionProbe: return "version_probe";
    case PacketKind::kVersionNegotiation: return "version_negotiation";
    case PacketKind::kNonQuic: return "non_quic";
    case PacketKind::kMalformed: return "malformed";
  }
  return "?";
}

const char* to_string(Migration migration) {
  switch (migration) {
    case Migration::kNone: return "none";
    case Migration::kActive: return "active";
    case Migration::kNatRebinding: return "nat_rebinding";
  }
  return "?";
}

IpAddress TrafficOptions::ipv6_address(const std::string& text) {
  IpAddress ip;
  ip.v6 = true;
  if (inet_pton(AF_INET6, text.c_str(), ip.bytes.data()) != 1)
    throw std::invalid_argument("not an IPv6 address: " + text);
  return ip;
}

QuicLbConfig default_quic_lb_config() {
  QuicLbConfig config;
  config.config_id = 0;
  config.server_id_len = 2;
  config.nonce_len = 14;
  config.len_self_encode = false;
  config.key = std::array<std::uint8_t, 16>{'q', 'u', 'i', 'c', 's', 't', 'e', 'e',
                                            'r', ' ', 'd', 'e', 'm', 'o', '!', '!'};
  return config;
}

std::vector<std::vector<std::uint8_t>> default_server_ids() { return {{0x00, 0x01}, {0x00, 0x02}}; }

TrafficOptions default_traffic_options() {
  TrafficOptions options;
  options.quic_lb = default_quic_lb_config();
  options.server_ids = default_server_ids();
  return options;
}

std::uint64_t Traffic::frame_bytes() const {
  std::uint64_t total = 0;
  for (const auto& p : packets) total += p.frame.size();
  return total;
}

Traffic generate_traffic(const TrafficOptions& options) { return Generator(options).run(); }

void write_pcap(const std::string& path, const Traffic& traffic) {
  PcapWriter writer(path);
  for (const auto& p : traffic.packets) writer.write(p.frame, p.timestamp_ns);
  writer.close();
}

}  // namespace qs::traffic
