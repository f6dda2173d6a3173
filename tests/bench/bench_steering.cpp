// Steering cost per packet, over bursts of 32 as an RX lcore sees them.
//
// Cases (scripts/bench/steering.sh turns them into a table and ratios):
//   jhash_reference   software RSS: find the IPv4 5-tuple, rte_jhash it, pick
//                     the owner from a 128-entry redirection table
//   parse             parse_packet() only
//   plaintext         classify_burst(): parse + plaintext QUIC-LB decode + route
//   single_pass       ... AES-128 single-pass decode (server ID 4 + nonce 12)
//   four_pass         ... four-pass decode stopping after 3 passes (3 + 5)
//   four_pass_full    ... four-pass decode needing all 4 passes (6 + 4)
//   fallback          ... unroutable DCIDs: SipHash-1-3 + hash ring
//   learned_hit       ... unroutable DCIDs the forwarding tables learned: the
//                     table hash and a lookup in a table of 200 000 entries
//   learned_miss      ... unroutable short-header DCIDs no table knows: the DCID
//                     lookup, the 4-tuple's hash and lookup, then the hash ring
//   single_pass_unbatched  classify() frame by frame (AES not overlapped)
//   fixture_mix       classify_burst() over every fixture frame (all header kinds)
//   ring_lookup/N     ConsistentHashRing::owner_for() alone, N owners of 128
//                     points, over random hashes (the fallback's last step)
//   maglev_lookup/N   MaglevTable::target_for() alone, N equal-weight backends
//                     (the chosen size: 65537 slots for both N)
//   maglev_build/N    building that table of N backends (per table, not per
//                     packet: no burst counter)
//
// Fairness of the reference: it walks the same frames in the same burst loop,
// checks lengths before every read as the parser does, and ends with an owner
// choice, as our cases do; it handles just what these frames are (untagged
// IPv4/UDP), while the parser also looks for VLAN tags, IPv6 and the QUIC
// header. That is the work a software RSS front end would really do.
//
// Frames: the fixture 'short_quic_lb_plaintext' layout (Ethernet, IPv4, UDP,
// QUIC short header, 20 octets of payload) with the DCID of each case; 1024
// frames per case with distinct source addresses, ports and nonces.
#include <benchmark/benchmark.h>
#include <rte_jhash.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "steering/consistent_hash.h"
#include "steering/maglev.h"
#include "steering/packet_classifier.h"
#include "tests/steering/packet_fixtures.h"

namespace {

constexpr unsigned kBurst = 32;
constexpr std::size_t kFrames = 1024;

struct FrameSet {
  std::vector<std::vector<std::uint8_t>> frames;
  std::vector<const std::uint8_t*> ptrs;
  std::vector<std::uint16_t> lens;

  void add(std::vector<std::uint8_t> frame) {
    frames.push_back(std::move(frame));
    ptrs.clear();
    lens.clear();
    for (const auto& f : frames) {
      ptrs.push_back(f.data());
      lens.push_back(std::uint16_t(f.size()));
    }
  }
};

const qs::test::PacketFixture& fixture(const std::string& name) {
  for (const auto& f : qs::test::packet_fixtures())
    if (name == f.name) return f;
  throw std::runtime_error("no fixture " + name);
}

std::vector<std::uint8_t> field_bytes(const qs::test::PacketFixture& f, const std::string& name) {
  for (const auto& field : f.fields)
    if (name == field.name) return qs::test::unhex(field.hex);
  throw std::runtime_error("no field " + name);
}

// The fixture's short-header frame with another DCID, source address and port.
std::vector<std::uint8_t> short_frame(const std::vector<std::uint8_t>& dcid, unsigned i) {
  const auto& f = fixture("short_quic_lb_plaintext");
  std::vector<std::uint8_t> frame = field_bytes(f, "ethernet");
  auto ip = field_bytes(f, "ipv4");
  auto udp = field_bytes(f, "udp");
  const auto payload = field_bytes(f, "payload");
  const std::size_t udp_len = 8 + 1 + dcid.size() + payload.size();
  ip[2] = std::uint8_t((20 + udp_len) >> 8);
  ip[3] = std::uint8_t(20 + udp_len);
  ip[14] = std::uint8_t(i >> 8);
  ip[15] = std::uint8_t(i);
  udp[0] = std::uint8_t(0xc0 | (i >> 8 & 0x3f));
  udp[1] = std::uint8_t(i);
  udp[4] = std::uint8_t(udp_len >> 8);
  udp[5] = std::uint8_t(udp_len);
  frame.insert(frame.end(), ip.begin(), ip.end());
  frame.insert(frame.end(), udp.begin(), udp.end());
  frame.push_back(0x41);
  frame.insert(frame.end(), dcid.begin(), dcid.end());
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

// Frames whose DCIDs the fixture config's QUIC-LB config `config_id` encodes
// for a routed server ID; config_id < 0: random DCIDs of no config (fallback).
FrameSet make_frames(int config_id) {
  const qs::SteeringConfig config = qs::test::fixture_steering_config();
  std::mt19937_64 rng(std::uint64_t(config_id + 100));
  FrameSet set;
  for (unsigned i = 0; i < kFrames; ++i) {
    std::vector<std::uint8_t> dcid;
    if (config_id < 0) {
      dcid.resize(8);
      for (auto& b : dcid) b = std::uint8_t(rng());
      dcid[0] = std::uint8_t(0x80 | (dcid[0] & 0x1f));  // codepoint 4: no config
    } else {
      const qs::QuicLbConfig& lb = config.quic_lb[std::size_t(config_id)];
      const qs::QuicLbCodec codec(lb);
      std::vector<std::vector<std::uint8_t>> sids;
      for (const auto& r : config.server_routes)
        if (r.server_id.size() == lb.server_id_len) sids.push_back(r.server_id);
      std::uint8_t nonce[18];
      for (auto& b : nonce) b = std::uint8_t(rng());
      dcid.resize(codec.cid_len());
      codec.encode(sids[i % sids.size()].data(), nonce, dcid.data(), std::uint8_t(rng()));
    }
    set.add(short_frame(dcid, i));
  }
  return set;
}

qs::PacketClassifier& classifier() {
  static qs::PacketClassifier c(qs::test::fixture_steering_config());
  return c;
}

// The reference: what a software RSS stage does per packet. rte_jhash reads
// the 13-octet tuple's tail as a whole word, hence the zeroed padding.
struct FiveTuple {
  std::uint32_t src, dst;
  std::uint16_t sport, dport;
  std::uint8_t proto;
  std::uint8_t pad[3];
};
constexpr std::uint32_t kFiveTupleLen = 13;

inline std::uint16_t jhash_owner(const std::uint8_t* p, std::size_t len,
                                 const std::uint16_t* reta) {
  if (len < 14 + 20 || p[12] != 0x08 || p[13] != 0x00) return qs::kNoOwner;
  const std::size_t ihl = std::size_t(p[14] & 0x0f) * 4;
  if (ihl < 20 || len < 14 + ihl + 4) return qs::kNoOwner;
  FiveTuple t{};
  std::memcpy(&t.src, p + 14 + 12, 4);
  std::memcpy(&t.dst, p + 14 + 16, 4);
  std::memcpy(&t.sport, p + 14 + ihl, 2);
  std::memcpy(&t.dport, p + 14 + ihl + 2, 2);
  t.proto = p[14 + 9];
  return reta[rte_jhash(&t, kFiveTupleLen, 0x5eed) & 127];
}

void BM_jhash_reference(benchmark::State& state) {
  const FrameSet set = make_frames(0);
  std::uint16_t reta[128];
  for (unsigned i = 0; i < 128; ++i) reta[i] = std::uint16_t(i % 4);
  std::uint16_t owners[kBurst];
  std::size_t off = 0;
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i)
      owners[i] = jhash_owner(set.ptrs[off + i], set.lens[off + i], reta);
    benchmark::DoNotOptimize(owners);
    benchmark::ClobberMemory();
    off = (off + kBurst) % kFrames;
  }
  state.counters["burst"] = kBurst;
}

void BM_parse(benchmark::State& state) {
  const FrameSet set = make_frames(0);
  const qs::ParserConfig& parser = classifier().parser_config();
  qs::ParsedPacket out[kBurst];
  std::size_t off = 0;
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i)
      qs::parse_packet(set.ptrs[off + i], set.lens[off + i], parser, out[i]);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    off = (off + kBurst) % kFrames;
  }
  state.counters["burst"] = kBurst;
}

void run_classify_burst(benchmark::State& state, const FrameSet& set, qs::ResolveMethod expected,
                        qs::PacketClassifier& c = classifier()) {
  qs::Decision out[kBurst];
  c.classify_burst(set.ptrs.data(), set.lens.data(), kBurst, out);
  if (out[0].resolution.how != expected) {
    state.SkipWithError("frames do not resolve the way this case means to measure");
    return;
  }
  const std::size_t n = set.frames.size() / kBurst * kBurst;
  std::size_t off = 0;
  for (auto _ : state) {
    c.classify_burst(set.ptrs.data() + off, set.lens.data() + off, kBurst, out);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    off = (off + kBurst) % n;
  }
  state.counters["burst"] = kBurst;
}

void BM_plaintext(benchmark::State& state) {
  run_classify_burst(state, make_frames(0), qs::ResolveMethod::kQuicLb);
}
void BM_single_pass(benchmark::State& state) {
  run_classify_burst(state, make_frames(1), qs::ResolveMethod::kQuicLb);
}
void BM_four_pass(benchmark::State& state) {
  run_classify_burst(state, make_frames(2), qs::ResolveMethod::kQuicLb);
}
void BM_four_pass_full(benchmark::State& state) {
  run_classify_burst(state, make_frames(3), qs::ResolveMethod::kQuicLb);
}
void BM_fallback(benchmark::State& state) {
  run_classify_burst(state, make_frames(-1), qs::ResolveMethod::kFallbackDcid);
}

// Table memory on 2 MB hugepages (mmap MAP_HUGETLB, what EAL memory is when
// hugepages are reserved): a lookup's random slot then costs no 4 KB TLB
// miss and page walk. nullptr when no hugepage is free. A 64-octet header
// before the table keeps the mapping's length for munmap.
qs::SlotMemory hugepage_slot_memory() {
  return qs::SlotMemory{[](std::size_t bytes, void*) -> void* {
                          constexpr std::size_t kPage = std::size_t(2) << 20, kHeader = 64;
                          const std::size_t len = (bytes + kHeader + kPage - 1) / kPage * kPage;
                          void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
                          if (m == MAP_FAILED) return nullptr;
                          *static_cast<std::size_t*>(m) = len;
                          return static_cast<std::uint8_t*>(m) + kHeader;
                        },
                        [](void* memory, void*) {
                          void* m = static_cast<std::uint8_t*>(memory) - 64;
                          munmap(m, *static_cast<std::size_t*>(m));
                        },
                        nullptr};
}

// What backs a mapping: the kernel's page size for the one that holds `p`
// and how much of it transparent huge pages back (/proc/self/smaps), so that
// a figure says which pages its table really had: MAP_HUGETLB gives 2 MB
// pages or fails, and the heap's 4 KB pages may still be THP-backed.
struct Pages {
  double kernel_page_kb = 0;
  double anon_huge_kb = 0;
};
Pages pages_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  Pages pages;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    double kb = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      if (inside) break;  // past the mapping
      inside = lo <= a && a < hi;
    } else if (inside && std::sscanf(line.c_str(), "KernelPageSize: %lf kB", &kb) == 1) {
      pages.kernel_page_kb = kb;
    } else if (inside && std::sscanf(line.c_str(), "AnonHugePages: %lf kB", &kb) == 1) {
      pages.anon_huge_kb = kb;
    }
  }
  return pages;
}

// Another SlotMemory that remembers where the first table it gave memory
// went (ForwardingTables allocates the established table first: the one a
// hit reads).
struct RecordedMemory {
  qs::SlotMemory inner;
  void* first = nullptr;
  qs::SlotMemory memory() {
    return qs::SlotMemory{[](std::size_t bytes, void* context) -> void* {
                            auto* self = static_cast<RecordedMemory*>(context);
                            void* m = self->inner.allocate(bytes, self->inner.context);
                            if (self->first == nullptr) self->first = m;
                            return m;
                          },
                          [](void* m, void* context) {
                            auto* self = static_cast<RecordedMemory*>(context);
                            self->inner.release(m, self->inner.context);
                          },
                          this};
  }
};

// The fixture profile with forwarding tables of the default size, filled with
// 200 000 learned entries (the frames' DCIDs among them when `learn_frames`),
// so that lookups run in a table far beyond the caches, as a loaded appliance's.
// `memory`: where the tables live (the heap's 4 KB pages by default); the
// counters table_page_kb and table_thp_kb say what backed the established
// table.
void run_with_tables(benchmark::State& state, bool learn_frames, qs::ResolveMethod expected,
                     qs::SlotMemory memory = qs::heap_slot_memory()) {
  const FrameSet set = make_frames(-1);
  qs::SteeringConfig config = qs::test::fixture_steering_config();
  RecordedMemory recorded{memory};
  std::optional<qs::ForwardingTables> holder;
  try {
    holder.emplace(config.forwarding, config.fallback_key, recorded.memory());
  } catch (const std::bad_alloc&) {
    state.SkipWithError("no room for the tables (hugepages: reserve them, scripts/setup.sh does as root)");
    return;
  }
  qs::ForwardingTables& tables = *holder;
  qs::PacketClassifier c(config);
  c.use_tables(&tables);
  std::mt19937_64 rng(99);
  for (unsigned i = 0; i < 200000; ++i) tables.established().insert(rng(), std::uint16_t(i % 4), 0);
  if (learn_frames) {
    for (std::size_t i = 0; i < set.frames.size(); ++i) {
      const qs::Decision d = c.classify(set.ptrs[i], set.lens[i]);
      tables.established().insert(tables.cid_key(set.ptrs[i], d.packet), std::uint16_t(i % 4), 0);
    }
  }
  run_classify_burst(state, set, expected, c);
  const Pages pages = pages_of(recorded.first);  // after the run: every page touched
  state.counters["table_page_kb"] = pages.kernel_page_kb;
  state.counters["table_thp_kb"] = pages.anon_huge_kb;
}

void BM_learned_hit(benchmark::State& state) { run_with_tables(state, true, qs::ResolveMethod::kLearnedCid); }
// The same hit with the tables on 2 MB hugepages (skipped when none are free).
void BM_learned_hit_hugepages(benchmark::State& state) {
  run_with_tables(state, true, qs::ResolveMethod::kLearnedCid, hugepage_slot_memory());
}
void BM_learned_miss(benchmark::State& state) {
  run_with_tables(state, false, qs::ResolveMethod::kFallbackUnknownCid);
}

void BM_single_pass_unbatched(benchmark::State& state) {
  const FrameSet set = make_frames(1);
  qs::PacketClassifier& c = classifier();
  qs::Decision out[kBurst];
  std::size_t off = 0;
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i) out[i] = c.classify(set.ptrs[off + i], set.lens[off + i]);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    off = (off + kBurst) % kFrames;
  }
  state.counters["burst"] = kBurst;
}

void BM_fixture_mix(benchmark::State& state) {
  FrameSet set;
  while (set.frames.size() < kFrames)
    for (const auto& f : qs::test::packet_fixtures()) set.add(f.bytes());
  run_classify_burst(state, set, qs::ResolveMethod::kFallbackDcid);  // fixture 0 is an Initial
}

// The two fallback choices by themselves, from a hash to an owner or a
// backend: 1024 random hashes (in L1), the table or ring wherever its size
// puts it (65537 two-octet slots: L2).
const std::vector<std::uint64_t>& random_hashes() {
  static const std::vector<std::uint64_t> hashes = [] {
    std::mt19937_64 rng(17);
    std::vector<std::uint64_t> v(kFrames);
    for (auto& h : v) h = rng();
    return v;
  }();
  return hashes;
}

const qs::SipHashKey kBenchKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

template <typename Lookup>
void run_lookups(benchmark::State& state, const Lookup& lookup) {
  const std::vector<std::uint64_t>& hashes = random_hashes();
  std::uint16_t out[kBurst];
  std::size_t off = 0;
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i) out[i] = lookup(hashes[off + i]);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    off = (off + kBurst) % kFrames;
  }
  state.counters["burst"] = kBurst;
}

void BM_ring_lookup(benchmark::State& state) {
  std::vector<unsigned> lcores;
  for (unsigned i = 0; i < unsigned(state.range(0)); ++i) lcores.push_back(i + 1);
  const qs::ConsistentHashRing ring(lcores, kBenchKey, 128);
  run_lookups(state, [&](std::uint64_t h) { return ring.owner_for(h); });
}

struct Backends {
  std::vector<std::string> names;
  std::vector<qs::MaglevMember> members;
  explicit Backends(std::size_t n) {
    names.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      names.push_back("server-" + std::to_string(i));
      members.push_back({names.back(), 1, std::uint16_t(i)});
    }
  }
};

void BM_maglev_lookup(benchmark::State& state) {
  const Backends backends(std::size_t(state.range(0)));
  const qs::MaglevTable table(backends.members, kBenchKey);
  state.counters["slots"] = table.size();
  run_lookups(state, [&](std::uint64_t h) { return table.target_for(h); });
}

void BM_maglev_build(benchmark::State& state) {
  const Backends backends(std::size_t(state.range(0)));
  for (auto _ : state) {
    const qs::MaglevTable table(backends.members, kBenchKey);
    benchmark::DoNotOptimize(table.entry(0));
  }
}

BENCHMARK(BM_jhash_reference);
BENCHMARK(BM_parse);
BENCHMARK(BM_plaintext);
BENCHMARK(BM_single_pass);
BENCHMARK(BM_four_pass);
BENCHMARK(BM_four_pass_full);
BENCHMARK(BM_fallback);
BENCHMARK(BM_learned_hit);
BENCHMARK(BM_learned_hit_hugepages);
BENCHMARK(BM_learned_miss);
BENCHMARK(BM_single_pass_unbatched);
BENCHMARK(BM_fixture_mix);
BENCHMARK(BM_ring_lookup)->Arg(2)->Arg(64);
BENCHMARK(BM_maglev_lookup)->Arg(2)->Arg(1000);
BENCHMARK(BM_maglev_build)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
