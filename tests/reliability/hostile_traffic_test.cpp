// Hostile traffic through the live data path (issue 15): a table of captures
// a hostile sender could produce, each replayed on ring ports through the
// whole data path (forward and reflect). For every one: no crash and no
// sanitizer report (this suite runs under ASan+UBSan too), the run does not
// stall, every frame is accounted for (received = processed + drops,
// processed = transmitted + sunk, the port's counters agree), the drops are
// exactly what steering/ says of the frames (malformed, not_udp), and every
// mbuf comes back.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "steering/packet_classifier.h"
#include "tests/dataplane/scenario.h"
#include "tests/dataplane/test_traffic.h"
#include "tests/traffic/frame.h"

namespace qs::test {
namespace {

using Frame = std::vector<std::uint8_t>;

std::string profile(const std::string& action) {
  return "ports:\n"
         "  - {name: wire, device: \"{DEVICE}\", rx_queues: 2, tx_queues: 2, rss: false}\n"
         "mempool: {mbufs: 8191, cache: 64}\n"
         "lcores:\n  - {id: 1, rx: [\"wire:0\"], owner: true}\n  - {id: 2, rx: [\"wire:1\"], owner: true}\n" +
         steering_yaml({1, 2}) + "action: " + action + "\n" +
         "polling: {idle_sleep_us: 20, idle_polls_before_sleep: 32}\n"
         "stats: {period_ms: 0}\n";
}

void put16(Frame& f, std::size_t at, unsigned v) {
  f[at] = std::uint8_t(v >> 8);
  f[at + 1] = std::uint8_t(v);
}

// A QUIC 1-RTT packet for the profile's 17-octet short-header DCIDs.
std::vector<std::uint8_t> short_header(std::mt19937_64& rng, std::size_t payload = 40) {
  std::vector<std::uint8_t> q{0x40};
  for (int i = 0; i < 17; ++i) q.push_back(std::uint8_t(rng()));
  for (std::size_t i = 0; i < payload; ++i) q.push_back(std::uint8_t(rng()));
  return q;
}

Frame udp(const std::vector<std::uint8_t>& payload, bool v6 = false, std::uint16_t vlan = 0) {
  traffic::L2Header l2;
  l2.dst = {2, 0, 0, 0, 0, 2};
  l2.src = {2, 0, 0, 0, 0, 1};
  l2.vlan = vlan;
  if (v6) {
    traffic::IpAddress a, b;
    a.v6 = b.v6 = true;
    a.bytes[0] = 0x20, a.bytes[15] = 1;
    b.bytes[0] = 0x20, b.bytes[15] = 2;
    return traffic::build_udp_frame(l2, a, 40000, b, 443, payload, 1, 0);
  }
  return traffic::build_udp_frame(l2, traffic::IpAddress::v4(10, 0, 0, 1), 40000,
                                  traffic::IpAddress::v4(198, 18, 0, 1), 443, payload, 1, 0);
}

struct HostileCase {
  const char* name;
  std::vector<Frame> (*make)(std::mt19937_64&);
};

std::vector<Frame> random_bytes(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (int i = 0; i < 400; ++i) {
    Frame f(rng() % 1600);
    for (auto& b : f) b = std::uint8_t(rng());
    if (i % 2 == 0 && f.size() >= 14) f[12] = 0x08, f[13] = 0x00;  // half of them claim IPv4
    if (i % 4 == 1 && f.size() >= 14) f[12] = 0x86, f[13] = 0xdd;  // a quarter IPv6
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Frame> truncated(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (int i = 0; i < 300; ++i) {
    Frame f = udp(short_header(rng, rng() % 200), i % 2 == 1, i % 3 == 0 ? 7 : 0);
    f.resize(rng() % (f.size() + 1));
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Frame> lying_lengths(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (int i = 0; i < 300; ++i) {
    const bool v6 = i % 2 == 1;
    Frame f = udp(short_header(rng, 60), v6);
    const std::size_t l3 = 14, l4 = v6 ? 54 : 34;
    const unsigned lie = (i / 2) % 4 == 0 ? unsigned(rng() % 65536) : unsigned(rng() % 200);
    switch (i % 6) {
      case 0: case 1: put16(f, v6 ? l3 + 4 : l3 + 2, lie); break;  // IP total / payload length
      case 2: case 3: put16(f, l4 + 4, lie); break;                // UDP length
      default: put16(f, v6 ? l3 + 4 : l3 + 2, lie), put16(f, l4 + 4, unsigned(rng() % 65536)); break;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Frame> ipv4_options(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (unsigned ihl = 0; ihl <= 15; ++ihl) {
    for (int variant = 0; variant < 4; ++variant) {
      const auto quic = short_header(rng, 30);
      Frame f = udp(quic);
      // Re-make the IPv4 header with IHL words: options of NOPs / random.
      const std::size_t opt = ihl > 5 ? (ihl - 5) * 4 : 0;
      Frame g(f.begin(), f.begin() + 34);
      g[14] = std::uint8_t(0x40 | ihl);
      for (std::size_t k = 0; k < opt; ++k) g.push_back(variant == 0 ? 0x01 : std::uint8_t(rng()));
      g.insert(g.end(), f.begin() + 34, f.end());
      put16(g, 16, unsigned(20 + opt + 8 + quic.size()));
      if (variant == 3) g.resize(14 + 20 + opt / 2);  // options cut short
      out.push_back(std::move(g));
    }
  }
  return out;
}

Frame ipv6_chain(std::mt19937_64& rng, unsigned headers, bool fragment_last) {
  const auto quic = short_header(rng, 30);
  Frame f = udp(quic, true);
  Frame g(f.begin(), f.begin() + 54);  // Ethernet + IPv6
  g[20] = headers == 0 ? 17 : 0;       // next header: hop-by-hop first
  for (unsigned h = 0; h < headers; ++h) {
    const bool last = h + 1 == headers;
    const std::uint8_t next = last ? (fragment_last ? 44 : 17) : (h % 2 == 0 ? 60 : 43);
    g.insert(g.end(), {next, 0, 0, 0, 0, 0, 0, 0});
  }
  if (fragment_last && headers != 0) g.insert(g.end(), {17, 0, 0x00, 0x01, 0, 0, 0, 1});  // first fragment, more to come
  g.insert(g.end(), f.begin() + 54, f.end());
  put16(g, 18, unsigned(g.size() - 54));
  return g;
}

std::vector<Frame> ipv6_extension_chains(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (unsigned n : {0u, 1u, 2u, 7u, 8u, 9u, 16u, 50u, 100u, 200u})
    for (bool frag : {false, true}) out.push_back(ipv6_chain(rng, n, frag));
  return out;
}

std::vector<Frame> fragments(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (int i = 0; i < 60; ++i) {
    Frame f = udp(short_header(rng, 50));
    const unsigned offset = i % 3 == 0 ? 0 : unsigned(1 + rng() % 8000);
    put16(f, 20, (i % 2 == 0 ? 0x2000 : 0) | (offset & 0x1fff));  // MF, offset
    out.push_back(std::move(f));
    // IPv6 fragment header, first and later fragments.
    Frame g = ipv6_chain(rng, 0, false);
    Frame h(g.begin(), g.begin() + 54);
    h[20] = 44;
    h.insert(h.end(), {17, 0, std::uint8_t(offset >> 5), std::uint8_t((offset << 3) | 1), 0, 0, 0, 7});
    h.insert(h.end(), g.begin() + 54, g.end());
    put16(h, 18, unsigned(h.size() - 54));
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<Frame> many_vlans(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (unsigned tags : {1u, 2u, 3u, 4u, 10u, 64u, 200u}) {
    for (std::uint16_t type : {std::uint16_t(0x8100), std::uint16_t(0x88a8)}) {
      const Frame f = udp(short_header(rng, 30));
      Frame g(f.begin(), f.begin() + 12);
      for (unsigned t = 0; t < tags; ++t) g.insert(g.end(), {std::uint8_t(type >> 8), std::uint8_t(type), 0, 7});
      g.insert(g.end(), f.begin() + 12, f.end());
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<Frame> long_dcids(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (unsigned len = 0; len <= 255; ++len) {
    for (std::uint32_t version : {0x00000001u, 0x6b3343cfu, 0x1a2a3a4au, 0u}) {
      if (len < 21 && version != 0x1a2a3a4au) continue;
      std::vector<std::uint8_t> q = {0xc0, std::uint8_t(version >> 24), std::uint8_t(version >> 16),
                                     std::uint8_t(version >> 8), std::uint8_t(version), std::uint8_t(len)};
      for (unsigned i = 0; i < len; ++i) q.push_back(std::uint8_t(rng()));
      q.push_back(std::uint8_t(rng() % 40));  // SCID length, maybe past the end
      q.resize(q.size() + rng() % 30, 0);
      out.push_back(udp(q, len % 2 == 1));
    }
  }
  return out;
}

std::vector<Frame> zero_length_and_jumbo(std::mt19937_64& rng) {
  std::vector<Frame> out;
  for (std::size_t n : {0, 1, 13, 14, 15, 33, 41, 42}) {
    Frame f(n);
    for (auto& b : f) b = std::uint8_t(rng());
    if (n >= 14) f[12] = 0x08, f[13] = 0x00;
    out.push_back(std::move(f));
  }
  for (std::size_t payload : {1400u, 1500u, 2100u, 4000u, 8900u, 9500u, 16000u, 40000u, 65000u}) {
    out.push_back(udp(short_header(rng, payload)));
    out.push_back(udp(short_header(rng, payload), true));
  }
  return out;
}

const HostileCase kCases[] = {
    {"random_bytes", random_bytes},
    {"truncated", truncated},
    {"lying_lengths", lying_lengths},
    {"ipv4_options", ipv4_options},
    {"ipv6_extension_chains", ipv6_extension_chains},
    {"fragments", fragments},
    {"many_vlans", many_vlans},
    {"dcid_lengths_0_to_255", long_dcids},
    {"zero_length_and_jumbo", zero_length_and_jumbo},
};

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

class HostileTraffic : public ::testing::TestWithParam<std::tuple<HostileCase, const char*>> {};

TEST_P(HostileTraffic, EveryFrameIsAccountedForAndNothingLeaks) {
  const auto& [c, action] = GetParam();
  std::mt19937_64 rng(15);
  const std::vector<Frame> frames = c.make(rng);
  const std::string yaml = profile(action);
  PacketClassifier reference(parse_test_profile(yaml).steering);
  std::uint64_t malformed = 0, not_udp = 0;
  std::vector<const Frame*> ptrs;
  std::vector<unsigned> queue_of;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const Verdict v = reference.classify(frames[i].data(), frames[i].size()).packet.verdict;
    malformed += v == Verdict::kMalformed;
    not_udp += v == Verdict::kNotUdp;
    ptrs.push_back(&frames[i]);
    queue_of.push_back(unsigned(i % 2));
  }
  RingPort port(2, 1024, 2, 1 << 14);
  Scenario scenario(yaml, port);
  RunOptions options;
  options.stall_limit = std::chrono::seconds(30);
  const ScenarioResult r = scenario.run(ptrs, queue_of, options);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.sent, frames.size());
  EXPECT_EQ(r.stats.rx_total.rx, frames.size());
  EXPECT_EQ(r.accounting, "");
  EXPECT_EQ(r.stats.drops_total[std::size_t(DropReason::kMalformed)], malformed) << "as steering/ says";
  EXPECT_EQ(r.stats.drops_total[std::size_t(DropReason::kNotUdp)], not_udp) << "as steering/ says";
  EXPECT_EQ(r.stats.drops_sum(), malformed + not_udp) << "no other drop in an unloaded run";
  EXPECT_EQ(r.delivered.size(), frames.size() - malformed - not_udp);
  EXPECT_EQ(r.mbufs_leaked, 0);
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<HostileCase, const char*>>& info) {
  const std::string action = std::get<1>(info.param);
  return std::string(std::get<0>(info.param).name) + (action.find("reflect") != std::string::npos ? "_reflect" : "_forward");
}

INSTANTIATE_TEST_SUITE_P(Captures, HostileTraffic,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values("{type: forward, tx_port: wire}", "{type: reflect}")),
                         case_name);

}  // namespace
}  // namespace qs::test
