#!/usr/bin/env python3
"""The quicsteer binary as an operator runs it, on virtual devices.

usage: quicsteer_cli_test.py BUILD_DIR SOURCE_DIR

Checks every shipped profile with --check; a bad profile is refused with
FILE:LINE:COL before EAL starts; a run on net_pcap -> net_null moves packets,
steers them, stops by itself and returns every mbuf; SIGINT stops it cleanly;
a missing device and an lcore EAL does not enable are clear errors.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, timeout=60, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


EAL = '["--lcores", "(0-2)@(0,1)", "--no-huge", "-m", "512", "--no-shconf", "--no-pci", "--log-level", "*:warning"]'


def profile(tmp, body, name="p.yaml"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(body)
    return path


def pcap_profile(pcap, json_path, extra=""):
    return f"""eal: {EAL}
ports:
  - {{name: wire, device: "net_pcap0,rx_pcap={pcap},rx_pcap={pcap},infinite_rx=1", rx_queues: 2, tx_queues: 0}}
  - {{name: sink, device: "net_null0,no-rx=1", rx_queues: 0, tx_queues: 2}}
mempool: {{mbufs: 16383, cache: 64}}
lcores:
  - {{id: 1, rx: ["wire:0"], owner: true}}
  - {{id: 2, rx: ["wire:1"], owner: true}}
steering:
  # net_pcap's infinite_rx keeps a copy of every frame per queue in mbufs.
  quic_lb: [{{config_id: 0, server_id_len: 2, nonce_len: 6, key: "3c72551026fbace916b856e563795118"}}]
  servers: [{{server_id: "0001", owner: 1}}, {{server_id: "0002", owner: 2}}]
action: {{type: forward, tx_port: sink}}
polling: {{idle_sleep_us: 50}}
stats: {{period_ms: 500, json: "{json_path}"}}
{extra}"""


with tempfile.TemporaryDirectory() as tmp:
    # Every shipped profile validates and prints itself resolved.
    configs = sorted(f for f in os.listdir(os.path.join(SOURCE, "configs")) if f.endswith(".yaml"))
    check(len(configs) >= 5, f"configs/ ships profiles ({len(configs)})")
    for c in configs:
        r = run([QUICSTEER, "--check", os.path.join(SOURCE, "configs", c)])
        check(r.returncode == 0 and "lcores:" in r.stdout and "backpressure:" in r.stdout,
              f"--check configs/{c}: {r.stderr.strip()[:200]}")

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
    p = profile(tmp, pcap_profile(pcap, stats), "run.yaml")
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
        check(all(v == 0 for v in other.values()), f"no back-pressure drops in an unloaded run: {other}")
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

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
