#include "dataplane/fastpath/mbuf_classifier.h"

#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include "dataplane/fastpath/burst.h"
#include "dataplane/fastpath/connection_table.h"
#include "dataplane/fastpath/lane_tally.h"
#include "dataplane/fastpath/steer_meta.h"
#include "steering/packet_classifier.h"

namespace qs {

struct MbufClassifier::Impl {
  explicit Impl(const SteeringConfig& config) : classifier(config) {}
  PacketClassifier classifier;
};

namespace {

// The ParsedHook of a SlotPrefetch: the condition is the one under which the
// classify loop below sets kSteerMetaQuic, and the hash the connection
// stage's (run_connection_burst), so that the stage can take it as it is.
void prefetch_slots(void* context, const std::uint8_t* const* frames, const Decision* decisions, unsigned first,
                    unsigned n) {
  const SlotPrefetch& p = *static_cast<SlotPrefetch*>(context);
  for (unsigned i = 0; i < n; ++i) {
    const ParsedPacket& packet = decisions[i].packet;
    if (packet.verdict != Verdict::kQuic || packet.dcid_len == 0) [[unlikely]] continue;
    const std::uint32_t h = ConnectionTable::hash_cid(frames[i] + packet.dcid_offset, packet.dcid_len, p.seed);
    p.hashes[first + i] = h;
    p.table->prefetch(h);
  }
}

}  // namespace

MbufClassifier::MbufClassifier(const SteeringConfig& config) : impl_(std::make_unique<Impl>(config)) {}
MbufClassifier::~MbufClassifier() = default;

void MbufClassifier::use_tables(ForwardingTables* tables) { impl_->classifier.use_tables(tables); }

bool MbufClassifier::classify(rte_mbuf* const* pkts, unsigned n, std::uint16_t* owner, RxClass* cls, SteerMeta* meta,
                              std::uint16_t local_owner, std::uint32_t now_ms, RouteCounts& counts,
                              const SlotPrefetch* prefetch) {
  // classify_burst writes each of the n decisions whole before it reads one,
  // and reads only the n frames filled below, so none of these is
  // initialised: a burst's worth of default-constructed decisions is a 1 KB
  // memset per burst.
  const std::uint8_t* frames[kMaxBurst];
  std::uint16_t lens[kMaxBurst];
  std::uint32_t frame_lens[kMaxBurst];
  union Scratch {
    Scratch() {}
    Decision at[kMaxBurst];
  } decisions;
  // Headers live in the first segment; a multi-segment mbuf is classified by
  // what that segment holds (a header cut there reads as malformed), as a
  // frame of its whole length (pkt_len): the rest is payload, not missing.
  // Each frame's first line is asked for here, a whole burst before the
  // parser reads it (l3fwd does the same): a NIC's DMA leaves it in memory
  // or at best the LLC, and the parse of every packet would otherwise wait
  // for it in turn.
  for (unsigned i = 0; i < n; ++i) {
    frames[i] = rte_pktmbuf_mtod(pkts[i], const std::uint8_t*);
    rte_prefetch0(frames[i]);
    lens[i] = rte_pktmbuf_data_len(pkts[i]);
    frame_lens[i] = rte_pktmbuf_pkt_len(pkts[i]);
  }
  // GCC cannot see that only the n entries written above are read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  // The caller's SlotPrefetch as it is (prefetch_slots only reads it), not a
  // copy of it here: with the copy, GCC kept the burst's first owner on the
  // stack in the SteerMeta loop below, and the split layout's receiver (which
  // never prefetches) took 15 cycles more per packet (tests/bench/RESULTS.md).
  const ParsedHook hook{prefetch_slots, const_cast<SlotPrefetch*>(prefetch)};
  impl_->classifier.classify_burst(frames, lens, n, decisions.at, frame_lens, now_ms, &counts.learn,
                                   prefetch != nullptr ? &hook : nullptr);
#pragma GCC diagnostic pop
  if (n == 0) return true;
  const std::uint16_t first_owner = decisions.at[0].resolution.owner_index;
  unsigned other_owners = 0;
  LaneTally<kResolveMethods> by_method;
  LaneTally<kRxClasses> by_class;
  for (unsigned i = 0; i < n; ++i) {
    const ParsedPacket& p = decisions.at[i].packet;
    owner[i] = decisions.at[i].resolution.owner_index;
    other_owners |= unsigned(owner[i] ^ first_owner);
    // Under a rule only what is kept: a frame the receive loop drops (not
    // UDP, malformed) was routed by nothing, so that `routed` sums to what
    // was steered.
    const Destination dest = decisions.at[i].destination;
    by_method.add_if(unsigned(decisions.at[i].resolution.how),
                     p.verdict < Verdict::kNotUdp && dest == Destination::kService);
    cls[i] = dest == Destination::kService ? RxClass(p.verdict)
             : dest == Destination::kHost  ? RxClass::kHost
                                           : RxClass::kNotService;
    by_class.add(unsigned(cls[i]));
    // One 8-octet store of the whole record, its flags from compares
    // rather than branches (the verdict, family and form follow the
    // traffic's mix).
    const SteerMeta m = SteerMeta{
        p.l4_offset, p.dcid_offset, decisions.at[i].resolution.backend, p.dcid_len,
        std::uint8_t(unsigned(p.ip_version == 6) * kSteerMetaIpv6 |
                     unsigned(p.verdict == Verdict::kQuic && p.dcid_len > 0) * kSteerMetaQuic |
                     unsigned(p.opens_connection) * kSteerMetaOpensConnection |
                     unsigned(p.form == QuicForm::kLong) * kSteerMetaLongHeader |
                     SteerMeta::vlan_flags(p.l3_offset))};
    // One or the other, not both: on the ring_loop benchmark, writing every
    // packet's SteerMeta into its mbuf cost the demo layout (every packet
    // owned where it arrives) 14 cycles per packet in one of the VM's phases
    // and 60 in the other, and keeping every one in the array as well cost
    // the split layout (every packet handed over) 7 and 14 % (tests/bench/RESULTS.md).
    if (owner[i] == local_owner) {
      meta[i] = m;
    } else {
      *steer_meta(pkts[i]) = m;
    }
  }
  for (unsigned m = 0; m < kResolveMethods; ++m) counts.by_method[m] += by_method[m];
  for (unsigned k = 0; k < kRxClasses; ++k) counts.by_class[k] += by_class[k];
  return other_owners == 0;
}

}  // namespace qs
