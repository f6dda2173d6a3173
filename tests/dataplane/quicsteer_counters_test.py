#!/usr/bin/env python3
"""Every counter in every output (issue 29).

usage: quicsteer_counters_test.py BUILD_DIR SOURCE_DIR

`quicsteer --list-counters` prints the one list of counters
(dataplane/control/counter_fields.h). quicsteer then replays a quicgen
capture once through net_pcap -> net_null to two backends, and each counter
of the list must appear, under its name, in every place of its scope: the
end-of-run summary, the stats JSON, the telemetry commands and the
Prometheus scrape (its sample name and label).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from qs_harness import (QUIC_LB_0, TWO_SERVERS, check, eal, failures, pcap_profile, prometheus_port, require_telemetry,
                        scrape, start, stop, telemetry, wait_for, write)

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")
PREFIX = f"qs-counters-{os.getpid()}"
SCOPES = ("receive", "queue", "owner", "lcore", "ring", "port", "forwarding", "backend", "exception", "peer_sync",
          "backend_health", "health_checks")
# The exception path's and the health checks' counters need a TAP (root,
# /dev/net/tun), peer sync's a profile of its own: runs of their own
# (exception_run, peer_sync_run, health_run).
MAIN_RUN_SCOPES = SCOPES[:-4]


def profile_text(pcap, json_path, fleet):
    """Two lcores that receive and own, the capture replayed once on two RX
    queues; QUIC-LB server IDs 0001 and 0002 belong to two servers, or
    (`fleet`) to two backends delivered to over l2."""
    if fleet:
        owners = """backends:
  - {name: b0, server_ids: ["0001"], ipv4: 10.9.0.10, mac: "02:00:00:09:00:10", weight: 1, state: active}
  - {name: b1, server_ids: ["0002"], ipv4: 10.9.0.11, mac: "02:00:00:09:00:11", weight: 1, state: active}
action: {type: forward, tx_port: sink, delivery: {mode: l2}}"""
    else:
        owners = TWO_SERVERS
    return pcap_profile(eal(PREFIX), pcap, json_path, 100, 'telemetry: {prometheus_listen: "127.0.0.1:0"}\n',
                        forever=False, steering=f"steering:\n  quic_lb: [{QUIC_LB_0}]\n{owners}")


def summary_blocks(text):
    """The summary's counter lines by scope: {scope: [text of each block]}.
    A block is a heading line and the lines wrapped under it."""
    text = text[text.find("== quicsteer summary"):]
    blocks = {s: [] for s in SCOPES}
    headings = [(re.compile(r"^    exception \S+ (arp|nd|bgp|bfd|link|icmp|other) +\w+ \d"), "exception"), (re.compile(r"^    receive {2,}\S"), "receive"), (re.compile(r"^    queues {2,}\S"), "queue"),
                (re.compile(r"^    owner {2,}\S"), "owner"), (re.compile(r"^    lcores {2,}\S"), "lcore"),
                (re.compile(r"^    forwarding {2,}\S"), "forwarding"), (re.compile(r"^    ring \d+->\d+ "), "ring"),
                (re.compile(r"^  port \S+ "), "port"), (re.compile(r"^    peer sync {2,}\S"), "peer_sync"),
                (re.compile(r"^    health checks +\S"), "health_checks")]
    scope, in_backends = None, False
    for line in text.splitlines():
        if scope and line.startswith(" " * 16):
            blocks[scope][-1] += line + "\n"
            continue
        scope = next((s for h, s in headings if h.match(line)), None)
        if scope:
            blocks[scope].append(line + "\n")
            continue
        if line.startswith("  backends"):
            in_backends = True
        elif in_backends and line.startswith("    "):
            blocks["backend"].append(line + "\n")
        else:
            in_backends = False
    return blocks


def in_summary(block, name):
    return re.search(rf"(^|\s){re.escape(name)} \d+(\s|$)", block) is not None


def run_quicsteer(profile, json_path, what, ready):
    """quicsteer on `profile` until `ready()` (telemetry, asked while it
    runs) gives an answer, waited for as `what`; Prometheus scraped at that
    moment; then stopped, which must be clean. (the answer, the scraped
    samples {(name, frozenset(labels)): value}, the stats JSON it wrote at
    the end, the summary's blocks by scope)."""
    proc, out = start([QUICSTEER, "--", "--profile", profile])
    port = prometheus_port(out)
    answer = wait_for(what, ready)
    families, _, _ = scrape(port)
    scraped = {(s.name, frozenset(s.labels.items())): s.value for family in families.values() for s in family.samples}
    stop(proc, out)
    check(proc.returncode == 0, f"quicsteer on {os.path.basename(profile)} stops cleanly ({proc.returncode})")
    with open(json_path) as f:
        stats = json.load(f)
    return answer, scraped, stats, summary_blocks(out.text())


require_telemetry()

# The one list.
r = subprocess.run([QUICSTEER, "--list-counters"], capture_output=True, text=True, timeout=60)
check(r.returncode == 0, f"--list-counters exits 0: {r.stderr.strip()[-200:]}")
rows = [line.split("\t") for line in r.stdout.splitlines()]
check(len(rows) > 40 and all(len(row) == 6 for row in rows), f"--list-counters: {len(rows)} rows of 6 columns")
counters = [dict(zip(("scope", "name", "metric", "kind", "unit", "help"), row)) for row in rows if len(row) == 6]
check({c["scope"] for c in counters} == set(SCOPES), f"every scope has counters: {sorted({c['scope'] for c in counters})}")
check(all(c["kind"] in ("counter", "gauge") and c["help"] for c in counters), "each counter has a kind and a help text")
check(len({(c["scope"], c["name"]) for c in counters}) == len(counters), "no counter is listed twice in its scope")
check(len({c["metric"] for c in counters}) == len(counters), "no two counters share a Prometheus sample")
check(all(c["metric"].split("{")[0].endswith("_total") == (c["kind"] == "counter") for c in counters),
      "Prometheus counters end in _total, gauges do not")
for name in ("connections_untracked", "tx_held_now", "tx_held_us", "parked_us", "doorbell_wakes", "high_water",
             "over_budget", "lost_races"):
    check(any(c["name"] == name for c in counters), f"{name} is in the list")

with tempfile.TemporaryDirectory() as tmp:
    pcap = os.path.join(tmp, "t.pcap")
    json_path = os.path.join(tmp, "stats.json")
    gen = os.path.join(tmp, "gen.yaml")
    write(gen, profile_text(pcap, json_path, fleet=False))
    r = subprocess.run([QUICGEN, "--profile", gen, "--out", pcap, "--connections", "100", "--seed", "3"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and os.path.getsize(pcap) > 0, f"quicgen wrote the capture: {r.stderr.strip()[-200:]}")
    profile = write(os.path.join(tmp, "run.yaml"), profile_text(pcap, json_path, fleet=True))
    commands = ["/quicsteer/totals", "/quicsteer/lcores", "/quicsteer/queues", "/quicsteer/rings", "/quicsteer/ports",
                "/quicsteer/forwarding", "/quicsteer/backends"]

    def replayed():
        """Every command's answer, once the capture is through."""
        answer = telemetry(PREFIX, "/quicsteer/totals")
        if not answer or answer[0].get("rx", 0) == 0:
            return None
        # Both queues are through the capture once the count stops moving.
        again = telemetry(PREFIX, *commands)
        return again if again and again[0].get("rx") == answer[0]["rx"] else None

    answers, scraped, stats, blocks = run_quicsteer(
        profile, json_path, "the capture to be replayed and every telemetry command to answer", replayed)
    tel = dict(zip(commands, answers or [{}] * len(commands)))

    lcores = list(tel["/quicsteer/lcores"].values())
    owners_tel = [l for l in lcores if l.get("owner_index", -1) >= 0]
    owners_json = [l for l in stats["lcores"] if l["owner_index"] >= 0]
    # Where each scope's counters are, per output: every item must have each.
    json_items = {"receive": [stats["total"]] + stats["lcores"] + stats["queues"], "queue": stats["queues"],
                  "owner": [stats["total"]] + owners_json, "lcore": stats["lcores"], "ring": stats["rings"],
                  "port": stats["ports"], "forwarding": [stats["forwarding"]], "backend": stats["backends"]}
    tel_items = {"receive": [tel["/quicsteer/totals"]] + lcores + list(tel["/quicsteer/queues"].values()),
                 "queue": list(tel["/quicsteer/queues"].values()), "owner": [tel["/quicsteer/totals"]] + owners_tel,
                 "lcore": lcores, "ring": list(tel["/quicsteer/rings"].values()),
                 "port": list(tel["/quicsteer/ports"].values()), "forwarding": [tel["/quicsteer/forwarding"]],
                 "backend": list(tel["/quicsteer/backends"].values())}
    for scope in MAIN_RUN_SCOPES:
        check(len(json_items[scope]) > 0 and len(tel_items[scope]) > 0 and len(blocks[scope]) > 0,
              f"{scope}: the run has some ({len(json_items[scope])} in the JSON, {len(tel_items[scope])} in telemetry, "
              f"{len(blocks[scope])} in the summary)")
    check(len(stats["backends"]) == 2 and len(blocks["backend"]) == 2, "both backends are reported")

    missing = {"summary": [], "JSON": [], "telemetry": [], "Prometheus": []}
    for c in counters:
        scope, name = c["scope"], c["name"]
        if scope not in MAIN_RUN_SCOPES:
            continue
        if not blocks[scope] or not all(in_summary(b, name) for b in blocks[scope]):
            missing["summary"].append(f"{scope}.{name}")
        if not json_items[scope] or not all(isinstance(item.get(name), int) for item in json_items[scope]):
            missing["JSON"].append(f"{scope}.{name}")
        if not tel_items[scope] or not all(isinstance(item.get(name), int) for item in tel_items[scope]):
            missing["telemetry"].append(f"{scope}.{name}")
        sample = re.fullmatch(r'(\w+)(?:\{(\w+)="([^"]*)"\})?', c["metric"])
        wanted_label = {(sample.group(2), sample.group(3))} if sample and sample.group(2) else set()
        if not sample or not any(n == sample.group(1) and wanted_label <= labels for n, labels in scraped):
            missing["Prometheus"].append(f"{scope}.{name} ({c['metric']})")
    for output, names in missing.items():
        check(not names, f"every counter of the list is in the {output}: missing {names}")

    # Times kept in microseconds are scraped in seconds, to the microsecond
    # (the capture was through before the scrape: nothing moved since; a
    # replay this short seldom parks, counter_fields_test has one that did).
    parked = {(str(q["lcore"]), q["port"], str(q["queue"])): q["parked_us"] for q in stats["queues"]}
    scraped_parked = {(dict(labels)["lcore"], dict(labels)["port"], dict(labels)["queue"]): round(value * 1e6)
                      for (name, labels), value in scraped.items() if name == "quicsteer_parked_seconds_total"}
    check(len(scraped_parked) == len(stats["queues"]) and scraped_parked == parked,
          f"quicsteer_parked_seconds_total is parked_us in seconds: {scraped_parked} vs {parked}")


def missing_in_outputs(scope, rows, blocks, scraped, labels):
    """The counters of `scope` that some JSON or telemetry row, summary block
    or Prometheus sample (with `labels` and the counter's own) lacks."""
    missing = []
    for c in counters:
        if c["scope"] != scope:
            continue
        name = c["name"]
        if not all(isinstance(r.get(name), int) for r in rows) or not all(in_summary(b, name) for b in blocks):
            missing.append(name)
        sample = re.fullmatch(r'(\w+)(?:\{(\w+)="([^"]*)"\})?', c["metric"])
        want = labels | ({(sample.group(2), sample.group(3))} if sample.group(2) else set())
        if not any(n == sample.group(1) and want <= got for n, got in scraped):
            missing.append(f"{name} (Prometheus {c['metric']})")
    return missing


def tap_profile(prefix, tap_stem, json_path, rest):
    """One lcore on a net_null port (nothing received) with services and a
    TAP named TAP_STEM + pid, and `rest` (the action and what goes with it)."""
    tap = f"{tap_stem}{os.getpid() % 100000}"
    return f"""eal: {eal(prefix)}
ports:
  - {{name: wire, device: "net_null0,no-rx=1", rx_queues: 1, tx_queues: 2, rss: false, tap: {tap}}}
mempool: {{mbufs: 4095, cache: 32}}
lcores: [{{id: 1, rx: ["wire:0"], owner: true}}]
services: [{{addresses: [10.9.9.9], udp_ports: [443]}}]
{rest}polling: {{idle_sleep_us: 100}}
telemetry: {{prometheus_listen: "127.0.0.1:0"}}
stats: {{period_ms: 100, json: "{json_path}"}}
"""


def exception_run(tmp):
    """A port with services and a TAP (net_null, nothing received): each of
    its classes is a row of the exception scope in every output, zeros
    included; the kernel's own frames on the TAP (IPv6 router solicitations,
    MLD) are counted as from_kernel."""
    json_path = os.path.join(tmp, "exception.json")
    prefix = PREFIX + "-x"
    profile = write(os.path.join(tmp, "exception.yaml"), tap_profile(prefix, "qsct", json_path, "action: {type: sink}\n"))
    answers, scraped, stats, by_scope = run_quicsteer(profile, json_path, "/quicsteer/exception to answer",
                                                      lambda: telemetry(prefix, "/quicsteer/exception"))
    rows_tel = list(answers[0].values()) if answers else []
    rows_json = stats["exception"]
    blocks = by_scope["exception"]
    classes = {"arp", "nd", "bgp", "bfd", "link", "icmp", "other"}
    check({r["class"] for r in rows_json} == classes and len(rows_json) == 7, f"a JSON row per class: {rows_json}")
    check(len(rows_tel) == 7 and len(blocks) == 7, f"7 rows in telemetry ({len(rows_tel)}) and the summary ({len(blocks)})")
    missing = missing_in_outputs("exception", rows_json + rows_tel, blocks, scraped, {("port", "wire"), ("class", "arp")})
    check(not missing, f"every exception counter is in every output: missing {missing}")


def peer_sync_run(tmp):
    """A fleet profile with peer_sync to a peer that never answers (a
    loopback port nobody binds): one row of the peer_sync scope in every
    output, zeros included; it asked for a copy and gave up after its
    resync_timeout_ms."""
    json_path = os.path.join(tmp, "peer_sync.json")
    prefix = PREFIX + "-s"
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        listen_port = sock.getsockname()[1]
    profile = write(os.path.join(tmp, "peer_sync.yaml"), f"""eal: {eal(prefix)}
ports:
  - {{name: wire, device: "net_null0,no-rx=1", rx_queues: 1, tx_queues: 1, rss: false}}
mempool: {{mbufs: 4095, cache: 32}}
lcores: [{{id: 1, rx: ["wire:0"], owner: true}}]
backends:
  - {{name: b0, ipv4: 10.9.0.10, mac: "02:00:00:09:00:10"}}
action: {{type: forward, tx_port: wire, delivery: {{mode: l2}}}}
peer_sync: {{listen: "127.0.0.1:{listen_port}", peers: ["127.0.0.1:9"], key: "{'5a' * 32}", resync_timeout_ms: 200}}
polling: {{idle_sleep_us: 100}}
telemetry: {{prometheus_listen: "127.0.0.1:0"}}
stats: {{period_ms: 100, json: "{json_path}"}}
""")

    def ready():
        answer = telemetry(prefix, "/quicsteer/peer_sync")
        return answer if answer and list(answer[0].values())[0].get("ready") == 1 else None

    answers, scraped, stats, by_scope = run_quicsteer(profile, json_path,
                                                      "/quicsteer/peer_sync to answer with ready 1", ready)
    rows_tel = list(answers[0].values()) if answers else []
    row_json = stats.get("peer_sync", {})
    blocks = by_scope["peer_sync"]
    check(len(rows_tel) == 1 and len(blocks) == 1, f"one row in telemetry ({len(rows_tel)}) and the summary ({len(blocks)})")
    check(row_json.get("resync_timeouts") == 1 and row_json.get("ready") == 1,
          f"no peer answered: one resync timeout, then ready: {row_json}")
    check(row_json.get("messages_sent", 0) + row_json.get("send_errors", 0) >= 1, f"it asked for a copy: {row_json}")
    missing = missing_in_outputs("peer_sync", [row_json] + rows_tel, blocks, scraped, set())
    check(not missing, f"every peer_sync counter is in every output: missing {missing}")


def health_run(tmp):
    """Backends behind a port with a TAP and health checks: the TAP has no
    address, so no round starts and every backend stays unchecked; each
    backend is a row of the backend_health scope, and the checks one of the
    health_checks scope, in every output, zeros included."""
    json_path = os.path.join(tmp, "health.json")
    prefix = PREFIX + "-h"
    profile = write(os.path.join(tmp, "health.yaml"), tap_profile(prefix, "qsch", json_path, """backends:
  - {name: b0, mac: "02:00:00:09:00:10"}
  - {name: b1, mac: "02:00:00:09:00:11"}
health_checks: {interval_ms: 100, timeout_ms: 50}
action: {type: forward, tx_port: wire, delivery: {mode: l2}}
"""))
    answers, scraped, stats, blocks = run_quicsteer(
        profile, json_path, "/quicsteer/health_checks and /quicsteer/backends to answer",
        lambda: telemetry(prefix, "/quicsteer/health_checks", "/quicsteer/backends"))
    checks_tel = list(answers[0].values()) if answers else []
    backends_tel = list(answers[1].values()) if answers else []
    check(len(checks_tel) == 1 and len(blocks["health_checks"]) == 1 and "health_checks" in stats,
          f"one health_checks row in telemetry ({len(checks_tel)}), the summary and the JSON")
    check(len(backends_tel) == 2 and len(blocks["backend"]) == 2 and len(stats["backends"]) == 2,
          "both backends in telemetry, the summary and the JSON")
    check(all(b.get("health") == "unchecked" for b in stats["backends"] + backends_tel),
          f"no address on the TAP: no round started, every backend unchecked: {stats['backends']}")
    check(all("health unchecked" in b for b in blocks["backend"]), f"the summary's backend lines say so: {blocks['backend']}")
    check(("quicsteer_backend_health", frozenset({("backend", "b0"), ("owner_lcore", "1"), ("health", "unchecked")}))
          in scraped, "quicsteer_backend_health{health} in the scrape")
    missing = missing_in_outputs("health_checks", [stats["health_checks"]] + checks_tel, blocks["health_checks"],
                                 scraped, set())
    missing += missing_in_outputs("backend_health", stats["backends"] + backends_tel, blocks["backend"], scraped,
                                  {("backend", "b0")})
    check(not missing, f"every health counter is in every output: missing {missing}")


with tempfile.TemporaryDirectory() as tmp:
    peer_sync_run(tmp)

if os.geteuid() == 0 and os.access("/dev/net/tun", os.R_OK | os.W_OK):
    with tempfile.TemporaryDirectory() as tmp:
        exception_run(tmp)
    with tempfile.TemporaryDirectory() as tmp:
        health_run(tmp)
else:
    print("note: the exception and health scopes' runs need root and /dev/net/tun; not run")

sys.exit(1 if failures else 0)
