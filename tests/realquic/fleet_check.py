#!/usr/bin/env python3
"""Checks for the realquic fleet test (tests/realquic/fleet_test.sh): what the
four servers logged and what reached their segment interfaces. Server N (0..3)
has QUIC-LB server ID 0a0(N+1), segment MAC 02:00:00:78:02:1N, addresses
10.78.2.1N / fd78:2::1N and VXLAN MAC 02:00:00:78:03:1N
(tests/realquic/fleet_topology.sh). Each subcommand prints what it found and
exits 1 when an assertion fails.

  standin     WORK --server N --tags TAG,...
  servers     WORK --logs GLOB --count K [--unknown-cid zero]
  connections WORK --since T_NS (--count K | --busiest)
  drain       WORK --server N --before T_NS --reload T_NS
  routing     WORK TAG --mode l2|vxlan --logs GLOB [--ignore-mld]
  quicsteer   WORK TAG
"""
import argparse
import glob
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realquic_check import pcap_records  # noqa: E402

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
    connection it does not have (with --unknown-cid zero)."""
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


def cmd_drain(a):
    """Server N, drained at --reload: the connections it had before keep
    completing; no connection reaches it afterwards; the others take them."""
    failures = []
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
    if not before:
        failures.append(f"server {a.server} had no connection to keep")
    if len(kept) != len(before):
        failures.append(f"{len(before) - len(kept)} connections of the drained server did not complete")
    if after[a.server]:
        failures.append(f"{after[a.server]} new connections reached the drained server")
    if sum(after) == 0:
        failures.append("no connection after the reload")
    return report("drain", failures)


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
        st = {"frames": 0, "own": 0, "other": 0, "first": 0, "unknown": 0, "bad_delivery": 0, "not_quic": 0, "mld": 0}
        bad = []
        for _, f in pcap_records(os.path.join(a.work, f"{a.tag}-srv{n}.pcap")):
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
            if a.ignore_mld and f[inner - 2:inner] == b"\x86\xdd" and f[inner + 24:inner + 26] == b"\xff\x02":
                st["mld"] += 1
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
              f"{st['unknown']} of no CID issued, {st['not_quic']} not QUIC, {st['mld']} MLD ignored, {st['bad_delivery']} delivered wrong "
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
    return report(a.tag, failures)


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
    v.add_argument("--unknown-cid", choices=["zero", "any"], default="any")
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
    r.add_argument("--mode", choices=["l2", "vxlan"], required=True)
    r.add_argument("--logs", required=True)
    # the stand-in's own VXLAN devices report their IPv6 multicast groups
    # (to ff02::) through the tunnel: kernel chatter, not delivery
    r.add_argument("--ignore-mld", action="store_true")
    q = sub.add_parser("quicsteer")
    q.add_argument("work")
    q.add_argument("tag")
    a = ap.parse_args()
    return globals()["cmd_" + a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
