#!/usr/bin/env python3
"""pktgen-DPDK drives quicsteer over a net_memif pair: the back-pressure chain
from quicsteer's TX queues back to pktgen's transmit, shown with the shipped
Lua scripts.

quicsteer runs configs/memif-pktgen.yaml (reflect, park) with one owner made
slow (cost_cycles), so that its ring fills and the receiver must park, and a
park timeout far beyond the run, so that nothing may be dropped. pktgen
replays a quicgen capture at 100 % of memif's nominal rate with replay.lua,
then find_lossfree_rate.lua runs a short search. Asserted, for each run:
pktgen's sent = received back + quicsteer's counted drops; quicsteer's
software drops = 0; quicsteer's port counters match pktgen's; the receive
side parked; the mbuf leak check passes.

Needs the pktgen binary in $PKTGEN (scripts: ../shared/tools/pktgen/build.sh
builds it; .ci/run does). Without it the test says so and is skipped (77).

usage: pktgen_memif_test.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "pktgen"))
import memif_pair  # noqa: E402

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_pair(build, source, pktgen, tmp, name, script, settings):
    """quicsteer on configs/memif-pktgen.yaml, made to park, against pktgen
    running SCRIPT; returns (pktgen's log, quicsteer's statistics)."""
    socket = f"qs-test-memif-{os.getpid()}-{name}"
    with open(os.path.join(source, "configs", "memif-pktgen.yaml")) as f:
        profile = f.read()
    profile = profile.replace("socket=/run/quicsteer-memif.sock", f"socket={socket}")
    profile = profile.replace('"--file-prefix", "quicsteer"', f'"--file-prefix", "qs-test-{os.getpid()}"')
    # The slow owner: lcore 2 spends cycles on every packet, so its ring fills
    # and the receiver (lcore 1) parks; no timeout may fire during the run.
    profile = profile.replace("  - {id: 2, owner: true}", "  - {id: 2, owner: true, cost_cycles: 4000}")
    profile = re.sub(r"park_timeout_us: \d+", "park_timeout_us: 10000000", profile)
    profile = profile.replace("period_ms: 1000", "period_ms: 0")
    if "cost_cycles: 4000" not in profile or "park_timeout_us: 10000000" not in profile or socket not in profile:
        fail("configs/memif-pktgen.yaml no longer has the lines this test adapts")
    prof_path = os.path.join(tmp, name + ".yaml")
    with open(prof_path, "w") as f:
        f.write(profile)
    stats_path = os.path.join(tmp, name + ".stats.json")
    start, stop = memif_pair.quicsteer(os.path.join(build, "quicsteer"), prof_path, stats_path)
    try:
        log, _ = memif_pair.run(pktgen, tmp, name, script, os.path.join(tmp, "capture.pcap"), socket, settings,
                                start, stop, timeout=240)
    except memif_pair.RunError as e:
        fail(str(e))
    with open(stats_path) as f:
        return log, json.load(f)


def check_accounting(name, sent, received, stats):
    total = stats["total"]
    drops = total["drops_sum"]
    port = stats["ports"][0]
    print(f"{name}: pktgen sent {sent}, received {received}; quicsteer rx {total['rx']}, tx {total['tx']}, "
          f"drops {drops}, parks {total['parks']}, TX holds {total['tx_holds']}, "
          f"port ipackets {port['ipackets']} opackets {port['opackets']} (counter resets {port['counter_resets']})")
    if sent == 0:
        fail(f"{name}: pktgen sent nothing")
    if sent != received + drops:
        fail(f"{name}: sent {sent} != received {received} + quicsteer's counted drops {drops}")
    if drops != 0:
        fail(f"{name}: quicsteer dropped in software: {total['drops_total']}")
    if port["ipackets"] != sent or port["opackets"] != received:
        fail(f"{name}: quicsteer's port counters ({port['ipackets']} in, {port['opackets']} out) "
             f"disagree with pktgen's ({sent} sent, {received} received)")
    if total["rx"] != sent or total["tx"] != received:
        fail(f"{name}: quicsteer received {total['rx']} and transmitted {total['tx']}")
    if total["parks"] == 0:
        fail(f"{name}: the receive side never parked: the slow owner did not hold it back")
    if not stats["mbufs"]["ok"]:
        fail(f"{name}: mbuf leak check: {stats['mbufs']}")


def main():
    build, source = sys.argv[1], sys.argv[2]
    pktgen = os.environ.get("PKTGEN", "")
    if not pktgen:
        print("SKIP: set PKTGEN to a pktgen-DPDK 23.06 binary (../shared/tools/pktgen/build.sh builds one; "
              "scripts/pktgen/README.md says how) to run quicsteer under pktgen")
        return SKIP
    if not os.access(pktgen, os.X_OK):
        fail(f"PKTGEN={pktgen} is not an executable file")
    if os.geteuid() != 0:
        print("SKIP: pktgen and quicsteer on net_memif need root here")
        return SKIP
    for tool in ("script",):
        if subprocess.call(["sh", "-c", f"command -v {tool} >/dev/null"]) != 0:
            fail(f"{tool} is needed (bsdutils)")

    with tempfile.TemporaryDirectory(prefix="qs-pktgen-") as tmp:
        subprocess.run([os.path.join(build, "quicgen"), "--profile",
                        os.path.join(source, "configs", "memif-pktgen.yaml"), "--client-to-server-only",
                        "--malformed", "0", "--connections", "500", "--out", os.path.join(tmp, "capture.pcap")],
                       check=True, stdout=subprocess.DEVNULL)

        log, stats = run_pair(build, source, pktgen, tmp, "replay", "replay.lua", {"QS_RATE": 100, "QS_DURATION": 5})
        try:
            sent, received = memif_pair.replay_totals(log)
            trials_log, trials_stats = run_pair(build, source, pktgen, tmp, "lossfree", "find_lossfree_rate.lua",
                                                {"QS_TRIAL": 2, "QS_MIN_RATE": 10, "QS_PRECISION": 50})
            trials, best = memif_pair.lossfree_result(trials_log)
        except memif_pair.RunError as e:
            fail(str(e))
        check_accounting("replay.lua", sent, received, stats)
        check_accounting("find_lossfree_rate.lua", sum(t[1] for t in trials), sum(t[2] for t in trials),
                         trials_stats)
        if best != 100.0:
            fail(f"with park and zero software drops every trial is loss-free, but the search found {best}%")
        print(f"find_lossfree_rate.lua: {len(trials)} trial(s), loss-free at {best}% of link")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
