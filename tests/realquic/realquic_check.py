#!/usr/bin/env python3
"""Checks for the realquic test (tests/realquic/realquic_test.sh): what the
clients received, what the servers logged, what quicsteer counted and what the
namespaces' captures saw. Each subcommand prints what it found and exits 1
when an assertion fails.

  transfers WORK TAG --ndown N --nup N --migration none|port|address|rebind --expect ok|some-fail
            [--server-log quicsteer|none] [--file NAME]
  counts    WORK TAG [--min-migrations N] [--forwarding on|off] [--routed-min METHOD=N]... [--routed-max METHOD=N]...
  owners    WORK TAG --cid-len N --expect own|misrouted [--connections N] [--moved PHASE:N]
  cids      WORK --cid-tool PATH --cr N --sid-len N --nonce-len N [--key HEX]
  servers   WORK --unknown-cid zero|some
  classify  WORK TAG --cid-tool PATH --profile FILE
"""
import argparse
import glob
import hashlib
import json
import os
import re
import struct
import subprocess
import sys


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def server_events(work):
    events = []
    for path in sorted(glob.glob(os.path.join(work, "server*.jsonl"))):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    events.append(json.loads(line))
    return events


def pcap_frames(path):
    """Frame count of a classic pcap file (either byte order)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return 0
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    n, off = 0, 24
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        off += 16 + incl
        n += 1
    return n


def pcap_records(path, with_length=False):
    """(seconds, frame) of each record of a classic pcap file; `with_length`:
    (seconds, frame as captured, its length on the wire)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    frac = 1e-9 if magic in (0xA1B23C4D, 0x4D3CB2A1) else 1e-6
    off = 24
    while off + 16 <= len(data):
        sec, sub, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        yield (sec + sub * frac, frame, orig) if with_length else (sec + sub * frac, frame)
        off += 16 + incl


def routed_failures(routed, at_least, at_most):
    """What breaks the --routed-min / --routed-max specs (RULE=N) for
    quicsteer's routed counts by rule."""
    failures = []
    for spec in at_least:
        method, n = spec.split("=")
        if routed[method] < int(n):
            failures.append(f"{routed[method]} packets routed by {method}, want at least {n}")
    for spec in at_most:
        method, n = spec.split("=")
        if routed[method] > int(n):
            failures.append(f"{routed[method]} packets routed by {method}, want at most {n}")
    return failures


def quic_header(frame, short_cid_len):
    """(client ip:port, long?, packet type, DCID, SCID) of an Ethernet/IPv4/UDP
    QUIC frame (hex CIDs; SCID None for a short header), or None."""
    if frame[12:14] != b"\x08\x00" or len(frame) < 34 or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    udp = 14 + ihl
    q = frame[udp + 8:]
    if len(q) < 1:
        return None
    src = ".".join(str(b) for b in frame[26:30]) + ":" + str(struct.unpack("!H", frame[udp:udp + 2])[0])
    if q[0] & 0x80:
        if len(q) < 7:
            return None
        dl = q[5]
        dcid = q[6:6 + dl]
        if len(q) < 7 + dl:
            return None
        sl = q[6 + dl]
        scid = q[7 + dl:7 + dl + sl]
        return src, True, (q[0] >> 4) & 3, dcid.hex(), scid.hex()
    return src, False, None, q[1:1 + short_cid_len].hex(), None


def non_udp_frames(path):

    """Frames of an Ethernet pcap that are not IPv4/IPv6 UDP."""
    with open(path, "rb") as f:
        data = f.read()
    endian = "<" if struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    n, off = 0, 24
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        ethertype = frame[12:14]
        if ethertype == b"\x08\x00" and len(frame) > 23 and frame[23] == 17:
            continue
        if ethertype == b"\x86\xdd" and len(frame) > 20 and frame[20] == 17:
            continue
        n += 1
    return n


def link_drops(path):
    """{iface: {tx_dropped, rx_dropped}} of the quicsteer-to-server veths."""
    out = {}
    if not os.path.exists(path):
        return out
    data = json.load(open(path))
    for links in data.values():
        for link in links:
            if link["ifname"] in ("qsrq-s0", "qsrq-s1", "qsrq-v0", "qsrq-v1"):
                st = link.get("stats64", link.get("stats", {}))
                out[link["ifname"]] = {"tx_dropped": st["tx"]["dropped"], "rx_dropped": st["rx"]["dropped"]}
    return out


def cmd_transfers(a):
    failures = []
    results = {}
    tsv = os.path.join(a.work, f"{a.tag}-clients.tsv")
    with open(tsv) as f:
        for line in f:
            name, rc, ms = line.rstrip("\n").split("\t")
            results[name] = (int(rc), int(ms))
    want = sha256_file(os.path.join(a.work, "www", a.file))
    ok_count, rows = 0, []
    names = [f"down{i}" for i in range(a.ndown)] + [f"up{i}" for i in range(a.nup)]
    for name in names:
        rc, ms = results.get(name, (None, 0))
        d = os.path.join(a.work, f"{a.tag}-dl", name)
        if name.startswith("down"):
            got = os.path.join(d, a.file)
            size = os.path.getsize(got) if os.path.exists(got) else 0
            ok = os.path.exists(got) and sha256_file(got) == want
            detail = f"{size} octets, sha256 {'matches' if ok else 'DIFFERS'}"
        else:
            i = name[2:]
            src = os.path.join(a.work, "up", f"up{i}")
            reply = os.path.join(d, f"upload{i}")
            text = open(reply).read().split() if os.path.exists(reply) else []
            expect = [sha256_file(src), str(os.path.getsize(src))]
            ok = text == expect
            detail = (f"server got {text[1] if len(text) == 2 else '?'} octets, sha256 "
                      f"{'matches' if ok else 'DIFFERS'}")
        if rc is None:
            ok, detail = False, "client did not report"
        rows.append((name, ok, ms, rc, detail))
        ok_count += ok
    for name, ok, ms, rc, detail in rows:
        print(f"  {a.tag:14} {name:7} {'ok  ' if ok else 'FAIL'} {ms / 1000:6.2f} s  exit {rc}  {detail}")
    total = len(rows)
    print(f"  {a.tag}: {ok_count}/{total} transfers complete with the right sha256")

    if a.server_log == "none":  # servers that write no log (ngtcp2's): see the owners check
        if a.expect == "ok" and ok_count != total:
            failures.append(f"{total - ok_count} of {total} transfers failed")
        if a.expect == "some-fail" and ok_count == total:
            failures.append(f"all {total} transfers completed: the baseline did not fail")
        for f in failures:
            print(f"  {a.tag}: FAILED: {f}")
        return 1 if failures else 0

    # What the servers saw of this phase's connections.
    t0, t1 = (int(x) for x in open(os.path.join(a.work, f"{a.tag}-window")).read().split())
    events = [e for e in server_events(a.work) if t0 <= e["t_ns"] <= t1 + 20_000_000_000]
    conns = {e["scid"]: e for e in events if e["event"] == "connection" and e["t_ns"] <= t1}
    moved = {}
    for e in events:
        if e["event"] == "path_validation" and e["result"] == "success" and e["scid"] in conns:
            moved.setdefault(e["scid"], []).append(e["client"])
    complete = {e["scid"] for e in events if e["event"] == "request" and e.get("complete") and e["scid"] in conns}
    print(f"  {a.tag}: servers: {len(conns)} connections, {len(complete)} with a complete request, "
          f"{len(moved)} moved to a validated new path")

    if a.expect == "ok":
        if ok_count != total:
            failures.append(f"{total - ok_count} of {total} transfers failed")
        if a.migration != "none":
            for scid, first in conns.items():
                paths = moved.get(scid, [])
                if not paths:
                    failures.append(f"connection {scid} ({first['client']}) never moved")
                    continue
                first_addr = first["client"].rsplit(":", 1)[0]
                if a.migration == "address" and not any(p.rsplit(":", 1)[0] != first_addr for p in paths):
                    failures.append(f"connection {scid} moved from {first['client']} to {paths}, not to a new address")
                if a.migration in ("port", "rebind") and not any(p != first["client"] and p.rsplit(":", 1)[0] == first_addr
                                                     for p in paths):
                    failures.append(f"connection {scid} moved from {first['client']} to {paths}, not to a new port")
            if len(conns) < total:
                failures.append(f"servers saw {len(conns)} connections for {total} transfers")
    else:  # some-fail: the baseline must lose migrated connections
        if ok_count == total:
            failures.append(f"all {total} migrated transfers completed: the baseline did not fail")
        if a.migration != "none" and not moved and ok_count == total:
            failures.append("no connection moved")
    for f in failures:
        print(f"  {a.tag}: FAILED: {f}")
    return 1 if failures else 0


def cmd_counts(a):
    failures = []
    stats = json.load(open(os.path.join(a.work, f"{a.tag}-quicsteer.json")))
    rx = pcap_frames(os.path.join(a.work, f"{a.tag}-rx.pcap"))
    tx = [pcap_frames(os.path.join(a.work, f"{a.tag}-tx{n}.pcap")) for n in (0, 1)]
    for path in glob.glob(os.path.join(a.work, f"{a.tag}-*.tcpdump")):
        m = re.search(r"(\d+) packets dropped by kernel", open(path).read())
        if not m:
            failures.append(f"{os.path.basename(path)}: tcpdump did not report its drops")
        elif int(m.group(1)) != 0:
            failures.append(f"{os.path.basename(path)}: the capture lost {m.group(1)} packets")
    total = stats["total"]
    ports = {p["name"]: p for p in stats["ports"]}
    links = link_drops(os.path.join(a.work, f"{a.tag}-links.json"))
    owners = sorted((l for l in stats["lcores"] if l.get("owner_index") is not None and l["owner_index"] >= 0),
                    key=lambda l: l["owner_index"])
    owner_tx = [l["tx"] for l in owners]
    imissed = ports["wire"]["imissed"]
    print(f"  {a.tag}: quicsteer rx {total['rx']} (port wire ipackets {ports['wire']['ipackets']}, "
          f"imissed {imissed}), capture on qsrq-c {rx}")
    print(f"  {a.tag}: quicsteer tx {total['tx']} per owner {owner_tx} (port servers opackets "
          f"{ports['servers']['opackets']}), captures on qsrq-v0/qsrq-v1 {tx}")
    print(f"  {a.tag}: kernel drops on the veths to the servers: "
          f"{ {k: v['tx_dropped'] + v['rx_dropped'] for k, v in links.items()} }")
    print(f"  {a.tag}: drops {total['drops_sum']} {total['drops_total']}, parks {total['parks']}, "
          f"mbuf leak check {'ok' if stats['mbufs']['ok'] else 'FAILED'}")
    # What the kernel dropped before quicsteer's RX queue (a full packet
    # socket ring; an AF_XDP socket out of fill-ring buffers while its queue
    # was parked or its lcore descheduled) is the port's imissed; QUIC's loss
    # recovery resends it.
    if total["rx"] + imissed != rx or ports["wire"]["ipackets"] != total["rx"]:
        failures.append(f"quicsteer received {total['rx']} and missed {imissed}, the client side sent {rx}")
    # What the kernel dropped on a veth between quicsteer and a server (its
    # backlog full) never reaches the capture; it is counted on the link.
    lost = [links.get(f"qsrq-s{n}", {}).get("tx_dropped", 0) + links.get(f"qsrq-v{n}", {}).get("rx_dropped", 0)
            for n in (0, 1)]
    if total["tx"] != sum(tx) + sum(lost) or ports["servers"]["opackets"] != total["tx"]:
        failures.append(f"quicsteer transmitted {total['tx']}, the servers' side saw {sum(tx)} "
                        f"and the links dropped {sum(lost)}")
    if owner_tx != [t + l for t, l in zip(tx, lost)]:
        failures.append(f"owner N's TX queue must feed qsrq-vN: owners sent {owner_tx}, links saw {tx}, "
                        f"dropped {lost}")
    # Non-UDP frames (the client namespace's ICMP port unreachable for a
    # server's last packets to a client that has exited) are dropped by
    # design and counted as not_udp; everything else must be zero with park.
    not_udp = non_udp_frames(os.path.join(a.work, f"{a.tag}-rx.pcap"))
    drops = dict(total["drops_total"])
    if drops.get("not_udp", 0) != not_udp:
        failures.append(f"quicsteer counted {drops.get('not_udp', 0)} not_udp drops, the client sent {not_udp} "
                        f"non-UDP frames")
    drops.pop("not_udp", None)
    if sum(drops.values()) != 0:
        failures.append(f"software drops: {drops}")
    if not stats["mbufs"]["ok"]:
        failures.append("mbuf leak")
    if rx == 0:
        failures.append("nothing crossed quicsteer")
    routed = total["routed"]
    fw = stats.get("forwarding", {})
    print(f"  {a.tag}: routed by {routed}; forwarding tables {fw}; learned {total['learned']}, "
          f"setups {total['setups']}, setups evicted {total['setup_evicted']}, table full {total['table_full']}")
    if a.forwarding is not None and fw.get("enabled") != (a.forwarding == "on"):
        failures.append(f"forwarding tables enabled: {fw.get('enabled')}, want {a.forwarding}")
    failures += routed_failures(routed, a.routed_min, a.routed_max)
    print(f"  {a.tag}: quicsteer followed {total['migrations']} migrations (a known CID from a new 4-tuple)")
    if total["migrations"] < a.min_migrations:
        failures.append(f"quicsteer followed {total['migrations']} migrations, want at least {a.min_migrations}")
    for f in failures:
        print(f"  {a.tag}: FAILED: {f}")
    return 1 if failures else 0


def cmd_owners(a):
    """Which server each QUIC packet quicsteer sent reached (the captures on
    qsrq-v0 / qsrq-v1), for servers whose own logs do not say (ngtcp2's
    gtlsserver): a connection is the client's SCID; its server is the one its
    first Initial reached (the one that made it); the server's CIDs are the
    other DCIDs the client put in long headers with that SCID; a short header
    belongs to the connection of its DCID. A packet of a connection another
    server made is misrouted (its server drops it: it has no such connection)."""
    failures = []
    packets = []  # (time, server, header)
    for n in (0, 1):
        for ts, frame in pcap_records(os.path.join(a.work, f"{a.tag}-tx{n}.pcap")):
            h = quic_header(frame, a.cid_len)
            if h:
                packets.append((ts, n, h))
    packets.sort(key=lambda p: p[0])
    first = {}  # client SCID -> (time, server, client, original DCID)
    for ts, n, (client, is_long, ptype, dcid, scid) in packets:
        if is_long and ptype == 0 and scid not in first:
            first[scid] = (ts, n, client, dcid)
    cid_conn = {}
    for ts, n, (client, is_long, ptype, dcid, scid) in packets:
        if is_long and scid in first and dcid != first[scid][3]:
            cid_conn[dcid] = scid
    per = [{"connections": 0, "packets": 0, "misrouted": 0, "unknown": 0} for _ in (0, 1)]
    tuples = {}  # client SCID -> client addresses:ports it used
    for scid, (ts, n, client, odcid) in first.items():
        per[n]["connections"] += 1
    for ts, n, (client, is_long, ptype, dcid, scid) in packets:
        per[n]["packets"] += 1
        conn = scid if is_long else cid_conn.get(dcid)
        if conn not in first:
            per[n]["unknown"] += 1
            continue
        tuples.setdefault(conn, set()).add(client)
        if first[conn][1] != n:
            per[n]["misrouted"] += 1
    for n in (0, 1):
        p = per[n]
        print(f"  {a.tag}: server {n} made {p['connections']} connections and received {p['packets']} QUIC packets: "
              f"{p['misrouted']} of connections the other server made, {p['unknown']} of no connection seen")
    misrouted = sum(p["misrouted"] for p in per)
    unknown = sum(p["unknown"] for p in per)
    if a.expect == "own":
        if misrouted or unknown:
            failures.append(f"{misrouted} packets reached the server without their connection, "
                            f"{unknown} belong to no connection seen")
        if any(p["connections"] == 0 for p in per):
            failures.append("a server made no connection: the test does not exercise both owners")
        if a.connections is not None and len(first) != a.connections:
            failures.append(f"{len(first)} connections reached the servers, want {a.connections}")
        for spec in a.moved:
            phase, want = spec.rsplit(":", 1)
            t0, t1 = (int(x) / 1e9 for x in open(os.path.join(a.work, f"{phase}-window")).read().split())
            conns = [s for s, f in first.items() if t0 <= f[0] <= t1]
            moved = [s for s in conns if len(tuples.get(s, ())) > 1]
            print(f"  {a.tag}: {phase}: {len(moved)} of {len(conns)} connections reached their server "
                  f"from more than one client address:port")
            if len(conns) != int(want) or len(moved) != len(conns):
                failures.append(f"{phase}: {len(moved)} of {len(conns)} connections moved, want {want} of {want}")
    else:  # misrouted: the baseline must send some packets to the wrong server
        if misrouted == 0:
            failures.append("no packet reached a server without its connection: the baseline did not misroute")
    for f in failures:
        print(f"  {a.tag}: FAILED: {f}")
    return 1 if failures else 0


def cmd_cids(a):
    failures = 0
    cids = [e for e in server_events(a.work) if e["event"] == "cid"]
    kinds = {}
    base = [a.cid_tool, "decode", "--cr", str(a.cr), "--sid-len", str(a.sid_len), "--nonce-len", str(a.nonce_len)]
    if a.key:
        base += ["--key", a.key]
    for e in cids:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
        out = subprocess.run(base + [e["cid"]], capture_output=True, text=True)
        if out.returncode != 0 or out.stdout.strip() != e["server_id"]:
            failures += 1
            if failures <= 5:
                print(f"  cids: FAILED: {e['kind']} CID {e['cid']} of server {e['server_id']} decodes to "
                      f"{out.stdout.strip() or out.stderr.strip()}")
    print(f"  cids: {len(cids) - failures}/{len(cids)} CIDs the servers issued decode to their server ID "
          f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})")
    return 1 if failures or not cids else 0


def cmd_classify(a):
    """quicsteer-cid classify over the client-side capture (snaplen 128): no
    frame may read malformed or cut (they are judged by their wire length)."""
    cap = os.path.join(a.work, f"{a.tag}-rx.pcap")
    out = subprocess.run([a.cid_tool, "classify", "--profile", a.profile, cap], capture_output=True, text=True)
    rows = [line.split(",") for line in out.stdout.splitlines()[1:]]
    verdicts = {}
    for r in rows:
        verdicts[r[1]] = verdicts.get(r[1], 0) + 1
    print(f"  {a.tag}: quicsteer-cid classify of the snaplen-128 capture: {verdicts}; {out.stderr.strip()}")
    bad = [r for r in rows if r[1].startswith("malformed") or r[1] == "truncated_capture"]
    if out.returncode != 0 or bad or not rows:
        print(f"  {a.tag}: FAILED: {len(bad)} frames misjudged (first: {bad[:1]}), exit {out.returncode}")
        return 1
    return 0


def cmd_servers(a):
    summaries = [e for e in server_events(a.work) if e["event"] == "summary"]
    unknown = sum(e["unknown_cid"] for e in summaries)
    resets = sum(e["stateless_resets"] for e in summaries)
    print(f"  servers: {len(summaries)} summaries, {unknown} packets for connections the server did not have, "
          f"{resets} stateless resets sent")
    if len(summaries) != 2:
        print("  servers: FAILED: both servers must have written their summary")
        return 1
    for path in glob.glob(os.path.join(a.work, "server*.out")):
        text = open(path, errors="replace").read()
        if re.search(r"ERROR: \w*Sanitizer|runtime error:", text):
            print(f"  servers: FAILED: {os.path.basename(path)} reports a sanitizer error")
            return 1
    if a.unknown_cid == "zero" and unknown != 0:
        print("  servers: FAILED: a server received packets of a connection it does not have")
        return 1
    if a.unknown_cid == "some" and unknown == 0:
        print("  servers: FAILED: no packet reached the wrong server")
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("transfers")
    t.add_argument("work")
    t.add_argument("tag")
    t.add_argument("--ndown", type=int, required=True)
    t.add_argument("--nup", type=int, required=True)
    t.add_argument("--migration", choices=["none", "port", "address", "rebind"], required=True)
    t.add_argument("--expect", choices=["ok", "some-fail"], required=True)
    t.add_argument("--server-log", choices=["quicsteer", "none"], default="quicsteer")
    # the file of $WORK/www the downloads fetched (health_test.sh: a small one)
    t.add_argument("--file", default="file5m")
    c = sub.add_parser("counts")
    c.add_argument("work")
    c.add_argument("tag")
    c.add_argument("--min-migrations", type=int, default=0)
    c.add_argument("--forwarding", choices=["on", "off"])
    c.add_argument("--routed-min", action="append", default=[], metavar="METHOD=N")
    c.add_argument("--routed-max", action="append", default=[], metavar="METHOD=N")
    o = sub.add_parser("owners")
    o.add_argument("work")
    o.add_argument("tag")
    o.add_argument("--cid-len", type=int, required=True)
    o.add_argument("--expect", choices=["own", "misrouted"], required=True)
    o.add_argument("--connections", type=int)
    o.add_argument("--moved", action="append", default=[], metavar="PHASE:N")
    d = sub.add_parser("cids")
    d.add_argument("work")
    d.add_argument("--cid-tool", required=True)
    d.add_argument("--cr", type=int, required=True)
    d.add_argument("--sid-len", type=int, required=True)
    d.add_argument("--nonce-len", type=int, required=True)
    d.add_argument("--key")
    k = sub.add_parser("classify")
    k.add_argument("work")
    k.add_argument("tag")
    k.add_argument("--cid-tool", required=True)
    k.add_argument("--profile", required=True)
    s = sub.add_parser("servers")
    s.add_argument("work")
    s.add_argument("--unknown-cid", choices=["zero", "some"], required=True)
    a = p.parse_args()
    return {"transfers": cmd_transfers, "counts": cmd_counts, "cids": cmd_cids, "servers": cmd_servers,
            "classify": cmd_classify, "owners": cmd_owners}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
