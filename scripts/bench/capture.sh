#!/usr/bin/env bash
# scripts/bench.sh capture [--json FILE] [--runs N] [--seconds S]
#
# What capturing a running quicsteer with dpdk-dumpcap costs its lcores. One
# quicsteer runs the demo profile's data path (net_pcap replaying a quicgen
# capture in a loop to net_null, as fast as the lcores take it) on hugepages
# with EAL's shared configuration, so that dpdk-dumpcap can attach. In each of
# N rounds it is measured S seconds without a capture and S seconds with
# dpdk-dumpcap capturing the RX port (all queues, default snap length, to
# /dev/null: the cost of the capture, not of a disk). Per window, from
# quicsteer's Prometheus counters: packets/s received and TSC cycles per packet
# of the lcores' busy loop iterations (the pdump RX callback runs inside
# them). dumpcap runs on the same 2 CPUs, as it would on a small machine.
# Reported: medians (min..max) of both, and the ratios with/without from the
# same rounds; dumpcap's own received/dropped counts. Writes
# results/capture.json (or FILE).
#
# Needs root for hugepages when fewer than 320 MB are free: it reserves the
# difference and gives it back at the end.
source "$(dirname "$0")/lib/common.sh"
source "$root/tests/realquic/realquic_lib.sh"
json=$root/results/capture.json
runs=3
seconds=3
source "$root/scripts/bench/lib/args.sh"
bench_parse_args capture.sh "scripts/bench.sh capture [--json FILE] [--runs N] [--seconds S]" "$@"
build_bench capture.sh quicsteer quicgen
command -v dpdk-dumpcap >/dev/null || { echo "capture.sh: no dpdk-dumpcap (Debian package dpdk)" >&2; exit 1; }
mkdir -p "$(dirname "$json")"

NEED_MB=320  # quicsteer's -m 256 (about 150 used) and dumpcap's capture pool
prefix=qsbcap$$
work=$(mktemp -d /tmp/qs-bench-capture.XXXXXX)
qs_pid=
dc_pid=
cleanup() {
  [ -n "$dc_pid" ] && kill -INT "$dc_pid" 2>/dev/null && wait "$dc_pid" 2>/dev/null
  [ -n "$qs_pid" ] && kill -INT "$qs_pid" 2>/dev/null && wait "$qs_pid" 2>/dev/null
  rq_huge_release "$prefix"
  rm -rf "$work"
}
trap cleanup EXIT

rq_huge_reserve "$NEED_MB" || { echo "capture.sh: $RQ_HUGE_WHY" >&2; exit 1; }

# The demo profile with: this run's capture (100 connections, so that a
# 32767-mbuf pool holds both queues' copies), EAL on hugepages with shared
# configuration under its own prefix, the Prometheus endpoint on, no live
# table, no statistics file, no duration, a TX queue on the wire port.
"$build/quicgen" --profile "$root/configs/demo.yaml" --out "$work/demo.pcap" --connections 100 --seed 1 >/dev/null
python3 - "$root/configs/demo.yaml" "$work" "$prefix" >"$work/profile.yaml" <<'PY'
import re, sys
text, work, prefix = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
def sub(pattern, repl):
    global text
    text, n = re.subn(pattern, repl, text, count=1, flags=re.M | re.S)
    if n != 1:
        sys.exit(f"capture.sh: configs/demo.yaml has no {pattern!r}")
sub(r'^eal: \[.*?\]\n', f'eal: ["--lcores", "(0-2)@(0,1)", "-m", "256", "--file-prefix", "{prefix}", "--no-pci", "--log-level", "*:notice"]\n')
# A path relative to quicsteer's and dumpcap's directory ($work): dpdk-dumpcap,
# a secondary process, opens the replayed capture again from the first 63
# characters of the port's devargs (net_pcap keeps no more for it).
text = text.replace("results/demo.pcap", "demo.pcap")
sub(r'^  json: "results/demo-stats.json"', '  json: ""')
# dpdk-dumpcap 22.11 captures both directions and refuses a port without TX
# queues: the wire port gets one, which nothing sends on.
sub(r'^    tx_queues: 0 [^\n]*', '    tx_queues: 1')
sub(r'^  mbufs: \d+', '  mbufs: 32767')
sub(r'^  period_ms: \d+', '  period_ms: 0')
sub(r'^  prometheus_listen: ""', '  prometheus_listen: "127.0.0.1:0"')
sub(r'^duration_s: [0-9.]+', 'duration_s: 0')
sys.stdout.write(text)
PY

(cd "$work" && exec "$build/quicsteer" -- --profile "$work/profile.yaml" >"$work/quicsteer.out" 2>&1) &
qs_pid=$!
rq_wait_for "$work/quicsteer.out" "running until" 30 "$qs_pid" || { cat "$work/quicsteer.out" >&2; echo "capture.sh: quicsteer did not start" >&2; exit 1; }
grep -q "^capture: dpdk-dumpcap can attach" "$work/quicsteer.out" ||
  { cat "$work/quicsteer.out" >&2; echo "capture.sh: quicsteer did not call rte_pdump_init" >&2; exit 1; }
port=$(rq_metrics_port "$work/quicsteer.out")

# sample LABEL: one line "LABEL monotonic_s rx busy_cycles" into $work/samples.
sample() {
  local sums
  sums=$(rq_metric_sums "" "$port" 'quicsteer_port_rx_packets_total{port="wire"' "quicsteer_lcore_busy_cycles_total{")
  echo "$1 $sums" >>"$work/samples"
}

sleep 1  # warm-up
: >"$work/samples"
: >"$work/dumpcap"
for r in $(seq 1 "$runs"); do
  sample "off$r:start"; sleep "$seconds"; sample "off$r:end"
  (cd "$work" && exec dpdk-dumpcap --file-prefix="$prefix" -i net_pcap0 -w /dev/null >"$work/dumpcap.out" 2>&1) &
  dc_pid=$!
  rq_wait_for "$work/dumpcap.out" "Packets captured:" 20 "$dc_pid" ||
    { cat "$work/dumpcap.out" >&2; echo "capture.sh: dpdk-dumpcap did not attach" >&2; exit 1; }
  sample "on$r:start"; sleep "$seconds"; sample "on$r:end"
  kill -INT "$dc_pid"; wait "$dc_pid" || true; dc_pid=
  sed -n "s/.*Packets received\/dropped on interface '[^']*': \([0-9]*\)\/\([0-9]*\).*/on$r \1 \2/p" "$work/dumpcap.out" >>"$work/dumpcap"
done
kill -INT "$qs_pid"; wait "$qs_pid" || true; qs_pid=

cpu=$(cpu_model)
python3 - "$work/samples" "$work/dumpcap" "$json" "$cpu" "$runs" "$seconds" <<'PY'
import json, statistics, sys
samples_path, dumpcap_path, out, cpu, runs, seconds = sys.argv[1:7]
s = {}
for line in open(samples_path):
    label, t, rx, busy = line.split()
    s[label] = (float(t), int(rx), int(busy))
dc = {line.split()[0]: (int(line.split()[1]), int(line.split()[2])) for line in open(dumpcap_path)}
rounds = []
for r in range(1, int(runs) + 1):
    row = {}
    for mode in ("off", "on"):
        (t0, rx0, b0), (t1, rx1, b1) = s[f"{mode}{r}:start"], s[f"{mode}{r}:end"]
        row[mode] = {"pps": (rx1 - rx0) / (t1 - t0), "cycles_per_packet": (b1 - b0) / max(1, rx1 - rx0),
                     "packets": rx1 - rx0}
    row["dumpcap_received"], row["dumpcap_dropped"] = dc.get(f"on{r}", (None, None))
    rounds.append(row)
def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}
res = {m: {"pps": spread([x[m]["pps"] for x in rounds]),
           "cycles_per_packet": spread([x[m]["cycles_per_packet"] for x in rounds])} for m in ("off", "on")}
ratios = {"cycles_per_packet_with_vs_without_capture": spread([x["on"]["cycles_per_packet"] / x["off"]["cycles_per_packet"] for x in rounds]),
          "pps_with_vs_without_capture": spread([x["on"]["pps"] / x["off"]["pps"] for x in rounds])}
dropped = [x["dumpcap_dropped"] / max(1, x["dumpcap_received"] + x["dumpcap_dropped"]) for x in rounds if x["dumpcap_received"] is not None]
print(f"CPU {cpu}; demo data path (net_pcap -> net_null) on hugepages; {runs} rounds of {seconds} s without and with dpdk-dumpcap")
print(f"{'':28} {'Mpps median (min..max)':>26} {'cycles/packet median (min..max)':>34}")
for m, name in (("off", "without capture"), ("on", "dpdk-dumpcap attached")):
    p, c = res[m]["pps"], res[m]["cycles_per_packet"]
    print(f"{name:28} {p['median']/1e6:8.3f} ({p['min']/1e6:6.3f}..{p['max']/1e6:6.3f}) {c['median']:14.1f} ({c['min']:7.1f}..{c['max']:7.1f})")
for k, v in ratios.items():
    print(f"ratios.{k} = {v['median']:.2f} ({v['min']:.2f}..{v['max']:.2f})")
if dropped:
    print(f"dumpcap dropped (its ring full): median {statistics.median(dropped) * 100:.1f} % of what pdump offered")
json.dump({"cpu": cpu, "runs": int(runs), "seconds": float(seconds), "memory": "hugepages, shared configuration",
           "profile": "configs/demo.yaml data path, 100-connection quicgen capture, 32767 mbufs",
           "capture": "dpdk-dumpcap -i net_pcap0 -w /dev/null (all RX queues, default snap length)",
           "without_capture": res["off"], "with_capture": res["on"], "ratios": ratios,
           "dumpcap_dropped_fraction": spread(dropped) if dropped else None, "rounds": rounds},
          open(out, "w"), indent=2)
print(f"wrote {out}")
PY
