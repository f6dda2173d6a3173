#!/usr/bin/env python3
"""Turns the raw outputs of scripts/bench/e2e.sh into the table, the JSON and
the plot. Every figure is a median over the runs, with min..max beside it;
ratios are ratios of medians."""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys

# (owner cost cycles, idle back-off us); the first is the headline: the
# lossless/drop profiles' owner cost and the shipped back-off, nothing tuned.
BACKPRESSURE_SCENARIOS = [(3000, 50), (3000, 10), (10000, 50), (10000, 10)]
HEADLINE = "cost3000_idle_sleep50us"
FORWARDING_LCORES = 2  # lcores 1 and 2 in every configuration
PINNING = "EAL --lcores 0@0,1@0,2@1: main lcore 0 and forwarding lcore 1 on CPU 0, forwarding lcore 2 on CPU 1"

# name, label, how many lcores receive from the wire
CONFIGS = [
    ("testpmd", "testpmd io (baseline)", 2),
    ("demo", "quicsteer demo", 2),
    ("split", "quicsteer split (1 rx + 1 owner)", 1),
    ("split_stack", "quicsteer split, stack mempool", 1),
    ("lossless", "quicsteer lossless (owner cost 3000)", 2),
    ("drop", "quicsteer drop (owner cost 3000)", 2),
    ("distributor", "rte_distributor pipeline", 1),
    ("eventdev", "event_sw atomic pipeline", 1),
    ("eventdev_symmetric", "event_sw atomic, every lcore receives and works", 2),
]


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def pcap_stats(path):
    frames = total = 0
    with open(path, "rb") as f:
        header = f.read(24)
        magic = struct.unpack("<I", header[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            incl = struct.unpack(endian + "IIII", rec)[2]
            f.seek(incl, 1)
            frames += 1
            total += incl
    return frames, total / frames if frames else 0.0


def parse_testpmd(path):
    text = open(path, errors="replace").read()
    blocks = re.findall(r"NIC statistics for port 0 +#+(.*?)#{10,}", text, re.S)
    if len(blocks) < 2:
        raise SystemExit(f"e2e_report: no second 'show port stats' in {path}")
    rx_pps = int(re.search(r"Rx-pps:\s+(\d+)", blocks[-1]).group(1))
    tx_blocks = re.findall(r"NIC statistics for port 1 +#+(.*?)#{10,}", text, re.S)
    tx_pps = int(re.search(r"Tx-pps:\s+(\d+)", tx_blocks[-1]).group(1))
    return rx_pps / 1e6, tx_pps / 1e6


def quicsteer_run(path):
    d = json.load(open(path))
    t = d["total"]
    el = d["elapsed_s"]
    rx = t["rx"]
    drops = t["drops_total"]
    policy_drops = drops["ring_full"] + drops["park_timeout"] + drops["shed_new"]
    unclassifiable = drops["malformed"] + drops["not_udp"]
    lc = {l["lcore"]: l for l in d["lcores"]}
    if not d["mbufs"]["ok"]:
        raise SystemExit(f"e2e_report: {path}: mbufs leaked")
    return {
        "rx_mpps": rx / el / 1e6,
        "tx_mpps": t["tx"] / el / 1e6,
        "lcore1_rx_mpps": lc[1]["rx"] / el / 1e6,
        "software_drop_pct": 100.0 * policy_drops / rx if rx else 0.0,
        "unclassifiable_pct": 100.0 * unclassifiable / rx if rx else 0.0,
        "busy_cycles_per_packet": t["busy_cycles"] / rx if rx else 0.0,
        "tsc_hz": t["tsc_hz"],
    }


def baseline_run(path, name, cycle_keys):
    """One run of a DPDK-native baseline (distributor or eventdev pipeline)."""
    d = json.load(open(path))
    if not d["accounted"] or d["mbufs"]["leaked"] != 0 or d.get("flushed_at_stop", 0) != 0:
        raise SystemExit(f"e2e_report: {path}: the {name} pipeline lost packets or mbufs")
    rx = d["rx"]
    run = {
        "rx_mpps": d["rx_mpps"],
        "tx_mpps": d["tx_mpps"],
        "software_drop_pct": 0.0,
        "unclassifiable_pct": 100.0 * d["unclassifiable"] / rx if rx else 0.0,
        "tsc_hz": d["tsc_hz"],
    }
    run.update({k: d[k] for k in cycle_keys})
    return run


def collect(work, runs):
    per = {name: [] for name, _, _ in CONFIGS}
    for r in range(1, runs + 1):
        rx, tx = parse_testpmd(os.path.join(work, f"testpmd-{r}.txt"))
        per["testpmd"].append({"rx_mpps": rx, "tx_mpps": tx, "software_drop_pct": 0.0, "unclassifiable_pct": 0.0})
        for name in ("demo", "split", "split_stack", "lossless", "drop"):
            per[name].append(quicsteer_run(os.path.join(work, f"{name}-{r}.json")))
        per["distributor"].append(baseline_run(os.path.join(work, f"distributor-{r}.json"), "distributor",
                                                ["distributor_cycles_per_packet"]))
        for name in ("eventdev", "eventdev_symmetric"):
            per[name].append(baseline_run(os.path.join(work, f"{name}-{r}.json"), name,
                                          ["eventdev_cycles_per_packet", "scheduler_cycles_per_packet"]))
    return per


def summarise(per, tsc_hz):
    out = {}
    for name, label, receivers in CONFIGS:
        runs = per[name]
        rx = [x["rx_mpps"] for x in runs]
        entry = {
            "label": label,
            "forwarding_lcores": FORWARDING_LCORES,
            "receiving_lcores": receivers,
            "rx_mpps": spread(rx),
            "tx_mpps": spread([x["tx_mpps"] for x in runs]),
            "mpps_per_lcore": spread([v / FORWARDING_LCORES for v in rx]),
            "mpps_per_receiving_lcore": spread([v / receivers for v in rx]),
            # Every forwarding lcore polls all the time: the lcore-cycles the
            # configuration spends per packet it takes in.
            "lcore_cycles_per_packet": spread([FORWARDING_LCORES * tsc_hz / (v * 1e6) for v in rx]),
            "software_drop_pct": spread([x["software_drop_pct"] for x in runs]),
            "unclassifiable_pct": spread([x["unclassifiable_pct"] for x in runs]),
        }
        if name in ("split", "split_stack"):
            entry["receiving_lcore_mpps"] = spread([x["lcore1_rx_mpps"] for x in runs])
        if name == "distributor":
            entry["distributor_cycles_per_packet"] = spread([x["distributor_cycles_per_packet"] for x in runs])
        if name in ("eventdev", "eventdev_symmetric"):
            for key in ("eventdev_cycles_per_packet", "scheduler_cycles_per_packet"):
                entry[key] = spread([x[key] for x in runs])
        out[name] = entry
    return out


def fmt_spread(s, width=6, prec=2):
    return f"{s['median']:{width}.{prec}f} ({s['min']:.{prec}f}..{s['max']:.{prec}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--cpu", required=True)
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--memory", required=True)
    ap.add_argument("--background", type=float, required=True)
    ap.add_argument("--capture", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--plot", required=True)
    a = ap.parse_args()

    per = collect(a.work, a.runs)
    tsc_hz = per["demo"][0]["tsc_hz"]
    configs = summarise(per, tsc_hz)
    matrix = {}
    for cost, idle in BACKPRESSURE_SCENARIOS:
        matrix[f"cost{cost}_idle_sleep{idle}us"] = json.load(
            open(os.path.join(a.work, f"backpressure-{cost}-{idle}.json")))
    bp = matrix[HEADLINE]
    frames, mean_bytes = pcap_stats(a.capture)

    med = lambda name, key: configs[name][key]["median"]
    ratios = {
        "e2e_vs_testpmd": med("demo", "mpps_per_receiving_lcore") / med("testpmd", "mpps_per_receiving_lcore"),
        "receiver_vs_testpmd": med("split", "receiving_lcore_mpps") / med("testpmd", "mpps_per_receiving_lcore"),
        "receiver_vs_testpmd_stack_mempool": med("split_stack", "receiving_lcore_mpps")
        / med("testpmd", "mpps_per_receiving_lcore"),
        "e2e_vs_distributor": med("demo", "rx_mpps") / med("distributor", "rx_mpps"),
        "e2e_vs_eventdev": med("demo", "rx_mpps") / med("eventdev", "rx_mpps"),
        # Informational, no target: event_sw with both lcores receiving, as
        # quicsteer's do (the target stays on e2e_vs_eventdev).
        "e2e_vs_eventdev_symmetric": med("demo", "rx_mpps") / med("eventdev_symmetric", "rx_mpps"),
        "park_vs_drop_goodput": bp["ratios"]["park_vs_drop_goodput"],
        "park_vs_drop_cycles_per_offered": bp["ratios"]["park_vs_drop_cycles_per_offered"],
        "park_vs_drop_receiver_cycles_per_offered": bp["ratios"]["park_vs_drop_receiver_cycles_per_offered"],
        "park_vs_drop_cpu_time_per_offered": bp["ratios"]["park_vs_drop_cpu_time_per_offered"],
        "park_vs_drop_receiver_cpu_time_per_offered": bp["ratios"]["park_vs_drop_receiver_cpu_time_per_offered"],
    }
    targets = {
        "e2e_vs_testpmd": {"target": ">= 0.8", "met": ratios["e2e_vs_testpmd"] >= 0.8},
        "receiver_vs_testpmd": {"target": ">= 0.8", "met": ratios["receiver_vs_testpmd"] >= 0.8},
        "e2e_vs_distributor": {"target": ">= 1.5", "met": ratios["e2e_vs_distributor"] >= 1.5},
        "e2e_vs_eventdev": {"target": ">= 2", "met": ratios["e2e_vs_eventdev"] >= 2},
        "park_vs_drop_goodput": {"target": ">= 0.95", "met": ratios["park_vs_drop_goodput"] >= 0.95},
        "park_vs_drop_cycles_per_offered": {"target": "< 1", "met": ratios["park_vs_drop_cycles_per_offered"] < 1},
    }

    # The table.
    print()
    print(f"CPU {a.cpu}, {a.cpus} CPUs, TSC {tsc_hz / 1e9:.3f} GHz; {PINNING}")
    print(f"background load before the runs: {a.background:.2f} of {a.cpus} CPUs busy")
    print(f"capture {a.capture}: {frames} frames, {mean_bytes:.0f} bytes on average; "
          f"median of {a.runs} runs of {a.seconds:g} s (min..max)")
    hdr = f"{'configuration':48} {'RX Mpps':>22} {'Mpps/rx lcore':>14} {'TX Mpps':>8} {'sw drop':>8} {'cyc/pkt':>8} {'vs testpmd':>10}"
    print(hdr)
    print("-" * len(hdr))
    base = med("testpmd", "mpps_per_receiving_lcore")
    for name, label, _ in CONFIGS:
        c = configs[name]
        print(f"{label:48} {fmt_spread(c['rx_mpps'])} {c['mpps_per_receiving_lcore']['median']:14.2f} "
              f"{c['tx_mpps']['median']:8.2f} {c['software_drop_pct']['median']:7.1f}% "
              f"{c['lcore_cycles_per_packet']['median']:8.0f} {c['mpps_per_receiving_lcore']['median'] / base:10.2f}")
    print("  Mpps/rx lcore: RX Mpps over the lcores that poll the wire; cyc/pkt: 2 forwarding lcores' TSC cycles per")
    print(f"  packet taken in. Unclassifiable frames (freed by quicsteer and both DPDK pipelines, forwarded by testpmd): "
          f"{configs['demo']['unclassifiable_pct']['median']:.1f}% of the capture.")
    print(f"  rte_distributor_process: {configs['distributor']['distributor_cycles_per_packet']['median']:.0f} "
          "TSC cycles per packet, waits for the worker included")
    print(f"  event_sw: {configs['eventdev']['eventdev_cycles_per_packet']['median']:.0f} TSC cycles per packet in the "
          f"producer's enqueues and scheduler iterations (scheduler "
          f"{configs['eventdev']['scheduler_cycles_per_packet']['median']:.0f}), on the receiving lcore")
    print(f"  event_sw symmetric: {configs['eventdev_symmetric']['eventdev_cycles_per_packet']['median']:.0f} TSC "
          f"cycles per packet in both lcores' enqueues and scheduler iterations (scheduler "
          f"{configs['eventdev_symmetric']['scheduler_cycles_per_packet']['median']:.0f})")
    p, d = bp["park"]["median"], bp["drop"]["median"]
    sc = bp["scenario"]
    print()
    print(f"back-pressure (headline: {HEADLINE}): owner cost {sc['owner_cost_cycles']} cycles/packet, offered "
          f"{sc['offered_mpps']:.3f} Mpps ({sc['overload']:.1f}x its capacity), idle back-off "
          f"{sc['idle_sleep_us']} us; {sc['pinning']}")
    print(f"{'policy':8} {'goodput Mpps':>22} {'missed at RX':>13} {'sw drops':>9} {'busy cyc/offered':>17} "
          f"{'(receiver)':>10} {'CPU cyc/offered':>16} {'(receiver)':>10}")
    for name, m in (("park", p), ("drop", d)):
        print(f"{name:8} {fmt_spread(m['goodput_mpps'], 7, 3)} {m['missed_at_rx_pct']['median']:12.1f}% "
              f"{m['software_drop_pct']['median']:8.1f}% {m['cycles_per_offered']['median']:17.0f} "
              f"{m['receiver_cycles_per_offered']['median']:10.0f} {m['cpu_time_cycles_per_offered']['median']:16.0f} "
              f"{m['receiver_cpu_time_cycles_per_offered']['median']:10.0f}")
    print("  busy cyc: the lcores' busy_cycles (TSC time of iterations that moved packets); CPU cyc: the kernel's")
    print("  CPU time of the lcore threads (schedstat), idle polling included; both per offered packet")
    print("park/drop by scenario (goodput, busy cycles per offered, CPU time per offered):")
    for key, s in matrix.items():
        r = s["ratios"]
        print(f"  {key:26} goodput {r['park_vs_drop_goodput']:.3f}  busy cycles "
              f"{r['park_vs_drop_cycles_per_offered']:.3f}  CPU time {r['park_vs_drop_cpu_time_per_offered']:.3f}"
              f"{'  (headline)' if key == HEADLINE else ''}")
    print()
    print("ratios (targets):")
    for k, v in ratios.items():
        t = targets.get(k)
        mark = "" if t is None else f"  target {t['target']}: {'met' if t['met'] else 'NOT met'}"
        print(f"  {k:42} {v:6.3f}{mark}")

    result = {
        "hardware": {"cpu": a.cpu, "cpus": a.cpus, "tsc_hz": tsc_hz, "pinning": PINNING,
                     "memory": a.memory,
                     "background_cpus_busy_before_runs": a.background,
                     "oversubscribed": "3 EAL lcores on 2 CPUs: the idle main lcore shares CPU 0 with forwarding lcore 1"},
        "capture": {"path": a.capture, "frames": frames, "mean_frame_bytes": mean_bytes},
        "runs": a.runs,
        "seconds_per_run": a.seconds,
        "configs": configs,
        "backpressure": dict(bp, headline=HEADLINE),
        "backpressure_scenarios": matrix,
        "ratios": ratios,
        "targets": targets,
    }
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"\nwritten: {a.json}")
    plot(a, configs, matrix)
    print(f"written: {a.plot}")


def plot(a, configs, matrix):
    data = os.path.join(a.work, "mpps.dat")
    with open(data, "w") as f:
        for name, label, _ in CONFIGS:
            c = configs[name]
            tot, per = c["rx_mpps"], c["mpps_per_receiving_lcore"]
            f.write(f"\"{label}\" {tot['median']} {tot['min']} {tot['max']} {per['median']} {per['min']} {per['max']}\n")
    bpdata = os.path.join(a.work, "bp.dat")
    with open(bpdata, "w") as f:
        for cost, idle in BACKPRESSURE_SCENARIOS:
            bp = matrix[f"cost{cost}_idle_sleep{idle}us"]
            for name in ("park", "drop"):
                m = bp[name]["median"]
                delivered = 100.0 * m["goodput_mpps"]["median"] / m["offered_mpps"]["median"]
                f.write(f"\"{name} {cost}/{idle}\" {delivered} {m['missed_at_rx_pct']['median']} "
                        f"{m['software_drop_pct']['median']} {m['unclassifiable_pct']['median']}\n")
    script = f"""
set terminal png size 1500,600 font ",10"
set termoption noenhanced
set output '{a.plot}'
set multiplot layout 1,2 title "quicsteer end to end: {a.cpu}, {a.cpus} CPUs, virtual devices; median and min..max of {a.runs} runs"
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set ylabel "Mpps"
set xtics rotate by -25 scale 0 font ",9"
set key top right
set yrange [0:*]
set grid ytics
set title "net_pcap -> net_null, 2 forwarding lcores"
plot '{data}' using 2:3:4:xtic(1) title "RX Mpps (whole pipeline)", \\
     '' using 5:6:7 title "Mpps per receiving lcore"
set style histogram rowstacked
set style data histogram
set xtics rotate by -25 scale 0 font ",9"
set ylabel "% of offered packets"
set yrange [0:105]
set key below horizontal
set title "Back-pressure at 2x one owner's capacity (policy owner-cycles/idle-sleep-us)"
plot '{bpdata}' using 2:xtic(1) title "delivered", '' using 3 title "missed at RX (no CPU spent)", \\
     '' using 4 title "dropped in software", '' using 5 title "unclassifiable"
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    sys.exit(main())
