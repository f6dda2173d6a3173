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
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def start_pktgen(pktgen, tmp, name, script, socket, env_extra):
    """pktgen needs a terminal: run it under script(1). Returns (proc, log path)."""
    log = os.path.join(tmp, name + ".pktgen.log")
    cmd = (f"{pktgen} --lcores '0@0,1@0,2@1' --no-huge -m 2048 --no-pci --file-prefix qs-test-pktgen-{os.getpid()} "
           f"--vdev net_memif0,role=server,socket={socket},id=0 -- -P -m '[1-2:1].0' "
           f"-s 0:{tmp}/capture.pcap -f {script}")
    env = dict(os.environ, QS_QUIT="1", QS_LINK_WAIT="60", **env_extra)
    out = open(log, "wb")
    proc = subprocess.Popen(["script", "-qfec", cmd, "/dev/null"], stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, log


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def wait_for(pred, seconds, what):
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if pred():
            return
        time.sleep(0.2)
    fail(f"timed out waiting for {what}")


def stop(proc, sig=signal.SIGINT, grace=30):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_pair(build, source, pktgen, tmp, name, script, env_extra):
    """One pktgen run against one quicsteer run; returns (pktgen log, quicsteer stats, quicsteer log)."""
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
    if "cost_cycles: 4000" not in profile or "park_timeout_us: 10000000" not in profile:
        fail("configs/memif-pktgen.yaml no longer has the lines this test adapts")
    prof_path = os.path.join(tmp, name + ".yaml")
    with open(prof_path, "w") as f:
        f.write(profile)
    stats_path = os.path.join(tmp, name + ".stats.json")

    pg, pg_log = start_pktgen(pktgen, tmp, name, os.path.join(source, "scripts", "pktgen", script), socket,
                              env_extra)
    try:
        wait_for(lambda: "Executing" in read(pg_log) or pg.poll() is not None, 90, "pktgen to start its script")
        if pg.poll() is not None:
            fail(f"pktgen exited early ({pg.returncode}):\n" + read(pg_log)[-3000:])
        qs_log = os.path.join(tmp, name + ".quicsteer.log")
        qs = subprocess.Popen([os.path.join(build, "quicsteer"), "--", "--profile", prof_path, "--stats-json",
                               stats_path], stdout=open(qs_log, "wb"), stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            give_up = time.monotonic() + 240
            while pg.poll() is None:
                if qs.poll() is not None:
                    fail(f"quicsteer exited {qs.returncode} while pktgen ran:\n" + read(qs_log)[-3000:])
                if time.monotonic() > give_up:
                    fail("pktgen did not finish within 240 s:\n" + read(pg_log)[-3000:])
                time.sleep(0.2)
        finally:
            stop(qs)
    finally:
        stop(pg, signal.SIGKILL, 5)
    if qs.returncode != 0:
        fail(f"quicsteer exited {qs.returncode}:\n" + read(qs_log)[-3000:])
    log = read(pg_log)
    errors = re.findall(r"^error: .*$", log, re.M)
    if errors:
        fail(f"{script} failed: " + "; ".join(errors))
    with open(stats_path) as f:
        stats = json.load(f)
    return log, stats, read(qs_log)


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

        log, stats, _ = run_pair(build, source, pktgen, tmp, "replay", "replay.lua",
                                 {"QS_RATE": "100", "QS_DURATION": "5"})
        m = re.search(r"replay: sent (\d+), received (\d+), lost (-?\d+)", log)
        if not m:
            fail("replay.lua printed no totals:\n" + log[-3000:])
        check_accounting("replay.lua", int(m.group(1)), int(m.group(2)), stats)

        log, stats, _ = run_pair(build, source, pktgen, tmp, "lossfree", "find_lossfree_rate.lua",
                                 {"QS_TRIAL": "2", "QS_MIN_RATE": "10", "QS_PRECISION": "50"})
        trials = re.findall(r"trial: rate +([\d.]+)%  sent +(\d+)  received +(\d+)", log)
        result = re.search(r"loss-free rate: ([\d.]+)% of link", log)
        if not trials or not result:
            fail("find_lossfree_rate.lua printed no trials or no result:\n" + log[-3000:])
        sent = sum(int(t[1]) for t in trials)
        received = sum(int(t[2]) for t in trials)
        check_accounting("find_lossfree_rate.lua", sent, received, stats)
        if float(result.group(1)) != 100.0:
            fail(f"with park and zero software drops every trial is loss-free, but the search found {result.group(1)}%")
        print(f"find_lossfree_rate.lua: {len(trials)} trial(s), loss-free at {result.group(1)}% of link")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
