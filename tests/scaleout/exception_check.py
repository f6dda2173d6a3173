#!/usr/bin/env python3
"""Checks for the exception-path test (tests/scaleout/exception_path_test.sh)
over scrapes of quicsteer's /metrics (Prometheus text, one file per scrape)
and FRR's JSON (vtysh). Each subcommand prints what it found; exit 1 when an
assertion fails.

  sum     METRICS SERIES
  delta   BEFORE AFTER SERIES ge|eq|le N
  up      BGP_JSON BFD_JSON PEER
  steady  BGP0 BGP1 BFDC0 BFDC1 PEER ELAPSED_MS
  flood   BEFORE AFTER --port P --sent N --veth-dropped N --kernel-rx N
          --seconds S --packets-per-s R

SERIES is a metric name with the labels to match, in Prometheus syntax:
'quicsteer_drops_total{reason="foreign_mac"}' sums every sample of
quicsteer_drops_total whose reason is foreign_mac, whatever its other labels
(lcore).
"""
import argparse
import json
import re
import sys

CLASSES = ["arp", "nd", "bgp", "bfd", "link", "icmp", "other"]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_series(spec):
    m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?', spec)
    if not m:
        sys.exit(f"not a series: {spec!r}")
    return m.group(1), dict(LABEL.findall(m.group(2) or ""))


def load(path):
    """The samples of one scrape: [(name, labels, value)]."""
    samples = []
    with open(path) as f:
        for line in f:
            m = SAMPLE.match(line.rstrip("\n"))
            if m:
                samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    if not samples:
        sys.exit(f"{path}: no samples (did the scrape fail?)")
    return samples


def total(samples, spec):
    """The sum of the samples SPEC matches; None when none does (a metric
    quicsteer does not have is an error, not a zero)."""
    name, want = parse_series(spec)
    hits = [v for n, labels, v in samples if n == name and all(labels.get(k) == x for k, x in want.items())]
    return int(sum(hits)) if hits else None


def must_total(samples, spec, path):
    v = total(samples, spec)
    if v is None:
        print(f"  exception: FAILED: {path} has no sample of {spec}")
        sys.exit(1)
    return v


def cmd_sum(a):
    print(must_total(load(a.metrics), a.series, a.metrics))
    return 0


def cmd_delta(a):
    d = must_total(load(a.after), a.series, a.after) - must_total(load(a.before), a.series, a.before)
    ok = {"ge": d >= a.n, "eq": d == a.n, "le": d <= a.n}[a.op]
    word = {"ge": "at least", "eq": "exactly", "le": "at most"}[a.op]
    print(f"  {a.series}: +{d} ({word} {a.n} expected){'' if ok else ': FAILED'}")
    return 0 if ok else 1


def bgp_peer(path, peer):
    doc = json.load(open(path))
    return doc.get("ipv4Unicast", {}).get("peers", {}).get(peer)


def bfd_peer(path, peer):
    for p in json.load(open(path)):
        if p.get("peer") == peer:
            return p
    return None


def cmd_up(a):
    """BGP with PEER Established, the BFD session with it up."""
    failures = []
    bgp, bfd = bgp_peer(a.bgp, a.peer), bfd_peer(a.bfd, a.peer)
    state = bgp.get("state") if bgp else "no such peer"
    status = bfd.get("status") if bfd else "no such peer"
    print(f"  {a.peer}: BGP {state}, BFD {status}")
    if state != "Established":
        failures.append(f"BGP with {a.peer} is {state}")
    if status != "up":
        failures.append(f"BFD with {a.peer} is {status}")
    for f in failures:
        print(f"  exception: FAILED: {f}")
    return 1 if failures else 0


def cmd_steady(a):
    """Between two readings ELAPSED_MS apart: the BGP session with PEER stayed
    Established throughout (no new connection, none dropped, its uptime grew
    by the time between), the BFD session never went down."""
    failures = []
    b0, b1 = bgp_peer(a.bgp0, a.peer), bgp_peer(a.bgp1, a.peer)
    c0, c1 = bfd_peer(a.bfdc0, a.peer), bfd_peer(a.bfdc1, a.peer)
    if not (b0 and b1 and c0 and c1):
        print(f"  exception: FAILED: no BGP or BFD peer {a.peer} in the readings")
        return 1
    up0, up1 = b0["peerUptimeMsec"], b1["peerUptimeMsec"]
    print(f"  {a.peer}: BGP {b0['state']} -> {b1['state']}, connections established "
          f"{b0['connectionsEstablished']} -> {b1['connectionsEstablished']}, dropped {b0['connectionsDropped']} -> "
          f"{b1['connectionsDropped']}, uptime {up0} -> {up1} ms ({a.elapsed_ms} ms apart); BFD session down "
          f"{c0['session-down']} -> {c1['session-down']}, up {c0['session-up']} -> {c1['session-up']}")
    if b1["state"] != "Established":
        failures.append(f"BGP with {a.peer} is {b1['state']}")
    if b1["connectionsEstablished"] != b0["connectionsEstablished"] or b1["connectionsDropped"] != b0["connectionsDropped"]:
        failures.append("the BGP session was re-established")
    # FRR keeps the uptime in whole seconds: up to 1 s of rounding each end.
    if up1 < up0 + a.elapsed_ms - 2000:
        failures.append(f"the BGP uptime grew {up1 - up0} ms in {a.elapsed_ms} ms: the session restarted")
    if c1["session-down"] != c0["session-down"]:
        failures.append(f"BFD went down {c1['session-down'] - c0['session-down']} time(s)")
    for f in failures:
        print(f"  exception: FAILED: {f}")
    return 1 if failures else 0


def cmd_flood(a):
    """The flood at the appliance's own address in quicsteer's counters.

    Every datagram the sender got out either (1) was dropped by the kernel
    between the sender and the data port (the router's veth: its tx_dropped,
    VETH_DROPPED), (2) was delivered to the data port (the instance's veth
    counts it: KERNEL_RX, which holds the rest of the link's traffic too)
    and then lost before quicsteer read it (af_packet's ring full: DPDK
    22.11's net_af_packet counts no imissed, so that is KERNEL_RX minus
    quicsteer's port_rx_packets), or (3) was read by quicsteer, which must
    count it in class other: policed, to the kernel, or ring full. So
    other >= sent - veth dropped - af_packet lost (the lost share holds the
    other traffic's losses too, so this bound is low by those) and other <=
    sent (no other traffic of class other here: a few packets' slack). And
    the policer took the flood: policed > 90 % of it, and to_kernel within
    the configured rate (each of the port's RX queues polices at 1/Q of it;
    the flood is one flow, so one queue's share: a bound of the whole rate
    over the flood's seconds plus one second of burst holds either way)."""
    before, after = load(a.before), load(a.after)

    def d(spec):
        return must_total(after, spec, a.after) - must_total(before, spec, a.before)

    port = a.port
    qs_rx = d(f'quicsteer_port_rx_packets_total{{port="{port}"}}')
    cls = {}
    for c in CLASSES:
        labels = f'port="{port}",class="{c}"'
        cls[c] = {"to_kernel": d(f'quicsteer_exception_packets_total{{{labels},direction="to_kernel"}}'),
                  "from_kernel": d(f'quicsteer_exception_packets_total{{{labels},direction="from_kernel"}}'),
                  "policed": d(f"quicsteer_exception_policed_total{{{labels}}}"),
                  "ring_full": d(f"quicsteer_exception_ring_full_total{{{labels}}}")}
    other = cls["other"]
    seen = other["policed"] + other["to_kernel"] + other["ring_full"]
    afp_lost = max(0, a.kernel_rx - qs_rx)
    floor = a.sent - a.veth_dropped - afp_lost
    print(f"  flood: sent {a.sent} in {a.seconds:.1f} s ({a.sent / a.seconds:.0f} pps); the router's veth dropped "
          f"{a.veth_dropped}; the data port received {a.kernel_rx} (all traffic), quicsteer read {qs_rx} "
          f"(af_packet lost {afp_lost})")
    print(f"  flood: class other: policed {other['policed']}, to the kernel {other['to_kernel']}, ring full "
          f"{other['ring_full']}: {seen} ({100 * seen / a.sent:.1f} % of sent; at least {floor} expected)")
    for c in CLASSES:
        if c != "other" and any(cls[c].values()):
            print(f"  flood: class {c}: " + ", ".join(f"{k} {v}" for k, v in cls[c].items()))
    failures = []
    # The background of class other (none expected) and the counters'
    # snapshot lag (the statistics period) against the veth's instant
    # counters: a few hundred packets.
    slack = 300 + a.sent // 200
    if seen > a.sent + slack:
        failures.append(f"class other counted {seen} packets, more than the {a.sent} sent")
    if seen < floor - slack:
        failures.append(f"class other counted {seen} packets, {floor - seen} fewer than quicsteer read of the flood")
    if other["policed"] <= 0.9 * seen or seen == 0:
        failures.append(f"policed {other['policed']} is not more than 90 % of the flood's {seen}")
    bound = a.packets_per_s * (a.seconds + 1)
    if other["to_kernel"] > bound:
        failures.append(f"{other['to_kernel']} packets of class other went to the kernel in {a.seconds:.1f} s, "
                        f"more than the policer's {a.packets_per_s}/s allows ({bound})")
    for c in ("arp", "nd", "bgp", "bfd"):
        if cls[c]["policed"] or cls[c]["ring_full"]:
            failures.append(f"class {c} lost packets during the flood: policed {cls[c]['policed']}, "
                            f"ring full {cls[c]['ring_full']}")
    for f in failures:
        print(f"  flood: FAILED: {f}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sum")
    s.add_argument("metrics")
    s.add_argument("series")
    d = sub.add_parser("delta")
    d.add_argument("before")
    d.add_argument("after")
    d.add_argument("series")
    d.add_argument("op", choices=["ge", "eq", "le"])
    d.add_argument("n", type=int)
    u = sub.add_parser("up")
    u.add_argument("bgp")
    u.add_argument("bfd")
    u.add_argument("peer")
    t = sub.add_parser("steady")
    for x in ("bgp0", "bgp1", "bfdc0", "bfdc1", "peer"):
        t.add_argument(x)
    t.add_argument("elapsed_ms", type=int)
    f = sub.add_parser("flood")
    f.add_argument("before")
    f.add_argument("after")
    f.add_argument("--port", required=True)
    f.add_argument("--sent", type=int, required=True)
    f.add_argument("--veth-dropped", type=int, required=True)
    f.add_argument("--kernel-rx", type=int, required=True)
    f.add_argument("--seconds", type=float, required=True)
    f.add_argument("--packets-per-s", type=int, required=True)
    a = ap.parse_args()
    return {"sum": cmd_sum, "delta": cmd_delta, "up": cmd_up, "steady": cmd_steady, "flood": cmd_flood}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
