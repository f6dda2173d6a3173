// Profile loader: every validation rule rejects a bad profile with
// "FILE:LINE:COL: KEY: what", the shipped profiles load, and the resolved dump
// reads back to itself.
#include "tests/shipped_profile.h"
#include "dataplane/config/profile.h"
#include "steering/owner_resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef QS_SOURCE_DIR
#error "QS_SOURCE_DIR must name the source tree (set by tests/dataplane/meson.build)"
#endif

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A minimal valid profile, one line per section so cases can append lines
// with known line numbers.
const std::string kPorts = "ports: [{name: wire, device: net_null0}]\n";               // line 1
const std::string kLcores = "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}]\n";     // line 2
const std::string kSink = "action: {type: sink}\n";                                    // line 3
const std::string kBase = kPorts + kLcores + kSink;

// A block-style port whose line 4 is `    <field>: <value>` (value at column
// field.size() + 7).
std::string block_port(const std::string& field_line) {
  return "ports:\n  - name: wire\n    device: net_null0\n    " + field_line + "\n" + kLcores + kSink;
}

// Steering with one QUIC-LB config: config_id on line 6, server_id_len 7,
// nonce_len 8, extra lines from 9.
std::string with_quic_lb(const std::string& config_id, const std::string& sid_len, const std::string& nonce_len,
                         const std::string& extra = "") {
  return kBase + "steering:\n  quic_lb:\n    - config_id: " + config_id + "\n      server_id_len: " + sid_len +
         "\n      nonce_len: " + nonce_len + "\n" + extra;
}

// Steering with a 2-octet QUIC-LB config (line 5) and servers from line 7.
std::string with_servers(const std::string& server_lines) {
  return kBase + "steering:\n  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 6}]\n  servers:\n" +
         server_lines;
}

std::string error_of(const std::string& yaml) {
  try {
    qs::parse_profile(yaml, "t.yaml");
  } catch (const qs::ProfileError& e) {
    return e.what();
  }
  return "(accepted)";
}

struct BadProfile {
  const char* name;
  std::string yaml;
  std::string where;  // "t.yaml:LINE:COL: key"
  std::string what;   // a fragment of the explanation
};

void PrintTo(const BadProfile& c, std::ostream* os) { *os << c.name; }

class RejectsBadProfile : public ::testing::TestWithParam<BadProfile> {};

TEST_P(RejectsBadProfile, NamesFileLineColumnKeyAndReason) {
  const BadProfile& c = GetParam();
  const std::string message = error_of(c.yaml);
  EXPECT_THAT(message, StartsWith(c.where + ": ")) << c.yaml;
  EXPECT_THAT(message, HasSubstr(c.what)) << c.yaml;
}

std::string case_name(const ::testing::TestParamInfo<BadProfile>& info) { return info.param.name; }

// --- YAML structure, keys and types -----------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Structure, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"syntax_error", "ports: [1, 2\nlcores: 3\n", "t.yaml:2:7: syntax error", "end of sequence"},
        BadProfile{"empty_file", "", "t.yaml:1:1: (top level)", "the profile is empty"},
        BadProfile{"only_comments", "# nothing here\n", "t.yaml:1:1: (top level)", "the profile is empty"},
        BadProfile{"top_level_list", "- 1\n", "t.yaml:1:1: (top level)", "expected a map, got a list"},
        BadProfile{"two_documents", kBase + "---\n" + kBase, "t.yaml:4:1: (top level)",
                   "a profile is one YAML document"},
        BadProfile{"text_after_the_document", "\"a\", \"b\"\n", "t.yaml:1:4: (top level)",
                   "a profile is one YAML document"},
        BadProfile{"unknown_root_key", kBase + "bogus: 1\n", "t.yaml:4:1: bogus", "unknown key"},
        BadProfile{"unknown_port_key", block_port("speed: 10"), "t.yaml:4:5: ports[0].speed", "unknown key"},
        BadProfile{"unknown_lcore_key_in_flow_map",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\"], owner: true, numa: 0}]\n" + kSink,
                   "t.yaml:2:47: lcores[0].numa", "unknown key"},
        BadProfile{"unknown_deep_key", kBase + "steering:\n  fallback:\n    vnodes: 8\n    seed: 1\n",
                   "t.yaml:7:5: steering.fallback.seed", "unknown key (allowed here: key, vnodes, rekey_on_reload, hash)"},
        BadProfile{"fallback_hash_word", kBase + "steering:\n  fallback:\n    hash: five_tuple\n",
                   "t.yaml:6:11: steering.fallback.hash", "expected one of auto | tuple | dcid, got 'five_tuple'"},
        BadProfile{"duplicate_key", kBase + "rings:\n  size: 64\n  size: 128\n", "t.yaml:6:3: rings.size",
                   "duplicate key (first given on line 5)"},
        BadProfile{"word_for_integer", kBase + "rings:\n  size: big\n", "t.yaml:5:9: rings.size",
                   "expected an integer, got 'big'"},
        BadProfile{"quoted_integer", kBase + "rings:\n  size: \"64\"\n", "t.yaml:5:9: rings.size",
                   "expected an integer, got the quoted string '64'"},
        BadProfile{"fraction_for_integer", kBase + "rings:\n  burst: 1.5\n", "t.yaml:5:10: rings.burst",
                   "expected an integer, got '1.5'"},
        BadProfile{"map_for_list", kBase + "eal: {a: 1}\n", "t.yaml:4:6: eal", "expected a list, got a map"},
        BadProfile{"list_for_map", kBase + "mempool: [1]\n", "t.yaml:4:10: mempool", "expected a map, got a list"},
        BadProfile{"scalar_for_map", kBase + "stats: 5\n", "t.yaml:4:8: stats", "expected a map, got '5'"},
        BadProfile{"list_for_string", kBase + "eal: [\"-l\", [1]]\n", "t.yaml:4:13: eal[1]",
                   "expected a string, got a list"},
        BadProfile{"list_for_path", kBase + "stats:\n  json: [a]\n", "t.yaml:5:9: stats.json",
                   "expected a string, got a list"},
        BadProfile{"integer_for_queue_ref", kPorts + "lcores: [{id: 1, rx: [0], owner: true}]\n" + kSink,
                   "t.yaml:2:23: lcores[0].rx[0]", "expected \"port:queue\""},
        BadProfile{"yes_for_bool", block_port("rss: yes"), "t.yaml:4:10: ports[0].rss",
                   "expected true or false, got 'yes'"},
        BadProfile{"empty_value", kBase + "rings:\n  size:\n", "t.yaml:5:3: rings.size",
                   "expected an integer, got nothing"},
        BadProfile{"bad_policy", kBase + "backpressure:\n  policy: pause\n", "t.yaml:5:11: backpressure.policy",
                   "expected one of park | drop | shed-new, got 'pause'"},
        BadProfile{"bad_flow_control", block_port("flow_control: both"), "t.yaml:4:19: ports[0].flow_control",
                   "expected one of none | rx_pause | tx_pause | full, got 'both'"},
        BadProfile{"bad_action_type", kPorts + kLcores + "action: {type: bounce}\n", "t.yaml:3:16: action.type",
                   "expected one of forward | reflect | sink, got 'bounce'"},
        BadProfile{"word_for_duration", kBase + "duration_s: forever\n", "t.yaml:4:13: duration_s",
                   "expected a number, got 'forever'"},
        BadProfile{"nan_duration", kBase + "duration_s: nan\n", "t.yaml:4:13: duration_s", "expected a number"}),
    case_name);

// --- per-field ranges ----------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Ranges, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"rx_queues_above_64", block_port("rx_queues: 65"), "t.yaml:4:16: ports[0].rx_queues",
                   "must be in 0..64, got 65"},
        BadProfile{"tx_queues_negative", block_port("tx_queues: -1"), "t.yaml:4:16: ports[0].tx_queues",
                   "must be in 0..64, got -1"},
        BadProfile{"rx_descriptors_below_32", block_port("rx_descriptors: 16"),
                   "t.yaml:4:21: ports[0].rx_descriptors", "must be in 32..16384, got 16"},
        BadProfile{"tx_descriptors_above_16384", block_port("tx_descriptors: 16385"),
                   "t.yaml:4:21: ports[0].tx_descriptors", "must be in 32..16384, got 16385"},
        BadProfile{"mtu_below_68", block_port("mtu: 67"), "t.yaml:4:10: ports[0].mtu", "must be in 68..9600, got 67"},
        BadProfile{"mtu_above_9600", block_port("mtu: 9601"), "t.yaml:4:10: ports[0].mtu",
                   "must be in 68..9600, got 9601"},
        BadProfile{"huge_integer", block_port("mtu: 99999999999999999999999"), "t.yaml:4:10: ports[0].mtu",
                   "must be in 68..9600"},
        BadProfile{"mbufs_below_1024", kBase + "mempool:\n  mbufs: 1023\n", "t.yaml:5:10: mempool.mbufs",
                   "must be in 1024..16777216, got 1023"},
        BadProfile{"mbufs_above_16M", kBase + "mempool:\n  mbufs: 16777217\n", "t.yaml:5:10: mempool.mbufs",
                   "must be in 1024..16777216, got 16777217"},
        BadProfile{"cache_above_512", kBase + "mempool:\n  cache: 513\n", "t.yaml:5:10: mempool.cache",
                   "must be in 0..512, got 513"},
        BadProfile{"data_room_below_1024", kBase + "mempool:\n  data_room: 1023\n", "t.yaml:5:14: mempool.data_room",
                   "must be in 1024..65535, got 1023"},
        BadProfile{"lcore_id_above_127", kPorts + "lcores: [{id: 128, rx: [\"wire:0\"], owner: true}]\n" + kSink,
                   "t.yaml:2:15: lcores[0].id", "must be in 0..127, got 128"},
        BadProfile{"ring_size_below_16", kBase + "rings:\n  size: 8\n", "t.yaml:5:9: rings.size",
                   "must be in 16..65536, got 8"},
        BadProfile{"ring_size_above_65536", kBase + "rings:\n  size: 131072\n", "t.yaml:5:9: rings.size",
                   "must be in 16..65536, got 131072"},
        BadProfile{"ring_size_not_power_of_two", kBase + "rings:\n  size: 1000\n", "t.yaml:5:9: rings.size",
                   "must be a power of two, got 1000"},
        BadProfile{"burst_zero", kBase + "rings:\n  burst: 0\n", "t.yaml:5:10: rings.burst", "must be in 1..64, got 0"},
        BadProfile{"burst_above_64", kBase + "rings:\n  burst: 65\n", "t.yaml:5:10: rings.burst",
                   "must be in 1..64, got 65"},
        BadProfile{"burst_above_ring_size", kBase + "rings:\n  size: 16\n  burst: 32\n", "t.yaml:6:10: rings.burst",
                   "must not exceed rings.size (16), got 32"},
        BadProfile{"bad_steering_mode", kBase + "steering:\n  mode: rss\n", "t.yaml:5:9: steering.mode",
                   "expected one of cid | four_tuple, got 'rss'"},
        BadProfile{"quic_port_zero", kBase + "steering:\n  quic_ports: [443, 0]\n",
                   "t.yaml:5:21: steering.quic_ports[1]", "must be in 1..65535, got 0"},
        BadProfile{"quic_port_above_65535", kBase + "steering:\n  quic_ports: [443, 65536]\n",
                   "t.yaml:5:21: steering.quic_ports[1]", "must be in 1..65535, got 65536"},
        BadProfile{"quic_ports_empty", kBase + "steering:\n  quic_ports: []\n", "t.yaml:5:15: steering.quic_ports",
                   "at least one UDP port is required"},
        BadProfile{"quic_ports_duplicate", kBase + "steering:\n  quic_ports: [443, 443]\n",
                   "t.yaml:5:21: steering.quic_ports[1]", "duplicate UDP port 443"},
        BadProfile{"short_dcid_len_above_20", kBase + "steering:\n  short_dcid_len: 21\n",
                   "t.yaml:5:19: steering.short_dcid_len", "must be in 0..20, got 21"},
        BadProfile{"config_id_7", with_quic_lb("7", "2", "6"), "t.yaml:6:18: steering.quic_lb[0].config_id",
                   "must be in 0..6, got 7"},
        BadProfile{"server_id_len_zero", with_quic_lb("0", "0", "6"),
                   "t.yaml:7:22: steering.quic_lb[0].server_id_len", "must be in 1..15, got 0"},
        BadProfile{"server_id_len_16", with_quic_lb("0", "16", "4"),
                   "t.yaml:7:22: steering.quic_lb[0].server_id_len", "must be in 1..15, got 16"},
        BadProfile{"nonce_len_3", with_quic_lb("0", "2", "3"), "t.yaml:8:18: steering.quic_lb[0].nonce_len",
                   "must be in 4..18, got 3"},
        BadProfile{"nonce_len_19", with_quic_lb("0", "1", "19"), "t.yaml:8:18: steering.quic_lb[0].nonce_len",
                   "must be in 4..18, got 19"},
        BadProfile{"cid_longer_than_20", with_quic_lb("0", "15", "5"), "t.yaml:8:18: steering.quic_lb[0].nonce_len",
                   "server_id_len + nonce_len must be at most 19 (a CID is at most 20 octets), got 15 + 5"},
        BadProfile{"len_self_encode_not_bool", with_quic_lb("0", "2", "6", "      len_self_encode: maybe\n"),
                   "t.yaml:9:24: steering.quic_lb[0].len_self_encode", "expected true or false, got 'maybe'"},
        BadProfile{"fallback_vnodes_zero", kBase + "steering:\n  fallback:\n    vnodes: 0\n",
                   "t.yaml:6:13: steering.fallback.vnodes", "must be in 1..4096, got 0"},
        BadProfile{"fallback_vnodes_above_4096", kBase + "steering:\n  fallback:\n    vnodes: 4097\n",
                   "t.yaml:6:13: steering.fallback.vnodes", "must be in 1..4096, got 4097"},
        BadProfile{"high_watermark_zero", kBase + "backpressure:\n  high_watermark: 0\n",
                   "t.yaml:5:19: backpressure.high_watermark", "must be in 1..rings.size (1024), got 0"},
        BadProfile{"park_timeout_zero", kBase + "backpressure:\n  park_timeout_us: 0\n",
                   "t.yaml:5:20: backpressure.park_timeout_us", "must be in 1..10000000, got 0"},
        BadProfile{"park_timeout_above_10s", kBase + "backpressure:\n  park_timeout_us: 10000001\n",
                   "t.yaml:5:20: backpressure.park_timeout_us", "must be in 1..10000000, got 10000001"},
        BadProfile{"cost_cycles_above_1M", kPorts + kLcores + "action:\n  type: sink\n  cost_cycles: 1000001\n",
                   "t.yaml:5:16: action.cost_cycles", "must be in 0..1000000, got 1000001"},
        BadProfile{"tx_drain_zero", kPorts + kLcores + "action:\n  type: sink\n  tx_drain_us: 0\n",
                   "t.yaml:5:16: action.tx_drain_us", "must be in 1..100000, got 0"},
        BadProfile{"tx_drain_above_100ms", kPorts + kLcores + "action:\n  type: sink\n  tx_drain_us: 100001\n",
                   "t.yaml:5:16: action.tx_drain_us", "must be in 1..100000, got 100001"},
        BadProfile{"max_connections_zero", kPorts + kLcores + "action:\n  type: sink\n  max_connections: 0\n",
                   "t.yaml:5:20: action.max_connections", "must be in 1..16777216, got 0"},
        BadProfile{"max_connections_above_16M",
                   kPorts + kLcores + "action:\n  type: sink\n  max_connections: 16777217\n",
                   "t.yaml:5:20: action.max_connections", "must be in 1..16777216, got 16777217"},
        BadProfile{"slots_per_connection_three",
                   kPorts + kLcores + "action:\n  type: sink\n  slots_per_connection: 3\n",
                   "t.yaml:5:25: action.slots_per_connection", "must be 2, 4 or 8, got 3"},
        BadProfile{"slots_per_connection_sixteen",
                   kPorts + kLcores + "action:\n  type: sink\n  slots_per_connection: 16\n",
                   "t.yaml:5:25: action.slots_per_connection", "must be in 2..8, got 16"},
        BadProfile{"idle_timeout_zero", kPorts + kLcores + "action:\n  type: sink\n  idle_timeout_ms: 0\n",
                   "t.yaml:5:20: action.idle_timeout_ms", "must be in 1..86400000, got 0"},
        BadProfile{"idle_sleep_above_1s", kBase + "polling:\n  idle_sleep_us: 1000001\n",
                   "t.yaml:5:18: polling.idle_sleep_us", "must be in 0..1000000, got 1000001"},
        BadProfile{"idle_polls_zero", kBase + "polling:\n  idle_polls_before_sleep: 0\n",
                   "t.yaml:5:28: polling.idle_polls_before_sleep", "must be in 1..1000000000, got 0"},
        BadProfile{"doorbell_spin_above_1s", kBase + "polling:\n  doorbell_spin_us: 1000001\n",
                   "t.yaml:5:21: polling.doorbell_spin_us", "must be in 0..1000000, got 1000001"},
        BadProfile{"stats_period_50ms", kBase + "stats:\n  period_ms: 50\n", "t.yaml:5:14: stats.period_ms",
                   "must be 0 (off) or in 100..3600000, got 50"},
        BadProfile{"stats_period_above_1h", kBase + "stats:\n  period_ms: 3600001\n", "t.yaml:5:14: stats.period_ms",
                   "must be in 0..3600000, got 3600001"},
        BadProfile{"duration_above_a_day", kBase + "duration_s: 86401\n", "t.yaml:4:13: duration_s",
                   "must be in 0..86400, got 86401"},
        BadProfile{"duration_negative", kBase + "duration_s: -0.5\n", "t.yaml:4:13: duration_s",
                   "must be in 0..86400, got -0.5"},
        BadProfile{"drain_grace_above_1h", kBase + "drain:\n  grace_s: 3601\n", "t.yaml:5:12: drain.grace_s",
                   "must be in 0..3600, got 3601"},
        BadProfile{"drain_grace_negative", kBase + "drain: {grace_s: -1}\n", "t.yaml:4:18: drain.grace_s",
                   "must be in 0..3600, got -1"},
        BadProfile{"drain_grace_inf", kBase + "drain: {grace_s: .inf}\n", "t.yaml:4:18: drain.grace_s",
                   "expected a number"},
        BadProfile{"drain_unknown_key", kBase + "drain: {grace: 2}\n", "t.yaml:4:9: drain.grace",
                   "unknown key (allowed here: grace_s)"}),
    case_name);

// --- hex keys and server IDs -------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Hex, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"quic_lb_key_bad_digit",
                   with_quic_lb("0", "2", "6", "      key: 00112233445566778899aabbccddeefg\n"),
                   "t.yaml:9:12: steering.quic_lb[0].key", "('g' at position 32 is not a hex digit)"},
        BadProfile{"quic_lb_key_short", with_quic_lb("0", "2", "6", "      key: 00112233\n"),
                   "t.yaml:9:12: steering.quic_lb[0].key", "expected 32 hex digits, got 8 hex digits"},
        BadProfile{"quic_lb_key_with_prefix",
                   with_quic_lb("0", "2", "6", "      key: 0x00112233445566778899aabbccddee\n"),
                   "t.yaml:9:12: steering.quic_lb[0].key", "('x' at position 2 is not a hex digit)"},
        BadProfile{"fallback_key_short", kBase + "steering:\n  fallback:\n    key: abc\n",
                   "t.yaml:6:10: steering.fallback.key", "expected 32 hex digits, got 3 hex digits"},
        BadProfile{"fallback_key_empty", kBase + "steering:\n  fallback:\n    key: \"\"\n",
                   "t.yaml:6:10: steering.fallback.key", "expected 32 hex digits, got 0 hex digits"},
        BadProfile{"server_id_not_hex", with_servers("    - {server_id: \"00zz\", owner: 1}\n"),
                   "t.yaml:7:19: steering.servers[0].server_id", "('z' at position 3 is not a hex digit)"},
        BadProfile{"server_id_odd_digits", with_servers("    - {server_id: \"001\", owner: 1}\n"),
                   "t.yaml:7:19: steering.servers[0].server_id", "got 3 hex digits"}),
    case_name);

// A refusal goes to the log and the terminal (issue 38 item 7): a key with a
// typo in it is not echoed, not even the digits before the typo; any other
// value comes back cut short and with its control bytes escaped.
TEST(RefusalShows, NoKeyWithATypo) {
  const std::string key = "5f0c9a7e21d34b8e96a1c07d3e45f2";  // 30 of 32 digits, then a typo
  for (const std::string& yaml : {with_quic_lb("0", "2", "6", "      key: " + key + "g1\n"),
                                  kBase + "steering:\n  fallback:\n    key: \"" + key + "\\x01\"\n"}) {
    const std::string message = error_of(yaml);
    EXPECT_THAT(message, HasSubstr("is not a hex digit")) << message;
    EXPECT_THAT(message, Not(HasSubstr(key.substr(0, 8)))) << message;
  }
  EXPECT_THAT(error_of(kBase + "steering:\n  fallback:\n    key: \"" + key + "\\x01\"\n"),
              HasSubstr("('\\x01' at position 31 is not a hex digit)"));
}

TEST(RefusalShows, AtMostABoundedValueWithControlBytesEscaped) {
  const std::string pasted(100000, 'k');
  std::string message = error_of(kPorts + kLcores + "action: {type: \"" + pasted + "\"}\n");
  EXPECT_THAT(message, HasSubstr("got the quoted string '" + std::string(64, 'k') + "... (100000 octets)'"));
  EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
  message = error_of(kPorts + kLcores + "action: {type: \"a\\e[2Jb\\x7f\\u00e9\"}\n");
  EXPECT_THAT(message, HasSubstr("got the quoted string 'a\\x1b[2Jb\\x7f\\xc3\\xa9'")) << message;
  // An unknown key is a name from the file, too (YAML keys stop at 1024 octets).
  message = error_of(kBase + "\"" + pasted.substr(0, 900) + "\\e\": 1\n");
  EXPECT_THAT(message, HasSubstr(std::string(64, 'k') + "... (901 octets): unknown key")) << message.substr(0, 400);
  EXPECT_LT(message.size(), 400u);
}

// --- cross-checks ----------------------------------------------------------------

const std::string kTwoOwners =
    "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2, rx: [\"wire:1\"], owner: true}]\n";

INSTANTIATE_TEST_SUITE_P(
    Ports, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"ports_missing", kLcores + kSink, "t.yaml:1:1: ports", "required key is missing"},
        BadProfile{"ports_empty", "ports: []\n" + kLcores + kSink, "t.yaml:1:8: ports",
                   "at least one port is required"},
        BadProfile{"port_name_missing", "ports: [{device: net_null0}]\n" + kLcores + kSink,
                   "t.yaml:1:9: ports[0].name", "required key is missing"},
        BadProfile{"port_device_missing", "ports: [{name: wire}]\n" + kLcores + kSink,
                   "t.yaml:1:9: ports[0].device", "required key is missing"},
        BadProfile{"port_name_with_space", "ports: [{name: \"wi re\", device: net_null0}]\n" + kLcores + kSink,
                   "t.yaml:1:16: ports[0].name", "got 'wi re'"},
        BadProfile{"port_name_duplicate",
                   "ports:\n  - {name: wire, device: net_null0}\n  - {name: wire, device: net_null1}\n" + kLcores +
                       kSink,
                   "t.yaml:3:12: ports[1].name", "duplicate port name 'wire' (also ports[0])"},
        BadProfile{"device_interface_name", "ports: [{name: wire, device: eth0}]\n" + kLcores + kSink,
                   "t.yaml:1:30: ports[0].device", "expected a PCI address"},
        BadProfile{"device_pci_function_8", "ports: [{name: wire, device: \"0000:3b:00.8\"}]\n" + kLcores + kSink,
                   "t.yaml:1:30: ports[0].device", "got '0000:3b:00.8'"},
        BadProfile{"device_pci_device_20", "ports: [{name: wire, device: \"3b:20.0\"}]\n" + kLcores + kSink,
                   "t.yaml:1:30: ports[0].device", "got '3b:20.0'"},
        BadProfile{"device_vdev_without_driver", "ports: [{name: wire, device: net_}]\n" + kLcores + kSink,
                   "t.yaml:1:30: ports[0].device", "got 'net_'"},
        BadProfile{"device_vdev_with_space", "ports: [{name: wire, device: \"net_pcap0, rx_pcap=a\"}]\n" + kLcores +
                                                 kSink,
                   "t.yaml:1:30: ports[0].device", "vdev devargs starting with net_"},
        BadProfile{"device_duplicate_vdev",
                   "ports:\n  - {name: wire, device: \"net_pcap0,rx_pcap=a.pcap\"}\n"
                   "  - {name: wire2, device: \"net_pcap0,rx_pcap=b.pcap\"}\n" +
                       kLcores + kSink,
                   "t.yaml:3:27: ports[1].device", "device 'net_pcap0' is already ports[0] ('wire')"},
        BadProfile{"device_duplicate_pci_spelling",
                   "ports:\n  - {name: wire, device: \"3b:00.0\"}\n  - {name: wire2, device: \"0000:3B:00.0\"}\n" +
                       kLcores + kSink,
                   "t.yaml:3:27: ports[1].device", "device '0000:3b:00.0' is already ports[0] ('wire')"},
        BadProfile{"port_without_queues",
                   "ports: [{name: wire, device: net_null0, rx_queues: 0, tx_queues: 0}]\n" + kLcores + kSink,
                   "t.yaml:1:9: ports[0]", "a port needs rx_queues or tx_queues (both are 0)"},
        BadProfile{"mtu_too_big_for_data_room", block_port("mtu: 9000"), "t.yaml:4:10: ports[0].mtu",
                   "raise mempool.data_room to at least 9146"}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Lcores, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"lcores_missing", kPorts + kSink, "t.yaml:1:1: lcores", "required key is missing"},
        BadProfile{"lcores_empty", kPorts + "lcores: []\n" + kSink, "t.yaml:2:9: lcores",
                   "at least one lcore is required"},
        BadProfile{"lcore_id_missing", kPorts + "lcores: [{rx: [\"wire:0\"], owner: true}]\n" + kSink,
                   "t.yaml:2:10: lcores[0].id", "required key is missing"},
        BadProfile{"lcore_id_duplicate",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 1, owner: true}]\n" + kSink,
                   "t.yaml:2:53: lcores[1].id", "duplicate lcore id 1 (also lcores[0])"},
        BadProfile{"no_owner", kPorts + "lcores: [{id: 1, rx: [\"wire:0\"]}]\n" + kSink, "t.yaml:2:9: lcores",
                   "no lcore has owner: true"},
        BadProfile{"idle_lcore", kPorts + "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2}]\n" + kSink,
                   "t.yaml:2:48: lcores[1]", "lcore 2 polls no RX queue and is not an owner"},
        BadProfile{"queue_polled_by_two_lcores",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2, rx: [\"wire:0\"]}]\n" + kSink,
                   "t.yaml:2:61: lcores[1].rx[0]", "queue 0 of port 'wire' is already polled by lcores[0] (id 1)"},
        BadProfile{"queue_listed_twice", kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire:0\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "already polled by lcores[0] (id 1)"},
        BadProfile{"queue_polled_by_none",
                   "ports: [{name: wire, device: net_null0, rx_queues: 2, tx_queues: 1}]\n" + kLcores + kSink,
                   "t.yaml:1:52: ports[0].rx_queues", "queue 1 of port 'wire' is polled by no lcore"},
        BadProfile{"default_queue_polled_by_none",
                   "ports: [{name: wire, device: net_null0}, {name: sink, device: net_null1}]\n" + kLcores + kSink,
                   "t.yaml:1:42: ports[1].rx_queues", "queue 0 of port 'sink' is polled by no lcore"},
        BadProfile{"queue_beyond_port", kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire:1\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "queue 1 is beyond port 'wire', which has 1 rx_queues (0..0)"},
        BadProfile{"queue_of_tx_only_port",
                   "ports: [{name: wire, device: net_null0}, {name: out, device: net_null1, rx_queues: 0}]\n"
                   "lcores: [{id: 1, rx: [\"wire:0\", \"out:0\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "queue 0 is beyond port 'out', which has 0 rx_queues"},
        BadProfile{"queue_ref_unknown_port",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wan:0\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "unknown port 'wan' (ports: wire)"},
        BadProfile{"queue_ref_without_colon",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "expected \"port:queue\" (e.g. \"wire:0\"), got 'wire'"},
        BadProfile{"queue_ref_word_queue",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire:x\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "got 'wire:x'"},
        BadProfile{"queue_ref_without_port",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \":0\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "got ':0'"},
        BadProfile{"queue_ref_without_queue",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire:\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "got 'wire:'"},
        BadProfile{"queue_ref_negative",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire:-1\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "got 'wire:-1'"},
        BadProfile{"queue_ref_two_colons",
                   kPorts + "lcores: [{id: 1, rx: [\"wire:0\", \"wire:0:1\"], owner: true}]\n" + kSink,
                   "t.yaml:2:33: lcores[0].rx[1]", "got 'wire:0:1'"}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Steering, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"too_many_quic_lb_configs",
                   kBase + "steering:\n  quic_lb: [" +
                       [] {
                         std::string s;
                         for (int i = 0; i < 8; ++i) {
                           s += std::string(i ? ", " : "") + "{config_id: " + std::to_string(i % 7) +
                                ", server_id_len: 1, nonce_len: 4}";
                         }
                         return s;
                       }() + "]\n",
                   "t.yaml:5:12: steering.quic_lb", "at most 7 configs (config_id 0..6), got 8"},
        BadProfile{"config_id_duplicate",
                   kBase + "steering:\n  quic_lb:\n    - {config_id: 1, server_id_len: 2, nonce_len: 6}\n"
                           "    - {config_id: 1, server_id_len: 3, nonce_len: 6}\n",
                   "t.yaml:7:19: steering.quic_lb[1].config_id", "duplicate config_id 1 (also steering.quic_lb[0])"},
        BadProfile{"server_id_len_missing", kBase + "steering:\n  quic_lb:\n    - {config_id: 1, nonce_len: 6}\n",
                   "t.yaml:6:7: steering.quic_lb[0].server_id_len", "required key is missing"},
        BadProfile{"server_owner_not_owner_lcore", with_servers("    - {server_id: \"0001\", owner: 2}\n"),
                   "t.yaml:7:34: steering.servers[0].owner", "lcore 2 is not an owner lcore (owners: 1)"},
        BadProfile{"server_id_length_without_config", with_servers("    - {server_id: \"000001\", owner: 1}\n"),
                   "t.yaml:7:19: steering.servers[0].server_id",
                   "server_id is 3 octets, but no steering.quic_lb config has that server_id_len (have: 2)"},
        BadProfile{"server_without_any_config", kBase + "steering:\n  servers: [{server_id: \"0001\", owner: 1}]\n",
                   "t.yaml:5:25: steering.servers[0].server_id", "(have: none)"},
        BadProfile{"server_id_duplicate",
                   with_servers("    - {server_id: \"0001\", owner: 1}\n    - {server_id: \"0001\", owner: 1}\n"),
                   "t.yaml:8:19: steering.servers[1].server_id", "duplicate server_id (also steering.servers[0])"},
        BadProfile{"server_id_duplicate_other_case",
                   with_servers("    - {server_id: \"00ab\", owner: 1}\n    - {server_id: \"00AB\", owner: 1}\n"),
                   "t.yaml:8:19: steering.servers[1].server_id", "duplicate server_id"},
        BadProfile{"server_owner_missing", with_servers("    - {server_id: \"0001\"}\n"),
                   "t.yaml:7:7: steering.servers[0].owner", "required key is missing"},
        BadProfile{"high_watermark_above_ring",
                   kBase + "rings:\n  size: 64\nbackpressure:\n  high_watermark: 128\n",
                   "t.yaml:7:19: backpressure.high_watermark", "must be in 1..rings.size (64), got 128"},
        BadProfile{"low_watermark_equal_high",
                   kBase + "backpressure:\n  high_watermark: 512\n  low_watermark: 512\n",
                   "t.yaml:6:18: backpressure.low_watermark", "must be below high_watermark (512), got 512"},
        BadProfile{"low_watermark_at_default_high", kBase + "backpressure:\n  low_watermark: 1024\n",
                   "t.yaml:5:18: backpressure.low_watermark", "must be below high_watermark (1024), got 1024"}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Action, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"forward_by_default_without_tx_port", kPorts + kLcores, "t.yaml:1:1: action.tx_port",
                   "required when action.type is forward"},
        BadProfile{"forward_without_tx_port", kPorts + kLcores + "action: {type: forward}\n",
                   "t.yaml:3:9: action.tx_port", "required when action.type is forward"},
        BadProfile{"tx_port_unknown", kPorts + kLcores + "action: {type: forward, tx_port: wan}\n",
                   "t.yaml:3:34: action.tx_port", "unknown port 'wan' (ports: wire)"},
        BadProfile{"tx_port_with_sink", kPorts + kLcores + "action: {type: sink, tx_port: wire}\n",
                   "t.yaml:3:31: action.tx_port", "only allowed when action.type is forward (type is sink)"},
        BadProfile{"tx_port_with_reflect", kPorts + kLcores + "action: {type: reflect, tx_port: wire}\n",
                   "t.yaml:3:34: action.tx_port", "only allowed when action.type is forward (type is reflect)"},
        BadProfile{"forward_port_fewer_tx_queues_than_owners",
                   "ports:\n  - {name: wire, device: net_null0, rx_queues: 2}\n  - name: out\n"
                   "    device: net_null1\n    rx_queues: 0\n    tx_queues: 1\n" +
                       kTwoOwners + "action: {type: forward, tx_port: out}\n",
                   "t.yaml:6:16: ports[1].tx_queues",
                   "port 'out' is the forward tx_port and needs one TX queue per owner lcore (2), has 1"},
        BadProfile{"reflect_port_fewer_tx_queues_than_owners",
                   "ports:\n  - name: wire\n    device: net_null0\n    rx_queues: 2\n" + kTwoOwners +
                       "action: {type: reflect}\n",
                   "t.yaml:2:5: ports[0].tx_queues",
                   "port 'wire' is an RX port and action.type is reflect and needs one TX queue per owner lcore "
                   "(2), has 1"}),
    case_name);

// --- issue 26: backends and delivery ----------------------------------------------

const std::string kMac1 = "\"02:00:00:00:00:01\"";
const std::string kMac2 = "\"02:00:00:00:00:02\"";

// kBase and backends from line 5 ("  - {name: a, mac: M, " puts the next key at column 41).
std::string with_backends(const std::string& backend_lines) { return kBase + "backends:\n" + backend_lines; }

// A 2-octet QUIC-LB config (line 5) and backends from line 7.
std::string with_lb_backends(const std::string& backend_lines) {
  return kBase + "steering:\n  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 6}]\nbackends:\n" +
         backend_lines;
}

// Forward on "wire" with action.delivery on line 6 (its map at column 13) and
// backends from line 8.
std::string with_delivery(const std::string& delivery, const std::string& backend_lines) {
  return kPorts + kLcores + "action:\n  type: forward\n  tx_port: wire\n  delivery: " + delivery + "\nbackends:\n" +
         backend_lines;
}

INSTANTIATE_TEST_SUITE_P(
    Backends, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"backends_not_a_list", kBase + "backends: {name: a}\n", "t.yaml:4:11: backends",
                   "expected a list, got a map"},
        BadProfile{"backends_empty", kBase + "backends: []\n", "t.yaml:4:11: backends",
                   "at least one backend is required"},
        BadProfile{"backend_unknown_key", with_backends("  - {name: a, mac: " + kMac1 + ", port: 1}\n"),
                   "t.yaml:5:41: backends[0].port", "unknown key"},
        BadProfile{"backend_name_missing", with_backends("  - {mac: " + kMac1 + "}\n"), "t.yaml:5:5: backends[0].name",
                   "required key is missing"},
        BadProfile{"backend_name_with_space", with_backends("  - {name: \"a b\", mac: " + kMac1 + "}\n"),
                   "t.yaml:5:12: backends[0].name", "backend names are 1..32 of A-Z a-z 0-9 _ . -, got 'a b'"},
        BadProfile{"backend_name_too_long", with_backends("  - {name: " + std::string(33, 'a') + ", mac: " + kMac1 + "}\n"),
                   "t.yaml:5:12: backends[0].name", "backend names are 1..32"},
        BadProfile{"backend_name_duplicate",
                   with_backends("  - {name: a.1, mac: " + kMac1 + "}\n  - {name: a.1, mac: " + kMac2 + "}\n"),
                   "t.yaml:6:12: backends[1].name", "duplicate backend name 'a.1' (also backends[0])"},
        BadProfile{"backend_mac_missing", with_backends("  - {name: a}\n"), "t.yaml:5:5: backends[0].mac",
                   "required key is missing"},
        BadProfile{"backend_mac_five_octets", with_backends("  - {name: a, mac: \"02:00:00:00:01\"}\n"),
                   "t.yaml:5:20: backends[0].mac", "expected a MAC address as six hex octets joined by ':'"},
        BadProfile{"backend_mac_dashes", with_backends("  - {name: a, mac: \"02-00-00-00-00-01\"}\n"),
                   "t.yaml:5:20: backends[0].mac", "got '02-00-00-00-00-01'"},
        BadProfile{"backend_mac_not_hex", with_backends("  - {name: a, mac: \"02:00:00:00:00:0g\"}\n"),
                   "t.yaml:5:20: backends[0].mac", "expected a MAC address"},
        BadProfile{"backend_mac_multicast", with_backends("  - {name: a, mac: \"01:00:5e:00:00:01\"}\n"),
                   "t.yaml:5:20: backends[0].mac", "a group address: multicast or broadcast"},
        BadProfile{"backend_mac_zero", with_backends("  - {name: a, mac: \"00:00:00:00:00:00\"}\n"),
                   "t.yaml:5:20: backends[0].mac", "all zeros"},
        BadProfile{"backend_vxlan_mac_broadcast",
                   with_backends("  - {name: a, mac: " + kMac1 + ", vxlan_mac: \"ff:ff:ff:ff:ff:ff\"}\n"),
                   "t.yaml:5:52: backends[0].vxlan_mac", "expected a unicast MAC address"},
        BadProfile{"backend_ipv4_three_octets", with_backends("  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0}\n"),
                   "t.yaml:5:47: backends[0].ipv4", "expected an IPv4 address (dotted quad, e.g. 10.0.0.1), got '10.0.0'"},
        BadProfile{"backend_ipv4_is_ipv6", with_backends("  - {name: a, mac: " + kMac1 + ", ipv4: \"fd00::1\"}\n"),
                   "t.yaml:5:47: backends[0].ipv4", "expected an IPv4 address"},
        BadProfile{"backend_ipv4_multicast", with_backends("  - {name: a, mac: " + kMac1 + ", ipv4: 224.0.0.1}\n"),
                   "t.yaml:5:47: backends[0].ipv4", "expected a unicast IPv4 address, got '224.0.0.1'"},
        BadProfile{"backend_ipv4_unspecified", with_backends("  - {name: a, mac: " + kMac1 + ", ipv4: 0.0.0.0}\n"),
                   "t.yaml:5:47: backends[0].ipv4", "expected a unicast IPv4 address"},
        BadProfile{"backend_ipv6_two_gaps", with_backends("  - {name: a, mac: " + kMac1 + ", ipv6: \"fd00::1::2\"}\n"),
                   "t.yaml:5:47: backends[0].ipv6", "expected an IPv6 address"},
        BadProfile{"backend_ipv6_multicast", with_backends("  - {name: a, mac: " + kMac1 + ", ipv6: \"ff02::1\"}\n"),
                   "t.yaml:5:47: backends[0].ipv6", "expected a unicast IPv6 address"},
        BadProfile{"backend_ipv4_duplicate",
                   with_backends("  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1}\n  - {name: b, mac: " + kMac2 +
                                 ", ipv4: 10.0.0.1}\n"),
                   "t.yaml:6:47: backends[1].ipv4", "duplicate address 10.0.0.1 (also backends[0])"},
        BadProfile{"backend_ipv6_duplicate_other_spelling",
                   with_backends("  - {name: a, mac: " + kMac1 + ", ipv6: \"fd00::1\"}\n  - {name: b, mac: " + kMac2 +
                                 ", ipv6: \"FD00:0:0::0001\"}\n"),
                   "t.yaml:6:47: backends[1].ipv6", "duplicate address fd00::1 (also backends[0])"},
        BadProfile{"backend_weight_zero", with_backends("  - {name: a, mac: " + kMac1 + ", weight: 0}\n"),
                   "t.yaml:5:49: backends[0].weight", "must be in 1..1000, got 0"},
        BadProfile{"backend_weight_above_1000", with_backends("  - {name: a, mac: " + kMac1 + ", weight: 1001}\n"),
                   "t.yaml:5:49: backends[0].weight", "must be in 1..1000, got 1001"},
        BadProfile{"backend_bad_state", with_backends("  - {name: a, mac: " + kMac1 + ", state: gone}\n"),
                   "t.yaml:5:48: backends[0].state", "expected one of active | draining | down, got 'gone'"},
        BadProfile{"backend_owner_not_owner_lcore", with_backends("  - {name: a, mac: " + kMac1 + ", owner: 2}\n"),
                   "t.yaml:5:48: backends[0].owner", "lcore 2 is not an owner lcore (owners: 1)"},
        BadProfile{"no_backend_active",
                   with_backends("  - {name: a, mac: " + kMac1 + ", state: draining}\n  - {name: b, mac: " + kMac2 +
                                 ", state: down}\n"),
                   "t.yaml:5:3: backends", "no backend is active; at least one must take new connections"},
        BadProfile{"backends_with_steering_servers",
                   with_servers("    - {server_id: \"0001\", owner: 1}\n") + "backends:\n  - {name: a, mac: " + kMac1 +
                       "}\n",
                   "t.yaml:9:3: backends", "cannot be combined with steering.servers (line 7)"},
        BadProfile{"backend_server_id_without_config",
                   with_backends("  - {name: a, mac: " + kMac1 + ", server_ids: [\"0001\"]}\n"),
                   "t.yaml:5:54: backends[0].server_ids[0]",
                   "server ID is 2 octets, but no steering.quic_lb config has that server_id_len (have: none)"},
        BadProfile{"backend_server_id_wrong_length",
                   with_lb_backends("  - {name: a, mac: " + kMac1 + ", server_ids: [\"000001\"]}\n"),
                   "t.yaml:7:54: backends[0].server_ids[0]", "server ID is 3 octets, but no steering.quic_lb config "
                                                              "has that server_id_len (have: 2)"},
        BadProfile{"backend_server_id_not_hex",
                   with_lb_backends("  - {name: a, mac: " + kMac1 + ", server_ids: [\"00zz\"]}\n"),
                   "t.yaml:7:54: backends[0].server_ids[0]", "('z' at position 3 is not a hex digit)"},
        BadProfile{"backend_server_ids_not_a_list",
                   with_lb_backends("  - {name: a, mac: " + kMac1 + ", server_ids: \"0001\"}\n"),
                   "t.yaml:7:53: backends[0].server_ids", "expected a list"},
        BadProfile{"backend_server_id_duplicate_across_backends",
                   with_lb_backends("  - {name: a, mac: " + kMac1 + ", server_ids: [\"0001\"]}\n  - {name: b, mac: " +
                                    kMac2 + ", server_ids: [\"0002\", \"0001\"]}\n"),
                   "t.yaml:8:62: backends[1].server_ids[1]", "duplicate server ID 0001 (also backends[0])"},
        BadProfile{"backend_server_id_duplicate_other_case",
                   with_lb_backends("  - {name: a, mac: " + kMac1 + ", server_ids: [\"00ab\", \"00AB\"]}\n"),
                   "t.yaml:7:62: backends[0].server_ids[1]", "duplicate server ID 00ab (also backends[0])"}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Delivery, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"delivery_with_sink", kPorts + kLcores + "action: {type: sink, delivery: {mode: as_is}}\n",
                   "t.yaml:3:32: action.delivery", "only allowed when action.type is forward (type is sink)"},
        BadProfile{"delivery_with_reflect", kPorts + kLcores + "action: {type: reflect, delivery: {mode: as_is}}\n",
                   "t.yaml:3:35: action.delivery", "only allowed when action.type is forward (type is reflect)"},
        BadProfile{"delivery_unknown_key", with_delivery("{mode: as_is, vni: 1}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:27: action.delivery.vni", "unknown key (allowed here: mode, source_ipv4, source_ipv6"},
        BadProfile{"delivery_bad_mode", with_delivery("{mode: gre}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:20: action.delivery.mode", "expected one of as_is | l2 | ipip | vxlan, got 'gre'"},
        BadProfile{"l2_without_backends", kPorts + kLcores + "action: {type: forward, tx_port: wire, delivery: {mode: l2}}\n",
                   "t.yaml:3:57: action.delivery.mode",
                   "mode l2 delivers to backends, but the profile lists none (add backends)"},
        BadProfile{"vxlan_without_backends",
                   kPorts + kLcores + "action: {type: forward, tx_port: wire, delivery: {mode: vxlan}}\n",
                   "t.yaml:3:57: action.delivery.mode", "mode vxlan delivers to backends"},
        BadProfile{"vni_above_24_bits", with_delivery("{vxlan_vni: 16777216}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:25: action.delivery.vxlan_vni", "must be in 0..16777215, got 16777216"},
        BadProfile{"vxlan_port_zero", with_delivery("{vxlan_port: 0}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:26: action.delivery.vxlan_port", "must be in 1..65535, got 0"},
        BadProfile{"ttl_zero", with_delivery("{ttl: 0}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:19: action.delivery.ttl", "must be in 1..255, got 0"},
        BadProfile{"ttl_256", with_delivery("{ttl: 256}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:19: action.delivery.ttl", "must be in 1..255, got 256"},
        BadProfile{"icmp_rate_above_1M", with_delivery("{icmp_too_big_per_s: 1000001}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:34: action.delivery.icmp_too_big_per_s", "must be in 0..1000000, got 1000001"},
        BadProfile{"source_ipv4_bad", with_delivery("{source_ipv4: 10.0.0.256}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:27: action.delivery.source_ipv4", "expected an IPv4 address"},
        BadProfile{"source_ipv6_bad", with_delivery("{source_ipv6: \"fd00:::1\"}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:27: action.delivery.source_ipv6", "expected an IPv6 address"},
        BadProfile{"delivery_vxlan_mac_multicast",
                   with_delivery("{vxlan_mac: \"33:33:00:00:00:01\"}", "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:6:25: action.delivery.vxlan_mac", "a group address"},
        BadProfile{"ipip_backend_without_address",
                   with_delivery("{mode: ipip, source_ipv4: 10.0.0.254}",
                                 "  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1}\n  - {name: b, mac: " + kMac2 + "}\n"),
                   "t.yaml:9:5: backends[1].ipv4",
                   "required when action.delivery.mode is ipip: backends[1] ('b') needs an address to be reached at "
                   "(ipv4, ipv6 or both)"},
        BadProfile{"vxlan_backend_without_address",
                   with_delivery("{mode: vxlan, source_ipv4: 10.0.0.254, vxlan_mac: " + kMac2 + "}",
                                 "  - {name: a, mac: " + kMac1 + "}\n"),
                   "t.yaml:8:5: backends[0].ipv4", "required when action.delivery.mode is vxlan"},
        BadProfile{"ipip_ipv4_backend_without_source_ipv4",
                   with_delivery("{mode: ipip, source_ipv6: \"fd00::fe\"}",
                                 "  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1}\n"),
                   "t.yaml:6:13: action.delivery.source_ipv4",
                   "required when action.delivery.mode is ipip: backends[0] ('a') is reached over IPv4"},
        BadProfile{"ipip_dual_stack_backend_without_source_ipv6",
                   with_delivery("{mode: ipip, source_ipv4: 10.0.0.254}",
                                 "  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1}\n  - {name: b, mac: " + kMac2 +
                                     ", ipv4: 10.0.0.2, ipv6: \"fd00::2\"}\n"),
                   "t.yaml:6:13: action.delivery.source_ipv6",
                   "required when action.delivery.mode is ipip: backends[1] ('b') is reached over IPv6"},
        BadProfile{"vxlan_ipv6_backend_without_source_ipv6",
                   with_delivery("{mode: vxlan, vxlan_mac: " + kMac2 + "}",
                                 "  - {name: a, mac: " + kMac1 + ", ipv6: \"fd00::1\"}\n"),
                   "t.yaml:6:13: action.delivery.source_ipv6", "backends[0] ('a') is reached over IPv6"},
        BadProfile{"vxlan_backend_without_any_vxlan_mac",
                   with_delivery("{mode: vxlan, source_ipv4: 10.0.0.254}",
                                 "  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1, vxlan_mac: " + kMac2 +
                                     "}\n  - {name: b, mac: " + kMac2 + ", ipv4: 10.0.0.2}\n"),
                   "t.yaml:9:5: backends[1].vxlan_mac",
                   "required when action.delivery.mode is vxlan and action.delivery.vxlan_mac is not given"}),
    case_name);

// `owners` owner lcores (ids 1..owners) and the given backends, forward on "wire".
std::string fleet(unsigned owners, const std::string& backend_lines, const std::string& delivery = "{mode: l2}") {
  std::string y = "ports: [{name: wire, device: net_null0, tx_queues: " + std::to_string(owners) +
                  "}]\nlcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n";
  for (unsigned id = 2; id <= owners; ++id) y += "  - {id: " + std::to_string(id) + ", owner: true}\n";
  return y + "steering:\n  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 6}, "
             "{config_id: 1, server_id_len: 3, nonce_len: 6}]\n"
             "action: {type: forward, tx_port: wire, delivery: " + delivery + "}\nbackends:\n" + backend_lines;
}

// --- peer_sync ------------------------------------------------------------------

const std::string kSyncKey = "\"" + std::string(62, '1') + "2f\"";
// One backend (line 5), peer_sync from line 6 with `fields` from line 7.
std::string with_peer_sync(const std::string& fields) {
  return with_backends("  - {name: a, mac: " + kMac1 + "}\n") + "peer_sync:\n" + fields;
}

INSTANTIATE_TEST_SUITE_P(
    PeerSync, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"peer_sync_without_backends",
                   kBase + "peer_sync:\n  listen: \"10.0.0.1:7700\"\n  peers: [\"10.0.0.2:7700\"]\n  key: " + kSyncKey + "\n",
                   "t.yaml:5:3: peer_sync", "the profile lists none"},
        BadProfile{"peer_sync_listen_missing", with_peer_sync("  peers: [\"10.0.0.2:7700\"]\n"),
                   "t.yaml:7:3: peer_sync.listen", "required key is missing"},
        BadProfile{"peer_sync_listen_no_port", with_peer_sync("  listen: \"10.0.0.1:0\"\n"),
                   "t.yaml:7:11: peer_sync.listen", "needs a port"},
        BadProfile{"peer_sync_no_peers", with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: []\n"),
                   "t.yaml:8:10: peer_sync.peers", "at least one peer"},
        BadProfile{"peer_sync_peer_is_self",
                   with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: [\"10.0.0.1:7700\"]\n"),
                   "t.yaml:8:11: peer_sync.peers[0]", "own listen address"},
        BadProfile{"peer_sync_peer_other_family",
                   with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: [\"[fd00::2]:7700\"]\n"),
                   "t.yaml:8:11: peer_sync.peers[0]", "family"},
        BadProfile{"peer_sync_key_short",
                   with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: [\"10.0.0.2:7700\"]\n  key: \"0011\"\n"),
                   "t.yaml:9:8: peer_sync.key", "expected 64 hex digits"},
        BadProfile{"peer_sync_key_zero",
                   with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: [\"10.0.0.2:7700\"]\n  key: \"" +
                                  std::string(64, '0') + "\"\n"),
                   "t.yaml:9:8: peer_sync.key", "all zeros"},
        BadProfile{"peer_sync_share_zero",
                   with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: [\"10.0.0.2:7700\"]\n  key: " + kSyncKey +
                                  "\n  max_peer_share: 0\n"),
                   "t.yaml:10:19: peer_sync.max_peer_share", "above 0"},
        BadProfile{"peer_sync_ring_not_power_of_two",
                   with_peer_sync("  listen: \"10.0.0.1:7700\"\n  peers: [\"10.0.0.2:7700\"]\n  key: " + kSyncKey +
                                  "\n  ring_size: 1000\n"),
                   "t.yaml:10:14: peer_sync.ring_size", "power of two"}),
    case_name);

TEST(PeerSync, DecodesEveryFieldAndDumpsThem) {
  const qs::Profile p = qs::parse_profile(
      with_peer_sync("  listen: \"[fd00::1]:7700\"\n  peers: [\"[fd00::2]:7701\", \"[fd00::3]:7700\"]\n  key: " +
                     kSyncKey +
                     "\n  max_peer_share: 0.5\n  entries_per_s: 5000\n  max_skew_ms: 2000\n"
                     "  resync_timeout_ms: 0\n  ring_size: 1024\n"),
      "t.yaml");
  const qs::PeerSyncConfig& x = p.peer_sync;
  ASSERT_TRUE(x.enabled);
  EXPECT_TRUE(x.listen.ipv6);
  EXPECT_EQ(x.listen.host, "fd00::1");
  ASSERT_EQ(x.peers.size(), 2u);
  EXPECT_EQ(x.peers[0].port, 7701);
  EXPECT_EQ(x.key[31], 0x2f);
  EXPECT_EQ(x.max_peer_share, 0.5);
  EXPECT_EQ(x.entries_per_s, 5000u);
  EXPECT_EQ(x.max_skew_ms, 2000u);
  EXPECT_EQ(x.resync_timeout_ms, 0u);
  EXPECT_EQ(x.ring_size, 1024u);
  const qs::Profile again = qs::parse_profile(qs::dump_profile(p, qs::DumpKeys::kInFull), "dump.yaml");
  EXPECT_EQ(qs::dump_profile(again, qs::DumpKeys::kInFull), qs::dump_profile(p, qs::DumpKeys::kInFull));
  EXPECT_FALSE(qs::parse_profile(with_backends("  - {name: a, mac: " + kMac1 + "}\n"), "t.yaml").peer_sync.enabled);
}

// --- health_checks ----------------------------------------------------------------

// A backend behind a port with a tap and services: health_checks on line 10,
// `fields` from line 11.
std::string with_health_checks(const std::string& fields, const std::string& port_keys = ", tx_queues: 2, tap: qs0",
                               const std::string& mode = "l2") {
  return "ports:\n  - {name: wire, device: net_null0" + port_keys +
         "}\n"
         "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n"
         "services:\n  - {name: web, addresses: [10.0.9.1, \"fd00::9:1\"], udp_ports: [443, 8443]}\n"
         "backends:\n  - {name: a, mac: \"02:00:00:00:00:01\", ipv4: 10.0.0.1}\n"
         "action: {type: forward, tx_port: wire, delivery: {mode: " + mode +
         ", source_ipv4: 10.0.0.254}}\n"
         "health_checks:\n" + fields;
}

INSTANTIATE_TEST_SUITE_P(
    HealthChecks, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"health_timeout_not_below_interval", with_health_checks("  interval_ms: 100\n  timeout_ms: 100\n"),
                   "t.yaml:12:15: health_checks.timeout_ms", "below interval_ms"},
        BadProfile{"health_rise_zero", with_health_checks("  rise: 0\n"), "t.yaml:11:9: health_checks.rise",
                   "must be in 1..100"},
        BadProfile{"health_without_tap", with_health_checks("  fall: 2\n", ", tx_queues: 2"), "t.yaml:11:3: health_checks",
                   "no port has a tap"},
        BadProfile{"health_without_probe_queue",
                   "ports:\n  - {name: wire, device: net_null0, tx_queues: 2, tap: qs0}\n"
                   "  - {name: servers, device: net_null1, rx_queues: 0, tx_queues: 1}\n"
                   "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n"
                   "services:\n  - {name: web, addresses: [10.0.9.1], udp_ports: [443]}\n"
                   "backends:\n  - {name: a, mac: \"02:00:00:00:00:01\"}\n"
                   "action: {type: forward, tx_port: servers, delivery: {mode: l2}}\n"
                   "health_checks: {fall: 2}\n",
                   "t.yaml:3:65: ports[1].tx_queues", "health_checks send their probes"},
        BadProfile{"health_as_is", with_health_checks("  fall: 2\n", ", tx_queues: 2, tap: qs0", "as_is"),
                   "t.yaml:11:3: health_checks", "as_is names none"},
        BadProfile{"health_target_not_a_service", with_health_checks("  targets: [\"10.0.9.2:443\"]\n"),
                   "t.yaml:11:13: health_checks.targets[0]", "no service's address"},
        BadProfile{"health_target_twice", with_health_checks("  targets: [\"10.0.9.1:443\", \"10.0.9.1:443\"]\n"),
                   "t.yaml:11:29: health_checks.targets[1]", "listed twice"},
        BadProfile{"health_tap_port_unknown", with_health_checks("  tap_port: nic\n"),
                   "t.yaml:11:13: health_checks.tap_port", "unknown port"},
        BadProfile{"health_unknown_key", with_health_checks("  rate: 5\n"), "t.yaml:11:3: health_checks.rate",
                   "unknown key"}),
    case_name);

TEST(HealthChecks, DecodesEveryFieldDefaultsTheTargetsAndDumpsThem) {
  const qs::Profile d = qs::parse_profile(with_health_checks("  fall: 4\n"), "t.yaml");
  const qs::HealthChecksConfig& x = d.health_checks;
  ASSERT_TRUE(x.enabled);
  EXPECT_EQ(x.interval_ms, 1000u);
  EXPECT_EQ(x.timeout_ms, 500u);
  EXPECT_EQ(x.rise, 2u);
  EXPECT_EQ(x.fall, 4u);
  EXPECT_EQ(x.probe_udp_port, 61000);
  EXPECT_EQ(x.tap_port, 0);
  ASSERT_EQ(x.targets.size(), 2u) << "the first service's first address of each family, its first port";
  EXPECT_EQ(qs::health_target_text(x.targets[0]), "10.0.9.1:443");
  EXPECT_EQ(qs::health_target_text(x.targets[1]), "[fd00::9:1]:443");
  const qs::Profile p = qs::parse_profile(
      with_health_checks("  interval_ms: 200\n  timeout_ms: 150\n  rise: 3\n  fall: 1\n  probes_per_s: 50\n"
                         "  probe_udp_port: 7000\n  targets: [\"[fd00::9:1]:8443\"]\n  tap_port: wire\n"),
      "t.yaml");
  EXPECT_EQ(p.health_checks.interval_ms, 200u);
  EXPECT_EQ(p.health_checks.probes_per_s, 50u);
  ASSERT_EQ(p.health_checks.targets.size(), 1u);
  EXPECT_TRUE(p.health_checks.targets[0].ipv6);
  EXPECT_EQ(p.health_checks.targets[0].udp_port, 8443);
  const qs::Profile again = qs::parse_profile(qs::dump_profile(p, qs::DumpKeys::kInFull), "dump.yaml");
  EXPECT_EQ(qs::dump_profile(again, qs::DumpKeys::kInFull), qs::dump_profile(p, qs::DumpKeys::kInFull));
  EXPECT_FALSE(qs::parse_profile(with_backends("  - {name: a, mac: " + kMac1 + "}\n"), "t.yaml").health_checks.enabled);
}

TEST(Backends, DecodesEveryField) {
  const qs::Profile p = qs::parse_profile(
      fleet(2,
            "  - name: srv-a.1\n"
            "    server_ids: [\"0a01\", 0002, \"0B0C0D\"]\n"
            "    ipv4: 10.77.2.11\n"
            "    ipv6: \"FD77::0011\"\n"
            "    mac: \"02:00:00:77:02:1A\"\n"
            "    vxlan_mac: \"02:00:00:77:03:11\"\n"
            "    weight: 1000\n"
            "    state: draining\n"
            "    owner: 2\n"
            "  - {name: b, mac: \"02:00:00:00:00:02\"}\n"),
      "t.yaml");
  ASSERT_EQ(p.steering.backends.size(), 2u);
  const qs::BackendConfig& a = p.steering.backends[0];
  EXPECT_EQ(a.name, "srv-a.1");
  EXPECT_EQ(a.server_ids, (std::vector<std::vector<std::uint8_t>>{{0x0a, 0x01}, {0x00, 0x02}, {0x0b, 0x0c, 0x0d}}));
  ASSERT_TRUE(a.ipv4.has_value());
  EXPECT_EQ(*a.ipv4, (std::array<std::uint8_t, 4>{10, 77, 2, 11}));
  ASSERT_TRUE(a.ipv6.has_value());
  EXPECT_EQ(*a.ipv6, (std::array<std::uint8_t, 16>{0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11}));
  EXPECT_EQ(a.mac, (std::array<std::uint8_t, 6>{0x02, 0, 0, 0x77, 0x02, 0x1a}));
  ASSERT_TRUE(a.vxlan_mac.has_value());
  EXPECT_EQ(*a.vxlan_mac, (std::array<std::uint8_t, 6>{0x02, 0, 0, 0x77, 0x03, 0x11}));
  EXPECT_EQ(a.weight, 1000u);
  EXPECT_EQ(a.state, qs::BackendState::kDraining);
  EXPECT_EQ(a.owner_lcore, 2u);
  EXPECT_EQ(a.slot, 0);
  // Defaults; the first backend without an owner goes to the first owner.
  const qs::BackendConfig& b = p.steering.backends[1];
  EXPECT_TRUE(b.server_ids.empty());
  EXPECT_FALSE(b.ipv4.has_value());
  EXPECT_FALSE(b.ipv6.has_value());
  EXPECT_FALSE(b.vxlan_mac.has_value());
  EXPECT_EQ(b.weight, 1u);
  EXPECT_EQ(b.state, qs::BackendState::kActive);
  EXPECT_EQ(b.owner_lcore, 1u);
  EXPECT_EQ(b.slot, 1);
  // Server IDs live in the backends, not in the routes.
  EXPECT_TRUE(p.steering.server_routes.empty());
  EXPECT_EQ(p.action.delivery.mode, qs::DeliveryMode::kL2);
}

TEST(Backends, WithoutThemNothingChanges) {
  const qs::Profile p = qs::parse_profile(kPorts + kLcores + "action: {type: forward, tx_port: wire}\n", "t.yaml");
  EXPECT_TRUE(p.steering.backends.empty());
  const qs::DeliveryConfig& d = p.action.delivery;
  EXPECT_EQ(d.mode, qs::DeliveryMode::kAsIs);
  EXPECT_FALSE(d.source_ipv4.has_value());
  EXPECT_FALSE(d.source_ipv6.has_value());
  EXPECT_EQ(d.vxlan_vni, 1u);
  EXPECT_EQ(d.vxlan_port, 4789);
  EXPECT_FALSE(d.vxlan_mac.has_value());
  EXPECT_EQ(d.ttl, 64);
  EXPECT_EQ(d.icmp_too_big_per_s, 100u);
  const std::string dump = qs::dump_profile(p);
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("backends")));
  EXPECT_THAT(dump, HasSubstr("mode: as_is"));
  // Sink and reflect have no delivery, and the dump writes none.
  EXPECT_THAT(qs::dump_profile(qs::parse_profile(kBase, "t.yaml")), ::testing::Not(HasSubstr("delivery")));
  // Backends need no delivery mode: as_is and sink take them too.
  EXPECT_EQ(qs::parse_profile(with_backends("  - {name: a, mac: " + kMac1 + "}\n"), "t.yaml").steering.backends.size(),
            1u);
}

// The k-th backend without an owner goes to owner_lcores[k % owners], in
// profile order; backends with an owner do not count.
TEST(Backends, OwnersSpreadEvenlyInProfileOrder) {
  std::string lines;
  for (int i = 0; i < 7; ++i) {
    lines += "  - {name: s" + std::to_string(i) + ", mac: \"02:00:00:00:00:0" + std::to_string(i + 1) + "\"" +
             (i == 1 ? ", owner: 3" : i == 4 ? ", owner: 1" : "") + "}\n";
  }
  const qs::Profile p = qs::parse_profile(fleet(3, lines), "t.yaml");
  std::vector<unsigned> owners;
  std::vector<std::uint16_t> slots;
  for (const qs::BackendConfig& b : p.steering.backends) {
    owners.push_back(b.owner_lcore);
    slots.push_back(b.slot);
  }
  // Unassigned s0 s2 s3 s5 s6 -> 1 2 3 1 2; s1 -> 3 and s4 -> 1 as given.
  EXPECT_EQ(owners, (std::vector<unsigned>{1, 3, 2, 3, 1, 1, 2}));
  EXPECT_EQ(slots, (std::vector<std::uint16_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(Backends, DrainingAndDownAreFineWhileOneIsActive) {
  const qs::Profile p = qs::parse_profile(
      with_backends("  - {name: a, mac: " + kMac1 + ", state: down}\n  - {name: b, mac: " + kMac2 +
                    ", state: draining}\n  - {name: c, mac: \"02:00:00:00:00:03\"}\n"),
      "t.yaml");
  ASSERT_EQ(p.steering.backends.size(), 3u);
  EXPECT_EQ(p.steering.backends[0].state, qs::BackendState::kDown);
  EXPECT_EQ(p.steering.backends[1].state, qs::BackendState::kDraining);
  EXPECT_EQ(p.steering.backends[2].state, qs::BackendState::kActive);
}

// 4096 backends load; one more is refused at the list.
TEST(Backends, AtMostKMaxBackends) {
  std::string lines;
  char line[96];
  for (unsigned i = 0; i < qs::kMaxBackends; ++i) {
    std::snprintf(line, sizeof line, "  - {name: b%u, mac: \"02:00:00:00:%02x:%02x\", ipv4: 10.1.%u.%u}\n", i,
                  i >> 8, i & 0xff, i >> 8, i & 0xff);
    lines += line;
  }
  const qs::Profile p = qs::parse_profile(with_backends(lines), "t.yaml");
  ASSERT_EQ(p.steering.backends.size(), qs::kMaxBackends);
  EXPECT_EQ(p.steering.backends.back().slot, qs::kMaxBackends - 1);
  EXPECT_THAT(error_of(with_backends(lines + "  - {name: extra, mac: " + kMac1 + "}\n")),
              StartsWith("t.yaml:5:3: backends: at most 4096 backends, got 4097"));
}

// `fleet` with steering.backend_table_size set to `size` (YAML text).
std::string sized_fleet(const std::string& size, const std::string& backend_lines) {
  std::string y = fleet(2, backend_lines);
  y.replace(y.find("steering:\n"), 10, "steering:\n  backend_table_size: " + size + "\n");
  return y;
}

// steering.backend_table_size: 0 (or absent) chooses the size from the
// active backends' weights; a prime sets it. The dump keeps what was given
// and says the size in a comment, which --check prints.
TEST(Backends, TableSizeIsAPrimeOrAutomatic) {
  const std::string three = "  - {name: a, mac: \"02:00:00:00:00:01\"}\n  - {name: b, mac: \"02:00:00:00:00:02\"}\n"
                            "  - {name: c, mac: \"02:00:00:00:00:03\", weight: 2, state: draining}\n";
  const qs::Profile automatic = qs::parse_profile(fleet(2, three), "t.yaml");
  EXPECT_EQ(automatic.steering.backend_table_size, 0u);
  EXPECT_EQ(qs::backend_hash_table_size(automatic.steering), 1048583u);
  EXPECT_THAT(qs::dump_profile(automatic), HasSubstr("backend_table_size: 0  # automatic: 1048583 slots, 2048 KiB\n"));
  EXPECT_EQ(qs::parse_profile(sized_fleet("0", three), "t.yaml").steering.backend_table_size, 0u);

  const qs::Profile sized = qs::parse_profile(sized_fleet("16777259", three), "t.yaml");
  EXPECT_EQ(sized.steering.backend_table_size, 16777259u);
  EXPECT_EQ(qs::backend_hash_table_size(sized.steering), 16777259u);
  const std::string dump = qs::dump_profile(sized, qs::DumpKeys::kInFull);
  EXPECT_THAT(dump, HasSubstr("backend_table_size: 16777259  # 16777259 slots, 32768 KiB\n"));  // 32 Mi + 86 octets
  EXPECT_EQ(qs::parse_profile(dump, "dump.yaml").steering.backend_table_size, 16777259u);
  EXPECT_EQ(qs::parse_profile(sized_fleet("3", three), "t.yaml").steering.backend_table_size, 3u);

  EXPECT_THAT(error_of(sized_fleet("1048581", three)),
              StartsWith("t.yaml:6:23: steering.backend_table_size: must be a prime (or 0: the default "
                         "size), got 1048581"));
  EXPECT_THAT(error_of(sized_fleet("16777261", three)),
              StartsWith("t.yaml:6:23: steering.backend_table_size: must be in 0..16777259, got 16777261"));
  EXPECT_THAT(error_of(sized_fleet("-1", three)), StartsWith("t.yaml:6:23: steering.backend_table_size: must be in"));
  EXPECT_THAT(error_of(sized_fleet("2", three)),
              StartsWith("t.yaml:6:23: steering.backend_table_size: must be at least the number of backends (3), "
                         "got 2"));
  EXPECT_THAT(error_of(kBase + "steering: {backend_table_size: 65537}\n"),
              HasSubstr("steering.backend_table_size: sizes the backend hash, but the profile lists no backends"));
  EXPECT_NO_THROW(qs::parse_profile(kBase + "steering: {backend_table_size: 0}\n", "t.yaml"));
}

TEST(Delivery, DecodesEveryField) {
  const qs::Profile p = qs::parse_profile(
      with_delivery("{mode: vxlan, source_ipv4: 10.77.2.1, source_ipv6: \"fd77::1\", vxlan_vni: 16777215, "
                    "vxlan_port: 8472, vxlan_mac: \"02:00:00:77:03:01\", ttl: 1, icmp_too_big_per_s: 0}",
                    "  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1, ipv6: \"fd00::1\"}\n"),
      "t.yaml");
  const qs::DeliveryConfig& d = p.action.delivery;
  EXPECT_EQ(d.mode, qs::DeliveryMode::kVxlan);
  ASSERT_TRUE(d.source_ipv4.has_value());
  EXPECT_EQ(*d.source_ipv4, (std::array<std::uint8_t, 4>{10, 77, 2, 1}));
  ASSERT_TRUE(d.source_ipv6.has_value());
  EXPECT_EQ((*d.source_ipv6)[0], 0xfd);
  EXPECT_EQ((*d.source_ipv6)[15], 0x01);
  EXPECT_EQ(d.vxlan_vni, 16777215u);
  EXPECT_EQ(d.vxlan_port, 8472);
  ASSERT_TRUE(d.vxlan_mac.has_value());
  EXPECT_EQ(*d.vxlan_mac, (std::array<std::uint8_t, 6>{0x02, 0, 0, 0x77, 0x03, 0x01}));
  EXPECT_EQ(d.ttl, 1);
  EXPECT_EQ(d.icmp_too_big_per_s, 0u);
}

TEST(Delivery, EachModeAcceptsWhatItNeeds) {
  const std::string a4 = "  - {name: a, mac: " + kMac1 + ", ipv4: 10.0.0.1}\n";
  const std::string b6 = "  - {name: b, mac: " + kMac2 + ", ipv6: \"fd00::2\"}\n";
  const auto mode = [](const std::string& yaml) { return qs::parse_profile(yaml, "t.yaml").action.delivery.mode; };
  // l2: a mac is all a backend needs.
  EXPECT_EQ(mode(with_delivery("{mode: l2}", "  - {name: a, mac: " + kMac1 + "}\n")), qs::DeliveryMode::kL2);
  // ipip: only the sources of the families the backends are reached over.
  EXPECT_EQ(mode(with_delivery("{mode: ipip, source_ipv4: 10.0.0.254}", a4)), qs::DeliveryMode::kIpip);
  EXPECT_EQ(mode(with_delivery("{mode: ipip, source_ipv6: \"fd00::fe\"}", b6)), qs::DeliveryMode::kIpip);
  EXPECT_EQ(mode(with_delivery("{mode: ipip, source_ipv4: 10.0.0.254, source_ipv6: \"fd00::fe\"}", a4 + b6)),
            qs::DeliveryMode::kIpip);
  // vxlan: the fleet-wide inner MAC stands in for a backend's own.
  EXPECT_EQ(mode(with_delivery("{mode: vxlan, source_ipv4: 10.0.0.254, vxlan_mac: \"02:00:00:00:03:01\"}", a4)),
            qs::DeliveryMode::kVxlan);
  EXPECT_EQ(mode(with_delivery("{mode: vxlan, source_ipv6: \"fd00::fe\"}",
                               "  - {name: b, mac: " + kMac2 + ", ipv6: \"fd00::2\", vxlan_mac: " + kMac1 + "}\n")),
            qs::DeliveryMode::kVxlan);
}

TEST(Delivery, NamesAreTheProfilesSpelling) {
  EXPECT_STREQ(qs::delivery_mode_name(qs::DeliveryMode::kAsIs), "as_is");
  EXPECT_STREQ(qs::delivery_mode_name(qs::DeliveryMode::kL2), "l2");
  EXPECT_STREQ(qs::delivery_mode_name(qs::DeliveryMode::kIpip), "ipip");
  EXPECT_STREQ(qs::delivery_mode_name(qs::DeliveryMode::kVxlan), "vxlan");
  EXPECT_STREQ(qs::backend_state_name(qs::BackendState::kActive), "active");
  EXPECT_STREQ(qs::backend_state_name(qs::BackendState::kDraining), "draining");
  EXPECT_STREQ(qs::backend_state_name(qs::BackendState::kDown), "down");
}

// The dump spells every backend out, owners resolved, and reads back to the
// same backends and delivery.
TEST(Backends, DumpReadsBackToTheSameFleet) {
  const qs::Profile p = qs::parse_profile(
      fleet(2,
            "  - {name: a, server_ids: [\"0001\", \"0a0b0c\"], ipv4: 10.0.0.1, ipv6: \"fd00::1\", mac: " + kMac1 +
                ", vxlan_mac: \"02:00:00:00:03:01\", weight: 7, state: draining}\n"
                "  - {name: b, server_ids: [\"0002\"], ipv6: \"fd00::2\", mac: " + kMac2 + ", state: down, owner: 1}\n"
                "  - {name: c, ipv4: 10.0.0.3, mac: \"02:00:00:00:00:03\"}\n",
            "{mode: vxlan, source_ipv4: 10.0.0.254, source_ipv6: \"fd00::fe\", vxlan_vni: 0, vxlan_port: 4790, "
            "vxlan_mac: \"02:00:00:00:03:ff\", ttl: 32, icmp_too_big_per_s: 5}"),
      "t.yaml");
  const std::string dump = qs::dump_profile(p, qs::DumpKeys::kInFull);
  EXPECT_THAT(dump, HasSubstr("server_ids: [\"0001\", \"0a0b0c\"]"));
  EXPECT_THAT(dump, HasSubstr("ipv6: \"fd00::1\""));
  EXPECT_THAT(dump, HasSubstr("mac: \"02:00:00:00:00:01\""));
  EXPECT_THAT(dump, HasSubstr("state: draining"));
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("slot:")));
  const qs::Profile again = qs::parse_profile(dump, "dump.yaml");
  EXPECT_EQ(qs::dump_profile(again, qs::DumpKeys::kInFull), dump);
  ASSERT_EQ(again.steering.backends.size(), p.steering.backends.size());
  for (std::size_t i = 0; i < p.steering.backends.size(); ++i) {
    const qs::BackendConfig &x = p.steering.backends[i], &y = again.steering.backends[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.server_ids, y.server_ids);
    EXPECT_EQ(x.ipv4, y.ipv4);
    EXPECT_EQ(x.ipv6, y.ipv6);
    EXPECT_EQ(x.mac, y.mac);
    EXPECT_EQ(x.vxlan_mac, y.vxlan_mac);
    EXPECT_EQ(x.weight, y.weight);
    EXPECT_EQ(x.state, y.state);
    EXPECT_EQ(x.owner_lcore, y.owner_lcore);
    EXPECT_EQ(x.slot, y.slot);
  }
  // a and c had no owner: spread to 1 and 2, and the dump says so.
  EXPECT_EQ(again.steering.backends[0].owner_lcore, 1u);
  EXPECT_EQ(again.steering.backends[2].owner_lcore, 2u);
  const qs::DeliveryConfig &d = p.action.delivery, &e = again.action.delivery;
  EXPECT_EQ(e.mode, d.mode);
  EXPECT_EQ(e.source_ipv4, d.source_ipv4);
  EXPECT_EQ(e.source_ipv6, d.source_ipv6);
  EXPECT_EQ(e.vxlan_vni, 0u);
  EXPECT_EQ(e.vxlan_port, 4790);
  EXPECT_EQ(e.vxlan_mac, d.vxlan_mac);
  EXPECT_EQ(e.ttl, 32);
  EXPECT_EQ(e.icmp_too_big_per_s, 5u);
}

// --- accepted profiles -------------------------------------------------------------

TEST(Profile, FillsEveryDefault) {
  const qs::Profile p = qs::parse_profile(kBase, "t.yaml");
  EXPECT_EQ(p.path, "t.yaml");
  EXPECT_TRUE(p.eal.empty());
  ASSERT_EQ(p.ports.size(), 1u);
  EXPECT_EQ(p.ports[0].name, "wire");
  EXPECT_EQ(p.ports[0].device, "net_null0");
  EXPECT_TRUE(p.ports[0].is_vdev());
  EXPECT_EQ(p.ports[0].rx_queues, 1);
  EXPECT_EQ(p.ports[0].tx_queues, 1);
  EXPECT_EQ(p.ports[0].rx_descriptors, 1024);
  EXPECT_EQ(p.ports[0].tx_descriptors, 1024);
  EXPECT_TRUE(p.ports[0].rss);
  EXPECT_EQ(p.ports[0].mtu, 1500);
  EXPECT_EQ(p.ports[0].flow_control, qs::FlowControl::kNone);
  EXPECT_FALSE(p.ports[0].rx_drop_en);
  EXPECT_EQ(p.mempool.mbufs, 16383u);
  EXPECT_EQ(p.mempool.cache, 256u);
  EXPECT_EQ(p.mempool.data_room, 2176);
  ASSERT_EQ(p.lcores.size(), 1u);
  EXPECT_EQ(p.lcores[0].id, 1u);
  EXPECT_EQ(p.lcores[0].rx, (std::vector<qs::RxQueueRef>{{0, 0}}));
  EXPECT_TRUE(p.lcores[0].owner);
  EXPECT_EQ(p.rings.size, 1024u);
  EXPECT_EQ(p.rings.burst, 32);
  EXPECT_EQ(p.steering.quic_ports, std::vector<std::uint16_t>{443});
  EXPECT_EQ(p.steering.short_dcid_len, 8);
  EXPECT_EQ(p.steering.mode, qs::SteeringMode::kCid);
  EXPECT_TRUE(p.steering.quic_lb.empty());
  EXPECT_TRUE(p.steering.server_routes.empty());
  EXPECT_EQ(p.steering.owner_lcores, std::vector<unsigned>{1});
  EXPECT_EQ(p.steering.fallback_key, (std::array<std::uint8_t, 16>{}));
  EXPECT_EQ(p.steering.fallback_vnodes, 128u);
  EXPECT_EQ(p.backpressure.policy, qs::BackpressurePolicy::kPark);
  EXPECT_EQ(p.backpressure.high_watermark, 1024u);
  EXPECT_EQ(p.backpressure.low_watermark, 512u);
  EXPECT_EQ(p.backpressure.park_timeout_us, 10000u);
  EXPECT_EQ(p.action.type, qs::OwnerAction::kSink);
  EXPECT_EQ(p.action.tx_port, -1);
  EXPECT_EQ(p.action.cost_cycles, 0u);
  EXPECT_EQ(p.action.tx_drain_us, 100u);
  EXPECT_EQ(p.action.max_connections, 65536u);
  EXPECT_EQ(p.action.slots_per_connection, 4u);
  EXPECT_EQ(p.action.idle_timeout_ms, 30000u);
  EXPECT_EQ(p.polling.idle_sleep_us, 0u);
  EXPECT_EQ(p.polling.idle_polls_before_sleep, 256u);
  EXPECT_EQ(p.polling.doorbell_spin_us, 0u);
  EXPECT_EQ(p.stats.period_ms, 1000u);
  EXPECT_EQ(p.stats.json_path, "");
  EXPECT_EQ(p.drain.grace_s, 0);
  EXPECT_EQ(p.duration_s, 0);
}

TEST(Profile, WatermarkDefaultsFollowRingAndHighWatermark) {
  EXPECT_EQ(qs::parse_profile(kBase + "rings: {size: 64}\n", "t").backpressure.high_watermark, 64u);
  EXPECT_EQ(qs::parse_profile(kBase + "rings: {size: 64}\n", "t").backpressure.low_watermark, 32u);
  // An explicit high watermark at or below half the ring halves itself instead.
  const qs::Profile low = qs::parse_profile(kBase + "backpressure: {high_watermark: 256}\n", "t");
  EXPECT_EQ(low.backpressure.high_watermark, 256u);
  EXPECT_EQ(low.backpressure.low_watermark, 128u);
  const qs::Profile high = qs::parse_profile(kBase + "backpressure: {high_watermark: 896}\n", "t");
  EXPECT_EQ(high.backpressure.low_watermark, 512u);
  const qs::Profile explicit_low = qs::parse_profile(kBase + "backpressure: {low_watermark: 0}\n", "t");
  EXPECT_EQ(explicit_low.backpressure.low_watermark, 0u);
}

TEST(Profile, DecodesEveryKey) {
  const std::string yaml = R"(
eal: ["-l", "0-3"]
ports:
  - {name: wire, device: "0000:3B:00.0", rx_queues: 2, tx_queues: 0, rx_descriptors: 2048, tx_descriptors: 512,
     rss: False, mtu: 9000, flow_control: rx_pause, rx_drop_en: TRUE}
  - {name: out-1, device: "3b:00.1", rx_queues: 0, tx_queues: 3, flow_control: tx_pause}
mempool: {mbufs: 65535, cache: 512, data_room: 10240}
lcores:
  - {id: 3, rx: ["wire:1"]}
  - {id: 1, owner: true}
  - {id: 2, rx: ["wire:0"], owner: true}
rings: {size: 4096, burst: 64}
steering:
  mode: four_tuple
  quic_ports: [443, 4433]
  short_dcid_len: 0
  quic_lb:
    - {config_id: 2, server_id_len: 3, nonce_len: 16, key: 000102030405060708090A0B0C0D0E0F, len_self_encode: true}
    - {config_id: 5, server_id_len: 2, nonce_len: 4}
  servers:
    - {server_id: 0001, owner: 2}
    - {server_id: "0a0b0c", owner: 1}
  fallback: {key: ffeeddccbbaa99887766554433221100, vnodes: 7}
backpressure: {policy: shed-new, high_watermark: 3000, low_watermark: 100, park_timeout_us: 70}
action: {type: forward, tx_port: out-1, cost_cycles: 500, tx_drain_us: 9, max_connections: 1000, slots_per_connection: 8,
         idle_timeout_ms: 5}
polling: {idle_sleep_us: 50, idle_polls_before_sleep: 8, doorbell_spin_us: 7}
stats: {period_ms: 0, json: "results/x.json"}
drain: {grace_s: 2.5}
duration_s: 0.25
)";
  const qs::Profile p = qs::parse_profile(yaml, "t.yaml");
  EXPECT_EQ(p.eal, (std::vector<std::string>{"-l", "0-3"}));
  ASSERT_EQ(p.ports.size(), 2u);
  EXPECT_FALSE(p.ports[0].is_vdev());
  EXPECT_EQ(p.ports[0].rx_queues, 2);
  EXPECT_EQ(p.ports[0].tx_queues, 0);
  EXPECT_EQ(p.ports[0].rx_descriptors, 2048);
  EXPECT_EQ(p.ports[0].tx_descriptors, 512);
  EXPECT_FALSE(p.ports[0].rss);
  EXPECT_EQ(p.ports[0].mtu, 9000);
  EXPECT_EQ(p.ports[0].flow_control, qs::FlowControl::kRxPause);
  EXPECT_TRUE(p.ports[0].rx_drop_en);
  EXPECT_EQ(p.ports[1].name, "out-1");
  EXPECT_EQ(p.ports[1].flow_control, qs::FlowControl::kTxPause);
  EXPECT_EQ(p.port_index("out-1"), 1);
  EXPECT_EQ(p.port_index("nope"), -1);
  EXPECT_EQ(p.mempool.mbufs, 65535u);
  EXPECT_EQ(p.mempool.cache, 512u);
  EXPECT_EQ(p.mempool.data_room, 10240);
  ASSERT_EQ(p.lcores.size(), 3u);
  EXPECT_EQ(p.lcores[0].rx, (std::vector<qs::RxQueueRef>{{0, 1}}));
  EXPECT_FALSE(p.lcores[0].owner);
  EXPECT_TRUE(p.lcores[1].rx.empty());
  // Owners in profile order, not sorted.
  EXPECT_EQ(p.steering.owner_lcores, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(p.rings.size, 4096u);
  EXPECT_EQ(p.rings.burst, 64);
  EXPECT_EQ(p.steering.quic_ports, (std::vector<std::uint16_t>{443, 4433}));
  EXPECT_EQ(p.steering.short_dcid_len, 0);
  EXPECT_EQ(p.steering.mode, qs::SteeringMode::kFourTuple);
  ASSERT_EQ(p.steering.quic_lb.size(), 2u);
  EXPECT_EQ(p.steering.quic_lb[0].config_id, 2);
  EXPECT_EQ(p.steering.quic_lb[0].server_id_len, 3);
  EXPECT_EQ(p.steering.quic_lb[0].nonce_len, 16);
  ASSERT_TRUE(p.steering.quic_lb[0].key.has_value());
  EXPECT_EQ((*p.steering.quic_lb[0].key)[10], 0x0a);
  EXPECT_EQ((*p.steering.quic_lb[0].key)[15], 0x0f);
  EXPECT_TRUE(p.steering.quic_lb[0].len_self_encode);
  EXPECT_FALSE(p.steering.quic_lb[1].key.has_value());
  ASSERT_EQ(p.steering.server_routes.size(), 2u);
  // A plain 0001 is YAML's integer 1, but the server ID keeps its digits.
  EXPECT_EQ(p.steering.server_routes[0].server_id, (std::vector<std::uint8_t>{0x00, 0x01}));
  EXPECT_EQ(p.steering.server_routes[0].owner_lcore, 2u);
  EXPECT_EQ(p.steering.server_routes[1].server_id, (std::vector<std::uint8_t>{0x0a, 0x0b, 0x0c}));
  EXPECT_EQ(p.steering.fallback_key[0], 0xff);
  EXPECT_EQ(p.steering.fallback_key[15], 0x00);
  EXPECT_EQ(p.steering.fallback_vnodes, 7u);
  EXPECT_EQ(p.backpressure.policy, qs::BackpressurePolicy::kShedNew);
  EXPECT_EQ(p.backpressure.high_watermark, 3000u);
  EXPECT_EQ(p.backpressure.low_watermark, 100u);
  EXPECT_EQ(p.backpressure.park_timeout_us, 70u);
  EXPECT_EQ(p.action.type, qs::OwnerAction::kForward);
  EXPECT_EQ(p.action.tx_port, 1);
  EXPECT_EQ(p.action.cost_cycles, 500u);
  EXPECT_EQ(p.action.tx_drain_us, 9u);
  EXPECT_EQ(p.action.max_connections, 1000u);
  EXPECT_EQ(p.action.slots_per_connection, 8u);
  EXPECT_EQ(p.action.idle_timeout_ms, 5u);
  EXPECT_EQ(p.polling.idle_sleep_us, 50u);
  EXPECT_EQ(p.polling.idle_polls_before_sleep, 8u);
  EXPECT_EQ(p.polling.doorbell_spin_us, 7u);
  EXPECT_EQ(p.stats.period_ms, 0u);
  EXPECT_EQ(p.stats.json_path, "results/x.json");
  EXPECT_EQ(p.drain.grace_s, 2.5);
  EXPECT_EQ(p.duration_s, 0.25);

  // The dump of a profile that sets everything reads back to itself.
  const std::string dump = qs::dump_profile(p, qs::DumpKeys::kInFull);
  EXPECT_EQ(qs::dump_profile(qs::parse_profile(dump, "dump"), qs::DumpKeys::kInFull), dump);
}

// An owner's doorbell spin is one nap unless the profile says otherwise, and
// the dump spells out the value taken, so that it reads back the same.
TEST(Profile, DoorbellSpinIsOneNapUnlessSet) {
  const qs::Profile p = qs::parse_profile(kBase + "polling: {idle_sleep_us: 40}\n", "t.yaml");
  EXPECT_EQ(p.polling.doorbell_spin_us, 40u);
  EXPECT_THAT(qs::dump_profile(p, qs::DumpKeys::kInFull), HasSubstr("doorbell_spin_us: 40"));
  EXPECT_EQ(qs::parse_profile(kBase + "polling: {idle_sleep_us: 40, doorbell_spin_us: 0}\n", "t.yaml")
                .polling.doorbell_spin_us,
            0u);
}

TEST(Profile, DumpOfDefaultsReadsBackToItself) {
  const std::string dump = qs::dump_profile(qs::parse_profile(kBase, "t.yaml"), qs::DumpKeys::kInFull);
  const qs::Profile again = qs::parse_profile(dump, "dump");
  EXPECT_EQ(qs::dump_profile(again, qs::DumpKeys::kInFull), dump);
  // Every default is spelled out in the dump.
  EXPECT_THAT(dump, HasSubstr("high_watermark: 1024"));
  EXPECT_THAT(dump, HasSubstr("low_watermark: 512"));
  EXPECT_THAT(dump, HasSubstr("idle_polls_before_sleep: 256"));
  EXPECT_THAT(dump, HasSubstr("key: \"00000000000000000000000000000000\""));
}


// --- issue 15: limits a running data path needs, files the loader must not trust --------

// A nap as long as the park timeout lets parked packets time out (lossless
// with idle_sleep_us 20000 dropped 4,145 of 4,164 parked packets).
INSTANTIATE_TEST_SUITE_P(
    RunsAsDocumented, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"idle_sleep_equal_to_park_timeout",
                   kBase + "backpressure:\n  park_timeout_us: 1000\npolling:\n  idle_sleep_us: 1000\n",
                   "t.yaml:7:18: polling.idle_sleep_us", "must be below backpressure.park_timeout_us (1000), got 1000"},
        BadProfile{"idle_sleep_above_default_park_timeout", kBase + "polling:\n  idle_sleep_us: 20000\n",
                   "t.yaml:5:18: polling.idle_sleep_us", "must be below backpressure.park_timeout_us (10000)"},
        BadProfile{"idle_sleep_above_park_timeout_shed_new",
                   kBase + "backpressure: {policy: shed-new, park_timeout_us: 500}\npolling: {idle_sleep_us: 600}\n",
                   "t.yaml:5:26: polling.idle_sleep_us", "raise park_timeout_us"}),
    case_name);

TEST(Profile, IdleSleepBelowParkTimeoutOrUnderDropIsAccepted) {
  EXPECT_EQ(qs::parse_profile(kBase + "backpressure: {park_timeout_us: 1000}\npolling: {idle_sleep_us: 999}\n", "t.yaml")
                .polling.idle_sleep_us,
            999u);
  // drop parks nothing, so nothing can time out.
  EXPECT_EQ(qs::parse_profile(kBase + "backpressure: {policy: drop, park_timeout_us: 1000}\n"
                                      "polling: {idle_sleep_us: 5000}\n",
                              "t.yaml")
                .polling.idle_sleep_us,
            5000u);
}

// `owners` owner lcores (ids 1..owners), the first polling the one queue.
std::string owners_profile(unsigned owners) {
  std::string y = "ports: [{name: wire, device: net_null0}]\nlcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n";
  for (unsigned id = 2; id <= owners; ++id) y += "  - {id: " + std::to_string(id) + ", owner: true}\n";
  return y + "action: {type: sink}\n";
}

// The receive loop's per-burst arrays hold 64 owners; sink needs no TX queue
// per owner, so nothing else stopped a 65th (issue 13, defect 2).
TEST(Profile, RejectsMoreOwnersThanTheReceiveLoopGroups) {
  EXPECT_EQ(qs::parse_profile(owners_profile(64), "t.yaml").steering.owner_lcores.size(), 64u);
  // Line 2 is "lcores:", lcore id N is on line N + 2; "  - {id: 65, owner: " puts the value at column 21.
  EXPECT_THAT(error_of(owners_profile(65)),
              StartsWith("t.yaml:67:21: lcores[64].owner: at most 64 lcores may be owners; lcore 65 would be owner 65"));
  EXPECT_THAT(error_of(owners_profile(100)), StartsWith("t.yaml:67:21: lcores[64].owner: "));
}

// 65,533 servers (every 2-octet server ID but three) load, and a duplicate at
// the very end names the first one. Before, the duplicate check compared
// every pair: 8 s here, 33 s under ASan.
TEST(Profile, TakesTheLargestServerMap) {
  std::string y = kBase + "steering:\n  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 6}]\n  servers:\n";
  char line[64];
  for (unsigned id = 1; id <= 65533; ++id) {
    std::snprintf(line, sizeof line, "    - {server_id: \"%04x\", owner: 1}\n", id);
    y += line;
  }
  EXPECT_EQ(qs::parse_profile(y, "t.yaml").steering.server_routes.size(), 65533u);
  const std::string message = error_of(y + "    - {server_id: \"0007\", owner: 1}\n");
  // kBase is 3 lines, steering 3 more: server i is on line i + 7.
  EXPECT_THAT(message, StartsWith("t.yaml:65540:19: steering.servers[65533].server_id: duplicate server_id "
                                  "(also steering.servers[6])"));
}

// --- files -------------------------------------------------------------------------

std::filesystem::path scratch_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("qs_profile_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path;
}

TEST(ProfileFile, MissingFileSaysCannotOpen) {
  try {
    qs::load_profile("/nonexistent/dir/p.yaml");
    FAIL() << "accepted a missing file";
  } catch (const qs::ProfileError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/dir/p.yaml: cannot open: No such file or directory");
  }
}

TEST(ProfileFile, DirectorySaysCannotRead) {
  try {
    qs::load_profile(std::filesystem::temp_directory_path().string());
    FAIL() << "accepted a directory";
  } catch (const qs::ProfileError& e) {
    EXPECT_THAT(e.what(), HasSubstr(": cannot read: Is a directory"));
  }
}

TEST(ProfileFile, ErrorsNameTheFile) {
  const auto path = scratch_file("bad.yaml", kBase + "rings: {size: 100}\n");
  try {
    qs::load_profile(path.string());
    FAIL() << "accepted a ring of 100";
  } catch (const qs::ProfileError& e) {
    EXPECT_THAT(e.what(), StartsWith(path.string() + ":4:15: rings.size: must be a power of two"));
  }
  std::filesystem::remove(path);
}

TEST(ProfileFile, LoadsFileAndRecordsPath) {
  const auto path = scratch_file("good.yaml", kBase);
  const qs::Profile p = qs::load_profile(path.string());
  EXPECT_EQ(p.path, path.string());
  EXPECT_EQ(p.ports.size(), 1u);
  std::filesystem::remove(path);
}


TEST(ProfileFile, FifoIsRefusedWithoutWaitingForAWriter) {
  const auto path = std::filesystem::temp_directory_path() / ("qs_profile_test_" + std::to_string(::getpid()) + ".fifo");
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  try {
    qs::load_profile(path.string());  // blocked forever before: nobody ever writes
    ADD_FAILURE() << "accepted a FIFO";
  } catch (const qs::ProfileError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": cannot read: Is a FIFO; a profile must be a regular file (at most 4 MiB)");
  }
  std::filesystem::remove(path);
}

TEST(ProfileFile, DeviceIsRefusedBeforeReadingIt) {
  try {
    qs::load_profile("/dev/zero");  // read without end before (1.28 GB in 10 s)
    FAIL() << "accepted /dev/zero";
  } catch (const qs::ProfileError& e) {
    EXPECT_EQ(std::string(e.what()), "/dev/zero: cannot read: Is a character device; a profile must be a regular file (at most 4 MiB)");
  }
}

TEST(ProfileFile, LargerThanTheLimitIsRefused) {
  const auto path = scratch_file("huge.yaml", kBase + "# " + std::string(qs::kMaxProfileBytes, 'x') + "\n");
  try {
    qs::load_profile(path.string());
    ADD_FAILURE() << "accepted a file over the limit";
  } catch (const qs::ProfileError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": cannot read: larger than 4 MiB, the most a profile may be");
  }
  std::filesystem::remove(path);
}

// The command line's numbers of seconds follow duration_s's rule.
TEST(ParseSeconds, FollowsTheProfilesRuleForNumbers) {
  EXPECT_EQ(qs::parse_seconds("1.5", "--duration", 0, 86400), 1.5);
  EXPECT_EQ(qs::parse_seconds("0", "--duration", 0, 86400), 0);
  EXPECT_EQ(qs::parse_seconds("+2", "--duration", 0, 86400), 2);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "1e400", "0x10", "", " 1", "1 ", "1s", "--1"}) {
    try {
      qs::parse_seconds(bad, "--duration", 0, 86400);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const qs::ProfileError& e) {
      EXPECT_THAT(e.what(), StartsWith(std::string("--duration: expected a number of seconds (decimal, e.g. 1.5), got '") + bad + "'"));
    }
  }
  for (const char* out : {"-1", "86401", "1e300"}) {
    try {
      qs::parse_seconds(out, "--duration", 0, 86400);
      ADD_FAILURE() << "accepted '" << out << "'";
    } catch (const qs::ProfileError& e) {
      EXPECT_THAT(e.what(), StartsWith(std::string("--duration: must be in 0..86400 seconds, got '") + out + "'"));
    }
  }
}

// --- shipped profiles ------------------------------------------------------------

std::vector<std::filesystem::path> shipped_profiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(QS_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kBaremetal = std::string(QS_SOURCE_DIR) + "/configs/baremetal-2port.yaml";

// configs/baremetal-2port.yaml as an operator completes it: its commented
// fallback key set.
qs::Profile baremetal_with_key() { return qs::test::load_shipped_profile(kBaremetal); }

// The template for real NICs ships no key that every copy would share: it is
// refused until the operator sets one, and the refusal says how.
TEST(ShippedProfiles, BaremetalTemplateIsRefusedUntilItHasAKey) {
  try {
    qs::load_profile(kBaremetal);
    ADD_FAILURE() << "baremetal-2port.yaml loads with the all-zero fallback key";
  } catch (const qs::ProfileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("steering.fallback.key: all zeros"));
    EXPECT_THAT(e.what(), HasSubstr("openssl rand -hex 16"));
  }
  EXPECT_TRUE(baremetal_with_key().warnings.empty());
}

TEST(ShippedProfiles, AllLoadAndDumpReadsBack) {
  const auto files = shipped_profiles();
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.filename().string());
  for (const char* expected : {"demo.yaml", "lossless.yaml", "drop.yaml", "shed-new.yaml", "baremetal-2port.yaml"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    try {
      // The bare-metal template ships no fallback key (its test is below).
      const qs::Profile p = file.filename() == "baremetal-2port.yaml" ? baremetal_with_key()
                                                                       : qs::load_profile(file.string());
      const std::string dump = qs::dump_profile(p, qs::DumpKeys::kInFull);
      EXPECT_EQ(qs::dump_profile(qs::parse_profile(dump, file.string()), qs::DumpKeys::kInFull), dump);
    } catch (const qs::ProfileError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Every key the dump writes (the whole schema) must be spelled out in demo.yaml,
// the profile operators copy from.
void expect_same_keys(const YAML::Node& complete, const YAML::Node& demo, const std::string& where) {
  if (complete.IsMap()) {
    ASSERT_TRUE(demo.IsMap()) << where << " is not a map in demo.yaml";
    for (const auto& kv : complete) {
      const std::string key = kv.first.Scalar();
      const std::string path = where.empty() ? key : where + "." + key;
      ASSERT_TRUE(demo[key].IsDefined()) << path << " is missing from demo.yaml";
      expect_same_keys(kv.second, demo[key], path);
    }
  } else if (complete.IsSequence() && complete.size() > 0 && complete[0].IsMap()) {
    ASSERT_TRUE(demo.IsSequence() && demo.size() > 0) << where;
    expect_same_keys(complete[0], demo[0], where + "[0]");
  }
}

TEST(ShippedProfiles, DemoSpellsOutEveryKey) {
  const std::string path = std::string(QS_SOURCE_DIR) + "/configs/demo.yaml";
  const qs::Profile p = qs::load_profile(path);
  expect_same_keys(YAML::Load(qs::dump_profile(p)), YAML::LoadFile(path), "");
}

// demo.yaml's backends example is commented out (the demo has no fleet): once
// uncommented it loads, and it spells out every key a backend has. Likewise
// the optional keys of action.delivery that it leaves commented.
std::string demo_text() { return read_text(std::string(QS_SOURCE_DIR) + "/configs/demo.yaml"); }

// The commented example of a top-level `key` in demo.yaml, uncommented:
// from its "# key:" line to the first line that is no comment (or that
// starts with `stop`).
std::string demo_example(const std::string& key, const std::string& stop = "") {
  std::istringstream demo(demo_text());
  std::string line, example;
  bool inside = false;
  while (std::getline(demo, line)) {
    if (line == "# " + key + ":") inside = true;
    if (inside && (line.rfind("#", 0) != 0 || (!stop.empty() && line.rfind(stop, 0) == 0))) break;
    if (inside) example += (line.size() > 2 ? line.substr(2) : std::string()) + "\n";
  }
  return example;
}

TEST(ShippedProfiles, DemoBackendsExampleLoadsAndSpellsOutEveryKey) {
  const std::string example = demo_example("backends", "# A reload");
  ASSERT_FALSE(example.empty()) << "no '# backends:' example in demo.yaml";
  const std::string yaml = kPorts + kLcores + kSink +
                           "steering:\n  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 6}]\n" + example;
  qs::Profile p;
  try {
    p = qs::parse_profile(yaml, "demo-backends.yaml");
  } catch (const qs::ProfileError& e) {
    FAIL() << e.what() << "\n" << yaml;
  }
  ASSERT_GE(p.steering.backends.size(), 2u);
  const qs::BackendConfig& first = p.steering.backends[0];
  ASSERT_TRUE(first.ipv4 && first.ipv6 && first.vxlan_mac) << "the first example backend sets every key";
  expect_same_keys(YAML::Load(qs::dump_profile(p))["backends"], YAML::Load(example)["backends"], "backends");
}

TEST(ShippedProfiles, DemoPeerSyncExampleLoadsAndSpellsOutEveryKey) {
  std::string example = demo_example("peer_sync");
  ASSERT_FALSE(example.empty()) << "no '# peer_sync:' example in demo.yaml";
  const auto key = example.find("<64 hex digits>");
  ASSERT_NE(key, std::string::npos);
  example.replace(key, 15, std::string(64, 'a'));
  const std::string yaml = kBase + "backends:\n  - {name: a, mac: \"02:00:00:00:00:01\"}\n" + example;
  qs::Profile p;
  try {
    p = qs::parse_profile(yaml, "demo-peer-sync.yaml");
  } catch (const qs::ProfileError& e) {
    FAIL() << e.what() << "\n" << yaml;
  }
  ASSERT_TRUE(p.peer_sync.enabled);
  expect_same_keys(YAML::Load(qs::dump_profile(p))["peer_sync"], YAML::Load(example)["peer_sync"], "peer_sync");
}

TEST(ShippedProfiles, DemoHealthChecksExampleLoadsAndSpellsOutEveryKey) {
  const std::string example = demo_example("health_checks");
  ASSERT_FALSE(example.empty()) << "no '# health_checks:' example in demo.yaml";
  const std::string yaml =
      "ports:\n  - {name: wire, device: net_null0, tx_queues: 2, tap: qs0}\n"
      "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n"
      "services:\n  - {name: web, addresses: [10.77.1.1, \"fd77:1::1\"], udp_ports: [443]}\n"
      "backends:\n  - {name: a, mac: \"02:00:00:00:00:01\"}\n"
      "action: {type: forward, tx_port: wire, delivery: {mode: l2}}\n" + example;
  qs::Profile p;
  try {
    p = qs::parse_profile(yaml, "demo-health-checks.yaml");
  } catch (const qs::ProfileError& e) {
    FAIL() << e.what() << "\n" << yaml;
  }
  ASSERT_TRUE(p.health_checks.enabled);
  expect_same_keys(YAML::Load(qs::dump_profile(p))["health_checks"], YAML::Load(example)["health_checks"],
                   "health_checks");
}

TEST(ShippedProfiles, DemoDeliveryCommentsLoadAndSpellOutEveryKey) {
  std::string text = demo_text();
  for (const char* key : {"source_ipv4:", "source_ipv6:", "vxlan_mac:"}) {
    const std::string commented = std::string("    # ") + key;
    const auto at = text.find(commented);
    ASSERT_NE(at, std::string::npos) << commented << " is missing from demo.yaml";
    text.replace(at, commented.size(), std::string("    ") + key);
  }
  const qs::Profile p = qs::parse_profile(text, "demo-delivery.yaml");
  EXPECT_TRUE(p.action.delivery.source_ipv4 && p.action.delivery.source_ipv6 && p.action.delivery.vxlan_mac);
  expect_same_keys(YAML::Load(qs::dump_profile(p)), YAML::Load(text), "");
}

TEST(ShippedProfiles, DemoIsTheSymmetricTwoOwnerLayout) {
  const qs::Profile p = qs::load_profile(std::string(QS_SOURCE_DIR) + "/configs/demo.yaml");
  ASSERT_EQ(p.ports.size(), 2u);
  EXPECT_TRUE(p.ports[0].is_vdev());
  EXPECT_EQ(p.ports[0].rx_queues, 2);
  EXPECT_THAT(p.ports[0].device, HasSubstr("results/demo.pcap"));
  EXPECT_EQ(p.steering.owner_lcores, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(p.lcores[0].rx, (std::vector<qs::RxQueueRef>{{0, 0}}));
  EXPECT_EQ(p.lcores[1].rx, (std::vector<qs::RxQueueRef>{{0, 1}}));
  EXPECT_EQ(p.action.type, qs::OwnerAction::kForward);
  EXPECT_EQ(p.port_index("sink"), p.action.tx_port);
  ASSERT_EQ(p.steering.quic_lb.size(), 1u);
  EXPECT_TRUE(p.steering.quic_lb[0].key.has_value());
  EXPECT_EQ(p.steering.server_routes.size(), 2u);
  EXPECT_EQ(p.polling.idle_sleep_us, 50u);
  EXPECT_EQ(p.duration_s, 15);
}

TEST(ShippedProfiles, PoliciesMatchTheirNames) {
  const std::string dir = std::string(QS_SOURCE_DIR) + "/configs/";
  EXPECT_EQ(qs::load_profile(dir + "lossless.yaml").backpressure.policy, qs::BackpressurePolicy::kPark);
  EXPECT_EQ(qs::load_profile(dir + "lossless.yaml").ports[0].flow_control, qs::FlowControl::kFull);
  EXPECT_EQ(qs::load_profile(dir + "drop.yaml").backpressure.policy, qs::BackpressurePolicy::kDrop);
  EXPECT_EQ(qs::load_profile(dir + "shed-new.yaml").backpressure.policy, qs::BackpressurePolicy::kShedNew);
  const qs::Profile metal = baremetal_with_key();
  ASSERT_EQ(metal.ports.size(), 2u);
  EXPECT_FALSE(metal.ports[0].is_vdev());
  EXPECT_FALSE(metal.ports[1].is_vdev());
  EXPECT_EQ(std::count(metal.eal.begin(), metal.eal.end(), "--no-huge"), 0);
  // Direct routing to four backends on the servers port, one per owner.
  EXPECT_EQ(metal.action.delivery.mode, qs::DeliveryMode::kL2);
  EXPECT_EQ(metal.port_index("servers"), metal.action.tx_port);
  EXPECT_TRUE(metal.steering.server_routes.empty());
  ASSERT_EQ(metal.steering.backends.size(), 4u);
  std::vector<unsigned> owners;
  for (const qs::BackendConfig& b : metal.steering.backends) {
    owners.push_back(b.owner_lcore);
    EXPECT_EQ(b.server_ids.size(), 1u) << b.name;
  }
  EXPECT_EQ(owners, metal.steering.owner_lcores);
}

}  // namespace

// --- issue 14: operating it live ----------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Telemetry, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"prometheus_host_name", kBase + "telemetry:\n  prometheus_listen: \"localhost:9464\"\n",
                   "t.yaml:5:22: telemetry.prometheus_listen", "expected ADDRESS:PORT"},
        BadProfile{"prometheus_no_port", kBase + "telemetry: {prometheus_listen: \"127.0.0.1\"}\n",
                   "t.yaml:4:32: telemetry.prometheus_listen", "got '127.0.0.1'"},
        BadProfile{"prometheus_port_not_a_number", kBase + "telemetry: {prometheus_listen: \"127.0.0.1:http\"}\n",
                   "t.yaml:4:32: telemetry.prometheus_listen", "expected ADDRESS:PORT"},
        BadProfile{"prometheus_port_too_big", kBase + "telemetry: {prometheus_listen: \"127.0.0.1:65536\"}\n",
                   "t.yaml:4:32: telemetry.prometheus_listen", "expected ADDRESS:PORT"},
        BadProfile{"prometheus_ipv6_without_brackets", kBase + "telemetry: {prometheus_listen: \"::1:9464\"}\n",
                   "t.yaml:4:32: telemetry.prometheus_listen", "expected ADDRESS:PORT"},
        BadProfile{"prometheus_not_a_string", kBase + "telemetry: {prometheus_listen: [1]}\n",
                   "t.yaml:4:32: telemetry.prometheus_listen", "expected a string"},
        BadProfile{"telemetry_unknown_key", kBase + "telemetry: {prometheus: \"127.0.0.1:9464\"}\n",
                   "t.yaml:4:13: telemetry.prometheus", "unknown key (allowed here: prometheus_listen)"},
        BadProfile{"rekey_on_reload_not_bool", kBase + "steering:\n  fallback: {rekey_on_reload: sometimes}\n",
                   "t.yaml:5:31: steering.fallback.rekey_on_reload", "expected true or false"}),
    case_name);

TEST(Telemetry, ListenAddressesDecode) {
  const qs::Profile off = qs::parse_profile(kBase, "t.yaml");
  EXPECT_EQ(off.telemetry.prometheus_listen, "");  // off by default
  const qs::Profile v4 = qs::parse_profile(kBase + "telemetry: {prometheus_listen: \"127.0.0.1:9464\"}\n", "t.yaml");
  EXPECT_EQ(v4.telemetry.prometheus_listen, "127.0.0.1:9464");
  qs::ListenAddress a;
  ASSERT_TRUE(qs::parse_listen_address("[::1]:80", a));
  EXPECT_TRUE(a.ipv6);
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 80);
  ASSERT_TRUE(qs::parse_listen_address("127.0.0.1:0", a));  // any free port
  EXPECT_EQ(a.port, 0);
  ASSERT_TRUE(qs::parse_listen_address("0.0.0.0:65535", a));
  EXPECT_FALSE(a.ipv6);
  EXPECT_EQ(a.port, 65535);
  // The dump carries both new keys and reads back to itself.
  const std::string dump = qs::dump_profile(v4, qs::DumpKeys::kInFull);
  EXPECT_THAT(dump, HasSubstr("prometheus_listen: \"127.0.0.1:9464\""));
  EXPECT_THAT(dump, HasSubstr("rekey_on_reload: false"));
  EXPECT_EQ(qs::dump_profile(qs::parse_profile(dump, "dump.yaml"), qs::DumpKeys::kInFull), dump);
}

// Two owners on one port; the steering section from the arguments, `tail`
// adds sections.
std::string reload_profile(const std::string& quic_lb, const std::string& servers,
                           const std::string& fallback = "{key: \"000102030405060708090a0b0c0d0e0f\"}",
                           const std::string& tail = "") {
  return "ports: [{name: wire, device: net_null0, rx_queues: 2, tx_queues: 2}]\n"
         "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2, rx: [\"wire:1\"], owner: true}]\n"
         "action: {type: sink}\n"
         "steering:\n  quic_lb: " + quic_lb + "\n  servers: " + servers + "\n  fallback: " + fallback + "\n" + tail;
}
const std::string kConfig0 = "{config_id: 0, server_id_len: 2, nonce_len: 14, key: \"7175696373746565722064656d6f2121\"}";
const std::string kConfig1 = "{config_id: 1, server_id_len: 3, nonce_len: 13, key: \"000102030405060708090a0b0c0d0e0f\"}";
const std::string kServers0 = "{server_id: \"0001\", owner: 1}, {server_id: \"0002\", owner: 2}";
const std::string kServers1 = "{server_id: \"010001\", owner: 2}, {server_id: \"010002\", owner: 1}";

qs::Profile reload_parse(const std::string& yaml) { return qs::parse_profile(yaml, "next.yaml"); }

TEST(ReloadRefusal, QuicLbConfigsAndServerRoutesMayChange) {
  const qs::Profile running = reload_parse(reload_profile("[" + kConfig0 + "]", "[" + kServers0 + "]"));
  EXPECT_EQ(qs::reload_refusal(running, running), std::nullopt);
  const qs::Profile both = reload_parse(reload_profile("[" + kConfig0 + ", " + kConfig1 + "]",
                                                       "[" + kServers0 + ", " + kServers1 + "]"));
  EXPECT_EQ(qs::reload_refusal(running, both), std::nullopt);
  const qs::Profile only1 = reload_parse(reload_profile("[" + kConfig1 + "]", "[" + kServers1 + "]"));
  EXPECT_EQ(qs::reload_refusal(both, only1), std::nullopt);
  // A new key for the same config, and servers moved between owners.
  const qs::Profile rekeyed = reload_parse(reload_profile(
      "[{config_id: 0, server_id_len: 2, nonce_len: 14, key: \"ffeeddccbbaa99887766554433221100\"}]",
      "[{server_id: \"0001\", owner: 2}, {server_id: \"0002\", owner: 1}]"));
  EXPECT_EQ(qs::reload_refusal(running, rekeyed), std::nullopt);
}

TEST(ReloadRefusal, NamesTheKeyTheDataPathCannotTake) {
  const std::string q = "[" + kConfig0 + "]", s = "[" + kServers0 + "]";
  const std::string fb = "{key: \"000102030405060708090a0b0c0d0e0f\"}";
  const qs::Profile running = reload_parse(reload_profile(q, s));
  struct Case {
    std::string yaml, starts;
  };
  const std::vector<Case> cases = {
      {reload_profile(q, s, fb, "rings: {size: 2048}\n"), "rings.size: was '1024', now '2048'"},
      {reload_profile(q, s, fb, "mempool: {mbufs: 32767}\n"), "mempool.mbufs: was '16383', now '32767'"},
      {reload_profile(q, s, fb, "backpressure: {policy: drop}\n"), "backpressure.policy: was 'park', now 'drop'"},
      {reload_profile(q, s, "{key: \"000102030405060708090a0b0c0d0e0f\", vnodes: 64}"),
       "steering.fallback.vnodes: was '128', now '64'"},
      {reload_profile(q, s, fb, "telemetry: {prometheus_listen: \"127.0.0.1:9464\"}\n"),
       "telemetry.prometheus_listen: was '', now '127.0.0.1:9464'"},
      {"ports: [{name: wire, device: net_null0, rx_queues: 2, tx_queues: 2}]\n"
           "lcores: [{id: 1, rx: [\"wire:0\", \"wire:1\"], owner: true}, {id: 2, owner: true}]\n"
           "action: {type: sink}\nsteering:\n  quic_lb: " + q + "\n  servers: " + s + "\n  fallback: " + fb + "\n",
       "lcores[0].rx: had 1 entries, now 2"},
  };
  for (const Case& c : cases) {
    const auto refusal = qs::reload_refusal(running, reload_parse(c.yaml));
    ASSERT_TRUE(refusal.has_value()) << c.yaml;
    EXPECT_THAT(*refusal, StartsWith(c.starts)) << c.yaml;
    EXPECT_THAT(*refusal, HasSubstr("the running data path cannot take this change")) << c.yaml;
  }
}

TEST(ReloadRefusal, FallbackKeyChangesOnlyWhenTheNewProfileSaysSo) {
  const std::string q = "[" + kConfig0 + "]", s = "[" + kServers0 + "]";
  const qs::Profile running = reload_parse(reload_profile(q, s));
  const auto refusal = qs::reload_refusal(running, reload_parse(reload_profile(q, s, "{key: \"ff0102030405060708090a0b0c0d0e0f\"}")));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_THAT(*refusal, StartsWith("steering.fallback.key: changed"));
  EXPECT_THAT(*refusal, HasSubstr("steering.fallback.rekey_on_reload: true"));
  EXPECT_EQ(qs::reload_refusal(running, reload_parse(reload_profile(
                                             q, s, "{key: \"ff0102030405060708090a0b0c0d0e0f\", rekey_on_reload: true}"))),
            std::nullopt);
}

// --- issue 26: a reload may change the fleet and how it is delivered to --------

// Two owners, forward on "wire"; no backends key when `backend_lines` is empty.
std::string fleet_reload(const std::string& backend_lines, const std::string& delivery, const std::string& tail = "") {
  return "ports: [{name: wire, device: net_null0, rx_queues: 2, tx_queues: 2}]\n"
         "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2, rx: [\"wire:1\"], owner: true}]\n"
         "steering:\n  quic_lb: [" + kConfig0 + "]\n"
         "action: {type: forward, tx_port: wire, delivery: " + delivery + "}\n" +
         (backend_lines.empty() ? "" : "backends:\n" + backend_lines) + tail;
}
const std::string kFleetA = "  - {name: a, server_ids: [\"0001\"], ipv4: 10.0.0.1, mac: \"02:00:00:00:00:01\"}\n";
const std::string kFleetB = "  - {name: b, server_ids: [\"0002\"], ipv4: 10.0.0.2, mac: \"02:00:00:00:00:02\"}\n";
const std::string kL2 = "{mode: l2}";

// --- services and the exception path (issue 36) ------------------------------

INSTANTIATE_TEST_SUITE_P(
    Services, RejectsBadProfile,
    ::testing::Values(
        BadProfile{"services_no_addresses", kBase + "services: [{udp_ports: [443]}]\n", "t.yaml:4:12: services[0].addresses", "required key is missing"},
        BadProfile{"services_empty_addresses", kBase + "services: [{addresses: [], udp_ports: [443]}]\n", "t.yaml:4:24: services[0].addresses", "at least one address"},
        BadProfile{"services_bad_address", kBase + "services: [{addresses: [10.0.0.300], udp_ports: [443]}]\n", "t.yaml:4:25: services[0].addresses[0]", "expected an IPv4 address"},
        BadProfile{"services_multicast_address", kBase + "services: [{addresses: [224.0.0.1], udp_ports: [443]}]\n", "t.yaml:4:25: services[0].addresses[0]", "unicast"},
        BadProfile{"services_port_zero", kBase + "services: [{addresses: [10.0.0.1], udp_ports: [0]}]\n", "t.yaml:4:48: services[0].udp_ports[0]", "must be in 1..65535"},
        BadProfile{"services_port_twice", kBase + "services: [{addresses: [10.0.0.1], udp_ports: [443, 443]}]\n", "t.yaml:4:53: services[0].udp_ports[1]", "listed twice"},
        BadProfile{"services_address_twice", kBase + "services: [{name: a, addresses: [10.0.0.1], udp_ports: [443]}, {name: b, addresses: [\"10.0.0.1\"], udp_ports: [80]}]\n", "t.yaml:4:86: services[1].addresses[0]", "already in service 'a'"},
        BadProfile{"services_name_twice", kBase + "services: [{name: a, addresses: [10.0.0.1], udp_ports: [443]}, {name: a, addresses: [\"10.0.0.2\"], udp_ports: [80]}]\n", "t.yaml:4:71: services[1].name", "duplicate service name 'a'"},
        BadProfile{"services_unknown_key", kBase + "services: [{addresses: [10.0.0.1], udp_ports: [443], vip: 1}]\n", "t.yaml:4:54: services[0].vip", "unknown key"},
        BadProfile{"police_unknown_class", kBase + "exception_path: {police: {ospf: {packets_per_s: 1}}}\n", "t.yaml:4:27: exception_path.police.ospf", "allowed here: arp, nd, bgp, bfd, link, icmp, other"},
        BadProfile{"police_rate_too_high", kBase + "exception_path: {police: {bgp: {packets_per_s: 20000000}}}\n", "t.yaml:4:48: exception_path.police.bgp.packets_per_s", "must be in 0..10000000"},
        BadProfile{"ring_not_power", kBase + "exception_path: {ring_size: 1000}\n", "t.yaml:4:29: exception_path.ring_size", "power of two"},
        BadProfile{"tap_without_services", "ports: [{name: wire, device: net_null0, tx_queues: 2, tap: qs0}]\n" + kLcores + kSink, "t.yaml:1:60: ports[0].tap", "a tap needs services"},
        BadProfile{"tap_without_its_tx_queue", "ports: [{name: wire, device: net_null0, tx_queues: 1, tap: qs0}]\n" + kLcores + kSink + "services: [{addresses: [10.0.0.1], udp_ports: [443]}]\n", "t.yaml:1:52: ports[0].tx_queues", "at least 2, got 1"},
        BadProfile{"tap_name_with_slash", "ports: [{name: wire, device: net_null0, tap: \"a/b\"}]\n" + kLcores + kSink, "t.yaml:1:46: ports[0].tap", "expected a kernel interface name"}),
    case_name);

TEST(Services, DecodeDumpAndReadBackTheSame) {
  const std::string yaml =
      "ports: [{name: wire, device: net_null0, tx_queues: 2, tap: qs-wire, promiscuous: true}]\n" + kLcores + kSink +
      "services:\n  - {name: web, addresses: [192.0.2.10, \"2001:db8::10\"], udp_ports: [443, 8443]}\n"
      "  - {addresses: [192.0.2.11], udp_ports: [443]}\n"
      "exception_path: {ring_size: 256, police: {other: {packets_per_s: 10, bytes_per_s: 20000}}}\n";
  const qs::Profile p = qs::parse_profile(yaml, "t.yaml");
  ASSERT_EQ(p.steering.services.size(), 2u);
  EXPECT_EQ(p.steering.services[0].name, "web");
  EXPECT_EQ(p.steering.services[0].ipv4.size(), 1u);
  EXPECT_EQ(p.steering.services[0].ipv6.size(), 1u);
  EXPECT_EQ(p.steering.services[0].udp_ports, (std::vector<std::uint16_t>{443, 8443}));
  EXPECT_EQ(p.steering.services[1].name, "service1");
  EXPECT_EQ(p.ports[0].tap, "qs-wire");
  EXPECT_TRUE(p.ports[0].promiscuous);
  EXPECT_EQ(p.exception_path.ring_size, 256u);
  EXPECT_EQ(p.exception_path.police[unsigned(qs::ExceptionClass::kOther)].packets_per_s, 10u);
  EXPECT_EQ(p.exception_path.police[unsigned(qs::ExceptionClass::kBgp)].packets_per_s,
            qs::ExceptionPathConfig::default_police()[unsigned(qs::ExceptionClass::kBgp)].packets_per_s);
  const qs::Profile back = qs::parse_profile(qs::dump_profile(p, qs::DumpKeys::kInFull), "dump.yaml");
  EXPECT_EQ(qs::dump_profile(back), qs::dump_profile(p));
  EXPECT_FALSE(qs::reload_refusal(p, back).has_value());
}

TEST(Services, AReloadMayChangeTheListButNotWhetherThereIsOne) {
  const std::string base = kBase;
  const qs::Profile none = qs::parse_profile(base, "t.yaml");
  const qs::Profile one =
      qs::parse_profile(base + "services: [{addresses: [192.0.2.10], udp_ports: [443]}]\n", "t.yaml");
  const qs::Profile other =
      qs::parse_profile(base + "services: [{addresses: [192.0.2.20, 192.0.2.21], udp_ports: [80]}]\n", "t.yaml");
  EXPECT_FALSE(qs::reload_refusal(one, other).has_value());
  const auto on = qs::reload_refusal(none, one);
  ASSERT_TRUE(on.has_value());
  EXPECT_THAT(*on, StartsWith("services"));
  ASSERT_TRUE(qs::reload_refusal(one, none).has_value());
}

TEST(ReloadRefusal, BackendsMayChangeInEveryWay) {
  const qs::Profile running = reload_parse(fleet_reload(kFleetA + kFleetB, kL2));
  EXPECT_EQ(qs::reload_refusal(running, running), std::nullopt);
  const std::vector<std::string> fleets = {
      kFleetA,                                                     // one removed
      kFleetA + kFleetB + "  - {name: c, mac: \"02:00:00:00:00:03\"}\n",  // one added
      kFleetB + kFleetA,                                           // reordered
      "  - {name: a, server_ids: [\"0001\", \"0003\"], ipv4: 10.0.0.9, ipv6: \"fd00::9\", mac: \"02:00:00:00:00:09\", "
      "vxlan_mac: \"02:00:00:00:03:09\", weight: 9, state: draining, owner: 2}\n" + kFleetB,  // every field
      "  - {name: a2, server_ids: [\"0001\"], ipv4: 10.0.0.1, mac: \"02:00:00:00:00:01\"}\n" + kFleetB,  // renamed
  };
  for (const std::string& f : fleets) {
    EXPECT_EQ(qs::reload_refusal(running, reload_parse(fleet_reload(f, kL2))), std::nullopt) << f;
  }
  // From no fleet to one and back.
  const qs::Profile none = reload_parse(fleet_reload("", "{mode: as_is}"));
  EXPECT_EQ(qs::reload_refusal(none, running), std::nullopt);
  EXPECT_EQ(qs::reload_refusal(running, none), std::nullopt);
}

// The backend hash's size is part of the fleet: a reload may change it
// (and so move most hashed connections, as the operator asked).
TEST(ReloadRefusal, BackendTableSizeMayChange) {
  const qs::Profile running = reload_parse(fleet_reload(kFleetA + kFleetB, kL2));
  const auto sized = [](const std::string& size) {
    std::string y = fleet_reload(kFleetA + kFleetB, kL2);
    y.replace(y.find("steering:\n"), 10, "steering:\n  backend_table_size: " + size + "\n");
    return reload_parse(y);
  };
  EXPECT_EQ(qs::reload_refusal(running, sized("1048583")), std::nullopt);
  EXPECT_EQ(qs::reload_refusal(sized("1048583"), sized("131071")), std::nullopt);
  EXPECT_EQ(qs::reload_refusal(sized("131071"), running), std::nullopt);
}

TEST(ReloadRefusal, DeliveryMayChange) {
  const qs::Profile running = reload_parse(fleet_reload(kFleetA + kFleetB, kL2));
  for (const std::string& delivery :
       {std::string("{mode: as_is}"), std::string("{mode: ipip, source_ipv4: 10.0.0.254, ttl: 8}"),
        std::string("{mode: vxlan, source_ipv4: 10.0.0.254, vxlan_mac: \"02:00:00:00:03:01\", vxlan_vni: 7, "
                    "vxlan_port: 8472, icmp_too_big_per_s: 0}")}) {
    EXPECT_EQ(qs::reload_refusal(running, reload_parse(fleet_reload(kFleetA + kFleetB, delivery))), std::nullopt)
        << delivery;
  }
}

TEST(ReloadRefusal, EverythingElseStaysRefusedAlongsideAFleetChange) {
  const qs::Profile running = reload_parse(fleet_reload(kFleetA + kFleetB, kL2));
  struct Case {
    std::string yaml, starts;
  };
  const std::vector<Case> cases = {
      {fleet_reload(kFleetA, kL2, "rings: {size: 2048}\n"), "rings.size: was '1024', now '2048'"},
      {fleet_reload(kFleetA, "{mode: as_is}", "polling: {idle_polls_before_sleep: 9}\n"),
       "polling.idle_polls_before_sleep: was '256', now '9'"},
      // Read once, when quicsteer starts: a restart changes it.
      {fleet_reload(kFleetA, kL2, "drain: {grace_s: 5}\n"), "drain.grace_s: was '0', now '5'"},
      {"ports: [{name: wire, device: net_null0, rx_queues: 2, tx_queues: 2}]\n"
       "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2, rx: [\"wire:1\"], owner: true}]\n"
       "steering:\n  quic_lb: [" + kConfig0 + "]\n"
       "action: {type: forward, tx_port: wire, delivery: " + kL2 + ", tx_drain_us: 7}\nbackends:\n" + kFleetA,
       "action.tx_drain_us: was '100', now '7'"},
  };
  for (const Case& c : cases) {
    const auto refusal = qs::reload_refusal(running, reload_parse(c.yaml));
    ASSERT_TRUE(refusal.has_value()) << c.yaml;
    EXPECT_THAT(*refusal, StartsWith(c.starts)) << c.yaml;
  }
  // A fleet cannot make a forward action a sink.
  const auto refusal = qs::reload_refusal(
      running, reload_parse("ports: [{name: wire, device: net_null0, rx_queues: 2, tx_queues: 2}]\n"
                            "lcores: [{id: 1, rx: [\"wire:0\"], owner: true}, {id: 2, rx: [\"wire:1\"], owner: true}]\n"
                            "steering:\n  quic_lb: [" + kConfig0 + "]\naction: {type: sink}\nbackends:\n" + kFleetA));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_THAT(*refusal, StartsWith("action.type: was 'forward', now 'sink'"));
}

// Secrets (issue 29): dumps show a fingerprint of each key, never the key.
const std::string kKeyed = kBase +
                           "steering:\n"
                           "  quic_lb: [{config_id: 0, server_id_len: 2, nonce_len: 6, key: 000102030405060708090A0B0C0D0E0F}]\n"
                           "  fallback: {key: ffeeddccbbaa99887766554433221100}\n";

TEST(Secrets, KeyFingerprintIsTheStartOfItsSha256) {
  // sha256 of 16 zero octets: 374708ff f7719dd5...
  EXPECT_EQ(qs::key_fingerprint(std::array<std::uint8_t, 16>{}), "sha256:374708ff");
  std::array<std::uint8_t, 16> key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = std::uint8_t(0xff - 0x11 * i);
  EXPECT_EQ(qs::key_fingerprint(key), "sha256:811407f1");  // ffeeddccbbaa99887766554433221100
}

TEST(Secrets, DumpShowsFingerprintsNotKeys) {
  const qs::Profile p = qs::parse_profile(kKeyed, "t.yaml");
  for (const std::string& dump : {qs::dump_profile(p), qs::dump_profile(p, qs::DumpKeys::kFingerprints)}) {
    EXPECT_THAT(dump, ::testing::Not(HasSubstr("000102030405060708090a0b0c0d0e0f")));
    EXPECT_THAT(dump, ::testing::Not(HasSubstr("ffeeddccbbaa99887766554433221100")));
    EXPECT_THAT(dump, HasSubstr("key: \"" + qs::key_fingerprint(p.steering.quic_lb[0].key.value()) + "\""));
    EXPECT_THAT(dump, HasSubstr("key: \"sha256:811407f1\""));
  }
  // In full only when asked, and then it reads back.
  const std::string full = qs::dump_profile(p, qs::DumpKeys::kInFull);
  EXPECT_THAT(full, HasSubstr("000102030405060708090a0b0c0d0e0f"));
  EXPECT_THAT(full, HasSubstr("ffeeddccbbaa99887766554433221100"));
  EXPECT_EQ(qs::parse_profile(full, "full.yaml").steering.fallback_key, p.steering.fallback_key);
}

TEST(Secrets, AFingerprintIsNoKey) {
  const std::string dump = qs::dump_profile(qs::parse_profile(kKeyed, "t.yaml"));
  try {
    qs::parse_profile(dump, "dump.yaml");
    ADD_FAILURE() << "a dump with fingerprints loaded";
  } catch (const qs::ProfileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a key's fingerprint"));
  }
}

// An all-zero fallback key (the default) is refused when a port is a NIC
// and a warning on vdevs.
const std::string kPciPort = "ports: [{name: wire, device: \"0000:3b:00.0\"}]\n";  // line 1

TEST(Secrets, AllZeroFallbackKeyIsRefusedOnPciPorts) {
  const struct {
    std::string yaml;
    std::string where;
  } cases[] = {
      {kPciPort + kLcores + kSink, "t.yaml:1:1: steering.fallback.key: all zeros"},
      {kPciPort + kLcores + kSink + "steering: {fallback: {key: \"00000000000000000000000000000000\"}}\n",
       "t.yaml:4:28: steering.fallback.key: all zeros"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.yaml);
    try {
      qs::parse_profile(c.yaml, "t.yaml");
      ADD_FAILURE() << "loaded";
    } catch (const qs::ProfileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(c.where));
      EXPECT_THAT(e.what(), HasSubstr("PCI port 'wire' (0000:3b:00.0)"));
      EXPECT_THAT(e.what(), HasSubstr("openssl rand -hex 16"));
    }
  }
  EXPECT_TRUE(qs::parse_profile(kPciPort + kLcores + kSink + "steering: {fallback: {key: ffeeddccbbaa99887766554433221100}}\n",
                                "t.yaml")
                  .warnings.empty());
}

TEST(Secrets, AllZeroFallbackKeyIsAWarningOnVdevs) {
  const qs::Profile zero = qs::parse_profile(kBase, "t.yaml");
  ASSERT_EQ(zero.warnings.size(), 1u);
  EXPECT_THAT(zero.warnings[0], HasSubstr("t.yaml: warning: steering.fallback.key is all zeros"));
  EXPECT_TRUE(qs::parse_profile(kKeyed, "t.yaml").warnings.empty());
  // A command-line program prints it as it loads the profile.
  char path[] = "/tmp/qs_zero_key_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, kBase.data(), kBase.size()), ssize_t(kBase.size()));
  ::close(fd);
  ::testing::internal::CaptureStderr();
  const auto loaded = qs::load_profile_or_report(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unlink(path);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_THAT(err, HasSubstr(std::string(path) + ": warning: steering.fallback.key is all zeros"));
}
