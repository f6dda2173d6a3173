#!/usr/bin/env python3
"""The driver behind scripts/bench.sh pktgen (see pktgen.sh for what it measures)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pktgen"))
import memif_pair  # noqa: E402

LCORES = "(0-2)@(0,1)"  # quicsteer's profile: main lcore + 2 workers floating over both CPUs; testpmd the same


def testpmd(socket, prefix):
    """start_dut/stop_dut for dpdk-testpmd, macswap with TX retry, as the memif client."""
    def start(log):
        p = subprocess.Popen(["dpdk-testpmd", "--lcores", LCORES, "--no-huge", "-m", "1024", "--no-pci",
                              "--file-prefix", prefix, "--log-level", "*:notice",
                              "--vdev", f"net_memif0,role=client,socket={socket},id=0", "--", "-i",
                              "--rxq=1", "--txq=2", "--nb-cores=2", "--burst=32", "--total-num-mbufs=16383"],
                             stdin=subprocess.PIPE, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        give_up = time.monotonic() + 60
        while "testpmd> " not in memif_pair.read(log):
            if p.poll() is not None or time.monotonic() > give_up:
                raise memif_pair.RunError("testpmd did not come up:\n" + memif_pair.read(log)[-2000:])
            time.sleep(0.1)
        p.stdin.write(b"set fwd macswap retry\nstart\n")
        p.stdin.flush()
        return p

    def stop(p):
        try:
            p.stdin.write(b"stop\nquit\n")
            p.stdin.flush()
            p.wait(30)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()
    return start, stop


def quicsteer_profile(source, tmp, socket):
    with open(os.path.join(source, "configs", "memif-pktgen.yaml")) as f:
        text = f.read()
    text = text.replace("socket=/run/quicsteer-memif.sock", f"socket={socket}")
    text = text.replace('"--file-prefix", "quicsteer"', f'"--file-prefix", "qs-bench-{os.getpid()}"')
    text = text.replace("period_ms: 1000", "period_ms: 0")
    path = os.path.join(tmp, "quicsteer.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--json", default="results/pktgen.json")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    if a.runs < 1 or a.seconds < 1:
        sys.exit("pktgen.sh: --runs and --seconds want whole numbers >= 1")
    pktgen = os.environ["PKTGEN"]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"pktgen: CPU {cpu}, {os.cpu_count()} CPUs; pktgen lcores {memif_pair.PKTGEN_LCORES}, "
          f"quicsteer and testpmd lcores {LCORES}; {a.runs} run(s) of {a.seconds} s at 100 % of memif's nominal rate")
    targets = ("quicsteer", "testpmd_macswap")
    runs = {t: [] for t in targets}
    lossfree = {}
    with tempfile.TemporaryDirectory(prefix="qs-pktgen-bench-") as tmp:
        capture = os.path.join(tmp, "capture.pcap")
        info = subprocess.run([os.path.join(a.build, "quicgen"), "--profile",
                               os.path.join(a.source, "configs", "memif-pktgen.yaml"), "--client-to-server-only",
                               "--malformed", "0", "--out", capture], check=True, capture_output=True, text=True)
        print("pktgen: " + info.stdout.strip().replace("quicgen: ", ""))
        socket = f"qs-bench-memif-{os.getpid()}"
        profile = quicsteer_profile(a.source, tmp, socket)

        def dut(target, name):
            if target == "quicsteer":
                stats = os.path.join(tmp, name + ".json")
                start, stop = memif_pair.quicsteer(os.path.join(a.build, "quicsteer"), profile, stats)
                return start, stop, stats
            start, stop = testpmd(socket, f"qs-bench-testpmd-{os.getpid()}")
            return start, stop, None

        def software_drops(stats_path, sent, received):
            """What the target dropped itself."""
            if stats_path is None:  # testpmd: memif loses nothing itself, so what did not come back it dropped
                return sent - received
            with open(stats_path) as f:
                return json.load(f)["total"]["drops_sum"]

        for r in range(1, a.runs + 1):
            for t in targets:
                name = f"{t}-replay-{r}"
                start, stop, stats = dut(t, name)
                log, _ = memif_pair.run(pktgen, tmp, name, "replay.lua", capture, socket,
                                        {"QS_RATE": 100, "QS_DURATION": a.seconds}, start, stop)
                sent, received = memif_pair.replay_totals(log)
                m = re.search(r"lost -?\d+ \([\d.]+%\), ([\d.]+) s", log)
                elapsed = float(m.group(1))
                row = {"sent": sent, "received": received, "lost": sent - received,
                       "software_drops": software_drops(stats, sent, received), "seconds": elapsed,
                       "mpps_received": received / elapsed / 1e6}
                runs[t].append(row)
                print(f"  run {r} {t:16s} sent {sent:10d} received {received:10d} lost {sent - received:8d} "
                      f"software drops {row['software_drops']:8d}  {row['mpps_received']:.3f} Mpps")
        for t in targets:
            name = f"{t}-lossfree"
            start, stop, stats = dut(t, name)
            log, _ = memif_pair.run(pktgen, tmp, name, "find_lossfree_rate.lua", capture, socket,
                                    {"QS_TRIAL": a.seconds, "QS_MIN_RATE": 1, "QS_PRECISION": 2}, start, stop,
                                    timeout=1800)
            trials, best = memif_pair.lossfree_result(log)
            sent = sum(x[1] for x in trials)
            received = sum(x[2] for x in trials)
            best_pps = max((x[3] for x in trials if x[0] == best), default=0.0)
            lossfree[t] = {"lossfree_rate_percent": best, "lossfree_mpps": best_pps / 1e6,
                           "trials": [{"rate_percent": x[0], "sent": x[1], "received": x[2], "pps": x[3]}
                                      for x in trials],
                           "lossfree_software_drops": software_drops(stats, sent, received)}
            print(f"  loss-free {t:16s} {best if best is not None else 'none'}% of link, "
                  f"{best_pps / 1e6:.3f} Mpps, {len(trials)} trial(s), software drops {lossfree[t]['lossfree_software_drops']}")

    result = {"benchmark": "pktgen", "hardware": {"cpu": cpu, "cpus": os.cpu_count(), "nic": "none (net_memif pair)"},
              "runs": a.runs, "seconds": a.seconds, "targets": {}}
    for t in targets:
        rows = runs[t]
        result["targets"][t] = {
            "sent": summary([x["sent"] for x in rows]), "received": summary([x["received"] for x in rows]),
            "lost": summary([x["lost"] for x in rows]),
            "software_drops": summary([x["software_drops"] for x in rows]),
            "mpps_received": summary([x["mpps_received"] for x in rows]), **lossfree[t]}
    q = result["targets"]["quicsteer"]["mpps_received"]["median"]
    b = result["targets"]["testpmd_macswap"]["mpps_received"]["median"]
    ratio = q / b if b else 0.0
    zero = all(x["software_drops"] == 0 for x in runs["quicsteer"]) and lossfree["quicsteer"]["lossfree_software_drops"] == 0
    result["ratios"] = {"pktgen_quicsteer_vs_testpmd_macswap": ratio}
    result["targets_met"] = {"pktgen_quicsteer_vs_testpmd_macswap >= 0.8": ratio >= 0.8,
                             "quicsteer_zero_software_drops": zero}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
    print("\n| target | received Mpps, median (min..max) | lost, median | software drops, median | loss-free rate |")
    print("|---|---|---|---|---|")
    for t in targets:
        x = result["targets"][t]
        m = x["mpps_received"]
        print(f"| {t} | {m['median']:.3f} ({m['min']:.3f}..{m['max']:.3f}) | {x['lost']['median']} | "
              f"{x['software_drops']['median']} | {x['lossfree_rate_percent']}% ({x['lossfree_mpps']:.3f} Mpps) |")
    print(f"\nratio pktgen_quicsteer_vs_testpmd_macswap = {ratio:.2f} (target >= 0.8: {'met' if ratio >= 0.8 else 'not met'}); "
          f"quicsteer software drops zero in every run: {'yes' if zero else 'NO'}")
    print(f"pktgen: wrote {a.json}")


if __name__ == "__main__":
    try:
        main()
    except memif_pair.RunError as e:
        sys.exit(f"pktgen.sh: {e}")
