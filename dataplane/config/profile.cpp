// Profile loader: strict YAML decoding, cross-checks and the resolved dump.
//
// Everything here is control path (runs once, before EAL): errors are
// ProfileError exceptions carrying "FILE:LINE:COL: KEY: what is wrong".
#include "dataplane/config/profile.h"
#include "steering/hex.h"

#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unistd.h>
#include <utility>

namespace qs {

int Profile::port_index(const std::string& name) const {
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Limits of the schema that are not plain per-field ranges.
constexpr std::uint16_t kMaxQueuesPerPort = 64;
constexpr unsigned kMaxLcoreId = 127;
constexpr std::uint32_t kMinMbufs = 1024;
constexpr std::uint32_t kMaxMbufs = 16u << 20;
constexpr std::uint32_t kMaxMempoolCache = 512;  // RTE_MEMPOOL_CACHE_MAX_SIZE
// rte_mempool_create() refuses a per-lcore cache above n / 1.5; the ranges
// alone guarantee it, so no profile can trip over it at start-up.
static_assert(kMaxMempoolCache * 3 <= kMinMbufs * 2);
// RTE_PKTMBUF_HEADROOM of the Debian DPDK build: the start of every mbuf data
// room that the NIC does not write, so a frame gets data_room minus this.
constexpr std::uint32_t kMbufHeadroom = 128;
// Ethernet header + FCS on top of the MTU (what PMDs size RX buffers for).
constexpr std::uint32_t kEthernetOverhead = 14 + 4;
constexpr std::size_t kMaxQuicLbConfigs = 7;   // config ids 0..6
constexpr unsigned kMaxCidPayload = 19;        // 20-octet CID minus first octet
constexpr std::size_t kMaxPortNameLength = 32;
// Per-lcore synthetic cost may stall an owner for tens of milliseconds a
// packet (a stuck owner in experiments); the profile-wide one stays modest.
constexpr std::uint32_t kMaxLcoreCostCycles = 100000000;
constexpr std::size_t kMaxBackendNameLength = 32;
constexpr std::uint32_t kMaxBackendWeight = 1000;
constexpr std::uint32_t kMaxVxlanVni = (1u << 24) - 1;  // 24 bits (RFC 7348)

// A value with where it came from: the node, its position and its dotted key.
struct Field {
  YAML::Node node;
  YAML::Mark mark;
  std::string key;
};

std::string join_key(const std::string& parent, std::string_view name) {
  if (parent.empty()) return std::string(name);
  return parent + "." + std::string(name);
}

std::string index_key(const std::string& parent, std::size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

bool has_position(const YAML::Mark& mark) { return mark.line >= 0 && mark.column >= 0; }

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      break;
  }
  if (node.Tag() == "!") return "the quoted string '" + node.Scalar() + "'";
  return "'" + node.Scalar() + "'";
}

class Decoder {
 public:
  explicit Decoder(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& key,
                         const std::string& what) const {
    // yaml-cpp counts from 0; editors and compilers count from 1.
    const int line = has_position(mark) ? mark.line + 1 : 1;
    const int column = has_position(mark) ? mark.column + 1 : 1;
    throw ProfileError(file_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                       (key.empty() ? std::string("(top level)") : key) + ": " + what);
  }
  [[noreturn]] void fail(const Field& field, const std::string& what) const {
    fail(field.mark, field.key, what);
  }

  // --- scalars ---

  std::string text(const Field& f) const {
    if (!f.node.IsScalar()) fail(f, "expected a string, got " + describe(f.node));
    return f.node.Scalar();
  }

  template <typename T>
  T integer(const Field& f, std::int64_t min, std::int64_t max) const {
    if (!f.node.IsScalar() || f.node.Tag() == "!") {
      fail(f, "expected an integer, got " + describe(f.node));
    }
    const std::string& s = f.node.Scalar();
    const char* first = s.data();
    const char* last = s.data() + s.size();
    if (first != last && *first == '+') ++first;
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
      fail(f, "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " + s);
    }
    if (ec != std::errc() || end != last || first == last) {
      fail(f, "expected an integer, got " + describe(f.node));
    }
    if (value < min || value > max) {
      fail(f, "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " + s);
    }
    return static_cast<T>(value);
  }

  double real(const Field& f, double min, double max) const {
    if (!f.node.IsScalar() || f.node.Tag() == "!") {
      fail(f, "expected a number, got " + describe(f.node));
    }
    double value = 0;
    switch (parse_real(f.node.Scalar(), min, max, value)) {
      case RealParse::kOk: return value;
      case RealParse::kNotANumber: fail(f, "expected a number, got " + describe(f.node));
      case RealParse::kOutOfRange: break;
    }
    fail(f, "must be in " + format_real(min) + ".." + format_real(max) + ", got " + f.node.Scalar());
  }

  // The profile's rule for numbers, shared with the command line: decimal
  // (std::from_chars: no hex, no leading spaces), finite, within [min, max].
  enum class RealParse { kOk, kNotANumber, kOutOfRange };
  static RealParse parse_real(const std::string& s, double min, double max, double& value) {
    const char* first = s.data();
    const char* last = s.data() + s.size();
    if (first != last && *first == '+') ++first;
    value = 0;
    const auto [end, ec] = std::from_chars(first, last, value);
    if (ec != std::errc() || end != last || first == last || !std::isfinite(value)) return RealParse::kNotANumber;
    if (value < min || value > max) return RealParse::kOutOfRange;
    return RealParse::kOk;
  }

  bool boolean(const Field& f) const {
    if (f.node.IsScalar() && f.node.Tag() != "!") {
      const std::string& s = f.node.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
    }
    fail(f, "expected true or false, got " + describe(f.node));
  }

  template <typename E>
  E choice(const Field& f, std::initializer_list<std::pair<std::string_view, E>> options) const {
    std::string expected;
    if (f.node.IsScalar()) {
      for (const auto& [name, value] : options) {
        if (f.node.Scalar() == name) return value;
      }
    }
    for (const auto& option : options) {
      expected += (expected.empty() ? "" : " | ") + std::string(option.first);
    }
    fail(f, "expected one of " + expected + ", got " + describe(f.node));
  }

  // Exactly `octets` octets as hex digits (no prefix, either case).
  std::vector<std::uint8_t> hex(const Field& f, std::size_t min_octets, std::size_t max_octets) const {
    const std::string s = text(f);
    const auto count = [](std::size_t n) {
      return std::to_string(n) + " hex digit" + (n == 1 ? "" : "s");
    };
    const std::string wanted = min_octets == max_octets
                                   ? count(2 * min_octets)
                                   : "an even number of hex digits, " + std::to_string(2 * min_octets) +
                                         ".." + std::to_string(2 * max_octets);
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
        fail(f, "expected " + wanted + ", got '" + s + "' ('" + s[i] + "' at position " +
                    std::to_string(i + 1) + " is not a hex digit)");
      }
    }
    if (s.size() % 2 != 0 || s.size() < 2 * min_octets || s.size() > 2 * max_octets) {
      fail(f, "expected " + wanted + ", got " + count(s.size()));
    }
    std::vector<std::uint8_t> octets(s.size() / 2);
    for (std::size_t i = 0; i < octets.size(); ++i) {
      std::from_chars(s.data() + 2 * i, s.data() + 2 * i + 2, octets[i], 16);
    }
    return octets;
  }

  std::array<std::uint8_t, 16> key128(const Field& f) const {
    const auto octets = hex(f, 16, 16);
    std::array<std::uint8_t, 16> key{};
    std::copy(octets.begin(), octets.end(), key.begin());
    return key;
  }

  // A unicast IPv4 address as a dotted quad (inet_pton's spelling: four
  // decimal octets, nothing else).
  std::array<std::uint8_t, 4> ipv4(const Field& f) const {
    const std::string s = text(f);
    std::array<std::uint8_t, 4> a{};
    if (::inet_pton(AF_INET, s.c_str(), a.data()) != 1) {
      fail(f, "expected an IPv4 address (dotted quad, e.g. 10.0.0.1), got '" + s + "'");
    }
    if (a == std::array<std::uint8_t, 4>{} || a == std::array<std::uint8_t, 4>{255, 255, 255, 255} ||
        (a[0] & 0xf0) == 0xe0) {
      fail(f, "expected a unicast IPv4 address, got '" + s + "' (unspecified, broadcast or multicast)");
    }
    return a;
  }

  // A unicast IPv6 address as inet_pton reads one ("fd00::1").
  std::array<std::uint8_t, 16> ipv6(const Field& f) const {
    const std::string s = text(f);
    std::array<std::uint8_t, 16> a{};
    if (::inet_pton(AF_INET6, s.c_str(), a.data()) != 1) {
      fail(f, "expected an IPv6 address (e.g. \"fd00::1\"), got '" + s + "'");
    }
    if (a == std::array<std::uint8_t, 16>{} || a[0] == 0xff) {
      fail(f, "expected a unicast IPv6 address, got '" + s + "' (unspecified or multicast)");
    }
    return a;
  }

  // A unicast Ethernet address: six octets of two hex digits joined by ':'.
  // A group (multicast, broadcast) or all-zero address is no station.
  std::array<std::uint8_t, 6> mac(const Field& f) const {
    const std::string s = text(f);
    std::array<std::uint8_t, 6> a{};
    bool well_formed = s.size() == 17;
    for (std::size_t i = 0; well_formed && i < a.size(); ++i) {
      const char* octet = s.data() + 3 * i;
      well_formed = std::isxdigit(static_cast<unsigned char>(octet[0])) &&
                    std::isxdigit(static_cast<unsigned char>(octet[1])) && (i == 5 || octet[2] == ':');
      if (well_formed) std::from_chars(octet, octet + 2, a[i], 16);
    }
    if (!well_formed) {
      fail(f, "expected a MAC address as six hex octets joined by ':' (e.g. \"02:00:00:00:00:01\"), got '" + s +
                  "'");
    }
    if ((a[0] & 0x01) != 0 || a == std::array<std::uint8_t, 6>{}) {
      fail(f, "expected a unicast MAC address, got '" + s + "' (" +
                  ((a[0] & 0x01) != 0 ? "a group address: multicast or broadcast" : "all zeros") + ")");
    }
    return a;
  }

  // --- collections ---

  std::vector<Field> list(const Field& f) const {
    if (!f.node.IsSequence()) fail(f, "expected a list, got " + describe(f.node));
    std::vector<Field> items;
    std::size_t i = 0;
    for (auto it = f.node.begin(); it != f.node.end(); ++it) {
      const YAML::Node item = *it;  // a handle; *it is a temporary
      YAML::Mark mark = item.Mark();
      if (!has_position(mark) || item.IsNull()) mark = has_position(mark) ? mark : f.mark;
      items.push_back({item, mark, index_key(f.key, i++)});
    }
    return items;
  }

  static std::string format_real(double v) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
    return std::string(buffer, result.ptr);
  }

 private:
  std::string file_;
};

// The keys of one YAML map, checked against the keys the schema allows.
class MapReader {
 public:
  MapReader(const Decoder& decoder, Field self, std::initializer_list<std::string_view> allowed)
      : decoder_(decoder), self_(std::move(self)) {
    if (!self_.node.IsMap()) decoder_.fail(self_, "expected a map, got " + describe(self_.node));
    for (auto it = self_.node.begin(); it != self_.node.end(); ++it) {
      const YAML::Node key_node = it->first;  // handles: it-> yields a temporary
      const YAML::Node value = it->second;
      if (!key_node.IsScalar()) {
        decoder_.fail(key_node.Mark(), self_.key, "keys must be plain names, got " + describe(key_node));
      }
      const std::string name = key_node.Scalar();
      const std::string key = join_key(self_.key, name);
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::string expected;
        for (std::string_view a : allowed) expected += (expected.empty() ? "" : ", ") + std::string(a);
        decoder_.fail(key_node.Mark(), key, "unknown key (allowed here: " + expected + ")");
      }
      for (const Entry& seen : entries_) {
        if (seen.name == name) {
          decoder_.fail(key_node.Mark(), key,
                        "duplicate key (first given on line " + std::to_string(seen.key_mark.line + 1) + ")");
        }
      }
      // An empty value has no position of its own (yaml-cpp puts it at the
      // next token); the key is where the operator looks.
      YAML::Mark mark = value.IsNull() || !has_position(value.Mark()) ? key_node.Mark() : value.Mark();
      entries_.push_back({name, key_node.Mark(), Field{value, mark, key}});
    }
  }

  std::optional<Field> get(std::string_view name) const {
    for (const Entry& e : entries_) {
      if (e.name == name) return e.field;
    }
    return std::nullopt;
  }

  // A missing required key is reported at the map that should hold it.
  Field require(std::string_view name) const {
    if (auto f = get(name)) return *f;
    decoder_.fail(self_.mark, join_key(self_.key, name), "required key is missing");
  }

  const Field& self() const { return self_; }

 private:
  struct Entry {
    std::string name;
    YAML::Mark key_mark;
    Field field;
  };
  const Decoder& decoder_;
  Field self_;
  std::vector<Entry> entries_;
};

bool valid_port_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxPortNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

bool valid_backend_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxBackendNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// Addresses as the profile spells them (and as Decoder reads them back).
std::string format_ipv4(const std::array<std::uint8_t, 4>& a) {
  char buffer[INET_ADDRSTRLEN];
  return ::inet_ntop(AF_INET, a.data(), buffer, sizeof buffer) ? buffer : "";
}

std::string format_ipv6(const std::array<std::uint8_t, 16>& a) {
  char buffer[INET6_ADDRSTRLEN];
  return ::inet_ntop(AF_INET6, a.data(), buffer, sizeof buffer) ? buffer : "";
}

std::string format_mac(const std::array<std::uint8_t, 6>& a) {
  std::string s = to_hex(a.data(), 1);
  for (std::size_t i = 1; i < a.size(); ++i) s += ":" + to_hex(a.data() + i, 1);
  return s;
}

bool hex_digits(std::string_view s, std::size_t n) {
  return s.size() == n &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// DDDD:BB:DD.F or BB:DD.F, device 00..1f, function 0..7 (what EAL's PCI
// allow-list accepts).
bool valid_pci_address(std::string_view s) {
  if (s.size() == 12) {
    if (!hex_digits(s.substr(0, 4), 4) || s[4] != ':') return false;
    s.remove_prefix(5);
  }
  if (s.size() != 7 || !hex_digits(s.substr(0, 2), 2) || s[2] != ':' || !hex_digits(s.substr(3, 2), 2) ||
      s[5] != '.' || s[6] < '0' || s[6] > '7') {
    return false;
  }
  unsigned device = 0;
  std::from_chars(s.data() + 3, s.data() + 5, device, 16);
  return device <= 0x1f;
}

// net_<driver><instance>[,key=value...]: a name EAL's --vdev accepts; the
// arguments are the driver's business.
bool valid_vdev(std::string_view s) {
  const std::size_t comma = s.find(',');
  const std::string_view name = s.substr(0, comma);
  if (name.size() <= 4 || name.substr(0, 4) != "net_") return false;
  if (!std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return false;
  }
  return std::none_of(s.begin(), s.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

// The identity EAL gives a device: the vdev name before its arguments, or the
// PCI address without the default domain.
std::string device_identity(const std::string& device) {
  if (device.rfind("net_", 0) == 0) return device.substr(0, device.find(','));
  std::string id = device;
  std::transform(id.begin(), id.end(), id.begin(), [](char c) { return char(std::tolower(c)); });
  return id.size() == 7 ? "0000:" + id : id;
}

std::string list_names(const std::vector<PortConfig>& ports) {
  std::string names;
  for (const PortConfig& p : ports) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

std::string list_numbers(const std::vector<unsigned>& numbers) {
  std::string s;
  for (unsigned n : numbers) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s.empty() ? "none" : s;
}

// Where cross-checks point: the node of a key, or the map that lacks it.
Field field_or(const MapReader& map, std::string_view name) {
  if (auto f = map.get(name)) return *f;
  Field self = map.self();
  self.key = join_key(self.key, name);
  return self;
}

// "ADDRESS:PORT" as telemetry.prometheus_listen spells it: an IPv4 dotted
// quad or a bracketed IPv6 address, and a port 1..65535. Empty when valid.
std::string listen_address_problem(const std::string& text) {
  const std::string expected = "expected ADDRESS:PORT (\"127.0.0.1:9464\", \"0.0.0.0:9464\" or \"[::1]:9464\"), got '" +
                               text + "'";
  ListenAddress a;
  if (!parse_listen_address(text, a)) return expected;
  return "";
}

class ProfileDecoder {
 public:
  ProfileDecoder(const Decoder& d, Profile& p) : d_(d), p_(p) {}

  void decode(const YAML::Node& root_node) {
    const MapReader root(d_, Field{root_node, root_node.Mark(), ""},
                         {"eal", "ports", "mempool", "lcores", "rings", "steering", "backends", "backpressure",
                          "action", "polling", "stats", "telemetry", "drain", "duration_s"});
    if (auto f = root.get("eal")) {
      for (const Field& arg : d_.list(*f)) p_.eal.push_back(d_.text(arg));
    }
    decode_ports(root.require("ports"));
    if (auto f = root.get("mempool")) decode_mempool(*f);
    check_frames_fit();
    decode_lcores(root.require("lcores"));
    if (auto f = root.get("rings")) decode_rings(*f);
    if (auto f = root.get("steering")) decode_steering(*f);
    // After steering (server IDs need the QUIC-LB configs) and before the
    // action (delivery needs the backends).
    if (auto f = root.get("backends")) decode_backends(*f);
    decode_backpressure(root.get("backpressure"));
    decode_action(root, root.get("action"));
    if (auto f = root.get("polling")) decode_polling(*f);
    if (auto f = root.get("stats")) decode_stats(*f);
    if (auto f = root.get("telemetry")) decode_telemetry(*f);
    if (auto f = root.get("drain")) decode_drain(*f);
    if (auto f = root.get("duration_s")) p_.duration_s = d_.real(*f, 0, 86400);
  }

 private:
  void decode_ports(const Field& f) {
    const std::vector<Field> items = d_.list(f);
    if (items.empty()) d_.fail(f, "at least one port is required");
    for (const Field& item : items) {
      const MapReader m(d_, item,
                        {"name", "device", "rx_queues", "tx_queues", "rx_descriptors", "tx_descriptors", "rss",
                         "mtu", "flow_control", "rx_drop_en"});
      PortConfig port;
      const Field name = m.require("name");
      port.name = d_.text(name);
      if (!valid_port_name(port.name)) {
        d_.fail(name, "port names are 1.." + std::to_string(kMaxPortNameLength) +
                          " of A-Z a-z 0-9 _ -, got '" + port.name + "'");
      }
      if (const int other = p_.port_index(port.name); other >= 0) {
        d_.fail(name, "duplicate port name '" + port.name + "' (also ports[" + std::to_string(other) + "])");
      }
      const Field device = m.require("device");
      port.device = d_.text(device);
      if (!valid_pci_address(port.device) && !valid_vdev(port.device)) {
        d_.fail(device, "expected a PCI address (DDDD:BB:DD.F or BB:DD.F) or vdev devargs starting with "
                        "net_ (e.g. net_null0,no-rx=1), got '" + port.device + "'");
      }
      for (std::size_t i = 0; i < p_.ports.size(); ++i) {
        if (device_identity(p_.ports[i].device) == device_identity(port.device)) {
          d_.fail(device, "device '" + device_identity(port.device) + "' is already ports[" + std::to_string(i) +
                              "] ('" + p_.ports[i].name + "')");
        }
      }
      if (auto v = m.get("rx_queues")) port.rx_queues = d_.integer<std::uint16_t>(*v, 0, kMaxQueuesPerPort);
      if (auto v = m.get("tx_queues")) port.tx_queues = d_.integer<std::uint16_t>(*v, 0, kMaxQueuesPerPort);
      if (port.rx_queues == 0 && port.tx_queues == 0) {
        d_.fail(item, "a port needs rx_queues or tx_queues (both are 0)");
      }
      if (auto v = m.get("rx_descriptors")) port.rx_descriptors = d_.integer<std::uint16_t>(*v, 32, 16384);
      if (auto v = m.get("tx_descriptors")) port.tx_descriptors = d_.integer<std::uint16_t>(*v, 32, 16384);
      if (auto v = m.get("rss")) port.rss = d_.boolean(*v);
      if (auto v = m.get("mtu")) port.mtu = d_.integer<std::uint16_t>(*v, 68, 9600);
      if (auto v = m.get("flow_control")) {
        port.flow_control = d_.choice<FlowControl>(*v, {{"none", FlowControl::kNone},
                                                        {"rx_pause", FlowControl::kRxPause},
                                                        {"tx_pause", FlowControl::kTxPause},
                                                        {"full", FlowControl::kFull}});
      }
      if (auto v = m.get("rx_drop_en")) port.rx_drop_en = d_.boolean(*v);
      p_.ports.push_back(std::move(port));
      port_maps_.push_back(m);
    }
  }

  void decode_mempool(const Field& f) {
    const MapReader m(d_, f, {"mbufs", "cache", "data_room"});
    if (auto v = m.get("mbufs")) p_.mempool.mbufs = d_.integer<std::uint32_t>(*v, kMinMbufs, kMaxMbufs);
    if (auto v = m.get("cache")) p_.mempool.cache = d_.integer<std::uint32_t>(*v, 0, kMaxMempoolCache);
    if (auto v = m.get("data_room")) p_.mempool.data_room = d_.integer<std::uint16_t>(*v, 1024, 65535);
  }

  // The data path receives single-segment frames only.
  void check_frames_fit() const {
    const std::uint32_t room = p_.mempool.data_room > kMbufHeadroom ? p_.mempool.data_room - kMbufHeadroom : 0;
    for (std::size_t i = 0; i < p_.ports.size(); ++i) {
      const std::uint32_t frame = p_.ports[i].mtu + kEthernetOverhead;
      if (frame > room) {
        d_.fail(field_or(port_maps_[i], "mtu"),
                "a " + std::to_string(p_.ports[i].mtu) + "-byte MTU needs " + std::to_string(frame) +
                    "-byte frames, but mempool.data_room " + std::to_string(p_.mempool.data_room) + " minus " +
                    std::to_string(kMbufHeadroom) + " headroom leaves " + std::to_string(room) +
                    "; raise mempool.data_room to at least " + std::to_string(frame + kMbufHeadroom));
      }
    }
  }

  void decode_lcores(const Field& f) {
    const std::vector<Field> items = d_.list(f);
    if (items.empty()) d_.fail(f, "at least one lcore is required");
    // Which lcore entry polls each queue, per port; -1 = nobody yet.
    std::vector<std::vector<int>> poller(p_.ports.size());
    for (std::size_t i = 0; i < p_.ports.size(); ++i) poller[i].assign(p_.ports[i].rx_queues, -1);

    for (std::size_t index = 0; index < items.size(); ++index) {
      const Field& item = items[index];
      const MapReader m(d_, item, {"id", "rx", "owner", "cost_cycles"});
      LcoreConfig lcore;
      const Field id = m.require("id");
      lcore.id = d_.integer<unsigned>(id, 0, kMaxLcoreId);
      for (std::size_t j = 0; j < p_.lcores.size(); ++j) {
        if (p_.lcores[j].id == lcore.id) {
          d_.fail(id, "duplicate lcore id " + std::to_string(lcore.id) + " (also lcores[" + std::to_string(j) + "])");
        }
      }
      if (auto rx = m.get("rx")) {
        for (const Field& entry : d_.list(*rx)) {
          const RxQueueRef ref = decode_queue_ref(entry);
          int& who = poller[ref.port][ref.queue];
          if (who >= 0) {
            d_.fail(entry, "queue " + std::to_string(ref.queue) + " of port '" + p_.ports[ref.port].name +
                               "' is already polled by lcores[" + std::to_string(who) + "] (id " +
                               std::to_string(p_.lcores.size() > std::size_t(who) ? p_.lcores[who].id : lcore.id) +
                               "); each RX queue needs exactly one poller");
          }
          who = static_cast<int>(index);
          lcore.rx.push_back(ref);
        }
      }
      if (auto owner = m.get("owner")) lcore.owner = d_.boolean(*owner);
      if (auto cost = m.get("cost_cycles")) {
        if (!lcore.owner) d_.fail(*cost, "cost_cycles is the owner's connection-stage cost; lcore " +
                                              std::to_string(lcore.id) + " is not an owner");
        lcore.cost_cycles = d_.integer<std::uint32_t>(*cost, 0, kMaxLcoreCostCycles);
      }
      if (lcore.rx.empty() && !lcore.owner) {
        d_.fail(item, "lcore " + std::to_string(lcore.id) + " polls no RX queue and is not an owner");
      }
      if (lcore.owner) {
        if (p_.steering.owner_lcores.size() == kMaxOwnerLcores) {
          d_.fail(*m.get("owner"), "at most " + std::to_string(kMaxOwnerLcores) +
                                       " lcores may be owners; lcore " + std::to_string(lcore.id) + " would be owner " +
                                       std::to_string(kMaxOwnerLcores + 1));
        }
        p_.steering.owner_lcores.push_back(lcore.id);
      }
      p_.lcores.push_back(std::move(lcore));
    }
    if (p_.steering.owner_lcores.empty()) {
      d_.fail(f, "no lcore has owner: true; at least one lcore must own connections");
    }
    for (std::size_t port = 0; port < poller.size(); ++port) {
      for (std::size_t queue = 0; queue < poller[port].size(); ++queue) {
        if (poller[port][queue] < 0) {
          d_.fail(field_or(port_maps_[port], "rx_queues"),
                  "queue " + std::to_string(queue) + " of port '" + p_.ports[port].name +
                      "' is polled by no lcore; list \"" + p_.ports[port].name + ":" + std::to_string(queue) +
                      "\" in one lcore's rx");
        }
      }
    }
  }

  RxQueueRef decode_queue_ref(const Field& entry) const {
    const std::string s = d_.text(entry);
    const std::size_t colon = s.rfind(':');
    const auto malformed = [&] {
      d_.fail(entry, "expected \"port:queue\" (e.g. \"" + (p_.ports.empty() ? std::string("wire") : p_.ports[0].name) +
                         ":0\"), got '" + s + "'");
    };
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) malformed();
    const std::string name = s.substr(0, colon);
    unsigned queue = 0;
    const auto [end, ec] = std::from_chars(s.data() + colon + 1, s.data() + s.size(), queue);
    if (ec != std::errc() || end != s.data() + s.size() || !valid_port_name(name)) malformed();
    const int port = p_.port_index(name);
    if (port < 0) d_.fail(entry, "unknown port '" + name + "' (ports: " + list_names(p_.ports) + ")");
    const PortConfig& pc = p_.ports[port];
    if (queue >= pc.rx_queues) {
      d_.fail(entry, "queue " + std::to_string(queue) + " is beyond port '" + name + "', which has " +
                         std::to_string(pc.rx_queues) + " rx_queues" +
                         (pc.rx_queues ? " (0.." + std::to_string(pc.rx_queues - 1) + ")" : std::string()));
    }
    return RxQueueRef{static_cast<std::uint16_t>(port), static_cast<std::uint16_t>(queue)};
  }

  void decode_rings(const Field& f) {
    const MapReader m(d_, f, {"size", "burst"});
    if (auto v = m.get("size")) {
      p_.rings.size = d_.integer<std::uint32_t>(*v, 16, 65536);
      if ((p_.rings.size & (p_.rings.size - 1)) != 0) {
        d_.fail(*v, "must be a power of two, got " + std::to_string(p_.rings.size));
      }
    }
    if (auto v = m.get("burst")) {
      p_.rings.burst = d_.integer<std::uint16_t>(*v, 1, 64);
      if (p_.rings.burst > p_.rings.size) {
        d_.fail(*v, "must not exceed rings.size (" + std::to_string(p_.rings.size) + "), got " +
                        std::to_string(p_.rings.burst));
      }
    }
  }

  void decode_steering(const Field& f) {
    SteeringConfig& s = p_.steering;
    const MapReader m(d_, f, {"mode", "quic_ports", "short_dcid_len", "quic_lb", "servers", "fallback", "forwarding"});
    if (auto v = m.get("mode")) {
      s.mode = d_.choice<SteeringMode>(*v, {{"cid", SteeringMode::kCid}, {"four_tuple", SteeringMode::kFourTuple}});
    }
    if (auto v = m.get("quic_ports")) {
      const std::vector<Field> items = d_.list(*v);
      if (items.empty()) d_.fail(*v, "at least one UDP port is required");
      s.quic_ports.clear();
      for (const Field& item : items) {
        const auto port = d_.integer<std::uint16_t>(item, 1, 65535);
        if (std::find(s.quic_ports.begin(), s.quic_ports.end(), port) != s.quic_ports.end()) {
          d_.fail(item, "duplicate UDP port " + std::to_string(port));
        }
        s.quic_ports.push_back(port);
      }
    }
    if (auto v = m.get("short_dcid_len")) s.short_dcid_len = d_.integer<std::uint8_t>(*v, 0, 20);
    if (auto v = m.get("quic_lb")) decode_quic_lb(*v);
    servers_ = m.get("servers");
    if (servers_) decode_servers(*servers_);
    if (auto v = m.get("fallback")) {
      const MapReader fb(d_, *v, {"key", "vnodes", "rekey_on_reload"});
      if (auto k = fb.get("key")) s.fallback_key = d_.key128(*k);
      if (auto n = fb.get("vnodes")) s.fallback_vnodes = d_.integer<unsigned>(*n, 1, 4096);
      if (auto r = fb.get("rekey_on_reload")) p_.rekey_fallback_on_reload = d_.boolean(*r);
    }
    if (auto v = m.get("forwarding")) {
      const MapReader fw(d_, *v, {"enabled", "max_entries", "max_setup_entries"});
      if (auto e = fw.get("enabled")) s.forwarding.enabled = d_.boolean(*e);
      if (auto n = fw.get("max_entries")) s.forwarding.max_entries = d_.integer<std::uint32_t>(*n, 16, 1u << 28);
      if (auto n = fw.get("max_setup_entries"))
        s.forwarding.max_setup_entries = d_.integer<std::uint32_t>(*n, 16, 1u << 28);
    }
  }

  void decode_quic_lb(const Field& f) {
    const std::vector<Field> items = d_.list(f);
    if (items.size() > kMaxQuicLbConfigs) {
      d_.fail(f, "at most " + std::to_string(kMaxQuicLbConfigs) + " configs (config_id 0..6), got " +
                     std::to_string(items.size()));
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i], {"config_id", "server_id_len", "nonce_len", "key", "len_self_encode"});
      QuicLbConfig c;
      const Field id = m.require("config_id");
      c.config_id = d_.integer<std::uint8_t>(id, 0, 6);
      for (std::size_t j = 0; j < p_.steering.quic_lb.size(); ++j) {
        if (p_.steering.quic_lb[j].config_id == c.config_id) {
          d_.fail(id, "duplicate config_id " + std::to_string(c.config_id) + " (also steering.quic_lb[" +
                          std::to_string(j) + "])");
        }
      }
      c.server_id_len = d_.integer<std::uint8_t>(m.require("server_id_len"), 1, 15);
      const Field nonce = m.require("nonce_len");
      c.nonce_len = d_.integer<std::uint8_t>(nonce, 4, 18);
      if (unsigned(c.server_id_len) + c.nonce_len > kMaxCidPayload) {
        d_.fail(nonce, "server_id_len + nonce_len must be at most " + std::to_string(kMaxCidPayload) +
                           " (a CID is at most 20 octets), got " + std::to_string(c.server_id_len) + " + " +
                           std::to_string(c.nonce_len));
      }
      if (auto k = m.get("key")) c.key = d_.key128(*k);
      if (auto v = m.get("len_self_encode")) c.len_self_encode = d_.boolean(*v);
      p_.steering.quic_lb.push_back(c);
    }
  }

  void decode_servers(const Field& f) {
    SteeringConfig& s = p_.steering;
    const std::vector<Field> items = d_.list(f);
    // server_id -> index: duplicates are found in one pass (65,533 servers
    // with 2-octet IDs must not cost a quadratic scan).
    std::unordered_map<std::string, std::size_t> server_index;
    server_index.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i], {"server_id", "owner"});
      ServerRoute route;
      const Field sid = m.require("server_id");
      route.server_id = d_.hex(sid, 1, 15);
      check_server_id_length(sid, route.server_id, "server_id");
      const auto [seen, fresh] = server_index.emplace(
          std::string(route.server_id.begin(), route.server_id.end()), s.server_routes.size());
      if (!fresh) d_.fail(sid, "duplicate server_id (also steering.servers[" + std::to_string(seen->second) + "])");
      route.owner_lcore = owner_lcore(m.require("owner"));
      s.server_routes.push_back(std::move(route));
    }
  }

  // A server ID is minted under some QUIC-LB config: its length must be one
  // a config has.
  void check_server_id_length(const Field& f, const std::vector<std::uint8_t>& id, const char* what) const {
    const std::vector<QuicLbConfig>& configs = p_.steering.quic_lb;
    const bool length_known = std::any_of(configs.begin(), configs.end(),
                                          [&](const QuicLbConfig& c) { return c.server_id_len == id.size(); });
    if (!length_known) {
      std::vector<unsigned> lengths;
      for (const QuicLbConfig& c : configs) lengths.push_back(c.server_id_len);
      d_.fail(f, std::string(what) + " is " + std::to_string(id.size()) +
                     " octets, but no steering.quic_lb config has that server_id_len (have: " + list_numbers(lengths) +
                     ")");
    }
  }

  unsigned owner_lcore(const Field& f) const {
    const std::vector<unsigned>& owners = p_.steering.owner_lcores;
    const auto id = d_.integer<unsigned>(f, 0, kMaxLcoreId);
    if (std::find(owners.begin(), owners.end(), id) == owners.end()) {
      d_.fail(f, "lcore " + std::to_string(id) + " is not an owner lcore (owners: " + list_numbers(owners) + ")");
    }
    return id;
  }

  void decode_backends(const Field& f) {
    SteeringConfig& s = p_.steering;
    const std::vector<Field> items = d_.list(f);
    if (items.empty()) d_.fail(f, "at least one backend is required (leave backends out for none)");
    if (items.size() > kMaxBackends) {
      d_.fail(f, "at most " + std::to_string(kMaxBackends) + " backends, got " + std::to_string(items.size()));
    }
    if (!s.server_routes.empty()) {
      d_.fail(f, "cannot be combined with steering.servers (line " + std::to_string(servers_->mark.line + 1) +
                     "): with backends, each backend lists its own server_ids");
    }
    // What must be unique across backends -> the first backend that has it.
    std::unordered_map<std::string, std::size_t> names, server_ids, addresses;
    const auto first = [](std::unordered_map<std::string, std::size_t>& seen, std::string value, std::size_t i) {
      return seen.emplace(std::move(value), i);
    };
    const auto also = [](std::size_t i) { return " (also backends[" + std::to_string(i) + "])"; };
    std::size_t unassigned = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i],
                        {"name", "server_ids", "ipv4", "ipv6", "mac", "vxlan_mac", "weight", "state", "owner"});
      BackendConfig b;
      const Field name = m.require("name");
      b.name = d_.text(name);
      if (!valid_backend_name(b.name)) {
        d_.fail(name, "backend names are 1.." + std::to_string(kMaxBackendNameLength) +
                          " of A-Z a-z 0-9 _ . -, got '" + b.name + "'");
      }
      if (const auto [seen, fresh] = first(names, b.name, i); !fresh) {
        d_.fail(name, "duplicate backend name '" + b.name + "'" + also(seen->second));
      }
      if (auto v = m.get("server_ids")) {
        for (const Field& sid : d_.list(*v)) {
          std::vector<std::uint8_t> id = d_.hex(sid, 1, 15);
          check_server_id_length(sid, id, "server ID");
          if (const auto [seen, fresh] = first(server_ids, std::string(id.begin(), id.end()), i); !fresh) {
            d_.fail(sid, "duplicate server ID " + to_hex(id) + also(seen->second));
          }
          b.server_ids.push_back(std::move(id));
        }
      }
      if (auto v = m.get("ipv4")) {
        b.ipv4 = d_.ipv4(*v);
        if (const auto [seen, fresh] = first(addresses, format_ipv4(*b.ipv4), i); !fresh) {
          d_.fail(*v, "duplicate address " + format_ipv4(*b.ipv4) + also(seen->second));
        }
      }
      if (auto v = m.get("ipv6")) {
        b.ipv6 = d_.ipv6(*v);
        if (const auto [seen, fresh] = first(addresses, format_ipv6(*b.ipv6), i); !fresh) {
          d_.fail(*v, "duplicate address " + format_ipv6(*b.ipv6) + also(seen->second));
        }
      }
      b.mac = d_.mac(m.require("mac"));
      if (auto v = m.get("vxlan_mac")) b.vxlan_mac = d_.mac(*v);
      if (auto v = m.get("weight")) b.weight = d_.integer<std::uint32_t>(*v, 1, kMaxBackendWeight);
      if (auto v = m.get("state")) {
        b.state = d_.choice<BackendState>(*v, {{"active", BackendState::kActive},
                                               {"draining", BackendState::kDraining},
                                               {"down", BackendState::kDown}});
      }
      if (auto v = m.get("owner")) {
        b.owner_lcore = owner_lcore(*v);
      } else {
        // Spread evenly: the k-th backend without an owner goes to the
        // k-th owner, round robin, in profile order.
        b.owner_lcore = s.owner_lcores[unassigned++ % s.owner_lcores.size()];
      }
      b.slot = static_cast<std::uint16_t>(i);
      s.backends.push_back(std::move(b));
      backend_maps_.push_back(m);
    }
    if (std::none_of(s.backends.begin(), s.backends.end(),
                     [](const BackendConfig& b) { return b.state == BackendState::kActive; })) {
      d_.fail(f, "no backend is active; at least one must take new connections (state: active)");
    }
  }

  void decode_backpressure(const std::optional<Field>& f) {
    BackpressureConfig& b = p_.backpressure;
    const std::uint32_t size = p_.rings.size;
    std::optional<Field> high, low;
    if (f) {
      const MapReader m(d_, *f, {"policy", "high_watermark", "low_watermark", "park_timeout_us"});
      if (auto v = m.get("policy")) {
        b.policy = d_.choice<BackpressurePolicy>(*v, {{"park", BackpressurePolicy::kPark},
                                                      {"drop", BackpressurePolicy::kDrop},
                                                      {"shed-new", BackpressurePolicy::kShedNew}});
      }
      high = m.get("high_watermark");
      low = m.get("low_watermark");
      if (auto v = m.get("park_timeout_us")) b.park_timeout_us = d_.integer<std::uint32_t>(*v, 1, 10000000);
    }
    if (high) {
      b.high_watermark = d_.integer<std::uint32_t>(*high, 0, std::numeric_limits<std::uint32_t>::max());
      if (b.high_watermark < 1 || b.high_watermark > size) {
        d_.fail(*high, "must be in 1..rings.size (" + std::to_string(size) + "), got " +
                           std::to_string(b.high_watermark));
      }
    } else {
      b.high_watermark = size;
    }
    if (low) {
      b.low_watermark = d_.integer<std::uint32_t>(*low, 0, std::numeric_limits<std::uint32_t>::max());
      if (b.low_watermark >= b.high_watermark) {
        d_.fail(*low, "must be below high_watermark (" + std::to_string(b.high_watermark) + "), got " +
                          std::to_string(b.low_watermark));
      }
    } else {
      // Half the ring, unless an explicit high watermark sits at or below
      // that; then half of the high watermark.
      b.low_watermark = size / 2 < b.high_watermark ? size / 2 : b.high_watermark / 2;
    }
  }

  void decode_action(const MapReader& root, const std::optional<Field>& f) {
    ActionConfig& a = p_.action;
    std::optional<Field> tx_port, delivery;
    std::optional<MapReader> m;
    if (f) {
      m.emplace(d_, *f, std::initializer_list<std::string_view>{"type", "tx_port", "delivery", "cost_cycles",
                                                                "tx_drain_us", "max_connections", "idle_timeout_ms"});
      if (auto v = m->get("type")) {
        a.type = d_.choice<OwnerAction>(*v, {{"forward", OwnerAction::kForward},
                                             {"reflect", OwnerAction::kReflect},
                                             {"sink", OwnerAction::kSink}});
      }
      tx_port = m->get("tx_port");
      delivery = m->get("delivery");
      if (auto v = m->get("cost_cycles")) a.cost_cycles = d_.integer<std::uint32_t>(*v, 0, 1000000);
      if (auto v = m->get("tx_drain_us")) a.tx_drain_us = d_.integer<std::uint32_t>(*v, 1, 100000);
      if (auto v = m->get("max_connections")) a.max_connections = d_.integer<std::uint32_t>(*v, 1, 16u << 20);
      if (auto v = m->get("idle_timeout_ms")) a.idle_timeout_ms = d_.integer<std::uint32_t>(*v, 1, 86400000);
    }
    // The forwarding tables forget a connection when its state does.
    p_.steering.forwarding.idle_timeout_ms = a.idle_timeout_ms;
    const std::size_t owners = p_.steering.owner_lcores.size();
    const auto check_tx_queues = [&](std::size_t port, const std::string& role) {
      const PortConfig& pc = p_.ports[port];
      if (pc.tx_queues < owners) {
        d_.fail(field_or(port_maps_[port], "tx_queues"),
                "port '" + pc.name + "' is " + role + " and needs one TX queue per owner lcore (" +
                    std::to_string(owners) + "), has " + std::to_string(pc.tx_queues));
      }
    };
    if (a.type == OwnerAction::kForward) {
      if (!tx_port) {
        const Field where = m ? field_or(*m, "tx_port") : field_or(root, "action.tx_port");
        d_.fail(where, "required when action.type is forward (name the port to send on)");
      }
      const std::string name = d_.text(*tx_port);
      a.tx_port = p_.port_index(name);
      if (a.tx_port < 0) d_.fail(*tx_port, "unknown port '" + name + "' (ports: " + list_names(p_.ports) + ")");
      check_tx_queues(static_cast<std::size_t>(a.tx_port), "the forward tx_port");
      if (delivery) decode_delivery(*delivery);
    } else {
      for (const auto& forward_only : {tx_port, delivery}) {
        if (forward_only) {
          d_.fail(*forward_only, std::string("only allowed when action.type is forward (type is ") +
                                     (a.type == OwnerAction::kReflect ? "reflect" : "sink") + ")");
        }
      }
      a.tx_port = -1;
      if (a.type == OwnerAction::kReflect) {
        for (std::size_t i = 0; i < p_.ports.size(); ++i) {
          if (p_.ports[i].rx_queues > 0) check_tx_queues(i, "an RX port and action.type is reflect");
        }
      }
    }
  }

  void decode_delivery(const Field& f) {
    DeliveryConfig& d = p_.action.delivery;
    const MapReader m(d_, f,
                      {"mode", "source_ipv4", "source_ipv6", "vxlan_vni", "vxlan_port", "vxlan_mac", "ttl",
                       "icmp_too_big_per_s"});
    if (auto v = m.get("mode")) {
      d.mode = d_.choice<DeliveryMode>(*v, {{"as_is", DeliveryMode::kAsIs},
                                            {"l2", DeliveryMode::kL2},
                                            {"ipip", DeliveryMode::kIpip},
                                            {"vxlan", DeliveryMode::kVxlan}});
    }
    if (auto v = m.get("source_ipv4")) d.source_ipv4 = d_.ipv4(*v);
    if (auto v = m.get("source_ipv6")) d.source_ipv6 = d_.ipv6(*v);
    if (auto v = m.get("vxlan_vni")) d.vxlan_vni = d_.integer<std::uint32_t>(*v, 0, kMaxVxlanVni);
    if (auto v = m.get("vxlan_port")) d.vxlan_port = d_.integer<std::uint16_t>(*v, 1, 65535);
    if (auto v = m.get("vxlan_mac")) d.vxlan_mac = d_.mac(*v);
    if (auto v = m.get("ttl")) d.ttl = d_.integer<std::uint8_t>(*v, 1, 255);
    if (auto v = m.get("icmp_too_big_per_s")) d.icmp_too_big_per_s = d_.integer<std::uint32_t>(*v, 0, 1000000);
    if (d.mode == DeliveryMode::kAsIs) return;

    const std::string mode = delivery_mode_name(d.mode);
    const std::vector<BackendConfig>& backends = p_.steering.backends;
    if (backends.empty()) {
      d_.fail(*m.get("mode"), "mode " + mode + " delivers to backends, but the profile lists none (add backends)");
    }
    if (d.mode == DeliveryMode::kL2) return;  // every backend has its mac

    const auto named = [&](std::size_t i) {
      return "backends[" + std::to_string(i) + "] ('" + backends[i].name + "')";
    };
    // The outer header's family is the inner packet's when the backend has
    // an address of that family, else its other one: a backend with an
    // IPv4 address is reached over IPv4 (for some traffic at least), and so
    // for IPv6.
    std::optional<std::size_t> over_ipv4, over_ipv6;
    for (std::size_t i = 0; i < backends.size(); ++i) {
      const BackendConfig& b = backends[i];
      if (!b.ipv4 && !b.ipv6) {
        d_.fail(field_or(backend_maps_[i], "ipv4"),
                "required when action.delivery.mode is " + mode + ": " + named(i) +
                    " needs an address to be reached at (ipv4, ipv6 or both)");
      }
      if (b.ipv4 && !over_ipv4) over_ipv4 = i;
      if (b.ipv6 && !over_ipv6) over_ipv6 = i;
      if (d.mode == DeliveryMode::kVxlan && !b.vxlan_mac && !d.vxlan_mac) {
        d_.fail(field_or(backend_maps_[i], "vxlan_mac"),
                "required when action.delivery.mode is vxlan and action.delivery.vxlan_mac is not given: the "
                "inner destination MAC of " + named(i) + "'s VXLAN device");
      }
    }
    if (over_ipv4 && !d.source_ipv4) {
      d_.fail(field_or(m, "source_ipv4"), "required when action.delivery.mode is " + mode + ": " +
                                              named(*over_ipv4) + " is reached over IPv4 (it has an ipv4 address)");
    }
    if (over_ipv6 && !d.source_ipv6) {
      d_.fail(field_or(m, "source_ipv6"), "required when action.delivery.mode is " + mode + ": " +
                                              named(*over_ipv6) + " is reached over IPv6 (it has an ipv6 address)");
    }
  }

  void decode_polling(const Field& f) {
    const MapReader m(d_, f, {"idle_sleep_us", "idle_polls_before_sleep"});
    if (auto v = m.get("idle_sleep_us")) {
      p_.polling.idle_sleep_us = d_.integer<std::uint32_t>(*v, 0, 1000000);
      // A receiver whose every queue is parked naps for idle_sleep_us at once;
      // a nap as long as the park timeout lets every parked packet time out.
      const std::uint32_t timeout = p_.backpressure.park_timeout_us;
      if (p_.backpressure.policy != BackpressurePolicy::kDrop && p_.polling.idle_sleep_us >= timeout) {
        d_.fail(*v, "must be below backpressure.park_timeout_us (" + std::to_string(timeout) + "), got " +
                        std::to_string(p_.polling.idle_sleep_us) +
                        ": a receiver whose queues are all parked naps this long, and its parked packets would "
                        "time out while it sleeps; lower idle_sleep_us or raise park_timeout_us");
      }
    }
    if (auto v = m.get("idle_polls_before_sleep")) {
      p_.polling.idle_polls_before_sleep = d_.integer<std::uint32_t>(*v, 1, 1000000000);
    }
  }

  void decode_stats(const Field& f) {
    const MapReader m(d_, f, {"period_ms", "json"});
    if (auto v = m.get("period_ms")) {
      p_.stats.period_ms = d_.integer<std::uint32_t>(*v, 0, 3600000);
      if (p_.stats.period_ms != 0 && p_.stats.period_ms < 100) {
        d_.fail(*v, "must be 0 (off) or in 100..3600000, got " + std::to_string(p_.stats.period_ms));
      }
    }
    if (auto v = m.get("json")) p_.stats.json_path = d_.text(*v);
  }

  void decode_telemetry(const Field& f) {
    const MapReader m(d_, f, {"prometheus_listen"});
    if (auto v = m.get("prometheus_listen")) {
      std::string text = d_.text(*v);
      if (!text.empty()) {
        const std::string problem = listen_address_problem(text);
        if (!problem.empty()) d_.fail(*v, problem);
      }
      p_.telemetry.prometheus_listen = std::move(text);
    }
  }

  void decode_drain(const Field& f) {
    const MapReader m(d_, f, {"grace_s"});
    if (auto v = m.get("grace_s")) p_.drain.grace_s = d_.real(*v, 0, 3600);
  }

  const Decoder& d_;
  Profile& p_;
  std::vector<MapReader> port_maps_;  // parallel to p_.ports, for cross-check positions
  std::vector<MapReader> backend_maps_;  // parallel to p_.steering.backends, likewise
  std::optional<Field> servers_;         // steering.servers, when given
};

// Records where each document of a YAML stream starts.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

const char* flow_control_name(FlowControl fc) {
  switch (fc) {
    case FlowControl::kNone: return "none";
    case FlowControl::kRxPause: return "rx_pause";
    case FlowControl::kTxPause: return "tx_pause";
    case FlowControl::kFull: return "full";
  }
  return "none";
}

const char* policy_name(BackpressurePolicy p) {
  switch (p) {
    case BackpressurePolicy::kPark: return "park";
    case BackpressurePolicy::kDrop: return "drop";
    case BackpressurePolicy::kShedNew: return "shed-new";
  }
  return "park";
}

const char* action_name(OwnerAction a) {
  switch (a) {
    case OwnerAction::kForward: return "forward";
    case OwnerAction::kReflect: return "reflect";
    case OwnerAction::kSink: return "sink";
  }
  return "forward";
}

const char* delivery_mode_name(DeliveryMode m) {
  switch (m) {
    case DeliveryMode::kAsIs: return "as_is";
    case DeliveryMode::kL2: return "l2";
    case DeliveryMode::kIpip: return "ipip";
    case DeliveryMode::kVxlan: return "vxlan";
  }
  return "as_is";
}

const char* backend_state_name(BackendState s) {
  switch (s) {
    case BackendState::kActive: return "active";
    case BackendState::kDraining: return "draining";
    case BackendState::kDown: return "down";
  }
  return "active";
}

Profile parse_profile(const std::string& yaml_text, const std::string& name) {
  const Decoder decoder(name);
  YAML::Node root;
  DocumentStarts starts;
  try {
    // At most two documents are looked at: yaml-cpp 0.7's LoadAll() never
    // returns when text is left over after a document (e.g. `"a", "b"`), so
    // the stream is walked one document at a time and the profile is Load()ed.
    std::istringstream stream(yaml_text);
    YAML::Parser parser(stream);
    for (int i = 0; i < 2 && parser.HandleNextDocument(starts); ++i) {
    }
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    decoder.fail(e.mark, "syntax error", e.msg);
  }
  if (starts.marks.size() > 1) {
    decoder.fail(starts.marks[1], "", "a profile is one YAML document, but more follows the first");
  }
  if (!root.IsDefined() || root.IsNull()) decoder.fail(YAML::Mark::null_mark(), "", "the profile is empty");
  Profile profile;
  profile.path = name;
  ProfileDecoder(decoder, profile).decode(root);
  return profile;
}

Profile load_profile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ProfileError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw ProfileError(path + ": cannot read: " + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw ProfileError(path + ": cannot read: Is " + std::string(kind) +
                       "; a profile must be a regular file (at most " + std::to_string(kMaxProfileBytes >> 20) +
                       " MiB)");
  }
  const auto too_large = [&] {
    ::close(fd);
    throw ProfileError(path + ": cannot read: larger than " + std::to_string(kMaxProfileBytes >> 20) +
                       " MiB, the most a profile may be");
  };
  if (std::uint64_t(st.st_size) > kMaxProfileBytes) too_large();
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw ProfileError(path + ": cannot read: " + std::strerror(error));
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxProfileBytes) too_large();  // it grew while being read
  }
  ::close(fd);
  return parse_profile(text, path);
}

double parse_seconds(const std::string& text, const std::string& what, double min, double max) {
  double value = 0;
  switch (Decoder::parse_real(text, min, max, value)) {
    case Decoder::RealParse::kOk: return value;
    case Decoder::RealParse::kNotANumber:
      throw ProfileError(what + ": expected a number of seconds (decimal, e.g. 1.5), got '" + text + "'");
    case Decoder::RealParse::kOutOfRange: break;
  }
  throw ProfileError(what + ": must be in " + Decoder::format_real(min) + ".." + Decoder::format_real(max) +
                     " seconds, got '" + text + "'");
}

std::string dump_profile(const Profile& p) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::Comment("quicsteer profile, resolved: every default filled in") << YAML::Newline;
  out << YAML::BeginMap;

  out << YAML::Key << "eal" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& arg : p.eal) out << YAML::DoubleQuoted << arg;
  out << YAML::EndSeq;

  out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
  for (const PortConfig& port : p.ports) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << port.name;
    out << YAML::Key << "device" << YAML::Value << YAML::DoubleQuoted << port.device;
    out << YAML::Key << "rx_queues" << YAML::Value << port.rx_queues;
    out << YAML::Key << "tx_queues" << YAML::Value << port.tx_queues;
    out << YAML::Key << "rx_descriptors" << YAML::Value << port.rx_descriptors;
    out << YAML::Key << "tx_descriptors" << YAML::Value << port.tx_descriptors;
    out << YAML::Key << "rss" << YAML::Value << YAML::TrueFalseBool << port.rss;
    out << YAML::Key << "mtu" << YAML::Value << port.mtu;
    out << YAML::Key << "flow_control" << YAML::Value << flow_control_name(port.flow_control);
    out << YAML::Key << "rx_drop_en" << YAML::Value << YAML::TrueFalseBool << port.rx_drop_en;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "mempool" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mbufs" << YAML::Value << p.mempool.mbufs;
  out << YAML::Key << "cache" << YAML::Value << p.mempool.cache;
  out << YAML::Key << "data_room" << YAML::Value << p.mempool.data_room;
  out << YAML::EndMap;

  out << YAML::Key << "lcores" << YAML::Value << YAML::BeginSeq;
  for (const LcoreConfig& lcore : p.lcores) {
    out << YAML::BeginMap;
    out << YAML::Key << "id" << YAML::Value << lcore.id;
    out << YAML::Key << "rx" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const RxQueueRef& ref : lcore.rx) {
      const std::string port = ref.port < p.ports.size() ? p.ports[ref.port].name : "?";
      out << YAML::DoubleQuoted << (port + ":" + std::to_string(ref.queue));
    }
    out << YAML::EndSeq;
    out << YAML::Key << "owner" << YAML::Value << YAML::TrueFalseBool << lcore.owner;
    if (lcore.cost_cycles) out << YAML::Key << "cost_cycles" << YAML::Value << *lcore.cost_cycles;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "rings" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "size" << YAML::Value << p.rings.size;
  out << YAML::Key << "burst" << YAML::Value << p.rings.burst;
  out << YAML::EndMap;

  const SteeringConfig& s = p.steering;
  out << YAML::Key << "steering" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mode" << YAML::Value << (s.mode == SteeringMode::kCid ? "cid" : "four_tuple");
  out << YAML::Key << "quic_ports" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (std::uint16_t port : s.quic_ports) out << port;
  out << YAML::EndSeq;
  out << YAML::Key << "short_dcid_len" << YAML::Value << unsigned(s.short_dcid_len);
  out << YAML::Key << "quic_lb" << YAML::Value << YAML::BeginSeq;
  for (const QuicLbConfig& c : s.quic_lb) {
    out << YAML::BeginMap;
    out << YAML::Key << "config_id" << YAML::Value << unsigned(c.config_id);
    out << YAML::Key << "server_id_len" << YAML::Value << unsigned(c.server_id_len);
    out << YAML::Key << "nonce_len" << YAML::Value << unsigned(c.nonce_len);
    if (c.key) out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted << to_hex(c.key->data(), 16);
    out << YAML::Key << "len_self_encode" << YAML::Value << YAML::TrueFalseBool << c.len_self_encode;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "servers" << YAML::Value << YAML::BeginSeq;
  for (const ServerRoute& r : s.server_routes) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "server_id" << YAML::Value << YAML::DoubleQuoted
        << to_hex(r.server_id.data(), r.server_id.size());
    out << YAML::Key << "owner" << YAML::Value << r.owner_lcore;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "fallback" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted << to_hex(s.fallback_key.data(), 16);
  out << YAML::Key << "vnodes" << YAML::Value << s.fallback_vnodes;
  out << YAML::Key << "rekey_on_reload" << YAML::Value << YAML::TrueFalseBool << p.rekey_fallback_on_reload;
  out << YAML::EndMap;
  out << YAML::Key << "forwarding" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << YAML::TrueFalseBool << s.forwarding.enabled;
  out << YAML::Key << "max_entries" << YAML::Value << s.forwarding.max_entries;
  out << YAML::Key << "max_setup_entries" << YAML::Value << s.forwarding.max_setup_entries;
  out << YAML::EndMap;
  out << YAML::EndMap;

  // Resolved: every owner filled in. The slot is the position, not written.
  if (!s.backends.empty()) {
    out << YAML::Key << "backends" << YAML::Value << YAML::BeginSeq;
    for (const BackendConfig& b : s.backends) {
      out << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << b.name;
      out << YAML::Key << "server_ids" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& id : b.server_ids) out << YAML::DoubleQuoted << to_hex(id);
      out << YAML::EndSeq;
      if (b.ipv4) out << YAML::Key << "ipv4" << YAML::Value << YAML::DoubleQuoted << format_ipv4(*b.ipv4);
      if (b.ipv6) out << YAML::Key << "ipv6" << YAML::Value << YAML::DoubleQuoted << format_ipv6(*b.ipv6);
      out << YAML::Key << "mac" << YAML::Value << YAML::DoubleQuoted << format_mac(b.mac);
      if (b.vxlan_mac) out << YAML::Key << "vxlan_mac" << YAML::Value << YAML::DoubleQuoted << format_mac(*b.vxlan_mac);
      out << YAML::Key << "weight" << YAML::Value << b.weight;
      out << YAML::Key << "state" << YAML::Value << backend_state_name(b.state);
      out << YAML::Key << "owner" << YAML::Value << b.owner_lcore;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }

  out << YAML::Key << "backpressure" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "policy" << YAML::Value << policy_name(p.backpressure.policy);
  out << YAML::Key << "high_watermark" << YAML::Value << p.backpressure.high_watermark;
  out << YAML::Key << "low_watermark" << YAML::Value << p.backpressure.low_watermark;
  out << YAML::Key << "park_timeout_us" << YAML::Value << p.backpressure.park_timeout_us;
  out << YAML::EndMap;

  out << YAML::Key << "action" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "type" << YAML::Value << action_name(p.action.type);
  if (p.action.tx_port >= 0 && std::size_t(p.action.tx_port) < p.ports.size()) {
    out << YAML::Key << "tx_port" << YAML::Value << YAML::DoubleQuoted << p.ports[p.action.tx_port].name;
  }
  if (p.action.type == OwnerAction::kForward) {
    const DeliveryConfig& d = p.action.delivery;
    out << YAML::Key << "delivery" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "mode" << YAML::Value << delivery_mode_name(d.mode);
    if (d.source_ipv4) {
      out << YAML::Key << "source_ipv4" << YAML::Value << YAML::DoubleQuoted << format_ipv4(*d.source_ipv4);
    }
    if (d.source_ipv6) {
      out << YAML::Key << "source_ipv6" << YAML::Value << YAML::DoubleQuoted << format_ipv6(*d.source_ipv6);
    }
    out << YAML::Key << "vxlan_vni" << YAML::Value << d.vxlan_vni;
    out << YAML::Key << "vxlan_port" << YAML::Value << d.vxlan_port;
    if (d.vxlan_mac) out << YAML::Key << "vxlan_mac" << YAML::Value << YAML::DoubleQuoted << format_mac(*d.vxlan_mac);
    out << YAML::Key << "ttl" << YAML::Value << unsigned(d.ttl);
    out << YAML::Key << "icmp_too_big_per_s" << YAML::Value << d.icmp_too_big_per_s;
    out << YAML::EndMap;
  }
  out << YAML::Key << "cost_cycles" << YAML::Value << p.action.cost_cycles;
  out << YAML::Key << "tx_drain_us" << YAML::Value << p.action.tx_drain_us;
  out << YAML::Key << "max_connections" << YAML::Value << p.action.max_connections;
  out << YAML::Key << "idle_timeout_ms" << YAML::Value << p.action.idle_timeout_ms;
  out << YAML::EndMap;

  out << YAML::Key << "polling" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "idle_sleep_us" << YAML::Value << p.polling.idle_sleep_us;
  out << YAML::Key << "idle_polls_before_sleep" << YAML::Value << p.polling.idle_polls_before_sleep;
  out << YAML::EndMap;

  out << YAML::Key << "stats" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "period_ms" << YAML::Value << p.stats.period_ms;
  out << YAML::Key << "json" << YAML::Value << YAML::DoubleQuoted << p.stats.json_path;
  out << YAML::EndMap;

  out << YAML::Key << "telemetry" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "prometheus_listen" << YAML::Value << YAML::DoubleQuoted << p.telemetry.prometheus_listen;
  out << YAML::EndMap;

  // Shortest text that reads back as the same double (here and below).
  out << YAML::Key << "drain" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "grace_s" << YAML::Value << Decoder::format_real(p.drain.grace_s);
  out << YAML::EndMap;

  out << YAML::Key << "duration_s" << YAML::Value << Decoder::format_real(p.duration_s);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

bool parse_listen_address(const std::string& text, ListenAddress& out) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= text.size()) return false;
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const unsigned long number = std::stoul(port);
  if (number > 65535) return false;
  bool ipv6 = false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
    ipv6 = true;
  }
  unsigned char buffer[16];
  if (inet_pton(ipv6 ? AF_INET6 : AF_INET, host.c_str(), buffer) != 1) return false;
  out.ipv6 = ipv6;
  out.host = host;
  out.port = static_cast<std::uint16_t>(number);
  return true;
}

namespace {

// The first difference between two resolved profiles (as dump_profile writes
// them), as "KEY: was X, now Y"; `may_differ` says which keys may.
std::optional<std::string> first_difference(const YAML::Node& a, const YAML::Node& b, const std::string& key,
                                            const std::function<bool(const std::string&)>& may_differ) {
  if (may_differ(key)) return std::nullopt;
  const auto show = [](const YAML::Node& n) -> std::string {
    if (!n.IsDefined() || n.IsNull()) return "absent";
    if (n.IsScalar()) return "'" + n.Scalar() + "'";
    YAML::Emitter e;
    e << YAML::Flow << n;
    return e.c_str();
  };
  const auto differs = [&](const std::string& why) {
    return std::optional<std::string>(key + ": " + why +
                                      "; the running data path cannot take this change (a restart can)");
  };
  if (!a.IsDefined() || !b.IsDefined() || a.Type() != b.Type())
    return differs("was " + show(a) + ", now " + show(b));
  if (a.IsScalar()) {
    if (a.Scalar() != b.Scalar()) return differs("was " + show(a) + ", now " + show(b));
    return std::nullopt;
  }
  if (a.IsSequence()) {
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (auto d = first_difference(a[i], b[i], index_key(key, i), may_differ)) return d;
    if (a.size() != b.size())
      return differs("had " + std::to_string(a.size()) + " entries, now " + std::to_string(b.size()));
    return std::nullopt;
  }
  if (a.IsMap()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (auto d = first_difference(it->second, b[name], join_key(key, name), may_differ)) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (!a[name].IsDefined()) {
        if (auto d = first_difference(a[name], it->second, join_key(key, name), may_differ)) return d;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> reload_refusal(const Profile& running, const Profile& next) {
  // Compared as their resolved dumps, so that every key is compared (and a
  // key added later is covered without touching this) and named as the
  // profile spells it.
  const YAML::Node a = YAML::Load(dump_profile(running));
  const YAML::Node b = YAML::Load(dump_profile(next));
  const auto may_differ = [&](const std::string& key) {
    return key == "steering.quic_lb" || key == "steering.servers" || key == "backends" || key == "action.delivery" ||
           key == "steering.fallback.rekey_on_reload" ||
           (key == "steering.fallback.key" && next.rekey_fallback_on_reload);
  };
  if (running.steering.fallback_key != next.steering.fallback_key && !next.rekey_fallback_on_reload) {
    return std::string(
        "steering.fallback.key: changed; that moves every connection whose CID is not routable by QUIC-LB "
        "(client-chosen Initial DCIDs, unknown server IDs) to another owner. Set "
        "steering.fallback.rekey_on_reload: true in the new profile to change it anyway");
  }
  return first_difference(a, b, "", may_differ);
}

std::optional<Profile> load_profile_or_report(const std::string& path) {
  try {
    return load_profile(path);
  } catch (const ProfileError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return std::nullopt;
  }
}

}  // namespace qs
