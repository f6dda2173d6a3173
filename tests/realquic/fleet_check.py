#!/usr/bin/env python3
"""Checks for the realquic fleet test (tests/realquic/fleet_test.sh): what the
four servers logged (quicsteer-server; for gtlsserver its request bodies) and
what reached their segment interfaces. Server N (0..3)
has QUIC-LB server ID 0a0(N+1), segment MAC 02:00:00:78:02:1N, addresses
10.78.2.1N / fd78:2::1N and VXLAN MAC 02:00:00:78:03:1N
(tests/realquic/fleet_topology.sh). Each subcommand prints what it found and
exits 1 when an assertion fails. ipip_why() is the check of one IP-in-IP
frame (routing --mode ipip; fleet_check_ipip_test.py runs it on the frames of
quicsteer's delivery code).

  standin     WORK --server N --tags TAG,...
  servers     WORK --logs GLOB --count K [--unknown-cid zero|some]
  connections WORK --since T_NS (--count K | --busiest)
  drain       WORK --server N --before T_NS --reload T_NS
  routing     WORK TAG --mode l2|vxlan|ipip --logs GLOB [--ignore-mld] [--outer-ttl N]
  quicsteer   WORK TAG [--routed-min METHOD=N]... [--routed-max METHOD=N]...
  owners      WORK TAG --cid-len N --connections K [--moved PHASE:N]...
  busiest     WORK TAG --cid-len N --since T_NS --count K
  drain-captures WORK TAG --cid-len N --server N --before T_NS --reload T_NS
  uploads     WORK --tags TAG,... --nup N --logs GLOB
"""
import argparse
import glob
import hashlib
import json
import re
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realquic_check import pcap_records, routed_failures, sha256_file  # noqa: E402

NSERVERS = 4
TX_ADDR = bytes([10, 78, 2, 2])
TX_ADDR6 = bytes.fromhex("fd780002000000000000000000000002")
VIP = bytes([10, 78, 1, 1])
VIP6 = bytes.fromhex("fd780001000000000000000000000001")
VNI = 42
SHORT_CID_LEN = 17  # QUIC-LB config 1: 1 + 2 (server ID) + 14 (nonce)


def sid(n):
    return f"0a0{n + 1}"


def server_of(server_id):
    return int(server_id, 16) - 0x0a01


def srv_mac(n):
    return bytes.fromhex(f"0200007802{0x10 + n:02x}")


def srv_vxmac(n):
    return bytes.fromhex(f"0200007803{0x10 + n:02x}")


def srv_addr(n):
    return bytes([10, 78, 2, 0x0a + n])


def srv_addr6(n):
    return bytes.fromhex(f"fd7800020000000000000000000000{0x10 + n:02x}")


def events(work, pattern="server*.jsonl"):
    out = []
    for path in sorted(glob.glob(os.path.join(work, pattern))):
        with open(path) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def window(work, tag):
    return tuple(int(x) for x in open(os.path.join(work, f"{tag}-window")).read().split())


def report(name, failures):
    for f in failures:
        print(f"  {name}: FAILED: {f}")
    return 1 if failures else 0


def cmd_standin(a):
    """The kernel in quicsteer's place delivered to server N: every
    connection of the tags' windows was made there and nowhere else."""
    failures = []
    evs = events(a.work)
    for tag in a.tags.split(","):
        t0, t1 = window(a.work, tag)
        conns = [e for e in evs if e["event"] == "connection" and t0 <= e["t_ns"] <= t1]
        where = sorted({e["server_id"] for e in conns})
        print(f"  {tag}: {len(conns)} connections, at server IDs {where}")
        if not conns:
            failures.append(f"{tag}: no server saw a connection")
        if any(e["server_id"] != sid(a.server) for e in conns):
            failures.append(f"{tag}: a connection reached another server than {a.server} ({sid(a.server)})")
    return report(f"standin {a.server}", failures)


def cmd_servers(a):
    """Every server process wrote its summary; none received a packet of a
    connection it does not have (with --unknown-cid zero), some did (with
    some: the four-tuple baseline)."""
    failures = []
    summaries = [e for e in events(a.work, a.logs) if e["event"] == "summary"]
    per = {}
    for e in summaries:
        per.setdefault(e["server_id"], []).append(e)
    for s in sorted(per):
        print(f"  servers: {s}: " + "; ".join(f"{e['connections']} connections, {e['requests']} requests, "
                                              f"{e['unknown_cid']} unknown-CID packets" for e in per[s]))
    if len(summaries) != a.count:
        failures.append(f"{len(summaries)} summaries, want {a.count}")
    unknown = sum(e["unknown_cid"] for e in summaries)
    if a.unknown_cid == "zero" and unknown:
        failures.append(f"{unknown} packets reached a server without their connection")
    if a.unknown_cid == "some" and not unknown:
        failures.append("no packet reached a server without its connection: the baseline did not misroute")
    return report("servers", failures)


def cmd_connections(a):
    conns = [e for e in events(a.work) if e["event"] == "connection" and e["t_ns"] >= a.since]
    if a.busiest:
        count = [0] * NSERVERS
        for e in conns:
            count[server_of(e["server_id"])] += 1
        print(max(range(NSERVERS), key=lambda n: (count[n], -n)))
        return 0
    return 0 if len(conns) >= a.count else 1


def drain_failures(server, had, kept, lost_why, after):
    """What breaks a drain of `server`: it had `had` connections when it
    drained, `kept` of them went on (the rest are named by lost_why); after
    holds the connections made after the reload, per server."""
    failures = []
    if not had:
        failures.append(f"server {server} had no connection to keep")
    if kept != had:
        failures.append(f"{had - kept} connections of the drained server {lost_why}")
    if after[server]:
        failures.append(f"{after[server]} new connections reached the drained server")
    if sum(after) == 0:
        failures.append("no connection after the reload")
    return failures


def cmd_drain(a):
    """Server N, drained at --reload: the connections it had before keep
    completing; no connection reaches it afterwards; the others take them."""
    evs = events(a.work)
    conns = [e for e in evs if e["event"] == "connection" and e["t_ns"] >= a.before]
    before = [e for e in conns if e["t_ns"] < a.reload and e["server_id"] == sid(a.server)]
    done = {e["scid"] for e in evs if e["event"] == "request" and e.get("complete")}
    after = [0] * NSERVERS
    for e in conns:
        if e["t_ns"] >= a.reload:
            after[server_of(e["server_id"])] += 1
    kept = [e for e in before if e["scid"] in done]
    print(f"  drain: server {a.server} had {len(before)} connections when it drained, {len(kept)} completed "
          f"their request; connections after the reload per server: {after}")
    return report("drain", drain_failures(a.server, len(before), len(kept), "did not complete", after))


def ip_udp(frame, off):
    """(version, src, dst, sport, dport, payload offset) of the IP/UDP packet
    at frame[off:], or None."""
    if len(frame) < off + 1:
        return None
    v = frame[off] >> 4
    if v == 4 and len(frame) >= off + 20 and frame[off + 9] == 17:
        ihl = (frame[off] & 0x0F) * 4
        src, dst, udp = frame[off + 12:off + 16], frame[off + 16:off + 20], off + ihl
    elif v == 6 and len(frame) >= off + 40 and frame[off + 6] == 17:
        src, dst, udp = frame[off + 8:off + 24], frame[off + 24:off + 40], off + 40
    else:
        return None
    if len(frame) < udp + 8:
        return None
    sport, dport = struct.unpack("!HH", frame[udp:udp + 4])
    return v, src, dst, sport, dport, udp + 8


def icmp_error_about_service(frame, off):
    """Whether the IP packet at frame[off:] is an ICMP destination
    unreachable (or ICMPv6 type 1) to the service address that quotes a
    UDP datagram from the service address and port 443: what a client's
    kernel sends about a server's packet that came after its socket closed."""
    if len(frame) < off + 1:
        return False
    v = frame[off] >> 4
    if v == 4 and len(frame) >= off + 20 and frame[off + 9] == 1:
        ihl = (frame[off] & 0x0F) * 4
        icmp = off + ihl
        if frame[off + 16:off + 20] != VIP or len(frame) < icmp + 8 or frame[icmp] != 3:
            return False
        q = ip_udp(frame, icmp + 8)
    elif v == 6 and len(frame) >= off + 48 and frame[off + 6] == 58:
        icmp = off + 40
        if frame[off + 24:off + 40] != VIP6 or frame[icmp] != 1:
            return False
        q = ip_udp(frame, icmp + 8)
    else:
        return False
    return bool(q) and q[1] == (VIP if v == 4 else VIP6) and q[3] == 443


def csum16(data):
    """The Internet checksum's folded one's-complement sum (RFC 1071) of
    data: 0xffff over a header or pseudo-header and segment whose checksum
    is right."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def ip_packet(frame, off):
    """(version, header length, total length, protocol / next header, src,
    dst) of the IPv4 or IPv6 header at frame[off:] (an IPv6 one without
    extension headers), or None."""
    if len(frame) < off + 20:
        return None
    v = frame[off] >> 4
    if v == 4:
        ihl = (frame[off] & 0x0F) * 4
        if ihl < 20 or len(frame) < off + ihl:
            return None
        return (4, ihl, struct.unpack("!H", frame[off + 2:off + 4])[0], frame[off + 9],
                frame[off + 12:off + 16], frame[off + 16:off + 20])
    if v == 6 and len(frame) >= off + 40:
        return (6, 40, 40 + struct.unpack("!H", frame[off + 4:off + 6])[0], frame[off + 6],
                frame[off + 8:off + 24], frame[off + 24:off + 40])
    return None


def ipip_why(frame, orig_len, sources, backend, ttl=None):
    """Why an Ethernet frame is not IP-in-IP as quicsteer's ipip delivery
    writes it (dataplane/fastpath/delivery.h), or None; and where its inner
    IP header starts (None when it has none). sources: the outer source
    addresses (IPv4, IPv6); backend: the backend's addresses (IPv4, IPv6),
    either None when it has none; ttl: the outer TTL / hop limit, or None
    for any but 0; orig_len: the frame's length on the wire (frame may be
    cut short by the capture).

    The frame: Ethernet (no VLAN tag), an outer header without options or
    extension headers of the inner packet's family when the backend has an
    address of it, the other one otherwise; protocol 4 (IPv4 inside) or 41
    (IPv6 inside); from the source of its family to the backend's address;
    its length the inner packet's plus its own, and the frame nothing
    after it; IPv4: a valid header checksum, no fragment, DF set (its ID
    is 0: RFC 6864 allows that only for an atomic datagram). The inner packet intact: its header's
    checksum valid (IPv4), its length within the frame, and, when the
    capture holds all of it, the UDP checksum valid."""
    ethertype = frame[12:14]
    if ethertype not in (b"\x08\x00", b"\x86\xdd"):
        return f"Ethernet type {ethertype.hex()}, not IPv4 or IPv6", None
    o = ip_packet(frame, 14)
    if not o or o[0] != (4 if ethertype == b"\x08\x00" else 6):
        return "no outer IP header of the Ethernet type's version", None
    v, hl, total, proto, src, dst = o
    if hl != (20 if v == 4 else 40):
        return f"an outer IPv{v} header of {hl} octets (options)", None
    inner = 14 + hl
    if proto not in (4, 41):
        return f"outer protocol {proto}, not 4 or 41", None
    iv = 4 if proto == 4 else 6
    i = ip_packet(frame, inner)
    if not i or i[0] != iv:
        return f"outer protocol {proto} but no IPv{iv} header inside", None
    want_v = iv if backend[0 if iv == 4 else 1] else (6 if iv == 4 else 4)
    if v != want_v:
        return f"IPv{iv} inside IPv{v}, want IPv{want_v} outside (the backend's addresses)", inner
    want = (sources[0], backend[0]) if v == 4 else (sources[1], backend[1])
    if (src, dst) != want:
        return f"outer {src.hex()} -> {dst.hex()}, want {want[0].hex()} -> {want[1].hex()}", inner
    otl = frame[14 + 8] if v == 4 else frame[14 + 7]
    if otl == 0 or (ttl is not None and otl != ttl):
        return f"outer TTL {otl}, want {ttl if ttl is not None else 'not 0'}", inner
    if total != hl + i[2]:
        return f"outer length {total}, the inner packet's {i[2]} + {hl}", inner
    if orig_len not in (14 + total, max(60, 14 + total)):
        return f"{orig_len} octets on the wire for an IP packet of {total}", inner
    if v == 4:
        if csum16(frame[14:34]) != 0xFFFF:
            return "a bad outer IPv4 header checksum", inner
        flags = struct.unpack("!H", frame[20:22])[0]
        if flags & 0x3FFF:
            return f"an outer fragment (flags/offset {flags:#06x})", inner
        if not flags & 0x4000:
            return "outer DF 0, want 1", inner
    if iv == 4 and csum16(frame[inner:inner + i[1]]) != 0xFFFF:
        return "a bad inner IPv4 header checksum", inner
    if i[2] < i[1]:
        return f"an inner length {i[2]} below its header", inner
    end = inner + i[2]
    if len(frame) >= end and i[3] == 17:
        udp = frame[inner + i[1]:end]
        if len(udp) < 8 or struct.unpack("!H", udp[4:6])[0] != len(udp):
            return "an inner UDP length that is not the rest of the inner packet", inner
        if iv == 6 or udp[6:8] != b"\0\0":
            pseudo = i[4] + i[5] + (struct.pack("!BBH", 0, 17, len(udp)) if iv == 4
                                    else struct.pack("!IxxxB", len(udp), 17))
            if csum16(pseudo + udp) != 0xFFFF:
                return "a bad inner UDP checksum", inner
    return None, inner


def cmd_routing(a):
    """Every frame that reached server N's segment interface was delivered as
    the mode says, to the service address, and every one whose DCID a server
    issued carries a CID of server N: each connection reached exactly the
    server of its server ID. Long headers with a DCID no server issued are a
    client's first Initials (the hash picks their backend)."""
    failures = []
    issued = {}
    conns = [0] * NSERVERS
    for e in events(a.work, a.logs):
        if e["event"] == "cid":
            issued[e["cid"]] = server_of(e["server_id"])
        elif e["event"] == "connection":
            conns[server_of(e["server_id"])] += 1
    sources = set()
    for n in range(NSERVERS):
        st = {"frames": 0, "own": 0, "other": 0, "first": 0, "unknown": 0, "bad_delivery": 0, "not_quic": 0, "mld": 0,
              "icmp": 0}
        bad = []
        for _, f, orig in pcap_records(os.path.join(a.work, f"{a.tag}-srv{n}.pcap"), with_length=True):
            st["frames"] += 1
            if len(f) < 14:
                st["not_quic"] += 1
                continue
            why = None
            # The source is the TX port's MAC as the port reports it (net_pcap
            # on tx_iface makes one up rather than take qsfl-tx's): one for all.
            sources.add(f[6:12].hex())
            if f[0:6] != srv_mac(n):
                why = f"Ethernet {f[6:12].hex()} -> {f[0:6].hex()}"
            inner = 14
            if a.mode == "vxlan":
                o = ip_udp(f, 14)
                if not o or o[4] != 4789:
                    st["not_quic"] += 1
                    continue
                v, src, dst, _, _, p = o
                want = (TX_ADDR, srv_addr(n)) if v == 4 else (TX_ADDR6, srv_addr6(n))
                vni = int.from_bytes(f[p + 4:p + 7], "big") if len(f) >= p + 8 else None
                if (src, dst) != want or f[p] != 0x08 or vni != VNI:
                    why = why or f"outer {src.hex()} -> {dst.hex()}, VXLAN flags {f[p]:#x} VNI {vni}"
                inner = p + 8
                if f[inner:inner + 6] != srv_vxmac(n):
                    why = why or f"inner destination MAC {f[inner:inner + 6].hex()}"
                inner += 14
            elif a.mode == "ipip":
                # IPv4 inside IPv4 and IPv6 inside IPv6 (every server has both)
                wrong, inner = ipip_why(f, orig, (TX_ADDR, TX_ADDR6), (srv_addr(n), srv_addr6(n)), a.outer_ttl)
                if inner is None:
                    st["not_quic"] += 1
                    continue
                why = why or wrong
            if (a.ignore_mld and len(f) > inner and f[inner] >> 4 == 6
                    and f[inner + 24:inner + 26] == b"\xff\x02"):
                st["mld"] += 1
                continue
            if icmp_error_about_service(f, inner):
                # A client's kernel answers a server's packet that came after
                # gtlsclient closed its socket with "port unreachable" to the
                # service address: delivered to the server whose flow it
                # quotes (quicsteer steers it by the quoted connection), not
                # QUIC but not misdelivered either.
                st["icmp"] += 1
                if f[0:6] != srv_mac(n):
                    st["bad_delivery"] += 1
                    bad.append(why or f"ICMP error to {f[0:6].hex()}")
                continue
            q = ip_udp(f, inner)
            if not q or q[4] != 443:
                st["not_quic"] += 1
                continue
            if q[2] != (VIP if q[0] == 4 else VIP6):
                why = why or f"to {q[2].hex()}"
            if why:
                st["bad_delivery"] += 1
                bad.append(why)
            qu = f[q[5]:]
            if not qu:
                st["unknown"] += 1
                continue
            if qu[0] & 0x80:
                dcid = qu[6:6 + qu[5]].hex() if len(qu) > 6 else ""
                first = len(qu) > 0 and (qu[0] >> 4) & 3 == 0
            else:
                dcid = qu[1:1 + SHORT_CID_LEN].hex()
                first = False
            owner = issued.get(dcid)
            if owner == n:
                st["own"] += 1
            elif owner is not None:
                st["other"] += 1
            elif first:
                st["first"] += 1
            else:
                st["unknown"] += 1
        print(f"  {a.tag}: server {n} ({sid(n)}): {conns[n]} connections; {st['frames']} frames: {st['own']} with "
              f"its CIDs, {st['first']} first Initials, {st['other']} with another server's CIDs, "
              f"{st['unknown']} of no CID issued, {st['not_quic']} not QUIC, {st['icmp']} ICMP errors about the service's "
              f"datagrams, {st['mld']} MLD ignored, {st['bad_delivery']} delivered wrong "
              f"({a.mode})")
        if st["other"] or st["unknown"]:
            failures.append(f"server {n} received {st['other']} packets of other servers' connections and "
                            f"{st['unknown']} of none")
        if st["not_quic"]:
            failures.append(f"server {n} received {st['not_quic']} frames that are not QUIC to the service address")
        if st["bad_delivery"]:
            failures.append(f"server {n}: {st['bad_delivery']} frames not delivered as {a.mode} says "
                            f"(first: {bad[0]})")
        if conns[n] == 0 or st["own"] == 0:
            failures.append(f"server {n} had no connection: the fleet is not exercised")
    print(f"  {a.tag}: source MACs {sorted(sources)}")
    if len(sources) > 1:
        failures.append(f"frames from {len(sources)} source MACs, want the TX port's alone")
    return report(a.tag, failures)


def cmd_quicsteer(a):
    """quicsteer's end-of-run statistics: no software drop, no leaked mbuf,
    a reload applied; per-backend counters printed where it has them."""
    failures = []
    stats = json.load(open(os.path.join(a.work, f"{a.tag}-quicsteer.json")))
    total = stats["total"]
    drops = {k: v for k, v in dict(total["drops_total"]).items() if v and k != "not_udp"}
    print(f"  {a.tag}: quicsteer rx {total['rx']} tx {total['tx']}, routed by {total['routed']}, "
          f"migrations {total['migrations']}, drops {drops}, steering generation {stats['steering_generation']}")
    for key in ("backends", "backend"):
        if key in stats:
            print(f"  {a.tag}: per backend: {json.dumps(stats[key])}")
    if drops:
        failures.append(f"software drops: {drops}")
    if not stats["mbufs"]["ok"]:
        failures.append("mbuf leak")
    if stats["steering_generation"] < 2:
        failures.append("no steering reload was applied")
    routed = total["routed"]
    failures += routed_failures(routed, a.routed_min, a.routed_max)
    if a.connections_from:
        # Each backend's `connections` against the connections its server
        # logged: a migrated connection, or one whose CIDs reach its owner
        # from several 4-tuples, is still one (issue 38 item 11).
        made = [0] * NSERVERS
        for e in events(a.work, a.connections_from):
            if e["event"] == "connection":
                made[server_of(e["server_id"])] += 1
        counted = {b["name"]: b.get("connections") for b in stats.get("backends", [])}
        for n in range(NSERVERS):
            print(f"  {a.tag}: backend srv{n}: quicsteer counted {counted.get(f'srv{n}')} connections, "
                  f"server {n} made {made[n]}")
            if counted.get(f"srv{n}") != made[n]:
                failures.append(f"backend srv{n}: quicsteer counted {counted.get(f'srv{n}')} connections, "
                                f"server {n} made {made[n]}")
    return report(a.tag, failures)


# ---- servers that log nothing of use (ngtcp2's gtlsserver, random CIDs):
# what reached them, from the captures in front of them.

def l2_quic(frame, n):
    """(ip version, client (address, port), QUIC payload, why not delivered
    as l2 says or None) of a frame that reached server N, or None for a frame
    that is not UDP to port 443."""
    if len(frame) < 14:
        return None
    q = ip_udp(frame, 14)
    if not q or q[4] != 443:
        return None
    v, src, dst, sport, _, p = q
    why = None
    if frame[0:6] != srv_mac(n):
        why = f"Ethernet {frame[6:12].hex()} -> {frame[0:6].hex()}"
    elif dst != (VIP if v == 4 else VIP6):
        why = f"to {dst.hex()}"
    return v, (src.hex(), sport), frame[p:], why


def quic_ids(payload, cid_len):
    """(long?, packet type, DCID, SCID) of a QUIC packet (hex; SCID None for a
    short header), or None."""
    if not payload:
        return None
    if payload[0] & 0x80:
        if len(payload) < 7 or len(payload) < 7 + payload[5]:
            return None
        dl = payload[5]
        sl = payload[6 + dl]
        return True, (payload[0] >> 4) & 3, payload[6:6 + dl].hex(), payload[7 + dl:7 + dl + sl].hex()
    return False, None, payload[1:1 + cid_len].hex(), None


def captured(work, tag, cid_len):
    """Every frame that reached a server: (time s, server, version, client,
    QUIC ids or None, why misdelivered or None, source MAC), in time order;
    and the frames per server."""
    out, frames = [], [0] * NSERVERS
    for n in range(NSERVERS):
        for ts, f in pcap_records(os.path.join(work, f"{tag}-srv{n}.pcap")):
            frames[n] += 1
            q = l2_quic(f, n)
            if q is None:
                out.append((ts, n, None, None, None, "not QUIC to the service address", f[6:12].hex()))
                continue
            v, client, payload, why = q
            out.append((ts, n, v, client, quic_ids(payload, cid_len), why, f[6:12].hex()))
    out.sort(key=lambda p: p[0])
    return out, frames


def first_initials(packets):
    """client SCID -> (time, server, client, original DCID) of each
    connection's first Initial (the client's long header of type 0 that
    reached a server first)."""
    first = {}
    for ts, n, _, client, ids, _, _ in packets:
        if ids and ids[0] and ids[1] == 0 and ids[3] not in first:
            first[ids[3]] = (ts, n, client, ids[2])
    return first


def cmd_owners(a):
    """Each connection reached exactly one server: the server of its first
    Initial (the one that made it) received every packet of it and no other
    server any. A connection is the client's SCID; the server's CIDs are the
    other DCIDs the client put in long headers with it; a short header is the
    connection of its DCID. Delivered as l2 says (destination MAC the
    server's, one source MAC); every server made connections; what quicsteer
    counted per backend is what reached that server."""
    failures = []
    packets, frames = captured(a.work, a.tag, a.cid_len)
    first = first_initials(packets)
    cid_conn = {}
    for _, _, _, _, ids, _, _ in packets:
        if ids and ids[0] and ids[3] in first and ids[2] != first[ids[3]][3]:
            cid_conn[ids[2]] = ids[3]
    per = [{"connections": 0, "packets": 0, "other": 0, "unknown": 0, "bad": 0} for _ in range(NSERVERS)]
    servers_of, clients_of, bad, sources = {}, {}, [], set()
    for scid, (_, n, _, _) in first.items():
        per[n]["connections"] += 1
    for ts, n, _, client, ids, why, smac in packets:
        per[n]["packets"] += 1
        sources.add(smac)
        if why:
            per[n]["bad"] += 1
            bad.append(f"server {n}: {why}")
        if not ids:
            continue
        conn = ids[3] if ids[0] else cid_conn.get(ids[2])
        if conn not in first:
            per[n]["unknown"] += 1
            continue
        servers_of.setdefault(conn, set()).add(n)
        clients_of.setdefault(conn, set()).add(client)
        if first[conn][1] != n:
            per[n]["other"] += 1
    stats = json.load(open(os.path.join(a.work, f"{a.tag}-quicsteer.json")))
    counted = {b["name"]: b for b in stats.get("backends", [])}
    for n in range(NSERVERS):
        p, b = per[n], counted.get(f"srv{n}", {})
        print(f"  {a.tag}: server {n}: made {p['connections']} connections; {frames[n]} frames "
              f"(quicsteer's backend srv{n}: {b.get('packets')} packets, {b.get('connections')} connections): "
              f"{p['other']} of connections another server made, {p['unknown']} of no connection seen, "
              f"{p['bad']} not delivered as l2 says")
        if p["other"] or p["unknown"]:
            failures.append(f"server {n} received {p['other']} packets of connections another server made and "
                            f"{p['unknown']} of no connection seen")
        if p["connections"] == 0:
            failures.append(f"server {n} made no connection: the fleet is not exercised")
        if b.get("packets") != frames[n]:
            failures.append(f"quicsteer counted {b.get('packets')} packets for backend srv{n}, "
                            f"{frames[n]} reached server {n}")
    split = [c for c, s in servers_of.items() if len(s) > 1]
    print(f"  {a.tag}: {len(first)} connections, {len(split)} seen at more than one server; "
          f"source MACs {sorted(sources)}")
    if bad:
        failures.append(f"{len(bad)} frames not delivered as l2 says (first: {bad[0]})")
    if split:
        failures.append(f"{len(split)} connections reached more than one server")
    if len(sources) > 1:
        failures.append(f"frames from {len(sources)} source MACs, want the TX port's alone")
    if len(first) != a.connections:
        failures.append(f"{len(first)} connections reached the servers, want {a.connections}")
    for path in glob.glob(os.path.join(a.work, f"{a.tag}-srv*.tcpdump")):
        m = re.search(r"(\d+) packets dropped by kernel", open(path).read())
        if not m or int(m.group(1)):
            failures.append(f"{os.path.basename(path)}: the capture lost packets or did not say")
    for spec in a.moved:
        phase, want = spec.rsplit(":", 1)
        t0, t1 = (t / 1e9 for t in window(a.work, phase))
        conns = [c for c, f in first.items() if t0 <= f[0] <= t1]
        moved = [c for c in conns if len({port for _, port in clients_of.get(c, ())}) > 1]
        print(f"  {a.tag}: {phase}: {len(moved)} of {len(conns)} connections reached their one server "
              f"from more than one client port")
        if len(conns) != int(want) or len(moved) != len(conns):
            failures.append(f"{phase}: {len(moved)} of {len(conns)} connections moved, want {want} of {want}")
    return report(a.tag, failures)


def cmd_busiest(a):
    """The server that made most of the connections whose first Initial
    arrived since --since (exit 1 while fewer than --count have)."""
    first = first_initials(captured(a.work, a.tag, a.cid_len)[0])
    count = [0] * NSERVERS
    for ts, n, _, _ in first.values():
        if ts >= a.since / 1e9:
            count[n] += 1
    if sum(count) < a.count:
        return 1
    print(max(range(NSERVERS), key=lambda n: (count[n], -n)))
    return 0


def cmd_drain_captures(a):
    """Server N, drained at --reload: the connections it made before the
    reload kept reaching it afterwards (their requests were sent after it);
    no connection whose first Initial came after the reload reached it."""
    packets, _ = captured(a.work, a.tag, a.cid_len)
    first = first_initials(packets)
    before, reload = a.before / 1e9, a.reload / 1e9
    kept = {c for c, f in first.items() if before <= f[0] < reload and f[1] == a.server}
    cid_conn = {ids[2]: ids[3] for _, _, _, _, ids, _, _ in packets
                if ids and ids[0] and ids[3] in kept and ids[2] != first[ids[3]][3]}
    later = {cid_conn[ids[2]] for ts, n, _, _, ids, _, _ in packets
             if ts >= reload and n == a.server and ids and not ids[0] and ids[2] in cid_conn}
    after = [0] * NSERVERS
    for ts, n, _, _ in first.values():
        if ts >= reload:
            after[n] += 1
    print(f"  drain: server {a.server} made {len(kept)} connections before it drained, {len(later)} of them "
          f"sent it 1-RTT packets after the reload; connections after the reload per server: {after}")
    return report("drain", drain_failures(a.server, len(kept), len(later), "sent it nothing after the reload", after))


def cmd_uploads(a):
    """What gtlsserver received (its request bodies, hex-dumped when it is
    not quiet, in stream order, after a log line of the connection they
    belong to): every upload arrived whole at exactly one server, with the
    sha256 of its file, and its client exited 0."""
    failures = []
    want = {sha256_file(os.path.join(a.work, "up", f"up{i}")): f"up{i}" for i in range(a.nup)}
    bodies = {}  # (log, server's SCID) -> hash of the body so far, octets
    conn_line = re.compile(r"^I\d+ 0x([0-9a-f]+) ")
    hex_line = re.compile(r"^[0-9a-f]{8}  ")
    for path in sorted(glob.glob(os.path.join(a.work, a.logs))):
        conn = key = None
        with open(path, errors="replace") as f:
            for line in f:
                if key and hex_line.match(line):
                    data = bytes.fromhex(line[10:58])
                    bodies[key][0].update(data)
                    bodies[key][1] += len(data)
                    continue
                key = None
                m = conn_line.match(line)
                if m:
                    conn = m.group(1)
                elif line.startswith("http: stream ") and " body " in line:
                    key = (os.path.basename(path), conn)
                    bodies.setdefault(key, [hashlib.sha256(), 0])
    got = {}
    for (log, conn), (h, size) in bodies.items():
        name = want.get(h.hexdigest())
        print(f"  uploads: {log}: connection {conn}: a body of {size} octets, "
              f"{'the sha256 of ' + name if name else 'sha256 of no upload'}")
        if name:
            got.setdefault(name, []).append(log)
        else:
            failures.append(f"{log}: connection {conn} received {size} octets that are no upload")
    results = {}
    for tag in a.tags.split(","):
        for line in open(os.path.join(a.work, f"{tag}-clients.tsv")):
            name, rc, _ = line.rstrip("\n").split("\t")
            results[name] = int(rc)
    for i in range(a.nup):
        name = f"up{i}"
        print(f"  uploads: {name}: client exit {results.get(name)}, arrived whole at {got.get(name, [])}")
        if results.get(name) != 0:
            failures.append(f"{name}: the client exited {results.get(name)}")
        if len(got.get(name, [])) != 1:
            failures.append(f"{name} arrived whole at {len(got.get(name, []))} servers, want 1")
    return report("uploads", failures)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("standin")
    s.add_argument("work")
    s.add_argument("--server", type=int, required=True)
    s.add_argument("--tags", required=True)
    v = sub.add_parser("servers")
    v.add_argument("work")
    v.add_argument("--logs", required=True)
    v.add_argument("--count", type=int, required=True)
    v.add_argument("--unknown-cid", choices=["zero", "some", "any"], default="any")
    c = sub.add_parser("connections")
    c.add_argument("work")
    c.add_argument("--since", type=int, required=True)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--count", type=int)
    g.add_argument("--busiest", action="store_true")
    d = sub.add_parser("drain")
    d.add_argument("work")
    d.add_argument("--server", type=int, required=True)
    d.add_argument("--before", type=int, required=True)
    d.add_argument("--reload", type=int, required=True)
    r = sub.add_parser("routing")
    r.add_argument("work")
    r.add_argument("tag")
    r.add_argument("--mode", choices=["l2", "vxlan", "ipip"], required=True)
    r.add_argument("--logs", required=True)
    # the stand-in's own VXLAN devices report their IPv6 multicast groups
    # (to ff02::) through the tunnel: kernel chatter, not delivery
    r.add_argument("--ignore-mld", action="store_true")
    # ipip: the outer TTL / hop limit the profile sets (without: any but 0;
    # the stand-in's IPv4 tunnel inherits the inner TTL)
    r.add_argument("--outer-ttl", type=int)
    q = sub.add_parser("quicsteer")
    q.add_argument("work")
    q.add_argument("tag")
    q.add_argument("--routed-min", action="append", default=[], metavar="METHOD=N")
    q.add_argument("--routed-max", action="append", default=[], metavar="METHOD=N")
    q.add_argument("--connections-from", metavar="GLOB",
                   help="the servers' logs (jsonl) whose connection events each backend's count must equal")
    o = sub.add_parser("owners")
    o.add_argument("work")
    o.add_argument("tag")
    o.add_argument("--cid-len", type=int, required=True)
    o.add_argument("--connections", type=int, required=True)
    o.add_argument("--moved", action="append", default=[], metavar="PHASE:N")
    b = sub.add_parser("busiest")
    b.add_argument("work")
    b.add_argument("tag")
    b.add_argument("--cid-len", type=int, required=True)
    b.add_argument("--since", type=int, required=True)
    b.add_argument("--count", type=int, required=True)
    dc = sub.add_parser("drain-captures")
    dc.add_argument("work")
    dc.add_argument("tag")
    dc.add_argument("--cid-len", type=int, required=True)
    dc.add_argument("--server", type=int, required=True)
    dc.add_argument("--before", type=int, required=True)
    dc.add_argument("--reload", type=int, required=True)
    u = sub.add_parser("uploads")
    u.add_argument("work")
    u.add_argument("--tags", required=True)
    u.add_argument("--nup", type=int, required=True)
    u.add_argument("--logs", required=True)
    a = ap.parse_args()
    return globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    sys.exit(main())
