// The strict YAML reader: typed reads and checked maps (yaml_reader.h).
#include "dataplane/config/yaml_reader.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "steering/hex.h"

namespace qs::config {

std::string join_key(const std::string& parent, std::string_view name) {
  if (parent.empty()) return std::string(name);
  return parent + "." + std::string(name);
}

std::string index_key(const std::string& parent, std::size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

bool has_position(const YAML::Mark& mark) { return mark.line >= 0 && mark.column >= 0; }

std::string shown(std::string_view value) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : value.substr(0, kShownOctets)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  if (value.size() > kShownOctets) out += "... (" + std::to_string(value.size()) + " octets)";
  return out;
}

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
  if (node.Tag() == "!") return "the quoted string '" + shown(node.Scalar()) + "'";
  return "'" + shown(node.Scalar()) + "'";
}

std::string format_ipv4(const std::array<std::uint8_t, 4>& a) {
  char buffer[INET_ADDRSTRLEN];
  return ::inet_ntop(AF_INET, a.data(), buffer, sizeof buffer) ? buffer : "";
}

std::string format_ipv6(const std::array<std::uint8_t, 16>& a) {
  char buffer[INET6_ADDRSTRLEN];
  return ::inet_ntop(AF_INET6, a.data(), buffer, sizeof buffer) ? buffer : "";
}

std::string format_mac(const std::array<std::uint8_t, 6>& a) {
  std::string s = to_hex(a.data(), a.size());
  // "020000000001" -> "02:00:00:00:00:01", from the end so that each insert
  // leaves the octets before it where they are.
  for (std::size_t i = a.size() - 1; i > 0; --i) s.insert(2 * i, 1, ':');
  return s;
}

std::string format_real(double v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

RealParse parse_real(const std::string& s, double min, double max, double& value) {
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+') ++first;
  value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || first == last || !std::isfinite(value)) return RealParse::kNotANumber;
  if (value < min || value > max) return RealParse::kOutOfRange;
  return RealParse::kOk;
}

void Decoder::fail(const YAML::Mark& mark, const std::string& key, const std::string& what) const {
  // yaml-cpp counts from 0; editors and compilers count from 1.
  const int line = has_position(mark) ? mark.line + 1 : 1;
  const int column = has_position(mark) ? mark.column + 1 : 1;
  throw ProfileError(file_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                     (key.empty() ? std::string("(top level)") : key) + ": " + what);
}

std::string Decoder::text(const Field& f) const {
  if (!f.node.IsScalar()) fail(f, "expected a string, got " + describe(f.node));
  return f.node.Scalar();
}

double Decoder::real(const Field& f, double min, double max) const {
  if (!f.node.IsScalar() || f.node.Tag() == "!") {
    fail(f, "expected a number, got " + describe(f.node));
  }
  double value = 0;
  switch (parse_real(f.node.Scalar(), min, max, value)) {
    case RealParse::kOk: return value;
    case RealParse::kNotANumber: fail(f, "expected a number, got " + describe(f.node));
    case RealParse::kOutOfRange: break;
  }
  fail(f, "must be in " + format_real(min) + ".." + format_real(max) + ", got " + shown(f.node.Scalar()));
}

bool Decoder::boolean(const Field& f) const {
  if (f.node.IsScalar() && f.node.Tag() != "!") {
    const std::string& s = f.node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  fail(f, "expected true or false, got " + describe(f.node));
}

std::vector<std::uint8_t> Decoder::hex(const Field& f, std::size_t min_octets, std::size_t max_octets) const {
  const std::string s = text(f);
  const auto count = [](std::size_t n) {
    return std::to_string(n) + " hex digit" + (n == 1 ? "" : "s");
  };
  const std::string wanted = min_octets == max_octets
                                 ? count(2 * min_octets)
                                 : "an even number of hex digits, " + std::to_string(2 * min_octets) +
                                       ".." + std::to_string(2 * max_octets);
  // The value itself is never shown: it may be a key with a typo in it.
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
      fail(f, "expected " + wanted + ", got " + std::to_string(s.size()) + " characters ('" +
                  shown(std::string_view(s).substr(i, 1)) + "' at position " + std::to_string(i + 1) +
                  " is not a hex digit)");
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

std::array<std::uint8_t, 16> Decoder::key128(const Field& f) const {
  if (f.node.IsScalar() && f.node.Scalar().rfind("sha256:", 0) == 0) {
    fail(f, "'" + shown(f.node.Scalar()) + "' is a key's fingerprint (dumps and telemetry show keys so); give the key "
                "itself, 32 hex digits");
  }
  const auto octets = hex(f, 16, 16);
  std::array<std::uint8_t, 16> key{};
  std::copy(octets.begin(), octets.end(), key.begin());
  return key;
}

template <std::size_t N>
std::array<std::uint8_t, N> Decoder::address(const Field& f, int family, const char* expected) const {
  const std::string s = text(f);
  std::array<std::uint8_t, N> a{};
  if (::inet_pton(family, s.c_str(), a.data()) != 1) fail(f, std::string("expected ") + expected + ", got '" + shown(s) + "'");
  return a;
}

std::array<std::uint8_t, 4> Decoder::ipv4(const Field& f) const {
  const auto a = address<4>(f, AF_INET, "an IPv4 address (dotted quad, e.g. 10.0.0.1)");
  if (a == std::array<std::uint8_t, 4>{} || a == std::array<std::uint8_t, 4>{255, 255, 255, 255} ||
      (a[0] & 0xf0) == 0xe0) {
    fail(f, "expected a unicast IPv4 address, got '" + shown(f.node.Scalar()) + "' (unspecified, broadcast or multicast)");
  }
  return a;
}

std::array<std::uint8_t, 16> Decoder::ipv6(const Field& f) const {
  const auto a = address<16>(f, AF_INET6, "an IPv6 address (e.g. \"fd00::1\")");
  if (a == std::array<std::uint8_t, 16>{} || a[0] == 0xff) {
    fail(f, "expected a unicast IPv6 address, got '" + shown(f.node.Scalar()) + "' (unspecified or multicast)");
  }
  return a;
}

std::array<std::uint8_t, 6> Decoder::mac(const Field& f) const {
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
    fail(f, "expected a MAC address as six hex octets joined by ':' (e.g. \"02:00:00:00:00:01\"), got '" + shown(s) +
                "'");
  }
  if ((a[0] & 0x01) != 0 || a == std::array<std::uint8_t, 6>{}) {
    fail(f, "expected a unicast MAC address, got '" + s + "' (" +
                ((a[0] & 0x01) != 0 ? "a group address: multicast or broadcast" : "all zeros") + ")");
  }
  return a;
}

std::vector<Field> Decoder::list(const Field& f) const {
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

MapReader::MapReader(const Decoder& decoder, Field self, std::initializer_list<std::string_view> allowed)
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
      // The name is the file's, whatever was typed there: shown, not echoed.
      decoder_.fail(key_node.Mark(), join_key(self_.key, shown(name)), "unknown key (allowed here: " + expected + ")");
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

std::optional<Field> MapReader::get(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return e.field;
  }
  return std::nullopt;
}

Field MapReader::require(std::string_view name) const {
  if (auto f = get(name)) return *f;
  decoder_.fail(self_.mark, join_key(self_.key, name), "required key is missing");
}

}  // namespace qs::config
