#!/usr/bin/env python3
"""The quicsteer binary as an operator runs it, on virtual devices.

usage: quicsteer_cli_test.py BUILD_DIR SOURCE_DIR NO_GETRANDOM_SO

Checks every shipped profile with --check; a bad profile is refused with
FILE:LINE:COL before EAL starts; a run on net_pcap -> net_null moves packets,
steers them, stops by itself and returns every mbuf; SIGINT stops it cleanly;
a missing device, an lcore EAL does not enable and a kernel that gives no
random octets (getrandom(2) failing) are clear errors.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from qs_harness import check, failures
from qs_harness import pcap_profile as harness_profile

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")
NO_GETRANDOM = sys.argv[3]  # an LD_PRELOAD library whose getrandom(2) fails




def run(args, timeout=60, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


EAL = '["--lcores", "(0-2)@(0,1)", "--no-huge", "-m", "512", "--no-shconf", "--no-pci", "--log-level", "*:warning"]'


def profile(tmp, body, name="p.yaml"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(body)
    return path


def pcap_profile(pcap, json_path, extra=""):
    return harness_profile(EAL, pcap, json_path, 500, extra)


with tempfile.TemporaryDirectory() as tmp:
    # Every shipped profile validates and prints itself resolved.
    configs = sorted(f for f in os.listdir(os.path.join(SOURCE, "configs")) if f.endswith(".yaml"))
    check(len(configs) >= 5, f"configs/ ships profiles ({len(configs)})")
    for c in configs:
        r = run([QUICSTEER, "--check", os.path.join(SOURCE, "configs", c)])
        if c == "baremetal-2port.yaml":
            # The template for real NICs ships no fallback key: refused until the operator sets one.
            check(r.returncode == 1 and "steering.fallback.key: all zeros" in r.stderr
                  and "openssl rand -hex 16" in r.stderr, f"--check configs/{c} asks for a key: {r.stderr.strip()[:300]}")
            continue
        check(r.returncode == 0 and "lcores:" in r.stdout and "backpressure:" in r.stdout,
              f"--check configs/{c}: {r.stderr.strip()[:200]}")
        # The dump shows each key by its fingerprint, never the key itself.
        check("sha256:" in r.stdout and not re.search(r'key: "[0-9a-f]{32}"', r.stdout),
              f"--check configs/{c} shows no key")

    # A bad profile: refused with file, line, column and key; nothing started.
    bad = profile(tmp, "ports:\n  - {name: a, device: net_null0, rx_queues: 1}\nlcores:\n  - {id: 1, rx: [\"a:0\"], owner: true, colour: red}\n", "bad.yaml")
    r = run([QUICSTEER, "--", "--profile", bad])
    check(r.returncode != 0 and f"{bad}:4:" in r.stderr and "colour" in r.stderr,
          f"bad profile refused with its location: {r.stderr.strip()[:200]}")
    check("EAL" not in r.stdout and "port " not in r.stdout, "bad profile: nothing was started")

    # Real traffic through net_pcap -> steering -> owners -> net_null.
    pcap = os.path.join(tmp, "t.pcap")
    gen_profile = profile(tmp, pcap_profile(pcap, "unused"), "gen.yaml")
    r = run([QUICGEN, "--profile", gen_profile, "--out", pcap, "--connections", "100", "--seed", "3"])
    check(r.returncode == 0 and os.path.getsize(pcap) > 0, f"quicgen wrote the capture: {r.stderr.strip()[:200]}")
    stats = os.path.join(tmp, "stats.json")
    # The replay saturates both lcores, and on a shared machine an owner may
    # be descheduled for longer than the default park timeout (10 ms), which
    # then drops a ticket as designed. A timeout longer than the whole run
    # cannot be reached by any scheduling, so a park_timeout drop here is a
    # ticket dropped before its time: a bug.
    p = profile(tmp, pcap_profile(pcap, stats, "backpressure: {park_timeout_us: 10000000}\n"), "run.yaml")
    r = run([QUICSTEER, "--", "--profile", p, "--duration", "1.5"], timeout=120)
    check(r.returncode == 0, f"1.5 s run exits 0: {r.stderr.strip()[-300:]}")
    check("quicsteer summary" in r.stdout and "mbuf leak check: ok" in r.stdout, "run prints its summary and leak check")
    try:
        s = json.load(open(stats))
    except Exception as e:  # noqa: BLE001
        s = None
        check(False, f"stats JSON readable: {e}")
    if s:
        t = s["total"]
        check(t["rx"] > 10000, f"packets were received ({t['rx']})")
        check(t["tx"] > 0 and t["processed"] > 0, f"owners transmitted ({t['tx']})")
        check(t["enqueued"] > 0 and t["steered_self"] > 0, "both hand-off and local processing happened")
        check(t["connections"] > 0, f"connections were tracked ({t['connections']})")
        check(s["mbufs"]["ok"] and s["mbufs"]["leaked"] == 0, "every mbuf came back")
        check(len(s["lcores"]) == 2 and len(s["queues"]) == 2 and len(s["rings"]) == 2 and len(s["ports"]) == 2,
              "JSON has per-lcore, per-queue, per-ring and per-port sections")
        other = {k: v for k, v in t["drops_total"].items() if k not in ("malformed", "not_udp", "shutdown")}
        check(all(v == 0 for v in other.values()),
              f"no back-pressure drops in a run shorter than its park timeout: {other}")
        check(t["drops_total"]["malformed"] > 0, "quicgen's malformed packets were counted as such")

    # SIGINT stops a run that has no duration, cleanly.
    p2 = profile(tmp, pcap_profile(pcap, os.path.join(tmp, "s2.json")), "sig.yaml")
    proc = subprocess.Popen([QUICSTEER, "--", "--profile", p2], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
        check(proc.returncode == 0 and "mbuf leak check: ok" in out, f"SIGINT: clean stop ({err.strip()[-200:]})")
    except subprocess.TimeoutExpired:
        proc.kill()
        check(False, "SIGINT: quicsteer did not stop")

    # A device that is not there: a clear error, non-zero exit.
    missing = profile(tmp, f"""eal: {EAL}
ports:
  - {{name: nic, device: "0000:99:00.0", rx_queues: 1, tx_queues: 1}}
lcores:
  - {{id: 1, rx: ["nic:0"], owner: true}}
action: {{type: reflect}}
steering: {{fallback: {{key: 5f0c9a7e21d34b8e96a1c07d3e45f218}}}}
""", "missing.yaml")
    r = run([QUICSTEER, "--", "--profile", missing])
    check(r.returncode != 0 and "port 'nic'" in r.stderr and "0000:99:00.0" in r.stderr,
          f"missing PCI device is a clear error: {r.stderr.strip()[-200:]}")

    # More queues than the driver offers (net_pcap has one RX queue per rx_pcap).
    one = pcap_profile(pcap, "").replace(f",rx_pcap={pcap},infinite_rx=1", ",infinite_rx=1")
    r = run([QUICSTEER, "--", "--profile", profile(tmp, one, "queues.yaml")])
    check(r.returncode != 0 and "rx_queues 2 exceeds the driver's maximum of 1" in r.stderr,
          f"too many queues for the driver is a clear error: {r.stderr.strip()[-200:]}")

    # An lcore EAL was not given.
    lc = profile(tmp, pcap_profile(pcap, "").replace("{id: 2,", "{id: 7,").replace("owner: 2}", "owner: 7}"), "lcore.yaml")
    r = run([QUICSTEER, "--", "--profile", lc])
    check(r.returncode != 0 and "lcore 7" in r.stderr, f"unknown lcore is a clear error: {r.stderr.strip()[-200:]}")

    # --- issue 15: what a hostile probe found -------------------------------------------

    # --duration follows the profile's rule for numbers: no nan, inf, overflow or hex.
    for bad in ["nan", "inf", "1e400", "0x10", "-1", "1s"]:
        r = run([QUICSTEER, "--", "--profile", p, "--duration", bad])
        check(r.returncode == 2 and "--duration" in r.stderr and f"'{bad}'" in r.stderr
              and "port " not in r.stdout,
              f"--duration {bad} is refused before anything starts: {r.stderr.strip()[-160:]}")

    # Outputs are checked at start-up, before EAL: an unwritable statistics file.
    r = run([QUICSTEER, "--", "--profile", p, "--duration", "0.2", "--stats-json", "/nonexistent-dir/s.json"])
    check(r.returncode == 1 and "cannot write the statistics file /nonexistent-dir/s.json" in r.stderr
          and "port " not in r.stdout and "summary" not in r.stdout,
          f"an unwritable --stats-json is refused at start-up: {r.stderr.strip()[-200:]}")
    r = run([QUICSTEER, "--", "--profile", profile(tmp, pcap_profile(pcap, tmp), "dirjson.yaml"), "--duration", "0.2"])
    check(r.returncode == 1 and f"the statistics file {tmp} (stats.json)" in r.stderr and "port " not in r.stdout,
          f"a stats.json naming a directory is refused at start-up: {r.stderr.strip()[-200:]}")

    # --check reads regular files only, and a bounded amount of them.
    r = run([QUICSTEER, "--check", "/dev/zero"], timeout=60)
    check(r.returncode == 1 and "/dev/zero: cannot read: Is a character device" in r.stderr,
          f"--check /dev/zero is refused: {r.stderr.strip()[-200:]}")
    fifo = os.path.join(tmp, "p.fifo")
    os.mkfifo(fifo)
    try:
        r = run([QUICSTEER, "--check", fifo], timeout=60)
        check(r.returncode == 1 and "Is a FIFO" in r.stderr, f"--check on a FIFO is refused: {r.stderr.strip()[-200:]}")
    except subprocess.TimeoutExpired:
        check(False, "--check on a FIFO waited for a writer")

    # A stop signal from the first moment: quicsteer is started with SIGINT
    # blocked and the signal already pending, so it arrives the moment
    # quicsteer's main() lets it (before EAL starts). The run stops on it and
    # prints its summary instead of running for its whole duration.
    def blocked_sigint():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    proc = subprocess.Popen([QUICSTEER, "--", "--profile", p, "--duration", "600"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=blocked_sigint)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=240)
        check(proc.returncode == 0 and "stopping on SIGINT" in out and "quicsteer summary" in out
              and "mbuf leak check: ok" in out,
              f"SIGINT before EAL: a clean stop with the summary ({proc.returncode}: {err.strip()[-200:]})")
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, "SIGINT before EAL was not seen: quicsteer ran on")

    # SIGINT while EAL is starting (its first log line is out): before, the
    # handler came after EAL and the signal killed quicsteer with no summary.
    eal_info = ["--lcores", "(0-2)@(0,1)", "--no-huge", "-m", "512", "--no-shconf", "--no-pci",
                "--log-level", "*:info"]
    proc = subprocess.Popen([QUICSTEER] + eal_info + ["--", "--profile", p, "--duration", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    while "EAL:" not in seen:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=240)
        out = seen + out
        check(proc.returncode == 0 and "stopping on SIGINT" in out and "quicsteer summary" in out,
              f"SIGINT during EAL start-up: a clean stop with the summary (exit {proc.returncode})")
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, "SIGINT during EAL start-up was not seen: quicsteer ran on")

    # Forwarding to a net_ring nobody reads: its rings hold what was sent.
    # They are the device's, not leaked; they come back when it closes.
    ring_json = os.path.join(tmp, "ring.json")
    ring = pcap_profile(pcap, ring_json).replace(
        '{name: sink, device: "net_null0,no-rx=1", rx_queues: 0, tx_queues: 2}',
        '{name: sink, device: "net_ring0", rx_queues: 0, tx_queues: 2}')
    check("net_ring0" in ring, "the net_ring profile was made")
    r = run([QUICSTEER, "--", "--profile", profile(tmp, ring, "ring.yaml"), "--duration", "1"], timeout=180)
    check(r.returncode == 0 and "mbuf leak check: ok" in r.stdout,
          f"a net_ring nobody reads: no leak reported ({r.stdout.strip()[-300:]} {r.stderr.strip()[-200:]})")
    try:
        m = json.load(open(ring_json))["mbufs"]
        check(m["leaked"] == 0 and m["held_by_devices"] >= 1023 and m["ok"],
              f"the mbufs in net_ring's rings are counted as held by the device: {m}")
    except Exception as e:  # noqa: BLE001
        check(False, f"net_ring stats JSON readable: {e}")

    # A memif client with no server: the error names the socket and the fix.
    sock = os.path.join(tmp, "nobody.sock")
    memif = f"""eal: {EAL}
ports:
  - {{name: memif, device: "net_memif0,role=client,socket={sock},id=0", rx_queues: 1, tx_queues: 1, rss: false}}
lcores:
  - {{id: 1, rx: ["memif:0"], owner: true}}
action: {{type: reflect}}
"""
    r = run([QUICSTEER, "--", "--profile", profile(tmp, memif, "memif.yaml"), "--duration", "0.5"], timeout=120)
    check(r.returncode != 0 and f"no memif peer listening on socket {sock}" in r.stderr and "memif server" in r.stderr,
          f"memif with no peer names the socket and the fix: {r.stderr.strip()[-300:]}")

    # Without random octets from the kernel (getrandom(2) failing, as under a
    # seccomp policy without it) quicsteer refuses to start, saying why,
    # rather than key its tables with numbers anyone could guess.
    no_random = dict(os.environ, LD_PRELOAD=NO_GETRANDOM,
                     ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    r = run([QUICSTEER, "--", "--profile", p, "--duration", "0.5"], timeout=120, env=no_random)
    check(r.returncode == 1 and "cannot draw random octets from the kernel (getrandom: Function not implemented)"
          in r.stderr and "quicsteer summary" not in r.stdout,
          f"no getrandom: start-up fails with a clear error: {r.returncode} {r.stderr.strip()[-300:]}")

    # A second instance on the same --file-prefix: the cause and the fix.
    prefix = f"qs-cli-{os.getpid()}"
    shared = pcap_profile(pcap, os.path.join(tmp, "first.json")).replace('"--no-shconf", ', f'"--file-prefix", "{prefix}", ')
    check(prefix in shared, "the shared-config profile was made")
    first = subprocess.Popen([QUICSTEER, "--", "--profile", profile(tmp, shared, "first.yaml"), "--duration", "600"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "running until" not in line and "running for" not in line:
            line = first.stdout.readline()
            if not line:
                break
        check("running" in line, "the first instance started")
        second = shared.replace("first.json", "second.json")
        r = run([QUICSTEER, "--", "--profile", profile(tmp, second, "second.yaml"), "--duration", "0.5"], timeout=120)
        check(r.returncode != 0 and f"another DPDK process (pid {first.pid})" in r.stderr
              and f"--file-prefix '{prefix}'" in r.stderr and "give this process its own --file-prefix" in r.stderr,
              f"a second instance on the same --file-prefix says why and what to do: {r.stderr.strip()[-300:]}")
    finally:
        first.send_signal(signal.SIGINT)
        try:
            first.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            first.kill()
            first.communicate()
    check(first.returncode == 0, f"the first instance stopped cleanly ({first.returncode})")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
