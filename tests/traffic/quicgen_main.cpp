// quicgen: writes a pcap of synthetic QUIC traffic (see quic_traffic.h).
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/config/profile.h"
#include "tests/traffic/quic_traffic.h"
#include "tests/traffic/traffic_profile.h"
#include "steering/hex.h"

namespace {

using qs::traffic::TrafficOptions;

constexpr const char* kUsage = R"(usage: quicgen --out FILE.pcap [options]

Writes QUIC traffic as a pcap: per connection a client Initial (random DCID of
8..20 octets, padded to >= 1200 octets), server Initial + Handshake whose SCID
is a QUIC-LB CID, client Initial ACK + Handshake, then 1-RTT both ways.
Fractions are of the connections (rounded to a whole count); counts are extra
standalone packets. Client traffic goes to the QUIC port from ports 49152+.

  --out FILE                 pcap to write (required)
  --truth FILE               also write per-frame ground truth as CSV
  --connections N            connections (default 2000)
  --packets-per-connection N 1-RTT packets per connection, both directions (16)
  --seed S                   random seed; same options + seed = same bytes (1)
  --ipv6 F                   IPv6 connections (0.25); the rest IPv4
  --vlan F                   802.1Q-tagged connections (0)
  --qinq F                   802.1ad+802.1Q double-tagged connections (0)
  --migrate F                active migration: new address+port, second server CID (0.05)
  --nat-rebind F             NAT rebinding: new port (sometimes address), same CIDs (0.05)
  --coalesce F               Initial+Handshake coalesced in one datagram (0.5)
  --v2 F                     QUIC version 2 connections (0.1)
  --zero-rtt F               connections whose client sends 0-RTT (0.1)
  --vn COUNT                 Version Negotiation exchanges (probe + VN) (10)
  --non-quic COUNT           DNS/NTP datagrams, not to the QUIC port (20)
  --malformed COUNT          unparseable QUIC headers to the QUIC port (10)
  --interleave on|off        overlap connections in time (on)
  --client-to-server-only    omit server->client packets
  --port N                   server QUIC port (443)
  --client-cid-len N         length of the clients' own CIDs, 0..20 (8)
  --server-cids quic-lb|random  servers mint QUIC-LB CIDs (default), or random ones of the
                             config's CID length, as servers that do not speak QUIC-LB do
QUIC-LB configuration (default: the demo's, as in configs/demo.yaml:
  --cr 0 --sid-len 2 --nonce-len 14 --key 7175696373746565722064656d6f2121,
  servers 0001,0002; single-pass AES):
  --cr N                     config rotation codepoint 0..6
  --sid-len N --nonce-len N  server ID and nonce lengths; giving them replaces the default
                             config, and without --key it is plaintext
  --key HEX                  16-octet key: single-pass AES when sid+nonce = 16, else four-pass
  --len-self-encode          first octet encodes the CID length
  --servers HEX,HEX,...      server IDs (sid-len octets each)
  --profile FILE             take QUIC-LB config (--cr picks one, else the first),
                             server IDs, QUIC port and client CID length
                             (short_dcid_len) from a quicsteer profile
  --help                     this text
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T parse_uint(const std::string& name, const std::string& text, unsigned long long max) {
  unsigned long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || value > max)
    throw UsageError(name + ": expected an integer 0.." + std::to_string(max) + ", got '" + text + "'");
  return T(value);
}

double parse_fraction(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= 0 && value <= 1))
    throw UsageError(name + ": expected a fraction between 0 and 1, got '" + text + "'");
  return value;
}

std::vector<std::uint8_t> parse_hex(const std::string& name, const std::string& text) {
  const std::string_view digits = text.rfind("0x", 0) == 0 ? std::string_view(text).substr(2) : std::string_view(text);
  if (digits.empty() || digits.size() % 2) throw UsageError(name + ": expected an even number of hex digits");
  std::vector<std::uint8_t> out;
  if (!qs::from_hex(digits, out)) throw UsageError(name + ": not hex: '" + text + "'");
  return out;
}

void write_truth(const std::string& path, const qs::traffic::Traffic& traffic) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot create");
  out << "frame,timestamp_ns,connection,direction,kind,coalesced,version,dcid,dcid_server_chosen,server_id,"
         "post_migration,detail\n";
  std::size_t index = 0;
  for (const auto& p : traffic.packets) {
    char version[16];
    std::snprintf(version, sizeof version, "%08x", unsigned(p.version));
    out << ++index << ',' << p.timestamp_ns << ',' << p.connection << ','
        << (p.direction == qs::traffic::Direction::kClientToServer ? "c2s" : "s2c") << ','
        << qs::traffic::to_string(p.kind) << ',' << int(p.coalesced) << ',' << version << ',' << qs::to_hex(p.dcid) << ','
        << int(p.dcid_server_chosen) << ',' << qs::to_hex(p.server_id) << ',' << int(p.post_migration) << ',' << p.detail
        << '\n';
  }
  out.close();
  if (!out) throw std::runtime_error(path + ": write failed");
}

int run(int argc, char** argv) {
  TrafficOptions options = qs::traffic::default_traffic_options();
  std::string out_path, truth_path, profile_path;
  std::optional<std::uint8_t> cr, sid_len, nonce_len;
  std::optional<std::vector<std::uint8_t>> key;
  std::optional<std::string> servers;
  bool len_self_encode = false;

  // Flags without a value; everything else takes exactly one ("--x v" or "--x=v").
  const std::set<std::string> flags = {"--help", "-h", "--len-self-encode", "--client-to-server-only"};
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i], value;
    if (name.rfind("--", 0) == 0 && name.find('=') != std::string::npos) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    } else if (!flags.count(name)) {
      if (i + 1 >= argc) throw UsageError(name + ": missing value");
      value = argv[++i];
    }
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (name == "--out") {
      out_path = value;
    } else if (name == "--truth") {
      truth_path = value;
    } else if (name == "--connections") {
      options.connections = parse_uint<std::uint32_t>(name, value, 10'000'000);
    } else if (name == "--packets-per-connection") {
      options.packets_per_connection = parse_uint<std::uint32_t>(name, value, 1'000'000);
    } else if (name == "--seed") {
      options.seed = parse_uint<std::uint64_t>(name, value, ~0ull);
    } else if (name == "--ipv6") {
      options.ipv6 = parse_fraction(name, value);
    } else if (name == "--vlan") {
      options.vlan = parse_fraction(name, value);
    } else if (name == "--qinq") {
      options.qinq = parse_fraction(name, value);
    } else if (name == "--migrate") {
      options.migrate = parse_fraction(name, value);
    } else if (name == "--nat-rebind") {
      options.nat_rebind = parse_fraction(name, value);
    } else if (name == "--coalesce") {
      options.coalesce = parse_fraction(name, value);
    } else if (name == "--v2") {
      options.v2 = parse_fraction(name, value);
    } else if (name == "--zero-rtt") {
      options.zero_rtt = parse_fraction(name, value);
    } else if (name == "--vn") {
      options.version_negotiation = parse_uint<std::uint32_t>(name, value, 1'000'000);
    } else if (name == "--non-quic") {
      options.non_quic = parse_uint<std::uint32_t>(name, value, 1'000'000);
    } else if (name == "--malformed") {
      options.malformed = parse_uint<std::uint32_t>(name, value, 1'000'000);
    } else if (name == "--interleave") {
      if (value != "on" && value != "off") throw UsageError("--interleave: expected on or off");
      options.interleave = value == "on";
    } else if (name == "--client-to-server-only") {
      options.client_to_server_only = true;
    } else if (name == "--port") {
      options.port = parse_uint<std::uint16_t>(name, value, 65535);
      if (options.port == 0) throw UsageError("--port: must be 1..65535");
    } else if (name == "--server-cids") {
      if (value != "quic-lb" && value != "random") throw UsageError("--server-cids: expected quic-lb or random");
      options.random_server_cids = value == "random";
    } else if (name == "--client-cid-len") {
      options.client_cid_len = parse_uint<std::uint8_t>(name, value, 20);
    } else if (name == "--cr") {
      cr = parse_uint<std::uint8_t>(name, value, 6);
    } else if (name == "--sid-len") {
      sid_len = parse_uint<std::uint8_t>(name, value, 255);
    } else if (name == "--nonce-len") {
      nonce_len = parse_uint<std::uint8_t>(name, value, 255);
    } else if (name == "--key") {
      key = parse_hex(name, value);
      if (key->size() != 16) throw UsageError("--key: expected 16 octets (32 hex digits)");
    } else if (name == "--len-self-encode") {
      len_self_encode = true;
    } else if (name == "--servers") {
      servers = value;
    } else if (name == "--profile") {
      profile_path = value;
    } else {
      throw UsageError("unknown option '" + name + "' (see --help)");
    }
  }
  if (out_path.empty()) throw UsageError("--out FILE is required (see --help)");

  const bool custom_config = sid_len || nonce_len || key || len_self_encode;
  if (!profile_path.empty()) {
    if (custom_config || servers)
      throw UsageError("--profile supplies the QUIC-LB config and servers; drop --sid-len/--nonce-len/--key/"
                       "--len-self-encode/--servers");
    qs::traffic::apply_profile(qs::load_profile(profile_path), cr, options);
  } else {
    if (custom_config) {
      if (!sid_len || !nonce_len) throw UsageError("--sid-len and --nonce-len go together");
      options.quic_lb = qs::QuicLbConfig{};
      options.quic_lb.server_id_len = *sid_len;
      options.quic_lb.nonce_len = *nonce_len;
      options.quic_lb.len_self_encode = len_self_encode;
      if (key) {
        options.quic_lb.key.emplace();
        std::copy(key->begin(), key->end(), options.quic_lb.key->begin());
      }
      if (!servers) {
        // Servers 1 and 2, right-aligned in sid-len octets.
        if (*sid_len == 0) throw UsageError("--sid-len: must be 1..15");
        options.server_ids.assign(2, std::vector<std::uint8_t>(*sid_len, 0));
        options.server_ids[0].back() = 1;
        options.server_ids[1].back() = 2;
      }
    }
    if (cr) options.quic_lb.config_id = *cr;
    if (servers) {
      options.server_ids.clear();
      std::string_view rest = *servers;
      while (!rest.empty() || options.server_ids.empty()) {
        const auto comma = rest.find(',');
        options.server_ids.push_back(parse_hex("--servers", std::string(rest.substr(0, comma))));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
  }

  const auto traffic = qs::traffic::generate_traffic(options);
  qs::traffic::write_pcap(out_path, traffic);
  if (!truth_path.empty()) write_truth(truth_path, traffic);

  std::map<qs::traffic::Migration, std::size_t> migrations;
  for (const auto& c : traffic.connections) ++migrations[c.migration];
  std::printf("quicgen: %s: %zu frames, %zu connections (%zu migrating, %zu NAT-rebinding), %llu bytes\n",
              out_path.c_str(), traffic.packets.size(), traffic.connections.size(),
              migrations[qs::traffic::Migration::kActive], migrations[qs::traffic::Migration::kNatRebinding],
              static_cast<unsigned long long>(traffic.frame_bytes()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quicgen: %s\n", e.what());
    return 2;
  }
}
