// Packet fixtures shared by the steering tests, the fuzzer's seed corpus and
// the steering benchmark: one frame per header kind, each as its fields in
// order (hex), with the verdict expected when the frame is cut anywhere in
// that field, and the expected parse and route of the whole frame.
//
// The frames were generated once by a throwaway script and checked with
// tshark 4.0 (Ethernet/VLAN/IP/UDP layers of all of them; QUIC long headers'
// version, DCID and SCID where tshark dissects them). The QUIC-LB DCIDs were
// computed independently of steering/quic_lb.cpp (Python's `cryptography`
// AES) under fixture_steering_config()'s configs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "steering/steering_config.h"
#include "tests/steering/hex.h"

namespace qs::test {

// Owners 2, 3, 5, 7; QUIC ports 443 and 4433; four QUIC-LB configs, one per
// algorithm shape:
//   cr 0  plaintext, server ID 2 + nonce 6, self-encoded length (CID 9)
//   cr 1  single-pass AES, 4 + 12 (CID 17)
//   cr 2  four-pass AES, 3 + 5, self-encoded (CID 9; decode stops after 3 passes)
//   cr 3  four-pass AES, 6 + 4 (CID 11; the server ID needs the 4th pass)
inline SteeringConfig fixture_steering_config() {
  SteeringConfig c;
  c.quic_ports = {443, 4433};
  c.short_dcid_len = 8;
  c.owner_lcores = {2, 3, 5, 7};
  const auto key = [](const char* text) {
    const auto bytes = unhex(text);
    std::array<std::uint8_t, 16> k{};
    std::copy(bytes.begin(), bytes.end(), k.begin());
    return k;
  };
  QuicLbConfig cr0;
  cr0.config_id = 0;
  cr0.server_id_len = 2;
  cr0.nonce_len = 6;
  cr0.len_self_encode = true;
  QuicLbConfig cr1;
  cr1.config_id = 1;
  cr1.server_id_len = 4;
  cr1.nonce_len = 12;
  cr1.key = key("4a6f8d2e1c3b5a7990a1b2c3d4e5f607");
  QuicLbConfig cr2;
  cr2.config_id = 2;
  cr2.server_id_len = 3;
  cr2.nonce_len = 5;
  cr2.len_self_encode = true;
  cr2.key = key("0f1e2d3c4b5a69788796a5b4c3d2e1f0");
  QuicLbConfig cr3;
  cr3.config_id = 3;
  cr3.server_id_len = 6;
  cr3.nonce_len = 4;
  cr3.key = key("0f1e2d3c4b5a69788796a5b4c3d2e1f0");
  c.quic_lb = {cr0, cr1, cr2, cr3};
  c.server_routes = {
      {unhex("0102"), 3},         {unhex("0a0b"), 7},          {unhex("11223344"), 5},
      {unhex("abcdef"), 2},       {unhex("010203040506"), 7},
  };
  c.fallback_key = key("000102030405060708090a0b0c0d0e0f");
  return c;
}

struct FixtureField {
  const char* name;
  const char* hex;
  // What a frame cut anywhere inside this field (including right before its
  // first octet) parses as: "malformed:REASON", "not_udp", "quic", ...
  const char* cut_outcome;
};

struct PacketFixture {
  const char* name;
  std::vector<FixtureField> fields;
  const char* outcome;  // verdict, or malformed:REASON
  const char* form;     // long, short or -
  const char* type;     // initial, 0rtt, handshake, retry, vn, 1rtt or -
  const char* version;  // 0x%08x or -
  const char* dcid;     // hex, empty when none
  const char* scid;
  bool opens_connection;
  // "lcore:N" (QUIC-LB routed to that owner lcore), "fallback_dcid",
  // "fallback_tuple" or "none".
  const char* route;

  std::vector<std::uint8_t> bytes() const {
    std::string all;
    for (const auto& f : fields) all += f.hex;
    return unhex(all);
  }
};

inline const std::vector<PacketFixture>& packet_fixtures() {
  static const std::vector<PacketFixture> fixtures = {
      {"v1_initial_ipv4",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500004e1234400040113c2fc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35001bb003a0000", "malformed:truncated_udp"},
           {"quic_first", "c3", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "08", "malformed:truncated_dcid_length"},
           {"dcid", "8394c8f03e515708", "malformed:truncated_dcid"},
           {"scid_len", "08", "malformed:truncated_scid_length"},
           {"scid", "f067a5502a4262b5", "malformed:truncated_scid"},
           {"payload", "004018000000000000000000000000000000000000000000000000", "malformed:truncated_payload"},
       },
       "quic", "long", "initial", "0x00000001", "8394c8f03e515708", "f067a5502a4262b5", true, "fallback_dcid"},
      {"v1_0rtt_ipv6_quic_lb_plaintext",
       {
           {"ethernet", "02000000000102000000000286dd", "malformed:truncated_ethernet"},
           {"ipv6", "600000000024114020010db800000000000000000000000120010db8000000000000000000000099", "malformed:truncated_ipv6"},
           {"udp", "c35101bb00240000", "malformed:truncated_udp"},
           {"quic_first", "d1", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "09", "malformed:truncated_dcid_length"},
           {"dcid", "080102a1a2a3a4a5a6", "malformed:truncated_dcid"},
           {"scid_len", "04", "malformed:truncated_scid_length"},
           {"scid", "c0ffee00", "malformed:truncated_scid"},
           {"payload", "4020111111111111", "malformed:truncated_payload"},
       },
       "quic", "long", "0rtt", "0x00000001", "080102a1a2a3a4a5a6", "c0ffee00", true, "lcore:3"},
      {"v1_handshake_vlan_quic_lb_single_pass",
       {
           {"ethernet", "0200000000010200000000028100", "malformed:truncated_ethernet"},
           {"vlan1", "00640800", "malformed:truncated_vlan"},
           {"ipv4", "450000421234400040113c3bc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35201bb002e0000", "malformed:truncated_udp"},
           {"quic_first", "e2", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "11", "malformed:truncated_dcid_length"},
           {"dcid", "334d18fe963dab3c692d119a7685b9d12a", "malformed:truncated_dcid"},
           {"scid_len", "08", "malformed:truncated_scid_length"},
           {"scid", "0807060504030201", "malformed:truncated_scid"},
           {"payload", "401022222222", "malformed:truncated_payload"},
       },
       "quic", "long", "handshake", "0x00000001", "334d18fe963dab3c692d119a7685b9d12a", "0807060504030201", false, "lcore:5"},
      {"v1_retry_from_server",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500004c1234400040113c31c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "01bbc35300380000", "malformed:truncated_udp"},
           {"quic_first", "f5", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "08", "malformed:truncated_dcid_length"},
           {"dcid", "b0b1b2b3b4b5b6b7", "malformed:truncated_dcid"},
           {"scid_len", "09", "malformed:truncated_scid_length"},
           {"scid", "48250617003bfe07ca", "malformed:truncated_scid"},
           {"payload", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "malformed:truncated_payload"},
       },
       "quic", "long", "retry", "0x00000001", "b0b1b2b3b4b5b6b7", "48250617003bfe07ca", false, "fallback_dcid"},
      {"v2_initial_qinq_ipv6",
       {
           {"ethernet", "02000000000102000000000288a8", "malformed:truncated_ethernet"},
           {"vlan1", "0c8a8100", "malformed:truncated_vlan"},
           {"vlan2", "006486dd", "malformed:truncated_vlan"},
           {"ipv6", "600000000034114020010db800000000000000000000000120010db8000000000000000000000099", "malformed:truncated_ipv6"},
           {"udp", "c35401bb00340000", "malformed:truncated_udp"},
           {"quic_first", "d0", "malformed:empty_udp_payload"},
           {"version", "6b3343cf", "malformed:truncated_version"},
           {"dcid_len", "0a", "malformed:truncated_dcid_length"},
           {"dcid", "c8c9cacbcccdcecfd0d1", "malformed:truncated_dcid"},
           {"scid_len", "00", "malformed:truncated_scid_length"},
           {"payload", "004018333333333333333333333333333333333333333333333333", "malformed:truncated_payload"},
       },
       "quic", "long", "initial", "0x6b3343cf", "c8c9cacbcccdcecfd0d1", "", true, "fallback_dcid"},
      {"v2_0rtt_quic_lb_four_pass",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000361234400040113c47c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35501bb00220000", "malformed:truncated_udp"},
           {"quic_first", "e0", "malformed:empty_udp_payload"},
           {"version", "6b3343cf", "malformed:truncated_version"},
           {"dcid_len", "09", "malformed:truncated_dcid_length"},
           {"dcid", "48250617003bfe07ca", "malformed:truncated_dcid"},
           {"scid_len", "04", "malformed:truncated_scid_length"},
           {"scid", "01020304", "malformed:truncated_scid"},
           {"payload", "400844444444", "malformed:truncated_payload"},
       },
       "quic", "long", "0rtt", "0x6b3343cf", "48250617003bfe07ca", "01020304", true, "lcore:2"},
      {"v2_handshake_quic_lb_four_pass_long_sid",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000341234400040113c49c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35601bb00200000", "malformed:truncated_udp"},
           {"quic_first", "f0", "malformed:empty_udp_payload"},
           {"version", "6b3343cf", "malformed:truncated_version"},
           {"dcid_len", "0b", "malformed:truncated_dcid_length"},
           {"dcid", "6768ae45af2e3eabd5a6d0", "malformed:truncated_dcid"},
           {"scid_len", "00", "malformed:truncated_scid_length"},
           {"payload", "400855555555", "malformed:truncated_payload"},
       },
       "quic", "long", "handshake", "0x6b3343cf", "6768ae45af2e3eabd5a6d0", "", false, "lcore:7"},
      {"v2_retry_from_server",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000481234400040113c35c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "01bbc35700340000", "malformed:truncated_udp"},
           {"quic_first", "c0", "malformed:empty_udp_payload"},
           {"version", "6b3343cf", "malformed:truncated_version"},
           {"dcid_len", "04", "malformed:truncated_dcid_length"},
           {"dcid", "a0a1a2a3", "malformed:truncated_dcid"},
           {"scid_len", "09", "malformed:truncated_scid_length"},
           {"scid", "080a0bb1b2b3b4b5b6", "malformed:truncated_scid"},
           {"payload", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "malformed:truncated_payload"},
       },
       "quic", "long", "retry", "0x6b3343cf", "a0a1a2a3", "080a0bb1b2b3b4b5b6", false, "fallback_dcid"},
      {"version_negotiation_long_cids",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500005b1234400040113c22c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "01bbc35800470000", "malformed:truncated_udp"},
           {"quic_first", "aa", "malformed:empty_udp_payload"},
           {"version", "00000000", "malformed:truncated_version"},
           {"dcid_len", "18", "malformed:truncated_dcid_length"},
           {"dcid", "b81111111111111111111111111111111111111111111111", "malformed:truncated_dcid"},
           {"scid_len", "18", "malformed:truncated_scid_length"},
           {"scid", "a82222222222222222222222222222222222222222222222", "malformed:truncated_scid"},
           {"payload", "000000016b3343cf", "malformed:truncated_payload"},
       },
       "quic", "long", "vn", "0x00000000", "b81111111111111111111111111111111111111111111111", "a82222222222222222222222222222222222222222222222", false, "fallback_dcid"},
      {"unknown_version_long_dcid",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500004e1234400040113c2fc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35901bb003a0000", "malformed:truncated_udp"},
           {"quic_first", "cf", "malformed:empty_udp_payload"},
           {"version", "1a2a3a4a", "malformed:truncated_version"},
           {"dcid_len", "19", "malformed:truncated_dcid_length"},
           {"dcid", "a5333333333333333333333333333333333333333333333333", "malformed:truncated_dcid"},
           {"scid_len", "02", "malformed:truncated_scid_length"},
           {"scid", "0102", "malformed:truncated_scid"},
           {"payload", "66666666666666666666666666666666", "malformed:truncated_payload"},
       },
       "quic", "long", "-", "0x1a2a3a4a", "a5333333333333333333333333333333333333333333333333", "0102", true, "fallback_dcid"},
      {"short_quic_lb_plaintext",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500003a1234400040113c43c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35a01bb00260000", "malformed:truncated_udp"},
           {"quic_first", "41", "malformed:empty_udp_payload"},
           {"dcid_first", "08", "malformed:empty_short_dcid"},
           {"dcid_rest", "0a0bb1b2b3b4b5b6", "malformed:truncated_dcid"},
           {"payload", "7777777777777777777777777777777777777777", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "080a0bb1b2b3b4b5b6", "", false, "lcore:7"},
      {"short_ipv6_extension_chain_single_pass",
       {
           {"ethernet", "02000000000102000000000286dd", "malformed:truncated_ethernet"},
           {"ipv6", "600000000056004020010db800000000000000000000000120010db8000000000000000000000099", "malformed:truncated_ipv6"},
           {"ext1", "2b00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext2", "3c0202010000000020010db8000000000000000000000042", "malformed:truncated_ipv6_extension"},
           {"ext3", "1100000000000000", "malformed:truncated_ipv6_extension"},
           {"udp", "c35b01bb002e0000", "malformed:truncated_udp"},
           {"quic_first", "5f", "malformed:empty_udp_payload"},
           {"dcid_first", "33", "malformed:empty_short_dcid"},
           {"dcid_rest", "4d18fe963dab3c692d119a7685b9d12a", "malformed:truncated_dcid"},
           {"payload", "8888888888888888888888888888888888888888", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "334d18fe963dab3c692d119a7685b9d12a", "", false, "lcore:5"},
      {"short_ipv6_first_fragment_four_pass",
       {
           {"ethernet", "02000000000102000000000286dd", "malformed:truncated_ethernet"},
           {"ipv6", "6000000000382c4020010db800000000000000000000000120010db8000000000000000000000099", "malformed:truncated_ipv6"},
           {"ext1", "11000001deadbeef", "malformed:truncated_ipv6_extension"},
           {"udp", "c35c115100c80000", "malformed:truncated_udp"},
           {"quic_first", "43", "malformed:empty_udp_payload"},
           {"dcid_first", "48", "malformed:empty_short_dcid"},
           {"dcid_rest", "250617003bfe07ca", "malformed:truncated_dcid"},
           {"payload", "999999999999999999999999999999999999999999999999999999999999", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "48250617003bfe07ca", "", false, "lcore:2"},
      {"short_unconfigured_codepoint_default_len",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500002f1234400040113c4ec0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35e01bb001b0000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
           {"dcid_first", "c7", "malformed:empty_short_dcid"},
           {"dcid_rest", "0102030405060a", "malformed:truncated_dcid"},
           {"payload", "abababababababababab", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "c70102030405060a", "", false, "fallback_dcid"},
      {"short_unroutable_codepoint_self_encoded",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000331234400040113c4ac0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c35f01bb001f0000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
           {"dcid_first", "eb", "malformed:empty_short_dcid"},
           {"dcid_rest", "1c1c1c1c1c1c1c1c1c1c1c", "malformed:truncated_dcid"},
           {"payload", "cdcdcdcdcdcdcdcdcdcd", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "eb1c1c1c1c1c1c1c1c1c1c1c", "", false, "fallback_dcid"},
      {"short_quic_lb_unrouted_server_id",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000301234400040113c4dc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c36001bb001c0000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
           {"dcid_first", "08", "malformed:empty_short_dcid"},
           {"dcid_rest", "ffffc1c2c3c4c5c6", "malformed:truncated_dcid"},
           {"payload", "efefefefefefefefefef", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "08ffffc1c2c3c4c5c6", "", false, "fallback_dcid"},
      {"v1_initial_ipv4_options_port_4433",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4600004a1234400040113932c0000201c6336407", "malformed:truncated_ipv4"},
           {"ipv4_options", "01010100", "malformed:truncated_ipv4_options"},
           {"udp", "c361115100320000", "malformed:truncated_udp"},
           {"quic_first", "c0", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "08", "malformed:truncated_dcid_length"},
           {"dcid", "1122334455667788", "malformed:truncated_dcid"},
           {"scid_len", "00", "malformed:truncated_scid_length"},
           {"payload", "004018000000000000000000000000000000000000000000000000", "malformed:truncated_payload"},
       },
       "quic", "long", "initial", "0x00000001", "1122334455667788", "", true, "fallback_dcid"},
      {"v1_initial_ipv4_first_fragment",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000461234200040115c37c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c36201bb04b00000", "malformed:truncated_udp"},
           {"quic_first", "c0", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "08", "malformed:truncated_dcid_length"},
           {"dcid", "2122232425262728", "malformed:truncated_dcid"},
           {"scid_len", "00", "malformed:truncated_scid_length"},
           {"payload", "004018000000000000000000000000000000000000000000000000", "malformed:truncated_payload"},
       },
       "quic", "long", "initial", "0x00000001", "2122232425262728", "", true, "fallback_dcid"},
      {"ipv4_later_fragment",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500003c123400b940117b88c0000201c6336407", "malformed:truncated_ipv4"},
           {"payload", "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1", "malformed:truncated_payload"},
       },
       "not_udp", "-", "-", "-", "", "", false, "fallback_tuple"},
      {"ipv6_later_fragment",
       {
           {"ethernet", "02000000000102000000000286dd", "malformed:truncated_ethernet"},
           {"ipv6", "6000000000302c4020010db800000000000000000000000120010db8000000000000000000000099", "malformed:truncated_ipv6"},
           {"ext1", "110005c8deadbeef", "malformed:truncated_ipv6_extension"},
           {"payload", "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2", "malformed:truncated_payload"},
       },
       "not_udp", "-", "-", "-", "", "", false, "fallback_tuple"},
      {"udp_dns_not_quic",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500003d1234400040113c40c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c365003500290000", "malformed:truncated_udp"},
           {"payload", "12340100000100000000000003777777076578616d706c6503636f6d0000010001", "malformed:truncated_payload"},
       },
       "not_quic", "-", "-", "-", "", "", false, "fallback_tuple"},
      {"tcp_to_443",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000281234400040063c60c0000201c6336407", "malformed:truncated_ipv4"},
           {"tcp", "c35101bb00000001000000005002200000000000", "malformed:truncated_payload"},
       },
       "not_udp", "-", "-", "-", "", "", false, "fallback_tuple"},
      {"arp",
       {
           {"ethernet", "0200000000010200000000020806", "malformed:truncated_ethernet"},
           {"arp", "0001080006040001020000000002c0000201000000000000c0000202", "not_udp"},
       },
       "not_udp", "-", "-", "-", "", "", false, "none"},
      {"v1_dcid_too_long",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500003c1234400040113c41c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c36801bb00280000", "malformed:truncated_udp"},
           {"quic_first", "c0", "malformed:empty_udp_payload"},
           {"version", "00000001", "malformed:truncated_version"},
           {"dcid_len", "15", "malformed:truncated_dcid_length"},
           {"dcid", "444444444444444444444444444444444444444444", "malformed:cid_too_long"},
           {"rest", "0000000000", "malformed:cid_too_long"},
       },
       "malformed:cid_too_long", "long", "-", "0x00000001", "", "", false, "none"},
      {"short_self_encoded_len_too_long",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000461234400040113c37c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c36901bb00320000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
           {"dcid_first", "ff", "malformed:empty_short_dcid"},
           {"rest", "00000000000000000000000000000000000000000000000000000000000000000000000000000000", "malformed:cid_too_long"},
       },
       "malformed:cid_too_long", "short", "1rtt", "-", "", "", false, "none"},
      {"three_vlan_tags",
       {
           {"ethernet", "0200000000010200000000028100", "malformed:truncated_ethernet"},
           {"vlan1", "00018100", "malformed:truncated_vlan"},
           {"vlan2", "00028100", "malformed:truncated_vlan"},
           {"vlan3", "00030800", "malformed:too_many_vlans"},
           {"ipv4", "450000261234400040113c57c0000201c6336407", "malformed:too_many_vlans"},
           {"udp", "c36a01bb00120000", "malformed:too_many_vlans"},
           {"quic_first", "40", "malformed:too_many_vlans"},
           {"dcid_first", "08", "malformed:too_many_vlans"},
           {"dcid_rest", "0a0bb1b2b3b4b5b6", "malformed:too_many_vlans"},
       },
       "malformed:too_many_vlans", "-", "-", "-", "", "", false, "none"},
      {"ipv4_ihl_below_5",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4400001c1234400040113d61c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "000101bb00080000", "malformed:bad_ipv4_header_length"},
       },
       "malformed:bad_ipv4_header_length", "-", "-", "-", "", "", false, "none"},
      {"ethertype_ipv4_version_6",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "6500001c1234400040111c61c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "000101bb00080000", "malformed:ip_version_mismatch"},
       },
       "malformed:ip_version_mismatch", "-", "-", "-", "", "", false, "none"},
      {"udp_length_below_8",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000201234400040113c5dc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c36d01bb00070000", "malformed:truncated_udp"},
           {"payload", "40c7c7c7", "malformed:bad_udp_length"},
       },
       "malformed:bad_udp_length", "-", "-", "-", "", "", false, "none"},
      {"udp_length_past_ip_payload",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000201234400040113c5dc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c36e01bb00280000", "malformed:truncated_udp"},
           {"payload", "40c7c7c7", "malformed:bad_udp_length"},
       },
       "malformed:bad_udp_length", "-", "-", "-", "", "", false, "none"},
      {"ipv4_total_length_below_header",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000101234400040113c6dc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "000101bb00080000", "malformed:bad_ipv4_total_length"},
       },
       "malformed:bad_ipv4_total_length", "-", "-", "-", "", "", false, "none"},
      {"nine_ipv6_extension_headers",
       {
           {"ethernet", "02000000000102000000000286dd", "malformed:truncated_ethernet"},
           {"ipv6", "60000000005a3c4020010db800000000000000000000000120010db8000000000000000000000099", "malformed:truncated_ipv6"},
           {"ext1", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext2", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext3", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext4", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext5", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext6", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext7", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext8", "3c00010400000000", "malformed:truncated_ipv6_extension"},
           {"ext9", "1100010400000000", "malformed:too_many_ipv6_extensions"},
           {"udp", "c37001bb00120000", "malformed:too_many_ipv6_extensions"},
           {"quic_first", "40", "malformed:too_many_ipv6_extensions"},
           {"dcid_first", "08", "malformed:too_many_ipv6_extensions"},
           {"dcid_rest", "0a0bb1b2b3b4b5b6", "malformed:too_many_ipv6_extensions"},
       },
       "malformed:too_many_ipv6_extensions", "-", "-", "-", "", "", false, "none"},
      {"short_header_without_dcid",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500001d1234400040113c60c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c37101bb00090000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
       },
       "malformed:empty_short_dcid", "short", "1rtt", "-", "", "", false, "none"},
      {"empty_udp_payload",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "4500001c1234400040113c61c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c37201bb00080000", "malformed:truncated_udp"},
       },
       "malformed:empty_udp_payload", "-", "-", "-", "", "", false, "none"},
      {"short_ethernet_padding",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000261234400040113c57c0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "c37301bb00120000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
           {"dcid_first", "08", "malformed:empty_short_dcid"},
           {"dcid_rest", "0102a1a2a3a4a5a6", "malformed:truncated_dcid"},
           {"padding", "0000000000000000", "quic"},
       },
       "quic", "short", "1rtt", "-", "080102a1a2a3a4a5a6", "", false, "lcore:3"},
      {"short_from_server",
       {
           {"ethernet", "0200000000010200000000020800", "malformed:truncated_ethernet"},
           {"ipv4", "450000311234400040113c4cc0000201c6336407", "malformed:truncated_ipv4"},
           {"udp", "01bbc374001d0000", "malformed:truncated_udp"},
           {"quic_first", "40", "malformed:empty_udp_payload"},
           {"dcid_first", "c5", "malformed:empty_short_dcid"},
           {"dcid_rest", "01020304050607", "malformed:truncated_dcid"},
           {"payload", "121212121212121212121212", "malformed:truncated_payload"},
       },
       "quic", "short", "1rtt", "-", "c501020304050607", "", false, "fallback_dcid"},
  };
  return fixtures;
}

}  // namespace qs::test
