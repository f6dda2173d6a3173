#!/usr/bin/env python3
"""Operating quicsteer live (issue 14), with the real binary and real clients.

usage: quicsteer_live_test.py BUILD_DIR SOURCE_DIR

quicsteer replays a quicgen capture (QUIC-LB config 0) once through
net_pcap -> net_null, with its own EAL --file-prefix. Then:
  - every /quicsteer/* telemetry command answers through Debian's
    dpdk-telemetry.py, as JSON that agrees with the run;
  - steering reloads through /quicsteer/reload: an invalid file, a change the
    data path cannot take and a fallback key change are refused, saying why,
    and leave the live generation alone; a profile that adds config 1 goes
    live (generation 2); SIGHUP after that file (the live profile's, which
    SIGHUP re-reads) was rewritten without config 0 makes generation 3;
  - the Prometheus endpoint, scraped with urllib and parsed with
    prometheus_client's text parser, agrees with the end-of-run JSON.
"""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

from qs_harness import (check, eal, failures, pcap_profile, prometheus_port, require_telemetry, scrape, start, stop,
                        telemetry_socket, wait_for, write)
import qs_harness

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")
PREFIX = f"qs-live-{os.getpid()}"
CONFIG0 = '{config_id: 0, server_id_len: 2, nonce_len: 14, key: "7175696373746565722064656d6f2121"}'
CONFIG1 = '{config_id: 1, server_id_len: 3, nonce_len: 13, key: "0f0e0d0c0b0a09080706050403020100"}'
SERVERS0 = '{server_id: "0001", owner: 1}, {server_id: "0002", owner: 2}'
SERVERS1 = '{server_id: "010001", owner: 2}, {server_id: "010002", owner: 1}'


def profile_text(pcap, json_path, quic_lb, servers, rings=512, fallback_key="000102030405060708090a0b0c0d0e0f",
                 rekey=False):
    # A park timeout longer than the whole run: the checks below count every
    # drop, and an lcore descheduled for longer than the default 10 ms on a
    # loaded machine would otherwise time a parked queue out (park_timeout).
    return pcap_profile(eal(PREFIX), pcap, json_path, 100,
                        'telemetry: {prometheus_listen: "127.0.0.1:0"}\nbackpressure: {park_timeout_us: 10000000}\n',
                        forever=False, steering=f"""rings: {{size: {rings}}}
steering:
  short_dcid_len: 17
  quic_lb: [{quic_lb}]
  servers: [{servers}]
  fallback: {{key: "{fallback_key}", rekey_on_reload: {"true" if rekey else "false"}}}
action: {{type: forward, tx_port: sink}}""")


def pcap_frames(path):
    with open(path, "rb") as f:
        data = f.read()
    at, frames = 24, 0
    while at + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, at + 8)[0]
        at += 16 + caplen
        frames += 1
    return frames


def telemetry(*commands, quiet=False):
    """The harness's telemetry with PREFIX: one JSON answer per command, empty
    ones when it could not answer (`quiet`: no failure is recorded for that,
    the caller waits for an answer)."""
    return qs_harness.telemetry(PREFIX, *commands, quiet=quiet) or [{} for _ in commands]


def samples(families, name):
    """{labels tuple: value} of a family's samples named `name`."""
    family = families.get(re.sub(r"_total$", "", name)) or families.get(name)
    out = {}
    if family is None:
        return out
    for s in family.samples:
        if s.name == name:
            out[tuple(sorted(s.labels.items()))] = s.value
    return out


def value(families, name, **labels):
    return samples(families, name).get(tuple(sorted((k, str(v)) for k, v in labels.items())))


require_telemetry()

with tempfile.TemporaryDirectory() as tmp:
    pcap = os.path.join(tmp, "config0.pcap")
    json_path = os.path.join(tmp, "stats.json")
    both = write(os.path.join(tmp, "both.yaml"),
                 profile_text(pcap, json_path, CONFIG0 + ", " + CONFIG1, SERVERS0 + ", " + SERVERS1))
    live_profile = write(os.path.join(tmp, "live.yaml"), profile_text(pcap, json_path, CONFIG0, SERVERS0))
    r = subprocess.run([QUICGEN, "--profile", both, "--cr", "0", "--connections", "300", "--malformed", "0",
                        "--out", pcap], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"quicgen wrote the capture: {r.stderr.strip()[-200:]}")
    frames = pcap_frames(pcap)
    check(frames > 3000, f"the capture has {frames} frames")

    proc, out = start([QUICSTEER, "--", "--profile", live_profile])
    check("running until SIGINT/SIGTERM" in out.text()
          and "steering generation 1 (QUIC-LB configs: 1, servers: 2)" in out.text(),
          "the start-up line names the live steering generation")
    port = prometheus_port(out)
    socket_path = telemetry_socket(PREFIX)
    check(os.path.exists(socket_path), f"EAL's telemetry socket is at {socket_path} (--no-shconf keeps it)")

    # Both queues replay the capture once; wait until telemetry has seen all of it.
    def settled():
        totals, = telemetry("/quicsteer/totals", quiet=True)
        return totals if totals.get("rx") == 2 * frames and totals.get("processed", 0) + totals.get("drops", 0) == 2 * frames else None
    totals = wait_for("every frame to be received and processed", settled)
    check(totals is not None and totals["steering_generation"] == 1 and totals["drops"] == 0,
          f"/quicsteer/totals: generation 1, every frame received, none dropped: {totals}")

    (steering, lcores, queues, rings, ports, drops, prof, helptext) = telemetry(
        "/quicsteer/steering", "/quicsteer/lcores", "/quicsteer/queues", "/quicsteer/rings", "/quicsteer/ports",
        "/quicsteer/drops", "/quicsteer/profile", "/help,/quicsteer/reload")
    check(steering.get("generation") == 1 and steering.get("quic_lb_config_ids") == [0] and steering.get("servers") == 2,
          f"/quicsteer/steering: generation 1, config [0], 2 servers: {steering}")
    check(sorted(lcores) == ["1", "2"] and all(l["owner_index"] in (0, 1) for l in lcores.values())
          and sum(l["rx"] for l in lcores.values()) == 2 * frames, f"/quicsteer/lcores: both lcores, all frames")
    check(sorted(queues) == ["wire/0", "wire/1"] and all(q["rx"] == frames for q in queues.values()),
          f"/quicsteer/queues: each queue replayed the capture once: { {k: q.get('rx') for k, q in queues.items()} }")
    check(sorted(rings) == ["1_to_2", "2_to_1"] and all(r["capacity"] == 512 for r in rings.values()),
          f"/quicsteer/rings: {rings}")
    check(ports.get("wire", {}).get("ipackets") == 2 * frames and ports.get("sink", {}).get("opackets") == 2 * frames,
          f"/quicsteer/ports: wire received and sink sent every frame")
    check(set(drops) >= {"malformed", "ring_full", "park_timeout", "shutdown"} and sum(drops.values()) == 0,
          f"/quicsteer/drops: every reason, all zero: {drops}")
    check(isinstance(prof, str) and "rekey_on_reload: false" in prof and '"0001"' in prof
          and 'prometheus_listen: "127.0.0.1:0"' in prof, "/quicsteer/profile: the resolved profile")
    check("profile path" in helptext.get("/quicsteer/reload", ""), f"/help,/quicsteer/reload: {helptext}")

    # Bad reloads: each refused, saying why; generation 1 stays live.
    invalid = write(os.path.join(tmp, "invalid.yaml"),
                    profile_text(pcap, json_path, CONFIG0, SERVERS0).replace("short_dcid_len: 17", "short_dcid_len: 21"))
    bigger_rings = write(os.path.join(tmp, "rings.yaml"), profile_text(pcap, json_path, CONFIG0, SERVERS0, rings=1024))
    new_key = write(os.path.join(tmp, "key.yaml"),
                    profile_text(pcap, json_path, CONFIG0, SERVERS0, fallback_key="ff0102030405060708090a0b0c0d0e0f"))
    a_invalid, a_rings, a_key, a_missing, steering = telemetry(
        f"/quicsteer/reload,{invalid}", f"/quicsteer/reload,{bigger_rings}", f"/quicsteer/reload,{new_key}",
        f"/quicsteer/reload,{tmp}/absent.yaml", "/quicsteer/steering")
    check(a_invalid.startswith(f"refused: {invalid}:11:19: steering.short_dcid_len: must be in 0..20")
          and a_invalid.endswith("steering generation 1 stays live"), f"an invalid profile is refused with FILE:LINE:COL: {a_invalid}")
    check(a_rings.startswith(f"refused: {bigger_rings}: rings.size: was '512', now '1024'"),
          f"a ring size change is refused, naming the key: {a_rings}")
    check(a_key.startswith(f"refused: {new_key}: steering.fallback.key: changed") and "rekey_on_reload: true" in a_key,
          f"a fallback key change is refused and says how to force it: {a_key}")
    check(a_missing.startswith("refused: ") and "absent.yaml" in a_missing, f"a missing file is refused: {a_missing}")
    check(steering.get("generation") == 1 and steering.get("quic_lb_config_ids") == [0]
          and steering.get("reloads_refused") == 4 and steering.get("reloads_applied") == 0,
          f"after four refusals generation 1 is still live: {steering}")
    # The line is printed before the answer goes out, but reaches out.text()
    # through a pipe and a reader thread.
    check(wait_for("a refusal's log line", lambda: "reload (/quicsteer/reload) refused:" in out.text()),
          "refusals are printed too")

    # A profile that adds config 1 (new key, new server IDs): generation 2.
    answer, steering = telemetry(f"/quicsteer/reload,{both}", "/quicsteer/steering")
    check(answer.startswith("applied: steering generation 2 is live: QUIC-LB configs [0,1]"),
          f"adding config 1 goes live: {answer}")
    check(steering.get("generation") == 2 and steering.get("quic_lb_config_ids") == [0, 1] and steering.get("servers") == 4
          and steering.get("profile") == both, f"/quicsteer/steering after it: {steering}")
    # The live profile's file (the one the telemetry reload applied, not the
    # one quicsteer started with) now retires config 0; SIGHUP reloads it.
    write(both, profile_text(pcap, json_path, CONFIG1, SERVERS1))
    proc.send_signal(signal.SIGHUP)
    wait_for("the SIGHUP reload", lambda: "reload (SIGHUP) applied: steering generation 3" in out.text())
    steering, totals, prof = telemetry("/quicsteer/steering", "/quicsteer/totals", "/quicsteer/profile")
    check(steering.get("generation") == 3 and steering.get("quic_lb_config_ids") == [1]
          and steering.get("reloads_applied") == 2, f"SIGHUP made generation 3, config [1] only: {steering}")
    check('"0001"' not in prof and '"010001"' in prof, "/quicsteer/profile shows the live steering")
    wait_for("the published snapshot to show generation 3",
             lambda: telemetry("/quicsteer/totals", quiet=True)[0].get("steering_generation") == 3)

    # Prometheus, scraped by a real HTTP client and parsed by prometheus_client.
    families, ctype, body = scrape(port)
    check(ctype.startswith("text/plain; version=0.0.4"), f"exposition format 0.0.4: {ctype}")
    check(value(families, "quicsteer_steering_generation") == 3, "quicsteer_steering_generation 3")
    check(value(families, "quicsteer_steering_reloads_total", result="applied") == 2
          and value(families, "quicsteer_steering_reloads_total", result="refused") == 4,
          "quicsteer_steering_reloads_total by result")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=30)
        check(False, "GET /other: 404")
    except urllib.error.HTTPError as e:
        check(e.code == 404, f"GET /other: {e.code}")

    stop(proc, out)
    check(proc.returncode == 0, f"quicsteer exits 0: {out.text()[-500:]}")
    check("generation 3 live at the end (2 reloads applied)" in out.text(), "the summary names the live generation")
    with open(json_path) as f:
        stats = json.load(f)
    check(stats["steering_generation"] == 3, "the JSON summary names generation 3")

    # Every counter of the scrape agrees with the end-of-run JSON (the traffic
    # was over before the scrape, so none moved since).
    agree = []
    for q in stats["queues"]:
        labels = dict(lcore=q["lcore"], port=q["port"], queue=q["queue"])
        for metric, key in [("quicsteer_rx_packets_total", "rx"), ("quicsteer_enqueued_packets_total", "enqueued"),
                            ("quicsteer_not_quic_packets_total", "not_quic"), ("quicsteer_parks_total", "parks"),
                            ("quicsteer_parked_packets_total", "parked_packets")]:
            agree.append((f"{metric}{labels}", value(families, metric, **labels), q[key]))
        for rule, n in q["routed"].items():
            agree.append((f"routed {rule} {labels}", value(families, "quicsteer_routed_packets_total", rule=rule, **labels), n))
        agree.append((f"steered self {labels}", value(families, "quicsteer_steered_packets_total", to="self", **labels),
                      q["steered_self"]))
        agree.append((f"steered other {labels}", value(families, "quicsteer_steered_packets_total", to="other", **labels),
                      q["steered_other"]))
        for reason, n in q["drops"].items():
            agree.append((f"queue drops {reason} {labels}",
                          value(families, "quicsteer_queue_drops_total", reason=reason, **labels), n))
    for l in stats["lcores"]:
        for reason, n in l["drops"].items():
            agree.append((f"drops {reason} lcore {l['lcore']}",
                          value(families, "quicsteer_drops_total", lcore=l["lcore"], reason=reason),
                          n + l["owner_drops"][reason]))
        if l["owner_index"] >= 0:
            labels = dict(lcore=l["lcore"], owner=l["owner_index"])
            for metric, key in [("quicsteer_owner_processed_packets_total", "processed"),
                                ("quicsteer_owner_dequeued_packets_total", "dequeued"),
                                ("quicsteer_owner_tx_packets_total", "tx"),
                                ("quicsteer_owner_sunk_packets_total", "sunk"),
                                ("quicsteer_connections_total", "connections"),
                                ("quicsteer_cids_total", "cids"),
                                ("quicsteer_migrations_total", "migrations")]:
                agree.append((f"{metric}{labels}", value(families, metric, **labels), l[key]))
    for r in stats["rings"]:
        labels = dict(from_lcore=r["from_lcore"], to_lcore=r["to_lcore"])
        agree.append((f"ring full events {labels}", value(families, "quicsteer_ring_full_events_total", **labels),
                      r["full_events"]))
        agree.append((f"ring capacity {labels}", value(families, "quicsteer_ring_capacity", **labels), r["capacity"]))
    for p in stats["ports"]:
        for metric, key in [("quicsteer_port_rx_packets_total", "ipackets"), ("quicsteer_port_tx_packets_total", "opackets"),
                            ("quicsteer_port_rx_bytes_total", "ibytes"), ("quicsteer_port_tx_bytes_total", "obytes"),
                            ("quicsteer_port_rx_missed_total", "imissed")]:
            agree.append((f"{metric} {p['name']}", value(families, metric, port=p["name"]), p[key]))
    disagree = [(what, scraped, expected) for what, scraped, expected in agree if scraped != expected]
    check(len(agree) > 60 and not disagree,
          f"{len(agree)} scraped values agree with the JSON summary; disagreeing: {disagree[:5]}")
    check(stats["total"]["rx"] == 2 * frames and stats["total"]["drops_sum"] == 0,
          "the run received every frame twice (two queues) and dropped none")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
