// MbufClassifier: steering/ over a burst of mbufs. For each packet it decides
// the class (QUIC, other UDP, not UDP, malformed) and the owner index, and
// the SteerMeta its owner's connection stage needs. Only a packet bound for
// another lcore carries its SteerMeta in the mbuf: one the receiving lcore
// owns itself is not written at all.
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/fastpath/steer_meta.h"
#include "steering/forwarding_rules.h"
#include "steering/owner_resolver.h"  // kNoOwner
#include "steering/packet_parser.h"   // Verdict
#include "steering/steering_config.h"

struct rte_mbuf;

namespace qs {

class ConnectionTable;

// The receiving owner's connection-table slots, asked for as soon as a
// burst is parsed (classify's `prefetch`): each QUIC packet's DCID is hashed
// with the shard's seed (ConnectionTable::hash_cid, what the connection
// stage looks the CID up by) and its slot prefetched, before QUIC-LB's AES
// and the resolution, so that the miss overlaps the whole classification
// instead of starting just before the lookup. hashes[i] gets pkts[i]'s hash
// (QUIC packets with a DCID only; the others' entries are left unwritten),
// which the connection stage then takes instead of hashing again.
struct SlotPrefetch {
  const ConnectionTable* table = nullptr;
  std::uint64_t seed = 0;
  std::uint32_t* hashes = nullptr;
};

inline constexpr unsigned kMaxOwners = 64;

// The first four are the parser's verdicts; the last two exist once the
// profile lists services (steering/service_table.h): a frame to a service
// address that is not for a service, and one for the appliance's own host
// (the exception path). Every class from kNotUdp on is not steered.
enum class RxClass : std::uint8_t { kQuic, kNotQuic, kNotUdp, kMalformed, kNotService, kHost };
inline constexpr unsigned kRxClasses = unsigned(RxClass::kHost) + 1;
// A verdict is its class: the receive loop converts one to the other with a cast.
static_assert(unsigned(RxClass::kQuic) == unsigned(Verdict::kQuic) &&
              unsigned(RxClass::kNotQuic) == unsigned(Verdict::kNotQuic) &&
              unsigned(RxClass::kNotUdp) == unsigned(Verdict::kNotUdp) &&
              unsigned(RxClass::kMalformed) == unsigned(Verdict::kMalformed));

// What classifying a burst counted: packets by class, the packets kept
// (QUIC, or UDP that is not QUIC) by the rule that routed them
// (ResolveMethod), and what the forwarding tables learned.
struct RouteCounts {
  std::uint32_t by_class[kRxClasses] = {};
  std::uint32_t by_method[kResolveMethods] = {};
  LearnCounts learn;
};

class MbufClassifier {
 public:
  // Throws std::invalid_argument on a configuration steering/ rejects.
  explicit MbufClassifier(const SteeringConfig& config);
  ~MbufClassifier();

  // Routes DCIDs QUIC-LB does not through `tables` (nullptr: none), which
  // must outlive this classifier's use.
  void use_tables(ForwardingTables* tables);

  // owner[i] and cls[i] are pkts[i]'s. Its SteerMeta (for a packet an owner
  // takes: QUIC, or UDP that is not QUIC) goes to meta[i] when its owner is
  // `local_owner` (the receiving lcore's owner index, kNoOwner when it owns
  // nothing), and into its mbuf otherwise, ready for the hand-off; meta[i]
  // of another owner's packet is left unwritten. now_ms ages the forwarding
  // tables' entries; `counts` is added to.
  // Returns whether every packet of the burst has owner[0] for its owner
  // (true for an empty burst): the receive loop then hands the burst over
  // whole, without grouping it. `prefetch` (nullptr: none): see SlotPrefetch;
  // it is done for every QUIC packet, whoever turns out to own it.
  bool classify(rte_mbuf* const* pkts, unsigned n, std::uint16_t* owner, RxClass* cls, SteerMeta* meta,
                std::uint16_t local_owner, std::uint32_t now_ms, RouteCounts& counts,
                const SlotPrefetch* prefetch = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qs
