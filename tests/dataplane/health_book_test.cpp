// Health checks without DPDK (issue 39): the probe's bytes and the receive
// path's test for its answer (dataplane/fastpath/health_probe.h), and the
// HealthBook's schedule, budget, matching and rise/fall on made-up times.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "dataplane/fastpath/health_probe.h"
#include "dataplane/runtime/health_book.h"

namespace qs {
namespace {

HealthTarget v4_target() {
  HealthTarget t;
  t.address = {10, 99, 1, 1};
  t.udp_port = 443;
  return t;
}
HealthTarget v6_target() {
  HealthTarget t;
  t.ipv6 = true;
  t.address = {0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  t.udp_port = 443;
  return t;
}

HealthChecksConfig config(std::uint32_t rise = 2, std::uint32_t fall = 3) {
  HealthChecksConfig c;
  c.enabled = true;
  c.interval_ms = 100;
  c.timeout_ms = 50;
  c.rise = rise;
  c.fall = fall;
  c.probes_per_s = 100000;
  c.targets = {v4_target(), v6_target()};
  return c;
}

std::vector<BackendConfig> backends(unsigned n) {
  std::vector<BackendConfig> out(n);
  for (unsigned i = 0; i < n; ++i) {
    out[i].name = std::string("b").append(std::to_string(i));
    out[i].slot = std::uint16_t(i);
  }
  return out;
}

// The answer a QUIC server sends to a probe: from the target, CIDs swapped.
ProbeAnswer answer_to(const HealthBook::Probe& p, const HealthTarget& t) {
  ProbeAnswer a;
  a.ipv6 = t.ipv6;
  a.source = t.address;
  a.source_port = t.udp_port;
  a.dcid_len = a.scid_len = kProbeCidLen;
  std::copy(p.scid.begin(), p.scid.end(), a.dcid.begin());
  std::copy(p.dcid.begin(), p.dcid.end(), a.scid.begin());
  return a;
}

std::uint16_t checksum_of(const std::uint8_t* p, std::uint32_t n) {
  return std::uint16_t(~delivery_detail::sum_be16(p, n));
}

TEST(HealthProbe, IsAReservedVersionLongHeaderOf1200OctetsWithValidChecksums) {
  for (const bool v6 : {false, true}) {
    ProbeAddresses a;
    a.ipv6 = v6;
    a.source = v6 ? std::array<std::uint8_t, 16>{0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
                  : std::array<std::uint8_t, 16>{10, 99, 0, 2};
    a.target = v6 ? v6_target().address : v4_target().address;
    a.source_port = 61000;
    a.target_port = 443;
    const std::uint8_t dcid[8] = {1, 2, 3, 4, 5, 6, 7, 8}, scid[8] = {9, 10, 11, 12, 13, 14, 15, 16};
    std::vector<std::uint8_t> f(kMaxProbeFrame);
    const std::uint32_t len = build_probe_frame(a, dcid, scid, 0x15, f.data());
    const std::uint32_t ip_len = v6 ? kIpv6HeaderLen : kIpv4HeaderLen;
    ASSERT_EQ(len, kEthernetLen + ip_len + kUdpHeaderLen + kProbeUdpPayload);
    const std::uint8_t* ip = f.data() + kEthernetLen;
    const std::uint8_t* udp = ip + ip_len;
    const std::uint8_t* q = udp + kUdpHeaderLen;
    if (!v6) {
      EXPECT_EQ(checksum_of(ip, kIpv4HeaderLen), 0) << "IPv4 header checksum";
    }
    // The UDP checksum over the pseudo-header and the datagram sums to zero.
    std::vector<std::uint8_t> pseudo;
    const std::uint32_t alen = v6 ? 16 : 4;
    pseudo.insert(pseudo.end(), ip + (v6 ? 8 : 12), ip + (v6 ? 8 : 12) + 2 * alen);
    pseudo.push_back(0);
    pseudo.push_back(17);
    pseudo.push_back(std::uint8_t((kUdpHeaderLen + kProbeUdpPayload) >> 8));
    pseudo.push_back(std::uint8_t(kUdpHeaderLen + kProbeUdpPayload));
    pseudo.insert(pseudo.end(), udp, udp + kUdpHeaderLen + kProbeUdpPayload);
    EXPECT_EQ(checksum_of(pseudo.data(), std::uint32_t(pseudo.size())), 0) << "UDP checksum, v6 " << v6;
    EXPECT_EQ(q[0] & 0xc0, 0xc0) << "long header, fixed bit";
    const std::uint32_t version = std::uint32_t(q[1]) << 24 | q[2] << 16 | q[3] << 8 | q[4];
    EXPECT_EQ(version & 0x0f0f0f0f, 0x0a0a0a0au) << "a version of the reserved form 0x?a?a?a?a";
    EXPECT_EQ(q[5], 8);
    EXPECT_TRUE(std::equal(dcid, dcid + 8, q + 6));
    EXPECT_EQ(q[14], 8);
    EXPECT_TRUE(std::equal(scid, scid + 8, q + 15));
    EXPECT_FALSE(parse_probe_answer(f.data(), len, 443)) << "a probe is no Version Negotiation";
  }
}

// A Version Negotiation frame: from `from`:443 to 10.99.0.2:port.
std::vector<std::uint8_t> vn_frame(std::uint16_t port, std::uint8_t version_octet = 0, std::uint8_t dcid_len = 8) {
  std::vector<std::uint8_t> f(14, 0);
  f[12] = 0x08;
  const std::uint8_t ip[20] = {0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 99, 1, 1, 10, 99, 0, 2};
  f.insert(f.end(), std::begin(ip), std::end(ip));
  std::vector<std::uint8_t> q = {0x80, version_octet, 0, 0, 0, dcid_len};
  for (unsigned i = 0; i < dcid_len; ++i) q.push_back(std::uint8_t(0xa0 + i));
  q.push_back(8);
  for (unsigned i = 0; i < 8; ++i) q.push_back(std::uint8_t(0xb0 + i));
  q.insert(q.end(), {0, 0, 0, 1});
  const std::uint32_t udp_len = 8 + std::uint32_t(q.size());
  const std::uint8_t udp[8] = {0x01, 0xbb, std::uint8_t(port >> 8), std::uint8_t(port), std::uint8_t(udp_len >> 8),
                               std::uint8_t(udp_len), 0, 0};
  f.insert(f.end(), std::begin(udp), std::end(udp));
  f.insert(f.end(), q.begin(), q.end());
  const std::uint32_t total = 20 + udp_len;
  f[16] = std::uint8_t(total >> 8);
  f[17] = std::uint8_t(total);
  return f;
}

TEST(HealthProbe, TheReceiveTestFindsVersionNegotiationToTheProbePortOnly) {
  const auto vn = vn_frame(61000);
  ProbeAnswer a;
  ASSERT_TRUE(parse_probe_answer(vn.data(), std::uint32_t(vn.size()), 61000, &a));
  EXPECT_FALSE(a.ipv6);
  EXPECT_EQ(a.source[0], 10);
  EXPECT_EQ(a.source[3], 1);
  EXPECT_EQ(a.source_port, 443);
  EXPECT_EQ(a.dcid_len, 8);
  EXPECT_EQ(a.dcid[0], 0xa0);
  EXPECT_EQ(a.scid[7], 0xb7);
  EXPECT_FALSE(parse_probe_answer(vn.data(), std::uint32_t(vn.size()), 61001)) << "another port";
  const auto not_vn = vn_frame(61000, 1);
  EXPECT_FALSE(parse_probe_answer(not_vn.data(), std::uint32_t(not_vn.size()), 61000)) << "version 1 is no VN";
  const auto long_cid = vn_frame(61000, 0, 21);
  EXPECT_FALSE(parse_probe_answer(long_cid.data(), std::uint32_t(long_cid.size()), 61000)) << "a CID over 20";
  for (std::uint32_t cut = 0; cut < vn.size(); ++cut)
    EXPECT_FALSE(parse_probe_answer(vn.data(), cut, 61000) && cut < 14 + 20 + 8 + 7 + 8 + 1 + 8) << cut;
}

// Runs the book from `from` to `to` (µs) in steps of 1 ms; `answers(i)`
// says whether backend i answers (every target, at once).
template <typename Answers>
std::uint64_t run(HealthBook& book, const HealthChecksConfig& c, std::uint64_t from, std::uint64_t to,
                  Answers&& answers) {
  std::uint64_t emitted = 0;
  for (std::uint64_t now = from; now < to; now += 1000) {
    std::vector<HealthBook::Probe> out;
    emitted += book.start_due(now, [&](const HealthBook::Probe& p) { out.push_back(p); });
    for (const auto& p : out)
      if (answers(p.backend)) {
        EXPECT_TRUE(book.answer(answer_to(p, c.targets[p.target]), now + 500));
      }
    book.expire(now);
  }
  return emitted;
}

TEST(HealthBook, FallFailedRoundsMarkDownAndRiseAnsweredRoundsMarkUp) {
  const HealthChecksConfig c = config(2, 3);
  HealthBook book(c, 1);
  book.set_backends(backends(4), 0);
  bool b2_alive = true;
  const auto alive = [&](std::uint32_t i) { return i != 2 || b2_alive; };
  run(book, c, 0, 500000, alive);
  for (const auto& r : book.rows()) EXPECT_EQ(r.health, BackendHealth::kUp) << r.name;
  EXPECT_GT(book.rows()[0].rtt_us, 0u);
  const std::uint64_t epoch = book.epoch();
  book.take_changes();

  b2_alive = false;
  std::uint64_t t = 500000;
  // Down after exactly `fall` failed rounds: look after each round.
  while (book.rows()[2].health != BackendHealth::kDown && t < 2000000) {
    run(book, c, t, t + 1000, alive);
    t += 1000;
  }
  ASSERT_EQ(book.rows()[2].health, BackendHealth::kDown);
  EXPECT_EQ(book.rows()[2].failed_in_row, c.fall);
  EXPECT_EQ(book.epoch(), epoch + 1);
  const auto changes = book.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].name, "b2");
  EXPECT_EQ(changes[0].rounds, c.fall);
  EXPECT_TRUE(book.any_answering());
  for (std::size_t i : {0, 1, 3}) EXPECT_EQ(book.rows()[i].health, BackendHealth::kUp);

  b2_alive = true;
  while (book.rows()[2].health != BackendHealth::kUp && t < 4000000) {
    run(book, c, t, t + 1000, alive);
    t += 1000;
  }
  ASSERT_EQ(book.rows()[2].health, BackendHealth::kUp);
  EXPECT_EQ(book.rows()[2].ok_in_row, c.rise) << "up after exactly rise answered rounds";
  EXPECT_EQ(book.epoch(), epoch + 2);
}

TEST(HealthBook, ARoundPassesOnlyWhenEveryTargetAnswered) {
  const HealthChecksConfig c = config(1, 2);
  HealthBook book(c, 2);
  book.set_backends(backends(1), 0);
  // Only the IPv4 target answers.
  for (std::uint64_t now = 0; now < 1000000; now += 1000) {
    std::vector<HealthBook::Probe> out;
    book.start_due(now, [&](const HealthBook::Probe& p) { out.push_back(p); });
    for (const auto& p : out)
      if (!c.targets[p.target].ipv6) book.answer(answer_to(p, c.targets[p.target]), now);
    book.expire(now);
  }
  EXPECT_EQ(book.rows()[0].health, BackendHealth::kDown);
  EXPECT_EQ(book.rows()[0].rounds_answered, 0u);
  EXPECT_FALSE(book.any_answering());
}

TEST(HealthBook, ForgedAndMisdirectedAnswersMarkNothingUp) {
  const HealthChecksConfig c = config(1, 1);
  HealthBook book(c, 3);
  book.set_backends(backends(2), 0);
  // Nobody answers: both down.
  run(book, c, 0, 300000, [](std::uint32_t) { return false; });
  ASSERT_EQ(book.rows()[0].health, BackendHealth::kDown);
  // Forge answers to every probe: from another source, from another port,
  // with the CIDs not swapped, with a guessed CID, or twice.
  std::uint64_t forged = 0;
  for (std::uint64_t now = 300000; now < 1300000; now += 1000) {
    std::vector<HealthBook::Probe> out;
    book.start_due(now, [&](const HealthBook::Probe& p) { out.push_back(p); });
    for (const auto& p : out) {
      const HealthTarget& t = c.targets[p.target];
      ProbeAnswer a = answer_to(p, t);
      a.source[3] ^= 0x40;
      EXPECT_FALSE(book.answer(a, now));
      a = answer_to(p, t);
      a.source_port = 444;
      EXPECT_FALSE(book.answer(a, now));
      a = answer_to(p, t);
      std::swap(a.dcid, a.scid);
      EXPECT_FALSE(book.answer(a, now));
      a = answer_to(p, t);
      a.dcid[7] ^= 1;
      EXPECT_FALSE(book.answer(a, now));
      a = answer_to(p, t);
      a.ipv6 = !a.ipv6;
      EXPECT_FALSE(book.answer(a, now));
      forged += 5;
    }
    book.expire(now);
  }
  EXPECT_EQ(book.rows()[0].health, BackendHealth::kDown);
  EXPECT_EQ(book.rows()[1].health, BackendHealth::kDown);
  EXPECT_EQ(book.totals().answers, 0u);
  EXPECT_EQ(book.totals().answers_unmatched, forged);
  EXPECT_GT(forged, 0u);
}

TEST(HealthBook, ALateAnswerCountsAsUnmatched) {
  const HealthChecksConfig c = config(1, 1);
  HealthBook book(c, 4);
  book.set_backends(backends(1), 0);
  std::vector<HealthBook::Probe> out;
  book.start_due(0, [&](const HealthBook::Probe& p) { out.push_back(p); });
  ASSERT_EQ(out.size(), 2u);
  book.expire(c.timeout_ms * 1000);
  EXPECT_EQ(book.rows()[0].health, BackendHealth::kDown);
  EXPECT_FALSE(book.answer(answer_to(out[0], c.targets[0]), c.timeout_ms * 1000 + 1));
  EXPECT_EQ(book.totals().answers_unmatched, 1u);
}

TEST(HealthBook, ThousandsOfBackendsStayWithinTheProbeBudget) {
  for (const std::uint32_t budget : {2000u, 20000u}) {
    HealthChecksConfig c = config();
    c.interval_ms = 1000;
    c.timeout_ms = 500;
    c.probes_per_s = budget;  // 4,096 backends x 2 targets a second need 8,192
    HealthBook book(c, 5);
    book.set_backends(backends(4096), 0);
    const std::uint64_t seconds = 10;
    std::map<std::uint64_t, std::uint64_t> per_second;
    std::uint64_t emitted = 0;
    for (std::uint64_t now = 0; now < seconds * 1000000; now += 1000) {
      const unsigned n = book.start_due(now, [](const HealthBook::Probe&) {});
      per_second[now / 1000000] += n;
      emitted += n;
      book.expire(now);
    }
    // Never more than the budget a second, plus the burst (a tenth of it).
    for (const auto& [s, n] : per_second) EXPECT_LE(n, budget + budget / 10 + 2) << "second " << s;
    EXPECT_LE(emitted, budget * seconds + budget / 10 + 2);
    std::uint64_t never = 0;
    for (const auto& r : book.rows()) never += r.rounds_sent == 0;
    if (budget < 8192) {
      EXPECT_GT(book.totals().rounds_deferred, 0u) << "over budget: rounds come late, counted";
      EXPECT_GE(emitted, budget * seconds * 9 / 10) << "the budget is used";
      EXPECT_EQ(never, 0u) << "late, but every backend is probed";
    } else {
      EXPECT_EQ(book.totals().rounds_deferred, 0u);
      EXPECT_EQ(never, 0u);
      for (const auto& r : book.rows()) EXPECT_GE(r.rounds_sent, seconds - 1) << r.name;
    }
  }
}

TEST(HealthBook, AReloadKeepsWhatItKnowsOfABackendByName) {
  const HealthChecksConfig c = config(2, 1);
  HealthBook book(c, 6);
  book.set_backends(backends(3), 0);
  run(book, c, 0, 300000, [](std::uint32_t i) { return i != 1; });
  ASSERT_EQ(book.rows()[1].health, BackendHealth::kDown);
  auto next = backends(3);
  next.erase(next.begin());  // b0 removed: b1 and b2 move up
  next.push_back(BackendConfig{});
  next.back().name = "b9";
  next.back().slot = 9;
  next.back().state = BackendState::kDown;
  book.set_backends(next, 300000);
  ASSERT_EQ(book.rows().size(), 3u);
  EXPECT_EQ(book.rows()[0].name, "b1");
  EXPECT_EQ(book.rows()[0].health, BackendHealth::kDown);
  EXPECT_EQ(book.rows()[1].health, BackendHealth::kUp);
  EXPECT_EQ(book.rows()[2].health, BackendHealth::kUnchecked);
  EXPECT_TRUE(book.rows()[2].operator_down);
  EXPECT_TRUE(book.any_answering()) << "b2 is up";
}

}  // namespace
}  // namespace qs
