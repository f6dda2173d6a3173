#!/usr/bin/env python3
"""Checks for the backend health-check test (tests/realquic/health_test.sh)
and scripts/bench.sh health, on the fleet of tests/realquic/fleet_topology.sh
(server N: segment MAC 02:00:00:78:02:1N, backend srvN). Each subcommand
prints what it found and exits 1 when an assertion fails.

  metrics   PORT [--want srvN=up|down|unchecked,...] [--forged-min N] [--rtt]
            [--totals] [--timeout S]
      quicsteer's /metrics on 127.0.0.1:PORT (run it in quicsteer's
      namespace), scraped until every backend's health is what --want says
      and the unmatched answers (forged, misrouted or late) counted reach
      --forged-min (at most --timeout seconds: the text is published once
      per stats period); prints each backend's health and probe RTT (--rtt:
      every backend wanted up has one), with --totals the health-check
      families.
  telemetry SOCKET [--want srvN=up|down|unchecked,...] [--timeout S]
      rte_telemetry's /quicsteer/backends (each backend's health and probe
      rounds) and /quicsteer/health_checks on EAL's socket SOCKET, asked
      until every backend's health is what --want says.
  healthz   PORT --want CODE [--reason TEXT] [--timeout S]
      /healthz until it answers CODE (and its body holds TEXT).
  placement WORK TAG --since NS [--until NS] --profile FILE --cid-tool PATH
            --expect all-up|avoided|back [--victim N] [--probe-port P]
      Where the connections whose first Initial reached a server
      (WORK/TAG-srvN.pcap, l2 delivery) between --since and --until went,
      against where the whole fleet's hash sends them (quicsteer-cid classify
      --profile FILE: the profile lists every backend active). all-up: every
      one reached the server the hash names. avoided (server --victim marked
      down): none reached the victim, and the probes kept reaching it. back
      (the victim up again): every one reached the server the hash names.
      Exit 3 (not 1) when nothing is wrong but no connection of the window
      hashes to the victim, so that the caller can try another batch.
  probe-delivery WORK TAG --mode l2|vxlan [--probe-port P]
      Every probe that reached a server (WORK/TAG-srvN.pcap) came as the
      delivery mode says, from the appliance's address to the service's,
      1200 octets of the reserved version 0x1a2a3a4a; each server got probes
      of both families.
  summary   WORK TAG [--forged-min N] [--health srvN=up|down,...]
      quicsteer's end-of-run JSON (WORK/TAG-quicsteer.json): per backend its
      health and probe rounds, the health-check totals; no leaked mbuf, no
      round deferred over the budget, no probe unsent or refused, every
      answer received matched or unmatched (--forged-min: at least that many
      unmatched), every backend probed and answered.
  probe-traffic PCAP --probe-port P --seconds S
      What a capture on a server's segment interface (both directions) saw
      of the health checks: probes in, answers out, per second, in octets
      on the wire.
  first-attempt WORK TAG --victim N --at elsewhere|victim --since NS
                --profile FILE --cid-tool PATH
      The time (ns, CLOCK_REALTIME like the captures) of the first
      connection attempt after --since that the whole fleet's hash sends to
      the victim and that reached another server (elsewhere) or the victim;
      nothing printed (exit 1) when there is none.
"""
import argparse
import csv
import io
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realquic_check import pcap_records  # noqa: E402

NSERVERS = 4


def srv_mac(n):
    return bytes.fromhex(f"0200007802{0x10 + n:02x}")


# ---- /metrics and /healthz

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port):
    """[(name, {label: value}, value)] of /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def health_view(samples):
    """(health per backend, probe RTT in us per backend, unmatched answers,
    the other health-check families summed by name and labels) from the
    samples: quicsteer_backend_health{backend,health} is 1 for the backend's
    health (up, down, unchecked); quicsteer_health_answers_total
    {outcome="unmatched"} counts Version Negotiations to the probe port that
    match no probe out (forged, misrouted or late)."""
    health, rtt, totals = {}, {}, {}
    unmatched = 0
    for name, labels, v in samples:
        if name == "quicsteer_backend_health":
            if v == 1:
                health[labels.get("backend")] = labels.get("health")
        elif name == "quicsteer_backend_probe_rtt_seconds":
            rtt[labels.get("backend")] = v * 1e6
        elif name.startswith("quicsteer_health_"):
            key = name + ("{" + ",".join(f"{k}={x}" for k, x in sorted(labels.items())) + "}" if labels else "")
            totals[key] = totals.get(key, 0) + v
            if name == "quicsteer_health_answers_total" and labels.get("outcome") == "unmatched":
                unmatched += int(v)
    return health, rtt, unmatched, totals


def cmd_metrics(a):
    want = dict(kv.split("=") for kv in a.want.split(",")) if a.want else {}
    deadline = time.monotonic() + a.timeout
    health = rtt = totals = None
    forged = 0
    while True:
        try:
            health, rtt, forged, totals = health_view(scrape(a.port))
        except (OSError, urllib.error.URLError) as e:
            health, rtt, forged, totals = {}, {}, 0, {"scrape failed": str(e)}
        ok = all(health.get(b) == v for b, v in want.items()) and forged >= a.forged_min
        if ok or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    print("  metrics: health " + " ".join(f"{b}={health[b]}" for b in sorted(health)) +
          "; probe RTT " + " ".join(f"{b}={rtt[b]:.0f}us" for b in sorted(rtt)) + f"; answers unmatched {forged}")
    if totals and a.totals:
        print("  metrics: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(totals.items())))
    failures = []
    for b, v in want.items():
        if health.get(b) != v:
            failures.append(f"backend {b}: health {health.get(b)} in /metrics, want {v}")
    if forged < a.forged_min:
        failures.append(f"{forged} unmatched answers counted, want at least {a.forged_min}")
    if want and a.rtt:
        for b, v in want.items():
            if v == "up" and not rtt.get(b, 0) > 0:
                failures.append(f"backend {b} is up with no probe RTT ({rtt.get(b)})")
    return report("metrics", failures)


def cmd_healthz(a):
    deadline = time.monotonic() + a.timeout
    while True:
        try:
            r = urllib.request.urlopen(f"http://127.0.0.1:{a.port}/healthz", timeout=5)
            code, body = r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            code, body = e.code, e.read().decode(errors="replace")
        except OSError as e:
            code, body = None, str(e)
        ok = code == a.want and (a.reason is None or a.reason in body)
        if ok or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    print(f"  healthz: {code} {body.strip()!r}")
    failures = []
    if code != a.want:
        failures.append(f"/healthz answered {code}, want {a.want}")
    elif a.reason is not None and a.reason not in body:
        failures.append(f"/healthz says {body.strip()!r}, want {a.reason!r} in it")
    return report("healthz", failures)


def telemetry(path, command):
    """One rte_telemetry command's answer (EAL's socket
    /var/run/dpdk/PREFIX/dpdk_telemetry.v2), as JSON."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(5)
        s.connect(path)
        s.recv(1 << 16)  # the greeting: version, pid, max_output_len
        s.send(command.encode())
        return json.loads(s.recv(1 << 20).decode())[command]


def cmd_telemetry(a):
    want = dict(kv.split("=") for kv in a.want.split(",")) if a.want else {}
    deadline = time.monotonic() + a.timeout
    while True:
        try:
            backends = telemetry(a.socket, "/quicsteer/backends")
            totals = telemetry(a.socket, "/quicsteer/health_checks")
        except (OSError, ValueError, KeyError) as e:
            backends, totals = {}, {"failed": str(e)}
        ok = all(backends.get(b, {}).get("health") == v for b, v in want.items())
        if ok or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    print("  telemetry /quicsteer/backends: " + "; ".join(
        f"{n} {b.get('state')} health {b.get('health')} rounds {b.get('probe_rounds_sent')}/"
        f"{b.get('probe_rounds_answered')}/{b.get('probe_rounds_failed')} rtt {b.get('probe_rtt_us')} us"
        for n, b in sorted(backends.items())))
    print(f"  telemetry /quicsteer/health_checks: {json.dumps(totals)}")
    failures = [f"backend {b}: health {backends.get(b, {}).get('health')} in telemetry, want {v}"
                for b, v in want.items() if backends.get(b, {}).get("health") != v]
    return report("telemetry", failures)


# ---- captures in front of the servers

def l2_udp(frame):
    """(src, dst, sport, dport, payload, payload length) of an
    Ethernet/IP/UDP frame (text addresses; the length the UDP header
    declares, the payload as far as the capture holds it), or None."""
    if len(frame) < 14:
        return None
    et = struct.unpack("!H", frame[12:14])[0]
    if et == 0x0800 and len(frame) >= 34 and frame[23] == 17:
        u = 14 + (frame[14] & 15) * 4
        src, dst = socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34])
    elif et == 0x86DD and len(frame) >= 62 and frame[20] == 17:
        u = 54
        src = socket.inet_ntop(socket.AF_INET6, frame[22:38])
        dst = socket.inet_ntop(socket.AF_INET6, frame[38:54])
    else:
        return None
    if len(frame) < u + 8:
        return None
    sport, dport, length = struct.unpack("!HHH", frame[u:u + 6])
    return src, dst, sport, dport, frame[u + 8:], length - 8


def classify(cid_tool, profile, pcap):
    """frame number (from 1) -> the backend quicsteer-cid classify names."""
    out = subprocess.run([cid_tool, "classify", "--profile", profile, pcap], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"health_check: quicsteer-cid classify {pcap} failed: {out.stderr.strip()}")
    rows = csv.DictReader(io.StringIO(out.stdout))
    return {int(r["frame"]): r["backend"] for r in rows}


def attempts(work, tag, profile, cid_tool, probe_port):
    """Each connection attempt whose first Initial reached a server: key ->
    (time s, server reached, backend the whole fleet's hash names), and per
    server the probe times. A connection is the client's SCID, or, for an
    Initial without one (health_probe.py initials), its client port and
    DCID; its first Initial is the earliest long header of type 0 from the
    client with that key (a client's later Initials carry the server's CID
    as DCID but the same SCID)."""
    first, probes = {}, [[] for _ in range(NSERVERS)]
    for n in range(NSERVERS):
        path = os.path.join(work, f"{tag}-srv{n}.pcap")
        if not os.path.exists(path):
            continue
        picks = None
        for i, (ts, f) in enumerate(pcap_records(path), 1):
            if f[0:6] != srv_mac(n):
                continue
            q = l2_udp(f)
            if not q or q[3] != 443:
                continue
            src, _, sport, _, p, _ = q
            if sport == probe_port:
                probes[n].append(ts)
                continue
            if len(p) < 7 or not p[0] & 0x80 or (p[0] >> 4) & 3 != 0 or p[1:5] != b"\0\0\0\1":
                continue
            dl = p[5]
            dcid = p[6:6 + dl].hex()
            sl = p[6 + dl] if len(p) > 6 + dl else 0
            scid = p[7 + dl:7 + dl + sl].hex()
            key = scid or f"{src}:{sport}/{dcid}"
            if key in first and first[key][0] <= ts:
                continue
            if picks is None:
                picks = classify(cid_tool, profile, path)
            first[key] = (ts, n, picks.get(i, "?"))
    return first, probes


def cmd_placement(a):
    failures = []
    first, probes = attempts(a.work, a.tag, a.profile, a.cid_tool, a.probe_port)
    since, until = a.since / 1e9, (a.until / 1e9 if a.until else float("inf"))
    conns = [(ts, n, pick) for ts, n, pick in first.values() if since <= ts <= until]
    victim = f"srv{a.victim}" if a.victim is not None else None
    per = [0] * NSERVERS
    elsewhere, hashed_victim, at_victim = [], 0, 0
    for ts, n, pick in conns:
        per[n] += 1
        if pick != f"srv{n}":
            elsewhere.append((pick, n))
        if victim and pick == victim:
            hashed_victim += 1
        if victim and n == a.victim:
            at_victim += 1
    moved = {}
    for pick, n in elsewhere:
        moved[f"{pick}->srv{n}"] = moved.get(f"{pick}->srv{n}", 0) + 1
    print(f"  {a.tag}: {len(conns)} connections, per server {per}; the whole fleet's hash names "
          f"{hashed_victim} of them for {victim}; {len(elsewhere)} reached another server than it names "
          f"{dict(sorted(moved.items())) if moved else ''}")
    if not conns:
        failures.append("no connection reached a server")
    if a.expect in ("all-up", "back"):
        if elsewhere:
            failures.append(f"{len(elsewhere)} connections reached another server than the hash names "
                            f"(the fleet is not whole): {dict(sorted(moved.items()))}")
    if a.expect == "avoided":
        if at_victim:
            failures.append(f"{at_victim} new connections reached {victim}, which is marked down")
        wrong = [m for m in moved if not m.startswith(f"{victim}->")]
        if wrong:
            # Maglev moves a few others' slots when a backend leaves (README:
            # about 1/N): printed, not a failure
            print(f"  {a.tag}: note: connections the hash names for a live backend reached another one: "
                  f"{', '.join(wrong)}")
        late = [ts for ts in probes[a.victim] if ts >= since]
        print(f"  {a.tag}: {len(late)} probes reached {victim} in the window (a down backend is still probed)")
        if not late:
            failures.append(f"no probe reached {victim} after it was marked down: it could never come back")
    if failures:
        return report(a.tag, failures)
    if victim and hashed_victim == 0:
        print(f"  {a.tag}: inconclusive: no connection of the window hashes to {victim}")
        return 3
    return 0


def srv_vxmac(n):
    return bytes.fromhex(f"0200007803{0x10 + n:02x}")


SRV_ADDR = lambda n: f"10.78.2.{10 + n}"  # noqa: E731
SRV_ADDR6 = lambda n: f"fd78:2::{0x10 + n:x}"  # noqa: E731
TX_ADDRS = ("10.78.2.2", "fd78:2::2")


def cmd_probe_delivery(a):
    """Every probe that reached the servers (WORK/TAG-srvN.pcap) came as
    --mode delivers: l2, to the server's MAC; vxlan, to its MAC inside
    UDP 4789 from quicsteer's outer source (10.78.2.2 / fd78:2::2, the
    inner packet's family) to its address, VNI 42, inner destination MAC
    its VXLAN MAC. Both targets' families were probed at every server."""
    failures = []
    for n in range(NSERVERS):
        per = {"v4": 0, "v6": 0}
        bad = []
        for _, f in pcap_records(os.path.join(a.work, f"{a.tag}-srv{n}.pcap")):
            q = l2_udp(f)
            if not q:
                continue
            inner, why = f, None
            if a.mode == "vxlan":
                if q[3] != 4789:
                    if q[2] == a.probe_port:
                        bad.append("a probe outside VXLAN")
                    continue
                p = q[4]
                vni = int.from_bytes(p[4:7], "big") if len(p) >= 8 else None
                inner = p[8:]
                fam6 = ":" in q[0]
                want = (TX_ADDRS[1], SRV_ADDR6(n)) if fam6 else (TX_ADDRS[0], SRV_ADDR(n))
                iq = l2_udp(inner)
                if not iq or iq[2] != a.probe_port:
                    continue
                if (q[0], q[1]) != want or vni != 42 or inner[0:6] != srv_vxmac(n) or (":" in iq[0]) != fam6:
                    why = (f"outer {q[0]} -> {q[1]} VNI {vni}, inner to {inner[0:6].hex()}, inner "
                           f"{'IPv6' if ':' in iq[0] else 'IPv4'}")
                q = iq
            elif q[2] != a.probe_port:
                continue
            if f[0:6] != srv_mac(n):
                why = why or f"to MAC {f[0:6].hex()}"
            src, dst, sport, dport, payload, length = q
            if src not in ("10.78.9.2", "fd78:9::2") or dst not in ("10.78.1.1", "fd78:1::1") or dport != 443:
                why = why or f"{src}:{sport} -> {dst}:{dport}"
            if length != 1200 or payload[1:5] != bytes.fromhex("1a2a3a4a"):
                why = why or f"a payload of {length} octets, version {payload[1:5].hex()}"
            if why:
                bad.append(why)
            else:
                per["v6" if ":" in src else "v4"] += 1
        print(f"  {a.tag}: server {n}: probes as {a.mode} delivers them: IPv4 {per['v4']}, IPv6 {per['v6']}; "
              f"{len(bad)} otherwise{' (first: ' + bad[0] + ')' if bad else ''}")
        if bad:
            failures.append(f"server {n}: {len(bad)} probes not delivered as {a.mode} says")
        if not per["v4"] or not per["v6"]:
            failures.append(f"server {n}: no probe of {'IPv4' if not per['v4'] else 'IPv6'} reached it")
    return report(a.tag, failures)


def cmd_first_attempt(a):
    first, _ = attempts(a.work, a.tag, a.profile, a.cid_tool, a.probe_port)
    since = a.since / 1e9
    hits = sorted(ts for ts, n, pick in first.values()
                  if ts >= since and pick == f"srv{a.victim}" and (n != a.victim) == (a.at == "elsewhere"))
    if not hits:
        return 1
    print(int(hits[0] * 1e9))
    return 0


def cmd_probe_traffic(a):
    probes = answers = probe_octets = answer_octets = 0
    t = []
    for ts, f, orig in pcap_records(a.pcap, with_length=True):
        q = l2_udp(f)
        if not q:
            continue
        _, _, sport, dport, _, _ = q
        if sport == a.probe_port:
            probes += 1
            probe_octets += orig
            t.append(ts)
        elif dport == a.probe_port:
            answers += 1
            answer_octets += orig
    s = a.seconds
    doc = {"probes_per_s": probes / s, "probe_octets_per_s": probe_octets / s, "answers_per_s": answers / s,
           "answer_octets_per_s": answer_octets / s, "probe_frame_octets": probe_octets / probes if probes else 0,
           "answer_frame_octets": answer_octets / answers if answers else 0, "seconds": s}
    print(json.dumps(doc))
    return 0 if probes else 1


# ---- the end-of-run JSON

def cmd_summary(a):
    failures = []
    stats = json.load(open(os.path.join(a.work, f"{a.tag}-quicsteer.json")))
    backends = stats.get("backends", [])
    keys = ("health", "probe_rtt_us", "probe_rounds_sent", "probe_rounds_answered", "probe_rounds_failed")
    for b in backends:
        print(f"  {a.tag}: backend {b['name']}: " + ", ".join(f"{k} {b.get(k)}" for k in keys))
        if not b.get("probe_rounds_sent"):
            failures.append(f"backend {b['name']}: no probe round sent")
        if not b.get("probe_rounds_answered"):
            failures.append(f"backend {b['name']}: no probe round answered")
    hc = stats.get("health_checks")
    print(f"  {a.tag}: health_checks {json.dumps(hc)}")
    if hc is None:
        failures.append("no health_checks section in the statistics")
        hc = {}
    # no round starts before the TAP has an address, so every probe leaves
    for key in ("rounds_deferred", "probes_unsent", "probes_refused"):
        if hc.get(key, 0):
            failures.append(f"health_checks.{key} is {hc.get(key)}, want 0")
    if hc.get("answers_unmatched", 0) < a.forged_min:
        failures.append(f"{hc.get('answers_unmatched')} unmatched answers counted, want at least {a.forged_min}")
    if hc.get("answers_received") != hc.get("answers_matched", 0) + hc.get("answers_unmatched", 0):
        failures.append(f"answers received {hc.get('answers_received')} are not matched {hc.get('answers_matched')} "
                        f"+ unmatched {hc.get('answers_unmatched')}")
    if a.health:
        for kv in a.health.split(","):
            name, want = kv.split("=")
            got = next((b.get("health") for b in backends if b["name"] == name), None)
            if got != want:
                failures.append(f"backend {name}: health {got} at the end, want {want}")
    if not stats["mbufs"]["ok"]:
        failures.append("mbuf leak")
    return report(a.tag, failures)


def report(name, failures):
    for f in failures:
        print(f"  {name}: FAILED: {f}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("metrics")
    m.add_argument("port", type=int)
    m.add_argument("--want", default="")
    m.add_argument("--forged-min", type=int, default=0)
    m.add_argument("--timeout", type=float, default=3.0)
    m.add_argument("--rtt", action="store_true", help="every backend wanted up has a probe RTT above 0")
    m.add_argument("--totals", action="store_true", help="print the quicsteer_health_* families too")
    h = sub.add_parser("healthz")
    h.add_argument("port", type=int)
    h.add_argument("--want", type=int, required=True)
    h.add_argument("--reason")
    h.add_argument("--timeout", type=float, default=3.0)
    tm = sub.add_parser("telemetry")
    tm.add_argument("socket")
    tm.add_argument("--want", default="")
    tm.add_argument("--timeout", type=float, default=3.0)
    for name in ("placement", "first-attempt"):
        p = sub.add_parser(name)
        p.add_argument("work")
        p.add_argument("tag")
        p.add_argument("--since", type=int, required=True)
        p.add_argument("--profile", required=True)
        p.add_argument("--cid-tool", required=True)
        p.add_argument("--probe-port", type=int, default=61000)
        if name == "placement":
            p.add_argument("--until", type=int)
            p.add_argument("--victim", type=int)
            p.add_argument("--expect", choices=["all-up", "avoided", "back"], required=True)
        else:
            p.add_argument("--victim", type=int, required=True)
            p.add_argument("--at", choices=["elsewhere", "victim"], required=True)
    d = sub.add_parser("probe-delivery")
    d.add_argument("work")
    d.add_argument("tag")
    d.add_argument("--mode", choices=["l2", "vxlan"], required=True)
    d.add_argument("--probe-port", type=int, default=61000)
    s = sub.add_parser("summary")
    s.add_argument("work")
    s.add_argument("tag")
    s.add_argument("--forged-min", type=int, default=0)
    s.add_argument("--health")
    t = sub.add_parser("probe-traffic")
    t.add_argument("pcap")
    t.add_argument("--probe-port", type=int, default=61000)
    t.add_argument("--seconds", type=float, required=True)
    a = ap.parse_args()
    return globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    sys.exit(main())
