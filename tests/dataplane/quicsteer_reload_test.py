#!/usr/bin/env python3
"""A large steering reload does not stall the control loop (issue 29, item 14).

usage: quicsteer_reload_test.py BUILD_DIR SOURCE_DIR

quicsteer starts with two servers, then its profile file is rewritten with
100,000 servers (3.7 MB, seconds to read and build) and SIGHUP asks for a
reload. While /quicsteer/steering says the reload is running:
  - the control loop still publishes: /quicsteer/totals, read between two
    /quicsteer/steering answers that both say "running", shows a snapshot
    taken after the reload started;
  - two more SIGHUPs merge into exactly one more reload after it.
Then a SIGINT during a reload stops quicsteer (exit 0), the reload dropped.
Everything is ordered by what quicsteer says, not by how long it takes.
"""
import os
import signal
import sys
import tempfile

from qs_harness import check, eal, failures, require_telemetry, start, stop, telemetry, wait_for, write

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
PREFIX = f"qs-reload-{os.getpid()}"
SERVERS = 100000


def profile_text(servers):
    routes = ",\n".join(f'    {{server_id: "{0x010000 + i:06x}", owner: {1 + i % 2}}}' for i in range(servers))
    return f"""eal: {eal(PREFIX)}
ports:
  - {{name: wire, device: "net_null0,no-rx=1", rx_queues: 2, tx_queues: 2}}
mempool: {{mbufs: 8191, cache: 64}}
lcores:
  - {{id: 1, rx: ["wire:0"], owner: true}}
  - {{id: 2, rx: ["wire:1"], owner: true}}
steering:
  quic_lb: [{{config_id: 0, server_id_len: 3, nonce_len: 6, key: "3c72551026fbace916b856e563795118"}}]
  servers: [
{routes}]
action: {{type: forward, tx_port: wire}}
polling: {{idle_sleep_us: 50}}
stats: {{period_ms: 100}}
"""


require_telemetry()

with tempfile.TemporaryDirectory() as tmp:
    path = write(os.path.join(tmp, "live.yaml"), profile_text(2))
    big = profile_text(SERVERS)
    proc, out = start([QUICSTEER, "--", "--profile", path])
    first = wait_for("telemetry to answer", lambda: telemetry(PREFIX, "/quicsteer/steering", "/quicsteer/totals"))
    check(first is not None and first[0].get("reload_running") == 0 and first[0].get("servers") == 2,
          f"/quicsteer/steering: two servers, no reload running: {first and first[0]}")

    write(path, big)
    proc.send_signal(signal.SIGHUP)
    running = wait_for("/quicsteer/steering to show the reload running",
                       lambda: (lambda a: a if a and a[0].get("reload_running") == 1 else None)(
                           telemetry(PREFIX, "/quicsteer/steering", "/quicsteer/totals")))
    started_ms = running[1]["elapsed_ms"] if running else 0
    # Two more while it runs: they make one more reload, after this one.
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGHUP)

    # A snapshot published after the reload started, read while it still runs
    # (the /quicsteer/steering answers before and after it say so).
    seen = {}

    def published_during_reload():
        a = telemetry(PREFIX, "/quicsteer/steering", "/quicsteer/totals", "/quicsteer/steering")
        if a is None:
            return None
        before, totals, after = a
        if before.get("reloads_applied") != 0 or after.get("reloads_applied") != 0:
            seen["finished"] = True
            return True
        if before.get("reload_running") == 1 and after.get("reload_running") == 1 and totals["elapsed_ms"] > started_ms:
            seen["during"] = totals["elapsed_ms"]
            return True
        return None
    wait_for("a snapshot published during the reload", published_during_reload)
    check("during" in seen and "finished" not in seen,
          f"the control loop published a snapshot (elapsed {seen.get('during')} ms, reload started by "
          f"{started_ms} ms) while the reload ran: {seen}")

    done = wait_for("the merged second reload", lambda: (lambda a: a if a and a[0].get("reloads_applied") == 2
                                                         and a[0].get("reload_running") == 0 else None)(
        telemetry(PREFIX, "/quicsteer/steering")))
    check(done is not None and done[0].get("servers") == SERVERS and done[0].get("generation") == 3,
          f"two reloads applied, {SERVERS} servers live: {done and done[0]}")
    # quicsteer publishes the reload's outcome before it prints its log line,
    # and the line reaches out.text() through a pipe and a reader thread:
    # wait for the line rather than read the text at once.
    text = wait_for("the second reload's log line",
                    lambda: (lambda t: t if t.count("reload (SIGHUP) applied") >= 2 else None)(out.text())) \
        or out.text()
    check(text.count("reload (SIGHUP) reading") == 2 and text.count("reload (SIGHUP) applied") == 2,
          "three SIGHUPs, the last two during the first reload, made two reloads")
    check(f"servers 2 -> {SERVERS}" in text and f"servers {SERVERS} -> {SERVERS}" in text,
          "the first reload took the profile from 2 to 100,000 servers, the second kept them")

    # SIGINT while a reload runs: quicsteer waits for it, drops it and stops.
    proc.send_signal(signal.SIGHUP)
    wait_for("the third reload to run", lambda: (lambda a: a if a and a[0].get("reload_running") == 1 else None)(
        telemetry(PREFIX, "/quicsteer/steering")))
    stop(proc, out)
    text = out.text()
    check(proc.returncode == 0, f"quicsteer exits 0 on SIGINT during a reload: {text[-500:]}")
    check("stopping on SIGINT" in text and text.count("reload (SIGHUP) applied") == 2
          and "generation 3 live at the end" in text, "the reload under way at SIGINT was dropped")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
