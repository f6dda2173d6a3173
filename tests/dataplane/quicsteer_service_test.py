#!/usr/bin/env python3
"""quicsteer as a systemd service runs it, with this test as the manager.

usage: quicsteer_service_test.py BUILD_DIR SOURCE_DIR

Graceful drain: with drain.grace_s 2, SIGTERM makes quicsteer say it is
draining (health false, STOPPING=1), keep forwarding (the port counters
still rise in the live table), stop once the grace is over, exit 0 and
count no software drop. With the default grace (0) SIGTERM stops at once.

The notify protocol (sd_notify(3)), as quicsteer@.service's Type=notify and
WatchdogSec= use it: the test binds a datagram socket, names it in
NOTIFY_SOCKET (a path, and an abstract @name) with WATCHDOG_USEC, runs the
demo profile and checks READY=1 after start-up, WATCHDOG=1 again and again,
RELOADING=1 then READY=1 around SIGHUP, STOPPING=1 on SIGTERM.

Races of issue 38 (item 6): a SIGHUP during the drain tells the manager
nothing (no READY=1 after STOPPING=1); the drain extends the manager's stop
timeout (EXTEND_TIMEOUT_USEC, again and again) by the grace at least;
/healthz never says 200 before READY=1, so a SIGTERM the moment it does
drains; SIGHUP reloads the live profile, also after a reload over telemetry
switched to another file.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import urllib.error
import urllib.request

from qs_harness import Manager, check, eal, failures, require_telemetry, telemetry
from qs_harness import pcap_profile as harness_profile

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")




EAL = '["--lcores", "(0-2)@(0,1)", "--no-huge", "-m", "512", "--no-shconf", "--no-pci", "--log-level", "*:warning"]'


def pcap_profile(pcap, json_path, extra=""):
    return harness_profile(EAL, pcap, json_path, 200, extra)


class Output:
    """quicsteer's stdout, read as it comes."""

    def __init__(self, proc):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc):
        for line in proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, text, timeout=120):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if any(text in line for line in self.lines):
                    return True
            time.sleep(0.05)
        return False

    def text(self):
        self.thread.join(timeout=60)
        with self.lock:
            return list(self.lines)


def start(args, env=None, cwd=None):
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    return proc, Output(proc)


def finish(proc, what):
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        check(False, f"{what}: quicsteer did not stop")


def sink_tx_rates(lines):
    """The sink port's tx rate in each live table, as printed ("2.378 Mpps", "0 pps")."""
    rates = []
    for line in lines:
        words = line.split()
        if words[:2] == ["port", "sink"] and "tx" in words:
            i = words.index("tx")
            rates.append(" ".join(words[i + 1:i + 3]))
    return rates


with tempfile.TemporaryDirectory() as tmp:
    pcap = os.path.join(tmp, "t.pcap")
    gen = os.path.join(tmp, "gen.yaml")
    with open(gen, "w") as f:
        f.write(pcap_profile(pcap, "unused"))
    # No malformed packets: every drop the run counts is then one the drain must not cause.
    r = subprocess.run([QUICGEN, "--profile", gen, "--out", pcap, "--connections", "100", "--seed", "3",
                        "--malformed", "0"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"quicgen wrote the capture: {r.stderr.strip()[-200:]}")

    # --- graceful drain -------------------------------------------------------------
    stats = os.path.join(tmp, "drain.json")
    drain_profile = os.path.join(tmp, "drain.yaml")
    with open(drain_profile, "w") as f:
        # net_pcap replays the capture as fast as the lcores take it, on CPUs
        # shared with the rest of the machine: an lcore descheduled for 10 ms
        # would time a parked queue out (park_timeout). With the longest park
        # timeout the software holds instead and the device waits, so any
        # software drop is the drain's.
        f.write(pcap_profile(pcap, stats, "drain: {grace_s: 2}\nbackpressure: {park_timeout_us: 10000000}\n"))
    manager = Manager(os.path.join(tmp, "notify.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=manager.name, WATCHDOG_USEC="1000000")
    proc, out = start([QUICSTEER, "--", "--profile", drain_profile], env=env)
    check(out.wait_for("quicsteer: health: true"), "drain run: quicsteer says it is healthy")
    ready = manager.wait_for("READY=1")
    check(ready is not None, "drain run: READY=1 on a path NOTIFY_SOCKET")
    sent_term = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stopping = manager.wait_for("STOPPING=1", after=(ready or 0) + 1)
    check(stopping is not None, "drain run: STOPPING=1 at the start of the drain")
    if stopping is not None:
        msg = manager.seen()[stopping]
        check("STATUS=draining" in msg, f"drain run: the manager's status says draining ({msg!r})")
        # A drain longer than TimeoutStopSec needs the manager told: the
        # extension covers the whole grace, from the start of the drain.
        extend = [int(a.split("=", 1)[1]) for a in msg.split("\n") if a.startswith("EXTEND_TIMEOUT_USEC=")]
        check(extend and extend[0] >= 2_000_000,
              f"drain run: STOPPING=1 extends the stop timeout by the grace at least ({msg!r})")
        # A reload during the drain is applied, and the manager hears nothing of it.
        proc.send_signal(signal.SIGHUP)
        check(out.wait_for("quicsteer: reload (SIGHUP) applied"), "drain run: a reload during the drain is applied")
    finish(proc, "drain run")
    took = time.monotonic() - sent_term
    lines = out.text()
    manager.close()
    at = next((i for i, line in enumerate(lines) if "draining on SIGTERM" in line), None)
    check(at is not None, "drain run: quicsteer says it is draining")
    after = lines[at:] if at is not None else []
    check(any("health: false (draining)" in line for line in after), "drain run: health is false, reason draining")
    rates = sink_tx_rates(after)
    moving = [x for x in rates if not x.startswith("0 ")]
    check(len(moving) >= 2, f"drain run: the sink's counters still rise during the grace ({rates})")
    check(took >= 2.0, f"drain run: it stopped only after the 2 s grace ({took:.2f} s)")
    check(any("stopping on SIGTERM, the drain is over" in line for line in after),
          "drain run: it stops once the drain is over")
    check(proc.returncode == 0, f"drain run: exit 0 ({proc.returncode}): {lines[-5:]}")
    if stopping is not None:
        fed = [m for m in manager.seen()[stopping + 1:] if m == "WATCHDOG=1"]
        check(len(fed) >= 1, "drain run: the watchdog is still fed while the data path drains (a stop, not a fault)")
        after_stop = manager.seen()[stopping + 1:]
        told = [m for m in after_stop if "READY=1" in m.split("\n") or "RELOADING=1" in m.split("\n")]
        check(not told, f"drain run: no READY=1 or RELOADING=1 after STOPPING=1 ({told})")
        extended = [m for m in after_stop if m.startswith("EXTEND_TIMEOUT_USEC=")]
        check(len(extended) >= 1, f"drain run: the extension is renewed during the drain ({after_stop})")
    try:
        s = json.load(open(stats))
        check(s["total"]["drops_sum"] == 0 and all(v == 0 for v in s["total"]["drops_total"].values()),
              f"drain run: no software drop ({s['total']['drops_total']})")
        check(s["mbufs"]["ok"] and s["mbufs"]["leaked"] == 0, "drain run: every mbuf came back")
    except Exception as e:  # noqa: BLE001
        check(False, f"drain run: stats JSON readable: {e}")

    # The default grace (0): SIGTERM stops at once, as before.
    nodrain = os.path.join(tmp, "nodrain.yaml")
    with open(nodrain, "w") as f:
        f.write(pcap_profile(pcap, os.path.join(tmp, "nodrain.json")))
    proc, out = start([QUICSTEER, "--", "--profile", nodrain])
    check(out.wait_for("quicsteer: health: true"), "no-grace run: healthy")
    proc.send_signal(signal.SIGTERM)
    finish(proc, "no-grace run")
    lines = out.text()
    check(proc.returncode == 0 and any(line == "quicsteer: stopping on SIGTERM" for line in lines)
          and not any("draining" in line for line in lines),
          f"no-grace run: SIGTERM stops at once, no drain ({proc.returncode})")

    # --- /healthz 200 only once READY=1 was sent ----------------------------------------
    # A router announces the route on /healthz's first 200; a SIGTERM then
    # must drain. SIGTERM goes the moment /healthz first says 200.
    first = os.path.join(tmp, "first.yaml")
    with open(first, "w") as f:
        f.write(pcap_profile(pcap, os.path.join(tmp, "first.json"),
                             'drain: {grace_s: 1}\ntelemetry: {prometheus_listen: "127.0.0.1:0"}\n'))
    manager = Manager(os.path.join(tmp, "first.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=manager.name, WATCHDOG_USEC="1000000")
    proc, out = start([QUICSTEER, "--", "--profile", first], env=env)
    check(out.wait_for("prometheus: http://127.0.0.1:0/metrics"), "first 200: the endpoint is up")
    with out.lock:
        m = re.search(r"prometheus: http://127\.0\.0\.1:0/metrics \(port (\d+)\)", "\n".join(out.lines))
    port = int(m.group(1)) if m else 0
    said_200 = False
    deadline = time.monotonic() + 120
    while port and proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
                said_200 = r.status == 200
        except (urllib.error.HTTPError, urllib.error.URLError, ConnectionError):
            said_200 = False
        if said_200:
            proc.send_signal(signal.SIGTERM)
            break
    check(said_200, "first 200: /healthz said 200")
    finish(proc, "first 200")
    lines = out.text()
    manager.close()
    check(any("draining on SIGTERM" in line for line in lines),
          f"first 200: a SIGTERM once /healthz said 200 drains ({[x for x in lines if 'SIGTERM' in x]})")

    # --- SIGHUP reloads what is live ---------------------------------------------------
    require_telemetry()
    prefix = f"qssvc{os.getpid()}"
    live_dir = os.path.join(tmp, "live")
    os.makedirs(live_dir)
    base = harness_profile(eal(prefix), pcap, "", 0)
    three = base.replace('{server_id: "0002", owner: 2}]', '{server_id: "0002", owner: 2}, {server_id: "0003", owner: 1}]')
    check(three != base, "live reload: a profile with a third server")
    with open(os.path.join(live_dir, "a.yaml"), "w") as f:
        f.write(base)
    with open(os.path.join(live_dir, "b.yaml"), "w") as f:
        f.write(three)
    proc, out = start([QUICSTEER, "--", "--profile", os.path.join(live_dir, "a.yaml"), "--duration", "0"])
    check(out.wait_for("running until SIGINT/SIGTERM"), "live reload: started")
    answer = None
    deadline = time.monotonic() + 120
    while answer is None and time.monotonic() < deadline:
        answer = telemetry(prefix, "/quicsteer/reload,b.yaml")
        time.sleep(0.1)
    check(answer is not None and str(answer[0]).startswith("applied"), f"live reload: b.yaml over telemetry ({answer})")
    proc.send_signal(signal.SIGHUP)
    check(out.wait_for("quicsteer: reload (SIGHUP) applied"), "live reload: SIGHUP applied")
    steering = telemetry(prefix, "/quicsteer/steering", quiet=False)
    check(steering is not None and steering[0]["servers"] == 3 and steering[0]["profile"].endswith("b.yaml"),
          f"live reload: SIGHUP re-read b.yaml, the live profile, not the start-up one ({steering})")
    proc.send_signal(signal.SIGINT)
    finish(proc, "live reload")

    # --- the notify protocol on the demo profile -------------------------------------
    # The demo as shipped, run from a directory of its own (its capture and
    # statistics paths are relative), until a signal stops it; with --no-huge,
    # which the demo leaves to quicsteer: the suites run EAL processes two at
    # a time and under ASan, which wants ordinary memory
    # (tests/sanitizers/README.md).
    demo_dir = os.path.join(tmp, "demo")
    os.makedirs(os.path.join(demo_dir, "results"))
    demo = os.path.join(demo_dir, "demo.yaml")
    with open(os.path.join(SOURCE, "configs", "demo.yaml")) as f:
        text = f.read().replace('"--no-shconf"', '"--no-huge", "-m", "1024", "--no-shconf"', 1)
    check('"--no-huge"' in text, "the demo profile, with --no-huge")
    with open(demo, "w") as f:
        f.write(text)
    r = subprocess.run([QUICGEN, "--profile", demo, "--out", "results/demo.pcap"], capture_output=True, text=True,
                       timeout=300, cwd=demo_dir)
    check(r.returncode == 0, f"quicgen wrote the demo capture: {r.stderr.strip()[-200:]}")
    manager = Manager(f"@qs-service-test-{os.getpid()}")
    env = dict(os.environ, NOTIFY_SOCKET=manager.name, WATCHDOG_USEC="1000000")
    proc, out = start([QUICSTEER, "--", "--profile", demo, "--duration", "0"], env=env, cwd=demo_dir)
    check(out.wait_for("running until SIGINT/SIGTERM"), "demo: started")
    ready = manager.wait_for("READY=1")
    check(ready is not None, "demo: READY=1 on an abstract (@) NOTIFY_SOCKET after start-up")
    if ready is not None:
        # WATCHDOG_USEC 1 s: fed twice a second while healthy; wait for several.
        fed = ready
        for _ in range(3):
            fed = manager.wait_for("WATCHDOG=1", after=fed + 1, timeout=60)
            if fed is None:
                break
        check(fed is not None, "demo: WATCHDOG=1 keeps arriving")
        mark = len(manager.seen())
        proc.send_signal(signal.SIGHUP)
        reloading = manager.wait_for("RELOADING=1", after=mark)
        check(reloading is not None, "demo: RELOADING=1 on SIGHUP")
        if reloading is not None:
            msg = manager.seen()[reloading]
            check(any(a.startswith("MONOTONIC_USEC=") and a[15:].isdigit() for a in msg.split("\n")),
                  f"demo: RELOADING=1 carries MONOTONIC_USEC ({msg!r})")
            again = manager.wait_for("READY=1", after=reloading + 1)
            check(again is not None and "STATUS=reload applied" in manager.seen()[again],
                  "demo: READY=1 after the reload, with its outcome")
        check(out.wait_for("quicsteer: reload (SIGHUP) applied"), "demo: the reload was applied")
        mark = len(manager.seen())
        fed = manager.wait_for("WATCHDOG=1", after=mark, timeout=60)
        check(fed is not None, "demo: the watchdog is fed after the reload")
        proc.send_signal(signal.SIGTERM)
        stopping = manager.wait_for("STOPPING=1", after=mark)
        check(stopping is not None, "demo: STOPPING=1 on SIGTERM")
    else:
        proc.send_signal(signal.SIGINT)
    finish(proc, "demo")
    lines = out.text()
    manager.close()
    check(proc.returncode == 0 and any("mbuf leak check: ok" in line for line in lines),
          f"demo: a clean stop ({proc.returncode}): {lines[-5:]}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
