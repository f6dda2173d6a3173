#include "steering/packet_classifier.h"

#include <cstring>

namespace qs {

bool PacketClassifier::route_quoted(const std::uint8_t* frame, std::size_t len, Decision& d, std::uint32_t now_ms) {
  ParsedPacket& p = d.packet;
  if (p.fragment || (p.ip_version == 4 && p.ip_proto != 1) || (p.ip_version == 6 && p.ip_proto != 58)) return false;
  const bool v6 = p.ip_version == 6;
  // The ICMP header: after IPv4's IHL, or straight after IPv6's fixed
  // header (errors carry no extension headers in practice).
  const std::size_t icmp = v6 ? p.l3_offset + 40u : p.l3_offset + std::size_t(frame[p.l3_offset] & 0x0f) * 4;
  if (v6 && frame[p.l3_offset + 6] != 58) return false;
  const std::size_t alen = v6 ? 16 : 4;
  const std::size_t inner = icmp + 8;
  const std::size_t inner_ip_len = v6 ? 40 : 20;
  if (len < inner + inner_ip_len + 8) return false;
  const std::uint8_t type = frame[icmp];
  // Errors only: destination unreachable, time exceeded, parameter problem
  // (IPv4 3, 11, 12; IPv6 1, 3, 4) and IPv6's packet too big (2).
  const bool error = v6 ? (type >= 1 && type <= 4) : (type == 3 || type == 11 || type == 12);
  if (!error) return false;
  const std::uint8_t* q = frame + inner;
  std::size_t q_l4;
  if (v6) {
    if ((q[0] >> 4) != 6 || q[6] != 17) return false;
    q_l4 = 40;
  } else {
    if ((q[0] >> 4) != 4 || q[9] != 17 || (((q[6] << 8) | q[7]) & 0x1fff) != 0) return false;
    q_l4 = std::size_t(q[0] & 0x0f) * 4;
    if (q_l4 < 20 || len < inner + q_l4 + 8) return false;
  }
  // The quoted datagram left the service address the error was sent to.
  const std::uint8_t* q_src = q + (v6 ? 8 : 12);
  const std::uint8_t* q_dst = q + (v6 ? 24 : 16);
  if (std::memcmp(q_src, p.dst_addr(frame), alen) != 0) return false;
  const std::uint8_t* udp = q + q_l4;
  Resolution r;
  // A long header's SCID is the server's CID: QUIC-LB routes it.
  const std::size_t quic = inner + q_l4 + 8;
  if (len > quic + 6 && (frame[quic] & 0x80) && resolver_.mode() == SteeringMode::kCid) {
    const std::uint8_t dcid_len = frame[quic + 5];
    const std::size_t scid_at = quic + 7 + dcid_len;
    if (dcid_len <= 20 && len > scid_at) {
      const std::uint8_t scid_len = frame[scid_at - 1];
      if (scid_len > 0 && scid_len <= 20 && len >= scid_at + scid_len)
        r = resolver_.resolve_quic_lb(frame + scid_at, scid_len, len - scid_at);
    }
  }
  // Else the 4-tuple the client's packets taught the tables, in the order
  // tuple_octets lays out a client -> server datagram.
  if (!r.routed() && tables_ != nullptr) {
    std::uint8_t input[38];
    input[0] = p.ip_version;
    input[1] = 17;
    input[2] = udp[2], input[3] = udp[3];  // the client's port: the quote's destination
    input[4] = udp[0], input[5] = udp[1];  // the service's port
    std::memcpy(input + 6, q_dst, alen);
    std::memcpy(input + 6 + alen, q_src, alen);
    r = tables_->find_tuple(resolver_, input, 6 + 2 * alen, now_ms);
  }
  if (!r.routed()) return false;
  d.resolution = r;
  d.destination = Destination::kService;
  p.verdict = Verdict::kNotQuic;
  p.l4_offset = std::uint16_t(icmp);
  return true;
}

void PacketClassifier::classify_burst(const std::uint8_t* const* frames,
                                      const std::uint16_t* lens, unsigned n,
                                      Decision* out, const std::uint32_t* frame_lens,
                                      std::uint32_t now_ms, LearnCounts* counts, const ParsedHook* parsed) {
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
    if (parsed != nullptr) parsed->fn(parsed->context, frames + base, out + base, base, m);
    for (unsigned i = 0; i < m; ++i) {
      const std::uint8_t* frame = frames[base + i];
      Decision& d = out[base + i];
      // Only a service's datagrams are routed: the appliance's own traffic
      // (a flood at its address included) never reaches the tables.
      d.destination = destination(frame, d.packet);
      if (d.destination != Destination::kService) [[unlikely]] {
        d.resolution = Resolution{};
        if (d.destination == Destination::kNotService) route_quoted(frame, lens[base + i], d, now_ms);
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
    if (tables_ == nullptr && resolver_.hashes_tuples()) {
      for (unsigned j = 0; j < hashes_due; ++j) {
        const unsigned i = base + hash_at[j];
        out[i].resolution = resolver_.resolution(resolver_.fallback_target_for_tuple(frames[i], out[i].packet),
                                                 ResolveMethod::kFallbackTuple);
      }
      continue;
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
    // A long header's setup and 4-tuple keys too: a new connection's
    // Initial looks all three up.
    std::uint64_t cid_hash[kChunk];
    ForwardingTables::LongHeaderKeys long_keys[kChunk];
    for (unsigned i = 0; i < m; ++i) {
      if (!unrouted[i]) continue;
      const ParsedPacket& p = out[base + i].packet;
      cid_hash[i] = tables_->cid_key(frames[base + i], p);
      tables_->prefetch(cid_hash[i]);
      if (p.form == QuicForm::kLong) {
        long_keys[i] = tables_->long_header_keys(frames[base + i], p);
        tables_->prefetch(long_keys[i]);
      }
    }
    for (unsigned i = 0; i < m; ++i)
      if (unrouted[i]) {
        const ParsedPacket& p = out[base + i].packet;
        out[base + i].resolution = tables_->resolve(resolver_, frames[base + i], p, cid_hash[i],
                                                    p.form == QuicForm::kLong ? &long_keys[i] : nullptr, now_ms, learn);
      }
  }
}

}  // namespace qs
