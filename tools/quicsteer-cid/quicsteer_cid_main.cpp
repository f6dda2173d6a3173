// quicsteer-cid: QUIC-LB connection IDs and packet classification from the
// command line. See usage() for the subcommands.
#include <pcap/pcap.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/config/profile.h"
#include "steering/packet_classifier.h"
#include "steering/packet_parser.h"
#include "steering/quic_lb.h"
#include "steering/hex.h"

namespace {

// A bad command line: printed with a pointer to --help, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* kUsage =
    "usage: quicsteer-cid encode --cr N --sid-len N --nonce-len N [--key HEX] [--len-self-encode]\n"
    "                            [--first-octet-bits N] --server-id HEX --nonce HEX\n"
    "       quicsteer-cid decode --cr N --sid-len N --nonce-len N [--key HEX] [--len-self-encode] CIDHEX\n"
    "       quicsteer-cid classify [--profile FILE] [--port N ...] [--cid-len N]\n"
    "                              [--fallback-hash tuple|dcid] FILE.pcap\n"
    "\n"
    "QUIC-LB connection IDs (draft-ietf-quic-load-balancers-21) and packet steering.\n"
    "\n"
    "encode  prints the CID, lowercase hex. --cr is the config rotation codepoint 0..6,\n"
    "        --sid-len 1..15 and --nonce-len 4..18 octets (sum <= 19), --key 32 hex digits\n"
    "        for AES-128 (single pass when sid+nonce = 16, four-pass otherwise; plaintext\n"
    "        without). Without --len-self-encode the first octet's low 5 bits are\n"
    "        --first-octet-bits (default 0; servers should pick them at random).\n"
    "decode  prints the server ID in lowercase hex, or 'unroutable' when the CID does not\n"
    "        belong to the config (other codepoint, too short, self-encoded length wrong).\n"
    "classify reads an Ethernet pcap and prints one CSV row per frame:\n"
    "        frame,verdict,form,type,version,dcid,scid,owner,rule,backend\n"
    "        frame counts from 1; verdict quic|not_quic|not_udp|malformed:REASON; form\n"
    "        long|short|-; type initial|0rtt|handshake|retry|vn|1rtt|-; version 0x%08x or -;\n"
    "        dcid/scid lowercase hex (empty when none); owner the lcore the profile's\n"
    "        steering picks, or - when nothing routes the frame; rule what picked it:\n"
    "        quic_lb, learned_setup / learned_cid / learned_tuple (the forwarding tables),\n"
    "        fallback_dcid / fallback_unknown_cid / fallback_tuple (the keyed consistent\n"
    "        hash of the DCID or 4-tuple), or -. With steering.forwarding enabled the\n"
    "        capture is replayed through the data path's rules in order, the tables\n"
    "        learning from each frame and ageing by the capture's timestamps, so the\n"
    "        owner column is what the data path would pick for that capture. backend is\n"
    "        the name of the profile's backend the frame goes to, or - (no backends).\n"
    "        Frames are judged by their length on the wire: a capture with a short snaplen\n"
    "        (tcpdump -s 128) holds the headers, and a payload cut by the snaplen is not\n"
    "        malformed; classify says once on stderr that the capture was truncated. A frame\n"
    "        cut before the headers it needs reads truncated_capture.\n"
    "        --profile FILE  take quic_ports, short_dcid_len, quic_lb, servers, fallback and\n"
    "                        the owner lcores from a quicsteer profile. Without it: port\n"
    "                        443, short DCIDs of 8 octets, no QUIC-LB, and owner is always -\n"
    "                        (there are no owners to pick from).\n"
    "        --port N        a QUIC UDP port (repeatable); the ports given replace the\n"
    "                        profile's (or the default 443). A datagram is QUIC when its\n"
    "                        destination port is one, or else its source port.\n"
    "        --cid-len N     short-header DCID length 0..20 where no QUIC-LB config applies;\n"
    "                        overrides the profile.\n"
    "        --fallback-hash tuple|dcid\n"
    "                        what routes a frame QUIC-LB cannot and no table knows: the\n"
    "                        keyed hash of its 4-tuple or of its DCID; overrides the\n"
    "                        profile's steering.fallback.hash (tuple with backends, dcid\n"
    "                        without), so that one capture can be replayed both ways.\n"
    "\n"
    "Exit status: 0 done, 1 error (unreadable or invalid file), 2 bad arguments.\n";

unsigned parse_number(std::string_view option, const std::string& text, unsigned lo, unsigned hi) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-' || v < lo || v > hi)
    throw UsageError(std::string(option) + ": expected a number in " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ", got '" + text + "'");
  return unsigned(v);
}

std::vector<std::uint8_t> parse_hex(std::string_view what, const std::string& text) {
  if (text.size() % 2 != 0)
    throw UsageError(std::string(what) + ": odd number of hex digits in '" + text + "'");
  std::vector<std::uint8_t> out;
  if (!qs::from_hex(text, out)) throw UsageError(std::string(what) + ": '" + text + "' is not hex");
  return out;
}

// Walks argv: options with values, flags, positionals.
class Args {
 public:
  Args(int argc, char** argv, int first) : argv_(argv + first, argv + argc) {}
  bool done() const { return pos_ >= argv_.size(); }
  std::string next() { return argv_[pos_++]; }
  std::string value(const std::string& option) {
    if (done()) throw UsageError(option + ": missing value");
    return next();
  }

 private:
  std::vector<std::string> argv_;
  std::size_t pos_ = 0;
};

struct CodecOptions {
  std::optional<unsigned> cr, sid_len, nonce_len;
  std::optional<std::vector<std::uint8_t>> key;
  bool self_encode = false;

  // Consumes `option` if it is a codec option.
  bool take(const std::string& option, Args& args) {
    if (option == "--cr") {
      cr = parse_number(option, args.value(option), 0, 6);
    } else if (option == "--sid-len") {
      sid_len = parse_number(option, args.value(option), 1, 15);
    } else if (option == "--nonce-len") {
      nonce_len = parse_number(option, args.value(option), 4, 18);
    } else if (option == "--key") {
      key = parse_hex(option, args.value(option));
      if (key->size() != 16) throw UsageError("--key: expected 32 hex digits (AES-128)");
    } else if (option == "--len-self-encode") {
      self_encode = true;
    } else {
      return false;
    }
    return true;
  }

  qs::QuicLbCodec codec() const {
    if (!cr) throw UsageError("--cr is required");
    if (!sid_len) throw UsageError("--sid-len is required");
    if (!nonce_len) throw UsageError("--nonce-len is required");
    if (*sid_len + *nonce_len > 19)
      throw UsageError("--sid-len + --nonce-len must be at most 19, got " +
                       std::to_string(*sid_len + *nonce_len));
    qs::QuicLbConfig c;
    c.config_id = std::uint8_t(*cr);
    c.server_id_len = std::uint8_t(*sid_len);
    c.nonce_len = std::uint8_t(*nonce_len);
    c.len_self_encode = self_encode;
    if (key) {
      std::array<std::uint8_t, 16> k{};
      std::copy(key->begin(), key->end(), k.begin());
      c.key = k;
    }
    return qs::QuicLbCodec(c);
  }
};

int run_encode(Args& args) {
  CodecOptions codec_options;
  std::optional<std::vector<std::uint8_t>> server_id, nonce;
  unsigned first_octet_bits = 0;
  while (!args.done()) {
    const std::string a = args.next();
    if (codec_options.take(a, args)) continue;
    if (a == "--server-id") {
      server_id = parse_hex(a, args.value(a));
    } else if (a == "--nonce") {
      nonce = parse_hex(a, args.value(a));
    } else if (a == "--first-octet-bits") {
      first_octet_bits = parse_number(a, args.value(a), 0, 31);
    } else {
      throw UsageError("encode: unexpected argument '" + a + "'");
    }
  }
  const qs::QuicLbCodec codec = codec_options.codec();
  if (!server_id) throw UsageError("--server-id is required");
  if (!nonce) throw UsageError("--nonce is required");
  if (server_id->size() != codec.server_id_len())
    throw UsageError("--server-id: expected " + std::to_string(codec.server_id_len()) +
                     " octets (--sid-len), got " + std::to_string(server_id->size()));
  if (nonce->size() != codec.nonce_len())
    throw UsageError("--nonce: expected " + std::to_string(codec.nonce_len()) +
                     " octets (--nonce-len), got " + std::to_string(nonce->size()));
  std::uint8_t cid[qs::kMaxCidLen];
  codec.encode(server_id->data(), nonce->data(), cid, std::uint8_t(first_octet_bits));
  std::cout << qs::to_hex(cid, codec.cid_len()) << '\n';
  return 0;
}

int run_decode(Args& args) {
  CodecOptions codec_options;
  std::optional<std::vector<std::uint8_t>> cid;
  while (!args.done()) {
    const std::string a = args.next();
    if (codec_options.take(a, args)) continue;
    if (a.rfind("--", 0) == 0) throw UsageError("decode: unknown option '" + a + "'");
    if (cid) throw UsageError("decode: more than one CID given");
    cid = parse_hex("CID", a);
  }
  const qs::QuicLbCodec codec = codec_options.codec();
  if (!cid) throw UsageError("decode: no CID given");
  if (cid->empty() || cid->size() > qs::kMaxCidLen)
    throw UsageError("CID: expected 1..20 octets, got " + std::to_string(cid->size()));
  std::uint8_t server_id[16];
  if (codec.decode(cid->data(), cid->size(), server_id)) {
    std::cout << qs::to_hex(server_id, codec.server_id_len()) << '\n';
  } else {
    std::cout << "unroutable\n";
  }
  return 0;
}

// How far into the frame the parser's verdict reaches: the octets it read.
std::size_t needed_octets(const qs::ParsedPacket& p) {
  switch (p.verdict) {
    case qs::Verdict::kQuic:
      if (p.form == qs::QuicForm::kLong) return std::size_t(p.scid_offset) + p.scid_len;
      return std::size_t(p.dcid_offset) + p.dcid_len;
    case qs::Verdict::kNotQuic:
      return std::size_t(p.l4_offset) + 8;
    case qs::Verdict::kNotUdp:
      if (p.ip_version == 0) return p.l3_offset;  // not IP: the EtherType said so
      return p.l4_offset ? p.l4_offset : std::size_t(p.l3_offset) + (p.ip_version == 6 ? 40 : 20);
    case qs::Verdict::kMalformed:
      break;
  }
  return 0xffff;
}

int run_classify(Args& args) {
  std::optional<std::string> profile_path, pcap_path;
  std::vector<std::uint16_t> ports;
  std::optional<unsigned> cid_len;
  std::optional<qs::FallbackHash> fallback_hash;
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "--profile") {
      profile_path = args.value(a);
    } else if (a == "--port") {
      ports.push_back(std::uint16_t(parse_number(a, args.value(a), 1, 65535)));
    } else if (a == "--cid-len") {
      cid_len = parse_number(a, args.value(a), 0, 20);
    } else if (a == "--fallback-hash") {
      const std::string v = args.value(a);
      if (v == "tuple") fallback_hash = qs::FallbackHash::kTuple;
      else if (v == "dcid") fallback_hash = qs::FallbackHash::kDcid;
      else throw UsageError("--fallback-hash: expected tuple or dcid, got '" + v + "'");
    } else if (a.rfind("--", 0) == 0) {
      throw UsageError("classify: unknown option '" + a + "'");
    } else if (pcap_path) {
      throw UsageError("classify: more than one capture given");
    } else {
      pcap_path = a;
    }
  }
  if (!pcap_path) throw UsageError("classify: no capture file given");

  qs::SteeringConfig steering;
  if (profile_path) steering = qs::load_profile(*profile_path).steering;
  if (!ports.empty()) steering.quic_ports = ports;
  if (cid_len) steering.short_dcid_len = std::uint8_t(*cid_len);
  if (fallback_hash) steering.fallback_hash = *fallback_hash;
  const qs::ParserConfig parser(steering);
  std::optional<qs::PacketClassifier> classifier;
  // The data path's forwarding tables, learning from the capture as the
  // receivers would from the wire (their entries age by capture time).
  std::optional<qs::ForwardingTables> tables;
  if (profile_path) {
    classifier.emplace(steering);
    if (steering.forwarding.enabled && steering.mode == qs::SteeringMode::kCid) {
      tables.emplace(steering.forwarding, steering.fallback_key);
      classifier->use_tables(&*tables);
    }
  }
  std::uint32_t last_sweep_ms = 0;

  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* pcap = pcap_open_offline(pcap_path->c_str(), errbuf);
  if (!pcap) throw std::runtime_error(*pcap_path + ": " + errbuf);
  struct Closer {
    pcap_t* p;
    ~Closer() { pcap_close(p); }
  } closer{pcap};
  if (pcap_datalink(pcap) != DLT_EN10MB)
    throw std::runtime_error(*pcap_path + ": link type " +
                             std::to_string(pcap_datalink(pcap)) +
                             " is not Ethernet");

  std::cout << "frame,verdict,form,type,version,dcid,scid,owner,rule,backend\n";
  std::vector<std::string> backend_names;  // by slot
  for (const qs::BackendConfig& b : steering.backends) {
    if (backend_names.size() <= b.slot) backend_names.resize(b.slot + 1u, "-");
    backend_names[b.slot] = b.name;
  }
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  unsigned long frame = 0;
  int rc;
  unsigned long truncated = 0;
  std::vector<std::uint8_t> wire;  // a truncated frame, zero-filled to its wire length
  while ((rc = pcap_next_ex(pcap, &header, &data)) == 1) {
    ++frame;
    qs::ParsedPacket p = qs::parse_packet(data, header->caplen, parser);
    bool cut_headers = false;
    if (header->caplen < header->len) {
      ++truncated;
      // Judge the wire length: parse the frame as long as it was, and keep
      // that verdict when everything it read lies within the captured octets.
      wire.assign(data, data + header->caplen);
      wire.resize(header->len, 0);
      const qs::ParsedPacket w = qs::parse_packet(wire.data(), wire.size(), parser);
      if (w.verdict == qs::Verdict::kMalformed) {
        // Decided by the captured octets only if they alone give the same answer.
        cut_headers = !(p.verdict == qs::Verdict::kMalformed && p.reason == w.reason);
      } else {
        cut_headers = needed_octets(w) > header->caplen;
      }
      p = w;
      data = wire.data();
    }
    if (cut_headers) {
      std::cout << frame << ",truncated_capture,-,-,-,,,-,-,-\n";
      continue;
    }
    std::string verdict(qs::to_string(p.verdict));
    if (p.verdict == qs::Verdict::kMalformed) verdict += ":" + std::string(qs::to_string(p.reason));
    std::string form = "-", type = "-", version = "-", dcid, scid, owner = "-", rule = "-", backend = "-";
    if (p.is_quic()) {
      form = qs::to_string(p.form);
      type = qs::to_string(p.type);
      if (p.form == qs::QuicForm::kLong) {
        char text[16];
        std::snprintf(text, sizeof text, "0x%08x", p.version);
        version = text;
        scid = qs::to_hex(p.scid(data), p.scid_len);
      }
      dcid = qs::to_hex(p.dcid(data), p.dcid_len);
    }
    if (classifier) {
      const std::uint32_t now_ms =
          std::uint32_t(std::uint64_t(header->ts.tv_sec) * 1000 + std::uint64_t(header->ts.tv_usec) / 1000);
      if (tables && now_ms - last_sweep_ms >= 1000) {
        tables->expire(now_ms, std::max(tables->established().bucket_count(), tables->setup().bucket_count()));
        last_sweep_ms = now_ms;
      }
      const qs::Resolution r = classifier->resolve(data, p, now_ms);
      if (r.routed()) {
        owner = std::to_string(classifier->resolver().owner_lcore(r.owner_index));
        rule = qs::to_string(r.how);
        if (r.backend < backend_names.size()) backend = backend_names[r.backend];
      }
    }
    std::cout << frame << ',' << verdict << ',' << form << ',' << type << ',' << version << ','
              << dcid << ',' << scid << ',' << owner << ',' << rule << ',' << backend << '\n';
  }
  if (rc == PCAP_ERROR)
    throw std::runtime_error(*pcap_path + ": frame " + std::to_string(frame + 1) + ": " +
                             pcap_geterr(pcap));
  if (truncated)
    std::cerr << "quicsteer-cid: " << *pcap_path << ": " << truncated << " of " << frame
              << " frames were truncated by the capture (snaplen " << pcap_snapshot(pcap)
              << "); they are judged by their length on the wire\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  Args args(argc, argv, 2);
  try {
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
        std::cout << kUsage;
        return 0;
      }
    }
    if (command == "encode") return run_encode(args);
    if (command == "decode") return run_decode(args);
    if (command == "classify") return run_classify(args);
    throw UsageError("unknown command '" + command + "' (encode, decode, classify)");
  } catch (const UsageError& e) {
    std::cerr << "quicsteer-cid: " << e.what() << " (see quicsteer-cid --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "quicsteer-cid: " << e.what() << '\n';
    return 1;
  }
}
