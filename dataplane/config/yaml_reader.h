// The strict YAML reader under the profile loader: each value with where it
// came from (Field), typed reads that refuse what is not exactly of their
// kind (Decoder), and maps whose keys are checked against the schema's
// (MapReader). Every refusal is a ProfileError "FILE:LINE:COL: KEY: what".
//
// Internal to dataplane/config/ (the loader and the reload diff); the
// profile's public interface is profile.h.
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/config/enum_names.h"
#include "dataplane/config/profile.h"

namespace qs::config {

// A value with where it came from: the node, its position and its dotted key.
struct Field {
  YAML::Node node;
  YAML::Mark mark;
  std::string key;
};

std::string join_key(const std::string& parent, std::string_view name);
std::string index_key(const std::string& parent, std::size_t i);
bool has_position(const YAML::Mark& mark);
// A value from the file as a message shows it: at most kShownOctets of it
// (then "..." and how long it was), each control byte, DEL and byte >= 0x80 as
// \xNN. Refusals go to the log and the terminal: a value pasted in the wrong
// place (a PEM file, a key) comes back cut short, and none can carry terminal
// control sequences.
constexpr std::size_t kShownOctets = 64;
std::string shown(std::string_view value);
// What a node is, for messages: "a list", "'abc'", "the quoted string '1'"
// (the scalar as shown()).
std::string describe(const YAML::Node& node);

// Addresses as the profile spells them (and as Decoder reads them back).
std::string format_ipv4(const std::array<std::uint8_t, 4>& a);
std::string format_ipv6(const std::array<std::uint8_t, 16>& a);
std::string format_mac(const std::array<std::uint8_t, 6>& a);
// The shortest text that reads back as the same double.
std::string format_real(double v);

// The profile's rule for numbers, shared with the command line: decimal
// (std::from_chars: no hex, no leading spaces), finite, within [min, max].
enum class RealParse { kOk, kNotANumber, kOutOfRange };
RealParse parse_real(const std::string& s, double min, double max, double& value);

class Decoder {
 public:
  explicit Decoder(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& key, const std::string& what) const;
  [[noreturn]] void fail(const Field& field, const std::string& what) const { fail(field.mark, field.key, what); }

  // --- scalars ---

  std::string text(const Field& f) const;

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
      fail(f, "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " + shown(s));
    }
    if (ec != std::errc() || end != last || first == last) {
      fail(f, "expected an integer, got " + describe(f.node));
    }
    if (value < min || value > max) {
      fail(f, "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " + shown(s));
    }
    return static_cast<T>(value);
  }

  double real(const Field& f, double min, double max) const;
  bool boolean(const Field& f) const;

  // One of an enum's spellings (its table in enum_names.h).
  template <typename E, std::size_t N>
  E choice(const Field& f, const std::array<Spelling<E>, N>& spellings) const {
    if (f.node.IsScalar()) {
      for (const Spelling<E>& s : spellings) {
        if (f.node.Scalar() == s.name) return s.value;
      }
    }
    std::string expected;
    for (const Spelling<E>& s : spellings) expected += (expected.empty() ? "" : " | ") + std::string(s.name);
    fail(f, "expected one of " + expected + ", got " + describe(f.node));
  }

  // min_octets..max_octets octets as hex digits (no prefix, either case).
  std::vector<std::uint8_t> hex(const Field& f, std::size_t min_octets, std::size_t max_octets) const;
  std::array<std::uint8_t, 16> key128(const Field& f) const;
  // A unicast IPv4 address as a dotted quad (inet_pton's spelling: four
  // decimal octets, nothing else).
  std::array<std::uint8_t, 4> ipv4(const Field& f) const;
  // A unicast IPv6 address as inet_pton reads one ("fd00::1").
  std::array<std::uint8_t, 16> ipv6(const Field& f) const;
  // A unicast Ethernet address: six octets of two hex digits joined by ':'.
  // A group (multicast, broadcast) or all-zero address is no station.
  std::array<std::uint8_t, 6> mac(const Field& f) const;

  // --- collections ---

  std::vector<Field> list(const Field& f) const;

 private:
  // inet_pton's reading of f's text in `family`, or a refusal that expected `expected`.
  template <std::size_t N>
  std::array<std::uint8_t, N> address(const Field& f, int family, const char* expected) const;

  std::string file_;
};

// The keys of one YAML map, checked against the keys the schema allows.
class MapReader {
 public:
  MapReader(const Decoder& decoder, Field self, std::initializer_list<std::string_view> allowed);

  std::optional<Field> get(std::string_view name) const;
  // A missing required key is reported at the map that should hold it.
  Field require(std::string_view name) const;
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

}  // namespace qs::config
