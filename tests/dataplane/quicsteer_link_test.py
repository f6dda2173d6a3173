#!/usr/bin/env python3
"""Link loss and dead TX queues (issue 38 items 3 and 6e): health, not restarts.

usage: quicsteer_link_test.py BUILD_DIR SOURCE_DIR

quicsteer runs with this test as its service manager (NOTIFY_SOCKET,
WATCHDOG_USEC 1 s). A lost link or a TX queue that takes nothing is for the
router to route around: /healthz (or the log and STATUS=) reports it, and
WATCHDOG=1 keeps coming, since a restart would bring no link back and lose
the forwarding tables.

- net_tap: the tap's interface is set down, then up again;
- net_af_packet on a veth in a network namespace made here (removed
  afterwards): the driver reports its link up whatever the interface does,
  so health reads the kernel's state. quicsteer starts with the veth's peer
  down: READY=1 comes all the same (ports started, lcores running);
- a net_ring TX port nobody reads: its TX queues fill and take nothing
  (tx_timeout on every packet) while its link stays up.

Needs root (net_tap, namespaces): exit 77 otherwise.
"""
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

from qs_harness import Manager, check, eal, failures, prometheus_port, start, wait_for, watch, write

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")

if os.geteuid() != 0:
    print("SKIP: needs root (net_tap, network namespaces)")
    sys.exit(77)

TAG = f"qsl{os.getpid() % 100000}"


def healthz(port):
    """(status, body) of GET /healthz."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def profile(pcap, prefix, ports, wire_lcore_rx, sink="sink", extra=""):
    """Two lcores on a looping capture (wire), `ports` (YAML list items) after
    the wire, lcore 1 also polling `wire_lcore_rx`."""
    return f"""eal: {eal(prefix)}
ports:
  - {{name: wire, device: "net_pcap0,rx_pcap={pcap},rx_pcap={pcap},infinite_rx=1", rx_queues: 2, tx_queues: 0}}
{ports}
mempool: {{mbufs: 16383, cache: 64}}
lcores:
  - {{id: 1, rx: ["wire:0"{wire_lcore_rx}], owner: true}}
  - {{id: 2, rx: ["wire:1"], owner: true}}
steering:
  quic_lb: [{{config_id: 0, server_id_len: 2, nonce_len: 6, key: "3c72551026fbace916b856e563795118"}}]
  servers: [{{server_id: "0001", owner: 1}}, {{server_id: "0002", owner: 2}}]
action: {{type: forward, tx_port: {sink}}}
polling: {{idle_sleep_us: 50}}
stats: {{period_ms: 0}}
telemetry: {{prometheus_listen: "127.0.0.1:0"}}
{extra}"""


def watchdog_keeps_coming(manager, what, times=3):
    """WATCHDOG=1 `times` more times from now on."""
    at = len(manager.seen()) - 1
    for _ in range(times):
        at = manager.wait_for("WATCHDOG=1", after=at + 1, timeout=60)
        if at is None:
            break
    check(at is not None, f"{what}: WATCHDOG=1 keeps coming")


def status_seen(manager, text, after=0):
    return any(a.startswith("STATUS=") and text in a for m in manager.seen()[after:] for a in m.split("\n"))


def stop(proc, out, what):
    proc.send_signal(2)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    out.thread.join(timeout=10)
    check(proc.returncode == 0 and "mbuf leak check: ok" in out.text(),
          f"{what}: a clean stop ({proc.returncode}): {out.text()[-300:]}")


def ip(*args, check_rc=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if check_rc:
        check(r.returncode == 0, f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r.returncode == 0


with tempfile.TemporaryDirectory() as tmp:
    pcap = os.path.join(tmp, "t.pcap")
    gen = write(os.path.join(tmp, "gen.yaml"), profile(pcap, TAG, '  - {name: sink, device: "net_null0,no-rx=1", '
                                                       'rx_queues: 0, tx_queues: 2}', ""))
    r = subprocess.run([QUICGEN, "--profile", gen, "--out", pcap, "--connections", "50", "--seed", "5"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"quicgen wrote the capture: {r.stderr.strip()[-200:]}")
    sink = '  - {name: sink, device: "net_null0,no-rx=1", rx_queues: 0, tx_queues: 2}'

    # --- net_tap: the interface set down, then up -----------------------------
    tap_if = f"{TAG}t"
    tap = write(os.path.join(tmp, "tap.yaml"), profile(
        pcap, TAG + "a", f'{sink}\n  - {{name: tap, device: "net_tap0,iface={tap_if}", rx_queues: 1, tx_queues: 1, '
                         f'rss: false}}', ', "tap:0"'))
    manager = Manager(os.path.join(tmp, "tap.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=manager.name, WATCHDOG_USEC="1000000")
    proc, out = start([QUICSTEER, "--", "--profile", tap], env=env)
    port = prometheus_port(out)
    check(manager.wait_for("READY=1") is not None, "tap: READY=1")
    wait_for("tap: /healthz 200", lambda: healthz(port)[0] == 200)
    ip("link", "set", tap_if, "down")
    seen = wait_for("tap: /healthz reports the link down",
                    lambda: (lambda h: h if h[0] == 503 and "port tap link down" in h[1] else None)(healthz(port)))
    check(seen is not None, f"tap: /healthz 503 naming the link ({seen})")
    mark = len(manager.seen())
    watchdog_keeps_coming(manager, "tap, link down")
    h = healthz(port)
    check(h[0] == 503 and "port tap link down" in h[1], f"tap: /healthz still reports the link ({h})")
    check(status_seen(manager, "port tap link down") , "tap: STATUS= names the link")
    check(proc.poll() is None, "tap: quicsteer runs on with the link down")
    ip("link", "set", tap_if, "up")
    wait_for("tap: /healthz 200 once the link is back", lambda: healthz(port)[0] == 200)
    stop(proc, out, "tap")
    manager.close()

    # --- net_af_packet on a veth whose peer is down --------------------------
    ns = f"{TAG}n"
    veth, peer = f"{TAG}a", f"{TAG}b"
    try:
        ip("netns", "add", ns)
        ip("-n", ns, "link", "add", veth, "type", "veth", "peer", "name", peer)
        ip("-n", ns, "link", "set", veth, "up")  # the peer stays down: no carrier
        afp = write(os.path.join(tmp, "afp.yaml"), profile(
            pcap, TAG + "b", f'{sink}\n  - {{name: afp, device: "net_af_packet0,iface={veth}", rx_queues: 1, '
                             f'tx_queues: 1, rss: false}}', ', "afp:0"'))
        manager = Manager(os.path.join(tmp, "afp.sock"))
        env = dict(os.environ, NOTIFY_SOCKET=manager.name, WATCHDOG_USEC="1000000")
        proc, out = start(["ip", "netns", "exec", ns, QUICSTEER, "--", "--profile", afp], env=env)
        ready = manager.wait_for("READY=1")
        check(ready is not None, "af_packet: READY=1 with a link down (the ports started, the lcores run)")
        wait_for("af_packet: health names the kernel interface's link",
                 lambda: "quicsteer: health: false (port afp link down)" in out.text())
        check(status_seen(manager, "port afp link down"), "af_packet: STATUS= names the link")
        watchdog_keeps_coming(manager, "af_packet, peer down")
        ip("-n", ns, "link", "set", peer, "up")
        wait_for("af_packet: healthy once the peer is up", lambda: "quicsteer: health: true" in out.text())
        mark = len(out.text())
        ip("-n", ns, "link", "set", veth, "down")
        wait_for("af_packet: the interface set down is a link down",
                 lambda: "quicsteer: health: false (port afp link down)" in out.text()[mark:])
        watchdog_keeps_coming(manager, "af_packet, interface down")
        stop(proc, out, "af_packet")
        manager.close()
    finally:
        ip("netns", "del", ns, check_rc=False)
    check(not ip("netns", "pids", ns, check_rc=False), "the namespace is gone")

    # --- a TX queue that takes nothing ---------------------------------------
    # net_ring's rings, nobody reading them, fill; its link stays up.
    ring = write(os.path.join(tmp, "ring.yaml"), profile(
        pcap, TAG + "c", '  - {name: sink, device: "net_ring0", rx_queues: 0, tx_queues: 2}', ""))
    manager = Manager(os.path.join(tmp, "ring.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=manager.name, WATCHDOG_USEC="1000000")
    proc, out = start([QUICSTEER, "--", "--profile", ring], env=env)
    port = prometheus_port(out)
    check(manager.wait_for("READY=1") is not None, "dead TX: READY=1")
    seen = wait_for("dead TX: /healthz names the TX queue",
                    lambda: (lambda h: h if h[0] == 503 and "port sink TX queue" in h[1] else None)(healthz(port)))
    check(seen is not None and "link down" not in seen[1], f"dead TX: /healthz 503 for the TX queue, not a link ({seen})")
    watchdog_keeps_coming(manager, "dead TX")
    stop(proc, out, "dead TX")
    manager.close()

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
