// Profile mutation fuzz (issue 15): thousands of seeded mutants of the
// shipped profiles and of a minimal one. Every mutant is either accepted,
// and then its resolved dump reads back to the same dump, or refused with a
// ProfileError that starts "FILE:LINE:COL: " with the line inside the file.
// Nothing else may happen: no other exception, no crash (this suite also runs
// under ASan+UBSan), no hang.
//
// QS_MUTATION_SEED=N picks another run; QS_MUTANTS=N another count (at least
// 2000 by default). A failure prints the mutant's seed and text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/config/profile.h"

#ifndef QS_SOURCE_DIR
#error "QS_SOURCE_DIR must name the source tree"
#endif

namespace {

// "m.yaml:LINE:COL: " at the start of `message`: the line, or 0 when absent.
unsigned long error_line(const std::string& message) {
  const std::string prefix = "m.yaml:";
  if (message.rfind(prefix, 0) != 0) return 0;
  std::size_t at = prefix.size();
  const auto number = [&](char end) -> unsigned long {
    const std::size_t from = at;
    while (at < message.size() && std::isdigit(static_cast<unsigned char>(message[at]))) ++at;
    if (at == from || at >= message.size() || message[at] != end) return 0;
    const unsigned long v = std::stoul(message.substr(from, at - from));
    ++at;
    return v;
  };
  const unsigned long line = number(':');
  const unsigned long column = number(':');
  if (line == 0 || column == 0 || at >= message.size() || message[at] != ' ') return 0;
  return line;
}

std::uint64_t env_or(const char* name, std::uint64_t otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : otherwise;
}

std::vector<std::string> seed_profiles() {
  std::vector<std::string> texts;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(QS_SOURCE_DIR) / "configs"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream s;
    s << in.rdbuf();
    texts.push_back(s.str());
  }
  // A small block-style profile, so that mutations hit values more often.
  texts.push_back(
      "ports:\n  - name: wire\n    device: net_null0\n    rx_queues: 2\n    tx_queues: 2\n"
      "lcores:\n  - id: 1\n    rx: [\"wire:0\"]\n    owner: true\n  - id: 2\n    rx: [\"wire:1\"]\n    owner: true\n"
      "rings:\n  size: 1024\n  burst: 32\n"
      "steering:\n  quic_lb:\n    - {config_id: 0, server_id_len: 2, nonce_len: 6}\n"
      "  servers:\n    - {server_id: \"0001\", owner: 1}\n    - {server_id: \"0002\", owner: 2}\n"
      "backpressure: {policy: park, high_watermark: 768, low_watermark: 256, park_timeout_us: 10000}\n"
      "action: {type: forward, tx_port: wire, idle_timeout_ms: 30000}\n"
      "polling: {idle_sleep_us: 50}\nstats: {period_ms: 1000}\nduration_s: 1.5\n");
  // And one with a fleet and encapsulated delivery (issue 26): backends whose
  // addresses, MACs and server IDs the mutations hit.
  texts.push_back(
      "ports:\n  - name: wire\n    device: net_null0\n    rx_queues: 2\n    tx_queues: 2\n"
      "lcores:\n  - id: 1\n    rx: [\"wire:0\"]\n    owner: true\n  - id: 2\n    rx: [\"wire:1\"]\n    owner: true\n"
      "steering:\n  quic_lb:\n    - {config_id: 0, server_id_len: 2, nonce_len: 6}\n"
      "backends:\n"
      "  - name: srv-a\n    server_ids: [\"0001\", \"0a02\"]\n    ipv4: 10.77.2.11\n    ipv6: \"fd77::11\"\n"
      "    mac: \"02:00:00:77:02:11\"\n    vxlan_mac: \"02:00:00:77:03:11\"\n    weight: 1\n    state: active\n"
      "    owner: 1\n"
      "  - {name: srv-b, server_ids: [\"0002\"], ipv4: 10.77.2.12, mac: \"02:00:00:77:02:12\", weight: 3, state: draining}\n"
      "  - {name: srv-c, ipv6: \"fd77::13\", mac: \"02:00:00:77:02:13\", state: down, owner: 2}\n"
      "action:\n  type: forward\n  tx_port: wire\n  delivery:\n    mode: vxlan\n    source_ipv4: 10.77.2.1\n"
      "    source_ipv6: \"fd77::1\"\n    vxlan_vni: 1\n    vxlan_port: 4789\n    vxlan_mac: \"02:00:00:77:03:01\"\n"
      "    ttl: 64\n    icmp_too_big_per_s: 100\n"
      "polling: {idle_sleep_us: 50}\nduration_s: 1.5\n");
  return texts;
}

const std::vector<std::string> kTokens = {
    "0", "1", "-1", "2", "7", "63", "64", "65", "127", "128", "255", "256", "1023", "1024", "1025", "65535",
    "65536", "4294967295", "4294967296", "18446744073709551616", "1e400", "-0", "0.5", "1.5", "nan", ".nan",
    "inf", ".inf", "-.inf", "0x10", "0o7", "1_000", "true", "false", "yes", "null", "~", "\"\"", "''", "[]",
    "{}", "[1, 2]", "{a: 1}", "\"wire:0\"", "\"wire:9\"", "wire:0", "net_null0", "net_ring0", "0000:3b:00.0",
    "park", "drop", "shed-new", "forward", "reflect", "sink", "full", "none", "\"0001\"", "\"zz\"",
    "00000000000000000000000000000000", "&a", "*a", "!!str", "!", "|", ">", "- ", ": ", "#", "\t", "%YAML 1.2",
    "---", "...", "? ", std::string(300, 'x'), "\"\\u0000\"", "\xff\xfe", "owner", "rx", "id", "ports", "lcores",
    "backends", "as_is", "l2", "ipip", "vxlan", "active", "draining", "down", "10.0.0.1", "224.0.0.1", "0.0.0.0",
    "\"fd00::1\"", "\"ff02::1\"", "\"::\"", "\"02:00:00:00:00:01\"", "\"01:00:5e:00:00:01\"", "\"02-00-00-00-00-01\"",
    "16777215", "srv-a", "[\"0001\"]"};

struct Mutator {
  std::mt19937_64 rng;

  std::size_t pick(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }
  const std::string& token() { return kTokens[pick(kTokens.size())]; }

  static std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
      if (c == '\n') {
        out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
  }
  static std::string join(const std::vector<std::string>& ls) {
    std::string s;
    for (const auto& l : ls) s += l + "\n";
    return s;
  }
  // Lines that carry YAML (not blank, not comments).
  std::size_t yaml_line(const std::vector<std::string>& ls) {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < ls.size(); ++i) {
      const auto first = ls[i].find_first_not_of(' ');
      if (first != std::string::npos && ls[i][first] != '#') idx.push_back(i);
    }
    return idx.empty() ? 0 : idx[pick(idx.size())];
  }

  std::string mutate_once(const std::string& text) {
    auto ls = lines(text);
    if (ls.empty()) return token();
    const std::size_t i = yaml_line(ls);
    std::string& l = ls[i];
    switch (pick(11)) {
      case 0: {  // replace a value: after a ": " or inside a flow list/map
        std::vector<std::size_t> starts;
        for (std::size_t k = 0; k + 1 < l.size(); ++k)
          if ((l[k] == ':' || l[k] == '[' || l[k] == ',' || l[k] == '{') && l[k + 1] == ' ') starts.push_back(k + 2);
        if (starts.empty()) break;
        const std::size_t at = starts[pick(starts.size())];
        std::size_t end = at;
        while (end < l.size() && l[end] != ',' && l[end] != ']' && l[end] != '}' && l[end] != '#') ++end;
        l = l.substr(0, at) + token() + l.substr(end);
        break;
      }
      case 1: ls.erase(ls.begin() + long(i)); break;
      case 2: ls.insert(ls.begin() + long(i), l); break;
      case 3: if (i + 1 < ls.size()) std::swap(ls[i], ls[i + 1]); break;
      case 4: l.insert(pick(l.size() + 1), token()); break;
      case 5: if (!l.empty()) l.erase(pick(l.size()), 1 + pick(10)); break;
      case 6: {
        static const char kChars[] = ":-[]{},\"'#&*!|> \t\\\x01\x7f";
        if (!l.empty()) l[pick(l.size())] = (pick(3) == 0) ? char(pick(256)) : kChars[pick(sizeof kChars - 1)];
        break;
      }
      case 7: return text.substr(0, pick(text.size() + 1));
      case 8: l = std::string(1 + pick(3), ' ') + l; break;
      case 9: if (l.size() >= 2 && l[0] == ' ' && l[1] == ' ') l.erase(0, 1 + pick(2)); break;
      case 10: {  // a number to a boundary
        std::vector<std::pair<std::size_t, std::size_t>> runs;
        for (std::size_t k = 0; k < l.size();) {
          if (std::isdigit(static_cast<unsigned char>(l[k]))) {
            std::size_t e = k;
            while (e < l.size() && std::isdigit(static_cast<unsigned char>(l[e]))) ++e;
            runs.push_back({k, e - k});
            k = e;
          } else {
            ++k;
          }
        }
        if (runs.empty()) break;
        const auto [at, len] = runs[pick(runs.size())];
        static const char* kNumbers[] = {"0", "1", "2", "3", "15", "16", "17", "19", "20", "21", "31", "32",
                                          "33", "64", "65", "100", "999", "10000", "86400", "86401", "1000000",
                                          "16777216", "16777217", "99999999999"};
        l.replace(at, len, kNumbers[pick(sizeof kNumbers / sizeof kNumbers[0])]);
        break;
      }
    }
    return join(ls);
  }
};

TEST(ProfileMutation, EveryMutantIsAcceptedAndReadsBackOrRefusedWithItsPosition) {
  const std::uint64_t seed = env_or("QS_MUTATION_SEED", 15);
  const std::uint64_t count = env_or("QS_MUTANTS", 3000);
  const auto seeds = seed_profiles();
  ASSERT_GE(seeds.size(), 8u);
  std::uint64_t accepted = 0, refused = 0, failures = 0;
  for (std::uint64_t n = 0; n < count && failures < 5; ++n) {
    Mutator m{std::mt19937_64(seed * 1000003 + n)};
    std::string text = seeds[m.pick(seeds.size())];
    const std::size_t rounds = 1 + m.pick(3);
    for (std::size_t r = 0; r < rounds; ++r) text = m.mutate_once(text);
    const std::size_t line_count = std::size_t(std::count(text.begin(), text.end(), '\n')) + 1;
    try {
      const qs::Profile p = qs::parse_profile(text, "m.yaml");
      const std::string dump = qs::dump_profile(p, qs::DumpKeys::kInFull);
      const std::string again = qs::dump_profile(qs::parse_profile(dump, "dump.yaml"), qs::DumpKeys::kInFull);
      if (again != dump) {
        ++failures;
        ADD_FAILURE() << "mutant " << n << " (seed " << seed << "): the resolved dump does not read back to itself\n"
                      << text;
      }
      ++accepted;
    } catch (const qs::ProfileError& e) {
      ++refused;
      const unsigned long line = error_line(e.what());
      if (line == 0 || line > line_count) {
        ++failures;
        ADD_FAILURE() << "mutant " << n << " (seed " << seed << "): refused without a position in the file: "
                      << e.what() << "\n"
                      << text;
      }
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << "mutant " << n << " (seed " << seed << "): " << typeid(e).name() << ": " << e.what() << "\n"
                    << text;
    }
  }
  std::printf("%llu mutants (seed %llu): %llu accepted and re-read identically, %llu refused with FILE:LINE:COL\n",
              static_cast<unsigned long long>(accepted + refused), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(refused));
  EXPECT_GE(accepted + refused, 2000u);
  // Both outcomes must really occur, or the mutations test nothing.
  EXPECT_GT(accepted, count / 20);
  EXPECT_GT(refused, count / 4);
}

}  // namespace
