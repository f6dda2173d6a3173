#!/usr/bin/env python3
"""Checks for the scale-out test (tests/scaleout/scaleout_test.sh): the
downloads of a batch, what the router sent each instance around an event,
how the instances routed and what quicsteer counted. Captures: TAG-qsI.pcap
(the router towards instance I), TAG-srvN.pcap (what reached server N); an
event's time is the first word of TAG-event (ns, the clock tcpdump stamps
with). Each subcommand prints what it found; exit 1 when an assertion fails.

  transfers WORK TAG --count N [--expect ok|report]
  failover  WORK TAG --victim I [--json F]
  routing   WORK TAG --cid-tool PATH --profile P0 --profile P1
  rebinding WORK TAG --count N --victim I [--expect ok|report] [--json F]
  drops     WORK STATS_JSON
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "realquic"))
from realquic_check import pcap_records, sha256_file  # noqa: E402

NINSTANCES = 2
VIP = "10.79.1.1"  # the service address (QSSO_VIP of scaleout_topology.sh)
INSTANCE_ADDRS = {f"10.79.1{i}.2" for i in range(NINSTANCES)}  # the BGP next hops (qsso_inst_addr)
NSERVERS = 4
QUIC_PORT = 443


def report(name, failures):
    for f in failures:
        print(f"  {name}: FAILED: {f}")
    return 1 if failures else 0


def downloads(work, tag, count):
    """The batch's clients' (exit status, ms) by name, and the names of the
    downloads that arrived whole with the right sha256 (gtlsclient exits 0 on
    a failed transfer too: the data is what counts)."""
    want = sha256_file(os.path.join(work, "www", "file5m"))
    rcs = {}
    with open(os.path.join(work, f"{tag}-clients.tsv")) as f:
        for line in f:
            name, rc, ms = line.rstrip("\n").split("\t")
            rcs[name] = (int(rc), int(ms))
    done = set()
    for i in range(count):
        got = os.path.join(work, f"{tag}-dl", f"down{i}", "file5m")
        if f"down{i}" in rcs and os.path.exists(got) and sha256_file(got) == want:
            done.add(f"down{i}")
    return rcs, done


def broken(work, tag, count, rcs, done):
    """One line per download of the batch that did not arrive whole: its
    client's exit status and time, and the last lines of its log (the
    test's files are gone once a CI run ends; this is what is left)."""
    lines = []
    for i in range(count):
        name = f"down{i}"
        if name in done:
            continue
        rc, ms = rcs.get(name, (None, None))
        try:
            with open(os.path.join(work, f"{tag}-dl", f"{name}.log"), errors="replace") as f:
                tail = [ln.strip() for ln in f.read().splitlines() if ln.strip()][-3:]
        except OSError:
            tail = ["(no log)"]
        lines.append(f"{name}: exit {rc} after {ms} ms; its log ends: {' | '.join(tail)[:300]}")
    return lines


def local_time(stamp, fmt):
    """Seconds since the epoch of a local time stamp ('2026-11-29T09:11:38.931662'
    from ip -ts, '2026/11/29 09:11:38.931' from FRR's log)."""
    return datetime.datetime.strptime(stamp, fmt).timestamp()


def batch_story(work, tag):
    """How the router spread the batch TAG, in one line: its next hops for
    the service address at the start and at each change (TAG-routes.log:
    so_start_captures' snapshot, then ip monitor), each watcher's announce
    and withdraw (watchI.log) and each BGP session's change the router logged
    (frr/rt.log, %ADJCHANGE: a session down says why: BFD, the hold time),
    in ms from the batch's start, the event's time named. A check that finds
    an instance got too little prints it: the test's files are gone once a
    CI run ends, and this says whether the router or quicsteer was short."""
    try:
        t0 = int(open(os.path.join(work, f"{tag}-window")).read().split()[0]) / 1e9
        t1 = int(open(os.path.join(work, f"{tag}-window")).read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return f"{tag}: no window recorded"
    events = []
    try:
        ev = open(os.path.join(work, f"{tag}-event")).read().split()
        events.append((int(ev[0]) / 1e9, f"the event ({' '.join(ev[1:3])})"))
    except (OSError, IndexError, ValueError):
        pass
    try:
        for line in open(os.path.join(work, f"{tag}-routes.log"), errors="replace"):
            words = line.split()
            if words[:1] == ["start"] and len(words) >= 2:
                events.append((int(words[1]) / 1e9, f"next hops [{' '.join(words[2:])}]"))
                continue
            if words[:1] == ["neighbour"] and len(words) >= 3:
                if words[2] in INSTANCE_ADDRS:
                    events.append((int(words[1]) / 1e9, f"neighbour {words[2]} {words[-1]}"))
                continue
            m = re.match(r"\[([0-9T:.-]+)\] (Deleted )?([0-9.]+)(/32)? ", line)
            if m and m.group(3) in INSTANCE_ADDRS and " dev " in line:
                state = "deleted" if m.group(2) else line.split()[-1]
                events.append((local_time(m.group(1), "%Y-%m-%dT%H:%M:%S.%f"), f"neighbour {m.group(3)} {state}"))
                continue
            if not m or m.group(3) != VIP:
                continue
            hops = [] if m.group(2) else sorted(re.findall(r"via ([0-9.]+)", line))
            events.append((local_time(m.group(1), "%Y-%m-%dT%H:%M:%S.%f"), f"next hops [{' '.join(hops)}]"))
    except OSError:
        events.append((t0, "no route log"))
    for i in range(NINSTANCES):
        try:
            for line in open(os.path.join(work, f"watch{i}.log"), errors="replace"):
                words = line.split(None, 1)
                if len(words) == 2 and words[0].isdigit():
                    events.append((int(words[0]) / 1e9, f"watcher {i}: {words[1].strip()}"))
        except OSError:
            pass
    try:
        for line in open(os.path.join(work, "frr", "rt.log"), errors="replace"):
            m = re.match(r"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+) .*%(?:ADJCHANGE|NOTIFICATION[^:]*): (.*)", line)
            if m:
                events.append((local_time(m.group(1), "%Y/%m/%d %H:%M:%S.%f"), f"router: {m.group(2).strip()}"))
    except OSError:
        pass
    # from 5 s before the batch (a change just before it decides its start) to its end
    said = [f"{(t - t0) * 1000:+.0f} ms {what}" for t, what in sorted(events) if t0 - 5 <= t <= t1]
    # what each capture and each killed quicsteer counted: a capture that lost
    # frames, or a quicsteer that received none, is another story than a route
    counted = []
    for i in range(NINSTANCES):
        try:
            text = open(os.path.join(work, f"{tag}-qs{i}.tcpdump"), errors="replace").read()
            got = dict((k, v) for v, k in re.findall(r"(\d+) packets? (captured|dropped by kernel)", text))
            counted.append(f"capture {i}: {got.get('captured', '?')} frames, {got.get('dropped by kernel', '?')} "
                           f"dropped by the kernel")
        except OSError:
            pass
        try:
            text = open(os.path.join(work, f"{tag}-qs{i}-metrics.txt"), errors="replace").read()
            sums = {name: sum(int(float(v)) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))
                    for name in ("quicsteer_rx_packets_total", "quicsteer_to_kernel_packets_total",
                                 "quicsteer_owner_tx_packets_total")}
            counted.append(f"quicsteer {i} before the kill: rx {sums['quicsteer_rx_packets_total']}, to the "
                           f"kernel {sums['quicsteer_to_kernel_packets_total']}, tx "
                           f"{sums['quicsteer_owner_tx_packets_total']}")
        except OSError:
            pass
    return (f"the batch's routing, from its start: {'; '.join(said) or 'nothing recorded'}"
            + (f"; {'; '.join(counted)}" if counted else ""))


def update_json(path, tag, figures):
    doc = json.load(open(path)) if os.path.exists(path) else {}
    doc.setdefault(tag, {}).update(figures)
    json.dump(doc, open(path, "w"), indent=1)


def cmd_transfers(a):
    """Every download of the batch arrived with the right sha256."""
    rcs, done = downloads(a.work, a.tag, a.count)
    ok = len(done)
    secs = sorted(ms / 1000 for _, ms in rcs.values())
    span = f", {secs[0]:.2f}..{secs[-1]:.2f} s each" if secs else ""
    print(f"  {a.tag}: {ok}/{a.count} downloads complete with the right sha256{span}")
    if a.json:
        update_json(a.json, a.tag, {"completed": ok, "transfers": a.count})
    if a.expect == "ok" and ok != a.count:
        return report(a.tag, [f"{a.count - ok} of {a.count} downloads broke"] + broken(a.work, a.tag, a.count, rcs, done))
    return 0


def flow(frame):
    """(client address, client port) of an IPv4/UDP frame to port 443, or None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    udp = 14 + (frame[14] & 0x0F) * 4
    if int.from_bytes(frame[udp + 2:udp + 4], "big") != QUIC_PORT:
        return None
    return frame[26:30], int.from_bytes(frame[udp:udp + 2], "big")


def cmd_failover(a):
    """The connections the router sent the victim before the event: when the
    first packet of one of them went to another instance after it (the
    failover time), and when the router sent the victim its last."""
    t_event = int(open(os.path.join(a.work, f"{a.tag}-event")).read().split()[0]) / 1e9
    before, first_other, last_victim = set(), None, None
    for t, f in pcap_records(os.path.join(a.work, f"{a.tag}-qs{a.victim}.pcap")):
        fl = flow(f)
        if fl is None:
            continue
        if t < t_event:
            before.add(fl)
        else:
            last_victim = t
    for i in range(NINSTANCES):
        if i == a.victim:
            continue
        for t, f in pcap_records(os.path.join(a.work, f"{a.tag}-qs{i}.pcap")):
            if t >= t_event and flow(f) in before:
                first_other = t if first_other is None else min(first_other, t)
                break
    failures = []
    if not before:
        failures.append(f"the router sent instance {a.victim} no connection before the event")
    if first_other is None:
        failures.append(f"no connection of instance {a.victim} reached another instance after the event")
    ms = None if first_other is None else round((first_other - t_event) * 1000, 1)
    last = None if last_victim is None else round((last_victim - t_event) * 1000, 1)
    print(f"  {a.tag}: instance {a.victim} had {len(before)} connections; first of their packets through another "
          f"instance {ms} ms after the event; the router's last packet to instance {a.victim} at {last} ms")
    if a.json:
        update_json(a.json, a.tag, {"failover_ms": ms, "last_to_victim_ms": last, "victim_connections": len(before)})
    if failures:
        failures.append(batch_story(a.work, a.tag))
    return report(a.tag, failures)


REBIND_CLASSES = {  # (moved at the rebinding, on the victim at the crash): the class of a rebound download
    (False, False): "not_moved",           # the survivor carried it throughout
    (True, False): "moved_at_rebinding",   # its new port hashed to the survivor, which had not seen it
    (False, True): "moved_at_crash",       # the victim carried it throughout, until the crash
    (True, True): "moved_back",            # its new port hashed to the victim; the crash sent it back
}


def cmd_rebinding(a):
    """A batch whose clients rebind their NAT (a new UDP port, the same CID)
    and then the victim instance crashes: for each download, its ports
    (TAG-ports.tsv, the sampler's) in the order the router first sent them
    on, and which instance the router sent each to before the crash (the ECMP
    hash takes the ports: the rebinding itself may move a connection). Each
    rebound download falls in one class of REBIND_CLASSES; the downloads
    complete per class. --expect ok: every download must complete, every one
    must have rebound before the crash, and the victim must have carried some
    of them at the crash."""
    t_event = int(open(os.path.join(a.work, f"{a.tag}-event")).read().split()[0]) / 1e9
    t_start = int(open(os.path.join(a.work, f"{a.tag}-window")).read().split()[0]) / 1e9
    rcs, done = downloads(a.work, a.tag, a.count)
    ports = {}
    with open(os.path.join(a.work, f"{a.tag}-ports.tsv")) as f:
        for line in f:
            name, _, port = line.split()
            ports.setdefault(name, set()).add(int(port))
    # By client port (unique among the client namespace's sockets: each is
    # bound to a wildcard address first): when the router first sent it on,
    # and to which instances before the event.
    first, before = {}, {}
    for i in range(NINSTANCES):
        for t, f in pcap_records(os.path.join(a.work, f"{a.tag}-qs{i}.pcap")):
            fl = flow(f)
            if fl is None:
                continue
            first[fl[1]] = min(t, first.get(fl[1], t))
            if t < t_event:
                before.setdefault(fl[1], set()).add(i)
    classes = {c: [0, 0] for c in list(REBIND_CLASSES.values()) + ["not_rebound"]}
    rebinds = []
    for k in range(a.count):
        name = f"down{k}"
        seen = sorted((first[p], p) for p in ports.get(name, ()) if p in first)
        if len(seen) < 2 or seen[-1][0] >= t_event:
            c = "not_rebound"
        else:
            (_, old), (t_new, new) = seen[0], seen[-1]
            rebinds.append(t_new - t_start)
            c = REBIND_CLASSES[(before.get(old, set()) != before.get(new, set()), a.victim in before.get(new, set()))]
        classes[c][0] += 1
        classes[c][1] += name in done
    when = f" (first packets from their new ports {min(rebinds):.2f}..{max(rebinds):.2f} s into the batch)" \
        if rebinds else ""
    print(f"  {a.tag}: {len(done)}/{a.count} downloads complete; {len(rebinds)} rebound before the crash of "
          f"instance {a.victim} at {t_event - t_start:.2f} s{when}. Complete per class: "
          + ", ".join(f"{c} {d}/{n}" for c, (n, d) in classes.items()))
    if a.json:
        update_json(a.json, a.tag, {"completed": len(done), "transfers": a.count, "rebound": len(rebinds),
                                    **{c: {"transfers": n, "completed": d} for c, (n, d) in classes.items()}})
    failures = []
    if a.expect == "ok":
        if len(done) != a.count:
            failures.append(f"{a.count - len(done)} of {a.count} downloads broke")
            failures += broken(a.work, a.tag, a.count, rcs, done)
        if len(rebinds) != a.count:
            failures.append(f"{a.count - len(rebinds)} downloads did not rebind before the crash")
        if classes["moved_at_crash"][0] + classes["moved_back"][0] == 0:
            failures.append(f"instance {a.victim} carried no rebound connection at the crash")
    return report(a.tag, failures)


def classify(tool, profile, pcap):
    out = subprocess.run([tool, "classify", "--profile", profile, pcap], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    head = out[0].split(",")
    return [dict(zip(head, line.split(","))) for line in out[1:]]


def without_tables(profile, out):
    """PROFILE with steering.forwarding.enabled false, written to OUT: what an
    instance that has seen nothing of a connection picks for its packets
    (QUIC-LB, else the fallback hash). Without its peer_sync block, if it has
    one: that shares the tables, and a profile without them may not have it."""
    text = re.sub(r"(?m)^peer_sync:.*\n(?:(?:[ #].*)?\n)*", "", open(profile).read())
    if re.search(r"(?m)^  forwarding:", text):
        text, n = re.subn(r"(?m)^(  forwarding:\n(?:(?:    .*)?\n)*?    enabled: *)true\b", r"\1false", text)
        if n != 1:
            raise SystemExit(f"{profile}: no 'enabled: true' under steering.forwarding to turn off")
    else:
        text, n = re.subn(r"(?m)^steering:\n", "steering:\n  forwarding: {enabled: false}\n", text)
        if n != 1:
            raise SystemExit(f"{profile}: no steering section")
    with open(out, "w") as f:
        f.write(text)


def first_paths(work, tag):
    """The client (address, port) pairs whose first frame through either
    instance (the router's captures) was a long header: the 4-tuples
    connections started on. A pair whose first frame was a short header is
    one a connection moved to (a NAT rebinding)."""
    first = {}
    for i in range(NINSTANCES):
        for t, f in pcap_records(os.path.join(work, f"{tag}-qs{i}.pcap")):
            fl = flow(f)
            if fl is not None and len(f) > 14 + (f[14] & 0x0F) * 4 + 8 and (fl not in first or t < first[fl][0]):
                first[fl] = (t, bool(f[14 + (f[14] & 0x0F) * 4 + 8] & 0x80))
    return {fl for fl, (_, long_header) in first.items() if long_header}


def cmd_routing(a):
    """Both instances route every frame alike, owner and backend,
    client-chosen Initial DCIDs included, and each frame that reached a
    server reached the backend classify names (matched by its IP packet,
    which l2 delivery leaves as it is). quicsteer-cid classify replays each
    instance's capture through its forwarding tables, as the instance did:
      - both instances' profiles (--profile, one per instance) route each
        capture alike;
      - an instance that has seen nothing of a connection routes its packets
        as that replay does: the profile without tables (QUIC-LB, else the
        fallback hash) gives the replay's backend for every frame on the
        4-tuple its connection started on. An instance learns an entry only
        from a frame it routed, so whatever each instance saw of a
        connection, both send its frames to that backend. Frames on a
        4-tuple a connection moved to (a NAT rebinding) may differ: only an
        instance that learned the connection's DCID follows it there (the
        fallback hashes the new 4-tuple); counted, not asserted."""
    failures = []
    reached = {}
    initials = 0
    for n in range(NSERVERS):
        for _, f in pcap_records(os.path.join(a.work, f"{a.tag}-srv{n}.pcap")):
            if flow(f):
                reached.setdefault(f[14:], set()).add(f"srv{n}")
    fresh_profile = os.path.join(a.work, f"{a.tag}-no-tables.yaml")
    without_tables(a.profile[0], fresh_profile)
    started = first_paths(a.work, a.tag)
    for i in range(NINSTANCES):
        pcap = os.path.join(a.work, f"{a.tag}-qs{i}.pcap")
        rows = [classify(a.cid_tool, p, pcap) for p in a.profile]
        fresh = classify(a.cid_tool, fresh_profile, pcap)
        frames = [f for _, f in pcap_records(pcap)]
        same = differ = initial = matched = wrong = on_start = unseen = moved = moved_differ = taught = 0
        for k, row in enumerate(rows[0]):
            if row["verdict"] != "quic":
                continue
            views = [(r[k]["owner"], r[k]["backend"]) for r in rows]
            if len(set(views)) == 1:
                same += 1
            else:
                differ += 1
                if differ == 1:
                    failures.append(f"instance {i}, frame {row['frame']}: owner/backend {views}")
            if flow(frames[k]) in started:
                on_start += 1
                if fresh[k]["backend"] != row["backend"]:
                    unseen += 1
                    if unseen == 1:
                        failures.append(f"instance {i}, frame {row['frame']} ({row['form']} header, {row['rule']}): "
                                        f"its tables say {row['backend']}, an instance without them "
                                        f"{fresh[k]['backend']} ({fresh[k]['rule']})")
            else:
                moved += 1
                moved_differ += fresh[k]["backend"] != row["backend"]
            if row["rule"] in ("fallback_dcid", "fallback_tuple") and row["type"] == "initial":
                initial += 1
            where = reached.get(frames[k][14:])
            if where:
                matched += 1
                if a.shared and where != {row["backend"]} and flow(frames[k]) not in started:
                    # On a 4-tuple its connection moved to, routed by an
                    # entry a peer sent (peer_sync), which a replay of this
                    # instance's capture alone cannot know.
                    taught += 1
                elif where != {row["backend"]}:
                    wrong += 1
                    if wrong == 1:
                        failures.append(f"instance {i}, frame {row['frame']}: classify says {row['backend']}, "
                                        f"it reached {sorted(where)}")
        rebound = (f"; {moved} on a 4-tuple their connection moved to, {moved_differ} of them elsewhere"
                   if moved else "")
        print(f"  {a.tag}: instance {i}'s capture: {same} QUIC frames routed alike by both profiles "
              f"({initial} client-chosen Initial DCIDs), {differ} differently; without tables (an instance "
              f"that saw nothing of them): {on_start} on the 4-tuple their connection started on, {unseen} of "
              f"them elsewhere{rebound}; {matched} found at a server, {wrong} at another backend than "
              f"classify's" + (f", {taught} routed by what a peer taught" if a.shared else ""))
        initials += initial
        if same == 0 or matched == 0:
            failures.append(f"instance {i}'s capture holds too little to compare ({same} frames, {matched} "
                            f"found at a server); {batch_story(a.work, a.tag)}")
        if differ:
            failures.append(f"instance {i}: {differ} frames routed differently")
        if unseen:
            failures.append(f"instance {i}: {unseen} frames routed elsewhere by an instance that has not seen "
                            f"their connection")
        if wrong:
            failures.append(f"instance {i}: {wrong} frames reached another backend")
    if initials == 0:
        failures.append("no client-chosen Initial DCID in the captures")
    return report(a.tag, failures)


def cmd_drops(a):
    """No software drop in quicsteer's end-of-run statistics, no leaked mbuf.
    Not counted as software drops: not_service, what reaches the service
    address and is not for a service port: the ICMP port unreachable a
    client's kernel sends the VIP when a server's packet arrives after
    gtlsclient closed its socket (quicsteer drops it, as it should: the
    servers answered, not quicsteer); not_udp, the same outside appliance
    mode; and foreign_mac, frames for another host's MAC, which no host but
    that one takes either (one CI run saw 4 in the first second of an
    instance's start, from the router's link, cause not found; what the
    service's traffic lost is what the downloads and the routing check
    assert)."""
    stats = json.load(open(os.path.join(a.work, a.stats)))
    total = stats["total"]
    exempt = ("not_udp", "not_service", "foreign_mac")
    drops = {k: v for k, v in dict(total["drops_total"]).items() if v and k not in exempt}
    print(f"  {a.stats}: rx {total['rx']} tx {total['tx']}, not_quic {total.get('not_quic', '?')}, "
          f"drops {drops}, " + ", ".join(f"{k} {dict(total['drops_total']).get(k, 0)}" for k in exempt) +
          f", mbufs ok {stats['mbufs']['ok']}")
    failures = []
    if drops:
        failures.append(f"software drops: {drops}")
    if not stats["mbufs"]["ok"]:
        failures.append("mbuf leak")
    if total["tx"] == 0:
        failures.append("it forwarded nothing")
    if a.report:
        for f in failures:
            print(f"  {a.stats}: note (not asserted): {f}")
        return 0
    return report(a.stats, failures)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("transfers")
    t.add_argument("work")
    t.add_argument("tag")
    t.add_argument("--count", type=int, required=True)
    t.add_argument("--expect", choices=["ok", "report"], default="ok")
    t.add_argument("--json")
    f = sub.add_parser("failover")
    f.add_argument("work")
    f.add_argument("tag")
    f.add_argument("--victim", type=int, required=True)
    f.add_argument("--json")
    r = sub.add_parser("routing")
    r.add_argument("work")
    r.add_argument("tag")
    r.add_argument("--cid-tool", required=True)
    r.add_argument("--profile", action="append", required=True)
    r.add_argument("--shared", action="store_true",
                   help="the instances share what they learn (peer_sync): a frame on a 4-tuple its connection "
                        "moved to may reach the backend a peer's entry names (counted, not failed)")
    b = sub.add_parser("rebinding")
    b.add_argument("work")
    b.add_argument("tag")
    b.add_argument("--count", type=int, required=True)
    b.add_argument("--victim", type=int, required=True)
    b.add_argument("--expect", choices=["ok", "report"], default="ok")
    b.add_argument("--json")
    d = sub.add_parser("drops")
    d.add_argument("work")
    d.add_argument("stats")
    d.add_argument("--report", action="store_true",
                   help="print what would fail as notes and exit 0 (an instance's last run, which may have "
                        "carried nothing after it came back)")
    a = ap.parse_args()
    return globals()["cmd_" + a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
