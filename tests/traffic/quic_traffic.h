// quicgen's engine: synthetic QUIC traffic with ground truth.
//
// generate_traffic() plays N QUIC connections (client Initial with a random
// DCID, optional 0-RTT, server Initial + Handshake whose SCID is a QUIC-LB
// CID, client Initial ACK + Handshake, then 1-RTT both ways, optionally
// migrating) plus standalone Version Negotiation exchanges, non-QUIC UDP and
// malformed QUIC, and returns every frame with what a steering test needs to
// know about it. Initial packets are really protected with the Initial keys,
// so Wireshark decrypts them; Handshake, 0-RTT and 1-RTT payloads are random
// octets standing in for ciphertext.
//
// Everything follows from TrafficOptions (seed included): the same options
// give the same bytes with any compiler. Each connection draws from its own
// random stream, so with --client-to-server-only the client's packets are
// byte-identical to those of the full capture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "steering/steering_config.h"
#include "tests/traffic/frame.h"

namespace qs::traffic {

enum class Direction : std::uint8_t { kClientToServer, kServerToClient };

enum class PacketKind : std::uint8_t {
  kClientInitial,       // first flight (DCID = client's random DCID) or Initial ACK (DCID = server CID)
  kZeroRtt,             // first flight, DCID = client's random DCID
  kServerInitial,       // DCID = client CID, SCID = QUIC-LB CID
  kServerHandshake,
  kClientHandshake,     // DCID = server CID
  kOneRtt,              // short header
  kVersionProbe,        // client long header with an unsupported (reserved) version
  kVersionNegotiation,  // the server's answer to a probe
  kNonQuic,             // UDP to a port that is not the QUIC port (DNS, NTP)
  kMalformed,           // UDP to the QUIC port whose QUIC header cannot be parsed
};
const char* to_string(PacketKind kind);

enum class Migration : std::uint8_t {
  kNone,
  kActive,        // client moves to a new address and port and to the second server CID
  kNatRebinding,  // client's port (sometimes address) changes, CIDs do not
};
const char* to_string(Migration migration);

struct Packet {
  std::vector<std::uint8_t> frame;  // the Ethernet frame as sent
  std::uint64_t timestamp_ns = 0;
  int connection = -1;  // index into Traffic::connections; -1 for standalone packets
  Direction direction = Direction::kClientToServer;
  PacketKind kind = PacketKind::kClientInitial;
  bool coalesced = false;  // Initial followed by a Handshake packet in one datagram
  // DCID of the (first) QUIC packet in the datagram; empty for non-QUIC and
  // malformed packets.
  std::vector<std::uint8_t> dcid;
  bool dcid_server_chosen = false;     // dcid is a QUIC-LB CID a server issued
  std::vector<std::uint8_t> server_id;  // what dcid encodes, when server chosen
  bool post_migration = false;          // sent on the connection's migrated 4-tuple
  std::uint32_t version = 0;            // long header version; 0 for short header and non-QUIC
  const char* detail = "";              // non-QUIC and malformed: which variety

  // A client packet addressed to the client's own random DCID: the load
  // balancer cannot route it by server ID and must use its fallback.
  bool first_flight() const {
    return connection >= 0 && direction == Direction::kClientToServer && !dcid_server_chosen &&
           (kind == PacketKind::kClientInitial || kind == PacketKind::kZeroRtt);
  }
};

struct Connection {
  std::uint32_t version = 0;  // kQuicV1 or kQuicV2
  std::vector<std::uint8_t> client_initial_dcid;  // random, 8..20 octets
  std::vector<std::uint8_t> client_cid;           // the client's SCID, client_cid_len octets
  // QUIC-LB CIDs of this connection's server: [0] from the handshake, [1] used
  // after an active migration (same server ID, fresh nonce).
  std::vector<std::vector<std::uint8_t>> server_cids;
  std::vector<std::uint8_t> server_id;
  std::size_t server_index = 0;  // into TrafficOptions::server_ids
  FourTuple original;
  FourTuple migrated;  // equal to original unless migration != kNone
  Migration migration = Migration::kNone;
  L2Header l2;  // client->server addressing; VLAN IDs apply both ways
  bool coalesced = false;
  bool zero_rtt = false;
};

struct TrafficOptions {
  std::uint64_t seed = 1;
  std::uint32_t connections = 2000;
  std::uint32_t packets_per_connection = 16;  // 1-RTT packets, both directions together
  // Fractions of connections (rounded to a whole count; each connection with a
  // property is drawn at random).
  double ipv6 = 0.25;
  double vlan = 0;        // single 802.1Q tag
  double qinq = 0;        // 802.1ad + 802.1Q; vlan + qinq <= 1
  double migrate = 0.05;  // active migration; migrate + nat_rebind <= 1
  double nat_rebind = 0.05;
  double coalesce = 0.5;  // server Initial+Handshake and client Initial+Handshake share datagrams
  double v2 = 0.1;        // QUIC version 2 (RFC 9369)
  double zero_rtt = 0.1;  // client sends 0-RTT after its Initial
  // Standalone packets, placed at random times.
  std::uint32_t version_negotiation = 10;  // probe + Version Negotiation pairs
  std::uint32_t non_quic = 20;
  std::uint32_t malformed = 10;
  bool interleave = true;  // connections overlap in time; off: one after another
  bool client_to_server_only = false;
  std::uint16_t port = 443;
  // Length of the CIDs clients choose for themselves (the DCID of server->
  // client packets). 8 matches a profile's default short_dcid_len, the length
  // a load balancer assumes for short headers it cannot route by QUIC-LB.
  std::uint8_t client_cid_len = 8;
  QuicLbConfig quic_lb;  // encodes every server CID (unless random_server_cids)
  // Servers that do not speak QUIC-LB: their CIDs are random octets of
  // quic_lb.cid_len(), on codepoints no config routes (like client-chosen
  // ones) and not 0b111 (which announces a self-encoded length wherever
  // QUIC-LB is in use), and carry no server ID (Packet::server_id stays
  // empty).
  bool random_server_cids = false;
  std::vector<std::vector<std::uint8_t>> server_ids;  // each quic_lb.server_id_len octets
  // Config-rotation codepoints a load balancer would try to decode. Client-
  // chosen CIDs (initial DCIDs, client CIDs) never start with one of them, so
  // that they always take the fallback path (a random CID that happened to
  // carry a valid server ID would be routed by it, which the ground truth
  // cannot predict).
  // quic_lb.config_id is always included.
  std::vector<std::uint8_t> routable_config_ids;
  IpAddress server_ipv4 = IpAddress::v4(198, 18, 0, 1);  // RFC 2544 benchmarking range
  IpAddress server_ipv6 = ipv6_address("2001:db8::443");
  MacAddress client_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  MacAddress server_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  std::uint64_t start_time_ns = 1700000000ull * 1000000000ull;

  // Parses a textual IPv6 address (inet_pton); throws std::invalid_argument.
  static IpAddress ipv6_address(const std::string& text);
};

// The demo's QUIC-LB configuration, also quicgen's default and configs/demo.yaml's:
// config ID 0, 2-octet server IDs, 14-octet nonce (single-pass AES, 17-octet
// CIDs), key 0x7175696373746565722064656d6f2121 ("quicsteer demo!!").
QuicLbConfig default_quic_lb_config();
// Server IDs 0x0001 and 0x0002.
std::vector<std::vector<std::uint8_t>> default_server_ids();
TrafficOptions default_traffic_options();  // the above plus the defaults in TrafficOptions

struct Traffic {
  std::vector<Connection> connections;
  std::vector<Packet> packets;  // capture order: by timestamp, each connection's packets in order
  std::uint64_t frame_bytes() const;
};

// Throws std::invalid_argument with a clear message for inconsistent options.
Traffic generate_traffic(const TrafficOptions& options);

// Writes the packets as a pcap file; throws std::runtime_error.
void write_pcap(const std::string& path, const Traffic& traffic);

}  // namespace qs::traffic
