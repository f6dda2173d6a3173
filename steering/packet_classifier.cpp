#include "steering/packet_classifier.h"

namespace qs {

void PacketClassifier::classify_burst(const std::uint8_t* const* frames,
                                      const std::uint16_t* lens, unsigned n,
                                      Decision* out, const std::uint32_t* frame_lens,
                                      std::uint32_t now_ms, LearnCounts* counts) {
  LearnCounts ignored;
  LearnCounts& learn = counts != nullptr ? *counts : ignored;
  constexpr unsigned kChunk = 64;
  for (unsigned base = 0; base < n; base += kChunk) {
    const unsigned m = n - base < kChunk ? n - base : kChunk;
    // Frames whose DCID an encrypted config must decode, per codepoint.
    unsigned pending[8] = {};
    // Frames QUIC-LB did not route, resolved last and in arrival order: the
    // forwarding tables learn from one packet what routes the next.
    bool unrouted[kChunk] = {};
    std::uint8_t members[8][kChunk];
    // Without tables, the unrouted DCIDs' list for the keyed hash, appended
    // where each is found unrouted (in any order: each hash stands alone).
    const std::uint8_t* hash_cids[kChunk];
    std::uint8_t hash_lens[kChunk];
    std::uint16_t hash_readable[kChunk];
    std::uint8_t hash_at[kChunk];
    unsigned hashes_due = 0;
    // Parse the whole chunk first, then resolve: each loop body is short
    // enough for the CPU to overlap several frames, and the resolve loop
    // reads parse results stored long before.
    for (unsigned i = 0; i < m; ++i)
      parse_packet(frames[base + i], lens[base + i], parser_, out[base + i].packet,
                   frame_lens != nullptr ? frame_lens[base + i] : 0);
    for (unsigned i = 0; i < m; ++i) {
      const std::uint8_t* frame = frames[base + i];
      Decision& d = out[base + i];
      // Only a service's datagrams are routed: the appliance's own traffic
      // (a flood at its address included) never reaches the tables.
      d.destination = destination(frame, d.packet);
      if (d.destination != Destination::kService) [[unlikely]] {
        d.resolution = Resolution{};
        continue;
      }
      if (routes_by_dcid(d.packet)) {
        const std::uint8_t* dcid = d.packet.dcid(frame);
        if (resolver_.encrypted_codepoint(dcid[0])) {
          const unsigned cp = quic_lb_config_id(dcid[0]);
          members[cp][pending[cp]++] = std::uint8_t(i);
        } else {
          const std::uint16_t readable = std::uint16_t(lens[base + i] - d.packet.dcid_offset);
          d.resolution = resolver_.resolve_quic_lb(dcid, d.packet.dcid_len, readable);
          const bool miss = !d.resolution.routed();
          unrouted[i] = miss;
          // Written whatever the outcome, kept only on a miss: no branch.
          hash_cids[hashes_due] = dcid;
          hash_lens[hashes_due] = d.packet.dcid_len;
          hash_readable[hashes_due] = readable;
          hash_at[hashes_due] = std::uint8_t(i);
          hashes_due += miss;
        }
        continue;
      }
      d.resolution = resolver_.resolve(frame, d.packet);
    }
    for (unsigned cp = 0; cp < 8; ++cp) {
      const unsigned k = pending[cp];
      if (k == 0) continue;
      const QuicLbCodec& codec = *resolver_.codec_for(std::uint8_t(cp << 5));
      const std::uint8_t* cids[kChunk];
      std::uint8_t cid_lens[kChunk];
      std::uint8_t server_ids[kChunk][16];
      bool ok[kChunk];
      for (unsigned j = 0; j < k; ++j) {
        const unsigned i = base + members[cp][j];
        cids[j] = out[i].packet.dcid(frames[i]);
        cid_lens[j] = out[i].packet.dcid_len;
      }
      codec.decode_many(cids, cid_lens, k, server_ids, ok);
      for (unsigned j = 0; j < k; ++j) {
        const unsigned i = base + members[cp][j];
        Resolution& r = out[i].resolution;
        const std::uint16_t target =
            ok[j] ? resolver_.target_for_server_id_block(server_ids[j], codec.server_id_len())
                  : kNoOwner;
        if (target != kNoOwner) {
          r = resolver_.resolution(target, ResolveMethod::kQuicLb);
        } else {
          unrouted[members[cp][j]] = true;
          hash_cids[hashes_due] = cids[j];
          hash_lens[hashes_due] = cid_lens[j];
          hash_readable[hashes_due] = std::uint16_t(lens[i] - out[i].packet.dcid_offset);
          hash_at[hashes_due++] = members[cp][j];
        }
      }
    }
    if (tables_ == nullptr) {
      // The keyed hash of every unrouted DCID at once: their AES blocks
      // share the pipeline as QUIC-LB's do.
      std::uint64_t hashes[kChunk];
      resolver_.dcid_hash_many(hash_cids, hash_lens, hash_readable, hashes_due, hashes);
      for (unsigned j = 0; j < hashes_due; ++j)
        out[base + hash_at[j]].resolution =
            resolver_.resolution(resolver_.target_for_hash(hashes[j]), ResolveMethod::kFallbackDcid);
      continue;
    }
    // Hash every DCID and ask for its bucket first, so that the table's
    // cache misses overlap instead of costing one round trip per packet.
    std::uint64_t cid_hash[kChunk];
    for (unsigned i = 0; i < m; ++i) {
      if (!unrouted[i]) continue;
      const ParsedPacket& p = out[base + i].packet;
      cid_hash[i] = tables_->cid_key(frames[base + i], p);
      tables_->prefetch(cid_hash[i]);
    }
    for (unsigned i = 0; i < m; ++i)
      if (unrouted[i])
        out[base + i].resolution =
            tables_->resolve(resolver_, frames[base + i], out[base + i].packet, cid_hash[i], now_ms, learn);
  }
}

}  // namespace qs
