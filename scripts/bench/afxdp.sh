#!/usr/bin/env bash
# scripts/bench/afxdp.sh [--json FILE] [--runs N] [--packets N]
#
# quicsteer against dpdk-testpmd macswap on the same AF_XDP port under the
# same sender, rounds interleaved, N of each (default 3):
#   quicsteer  one lcore receives the AF_XDP port (net_af_xdp on a veth, the
#              devargs of configs/realquic-afxdp.yaml), steers every datagram
#              (QUIC, fallback hash) and forwards it out of the same port to
#              the sender's MAC (delivery l2: the header rewrite macswap makes)
#   testpmd    dpdk-testpmd --forward-mode=macswap on the same port with the
#              same lcores, pool size and RX ring, its pool packed as
#              quicsteer's is for net_af_xdp (--mp-alloc=anon --no-iova-contig:
#              tests/realquic/README.md, "Over AF_XDP", says why an ordinary
#              pool loses mbufs to the UMEM)
# The sender is tests/realquic/quic_sender.py (the afxdp_imissed test's: 1200-
# octet QUIC Initials from 64 sockets) in its own namespace, unpaced, P
# datagrams a round (default 200000), pinned to CPU 0; the EAL's main lcore
# is on CPU 0 too (idle), the forwarding lcore alone on CPU 1. Both run on
# ordinary pages (--no-huge), as the realquic profiles do.
#
# Per round: datagrams sent and the sender's wall time, user and system time;
# what the veth's XDP program saw and redirected (ethtool -S); what the
# application received, missed (imissed) and sent back; its busy cycles per
# packet (quicsteer: TSC time of the lcore's iterations that moved packets;
# testpmd: --record-core-cycles, the same measure); and each CPU's split into
# user, system, softirq and idle from /proc/stat over the sender's window.
# Prints the medians, their spread (min..max) and the ratios quicsteer / testpmd, and what the figures
# say bounds both; writes results/afxdp.json (or --json FILE). As root (network
# namespaces). QS_BUILD_DIR picks the build directory (./build).
source "$(dirname "$0")/lib/common.sh"
cd "$root"

json=results/afxdp.json
runs=3
packets=200000
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "usage: scripts/bench.sh afxdp [--json FILE] [--runs N] [--packets N]" >&2; exit 2; }
  case $1 in
    --json) json=$2 ;;
    --runs) runs=$2 ;;
    --packets) packets=$2 ;;
    *) echo "usage: scripts/bench.sh afxdp [--json FILE] [--runs N] [--packets N]" >&2; exit 2 ;;
  esac
  shift 2
done
bench_whole_number afxdp.sh --runs "$runs"
bench_whole_number afxdp.sh --packets "$packets"
bench_need_root afxdp.sh
source tests/realquic/topology.sh
qsrq_can_afxdp || { echo "afxdp.sh: this machine cannot do AF_XDP (no AF_XDP sockets or no net_af_xdp PMD)" >&2; exit 1; }
for tool in dpdk-testpmd ethtool taskset; do
  command -v $tool >/dev/null || { echo "afxdp.sh: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
bash scripts/setup.sh || exit 1
build_bench afxdp.sh quicsteer

P=qsax$$
S=$P-s
Q=$P-q
work=$(mktemp -d /tmp/qsax-bench.XXXXXX)
dut_pid=
cleanup() {
  [ -n "$dut_pid" ] && kill -9 "$dut_pid" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$Q" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

for ns in "$S" "$Q"; do
  ip netns add "$ns" || exit 1
  # No IPv6: no solicitation may reach the port and spoil the counts.
  ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || exit 1
  ip -n "$ns" link set lo up
done
ip -n "$S" link add qsax-tx type veth peer name qsax-rx netns "$Q" || exit 1
ip -n "$S" link set qsax-tx address 02:00:00:79:00:01
ip -n "$Q" link set qsax-rx address 02:00:00:79:00:02
ip -n "$S" addr add 10.79.0.1/24 dev qsax-tx
ip -n "$S" neigh replace 10.79.0.2 lladdr 02:00:00:79:00:02 nud permanent dev qsax-tx
ip -n "$S" link set qsax-tx up
ip -n "$Q" link set qsax-rx up
device="net_af_xdp0,iface=qsax-rx,start_queue=0,queue_count=1,busy_budget=0"
eal=(--lcores "0@0,1@1" --no-huge -m 1024 --no-shconf --no-pci --log-level "*:notice")
mbufs=16383
# idle_sleep_us 0: the forwarding lcore has CPU 1 to itself and polls without
# pause, as testpmd does. The frames go back out of the port with l2 delivery
# to one backend, the sender's veth: destination MAC := the sender's, source
# := the port's, what testpmd's macswap writes too. So both kinds reach the
# sender's IP layer alike, which drops them (not its address, no forwarding).
cat >"$work/quicsteer.yaml" <<YAML
eal: [$(printf '"%s", ' "${eal[@]}" | sed 's/, $//')]
ports:
  - name: wire
    device: "$device"
    rx_queues: 1
    tx_queues: 1
    rx_descriptors: 2048
    rss: false
mempool:
  mbufs: $mbufs
lcores:
  - {id: 1, rx: ["wire:0"], owner: true}
steering:
  quic_ports: [443]
  fallback:
    key: "5172f08c2cd54a9b8e0e4b6f1d3a7c21"
backpressure:
  policy: park
backends:
  - {name: sender, mac: "02:00:00:79:00:01"}
action:
  type: forward
  tx_port: wire
  delivery: {mode: l2}
polling:
  idle_sleep_us: 0
stats:
  period_ms: 0
telemetry: {prometheus_listen: ""}
YAML
"$build/quicsteer" --check "$work/quicsteer.yaml" >/dev/null || { echo "afxdp.sh: the quicsteer profile does not validate" >&2; exit 1; }

# snapshot TAG: the kernel's counters and the CPUs' times, to $work/TAG.*
snapshot() {
  ip netns exec "$Q" ethtool -S qsax-rx >"$work/$1.xdp"
  ip -n "$S" -s -j link show qsax-tx >"$work/$1.tx.json"
  grep '^cpu[0-9]' /proc/stat >"$work/$1.stat"
  if [ -n "$dut_pid" ]; then awk '{print $14, $15}' "/proc/$dut_pid/stat" >"$work/$1.dut"; fi
}

# send TAG: the sender, timed; its line "sent N", then wall/user/system seconds.
send() {
  local TIMEFORMAT='%R %U %S'
  snapshot "$1-before"
  { time ip netns exec "$S" taskset -c 0 python3 tests/realquic/quic_sender.py 10.79.0.2 443 "$packets" \
      --pause-us 0 --burst 64 >"$work/$1.sender"; } 2>"$work/$1.time" || { cat "$work/$1.time" >&2; exit 1; }
  snapshot "$1-sent"
  sleep 0.5  # what the rings still hold reaches the application
  snapshot "$1-after"
}

run_quicsteer() {
  local tag=$1
  ip netns exec "$Q" "$build/quicsteer" -- --profile "$work/quicsteer.yaml" --stats-json "$work/$tag.json" \
    >"$work/$tag.out" 2>&1 &
  dut_pid=$!
  local i
  for i in $(seq 1 600); do grep -q "running until" "$work/$tag.out" && break; sleep 0.05; done
  grep -q "running until" "$work/$tag.out" || { cat "$work/$tag.out" >&2; echo "afxdp.sh: quicsteer did not start" >&2; exit 1; }
  send "$tag"
  kill -INT "$dut_pid"
  local rc=0
  wait "$dut_pid" || rc=$?
  dut_pid=
  # Any failure is fatal, the leak check's too: quicsteer reaps the frames
  # the driver's TX completion ring still holds before it closes the port
  # (tests/realquic/afxdp_forward_test.sh checks that). The JSON keeps the
  # count (mbufs_not_returned).
  if [ $rc -ne 0 ]; then
    tail -20 "$work/$tag.out" >&2
    echo "afxdp.sh: quicsteer failed ($rc)" >&2
    exit 1
  fi
}

run_testpmd_macswap() {
  local tag=$1 fifo=$work/testpmd.in i
  rm -f "$fifo"
  mkfifo "$fifo"
  ip netns exec "$Q" dpdk-testpmd "${eal[@]}" --vdev "$device" -- -i --forward-mode=macswap --port-topology=loop \
    --nb-cores=1 --rxq=1 --txq=1 --rxd=2048 --txd=2048 --burst=32 --total-num-mbufs=$mbufs --mbcache=256 \
    --mp-alloc=anon --no-iova-contig --record-core-cycles <"$fifo" >"$work/$tag.out" 2>&1 &
  dut_pid=$!
  exec 3>"$fifo"
  for i in $(seq 1 600); do grep -q 'testpmd> ' "$work/$tag.out" && break; sleep 0.05; done
  grep -q 'testpmd> ' "$work/$tag.out" || { cat "$work/$tag.out" >&2; echo "afxdp.sh: testpmd did not start" >&2; exit 1; }
  echo start >&3
  for i in $(seq 1 100); do grep -q 'Logical Core 1' "$work/$tag.out" && break; sleep 0.05; done
  # The thread that runs the PMD: testpmd's forwarding lcore, not its prompt.
  send "$tag"
  echo "show port stats all" >&3
  echo stop >&3
  echo quit >&3
  exec 3>&-
  wait "$dut_pid" || { tail -20 "$work/$tag.out" >&2; echo "afxdp.sh: testpmd failed" >&2; exit 1; }
  dut_pid=
}

echo "afxdp: $(cpu_model), $(nproc) CPUs; $runs round(s) of $packets datagrams; sender on CPU 0, forwarding lcore on CPU 1"
for r in $(seq 1 "$runs"); do
  echo "afxdp: round $r/$runs"
  run_quicsteer "quicsteer-$r"
  run_testpmd_macswap "testpmd-$r"
done

mkdir -p "$(dirname "$json")"
python3 - "$work" "$runs" "$packets" "$(cpu_model)" "$json" <<'PY'
import json, re, statistics, sys
work, runs, packets, cpu, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
HZ = 100  # USER_HZ: /proc/stat and /proc/PID/stat count in it

def ethtool(path):
    d = {}
    for line in open(path):
        k, _, v = line.strip().partition(": ")
        if v.strip().lstrip("-").isdigit():
            d[k] = int(v)
    return d

def tx_link(path):
    return json.load(open(path))[0]["stats64"]

def cpus(path):
    return {l.split()[0]: [int(x) for x in l.split()[1:]] for l in open(path)}

def cpu_split(a, b, wall):
    # /proc/stat: user nice system idle iowait irq softirq steal ...
    res = {}
    for c in sorted(a):
        d = [y - x for x, y in zip(a[c], b[c])]
        res[c] = {"user": (d[0] + d[1]) / HZ / wall, "system": d[2] / HZ / wall, "softirq": (d[5] + d[6]) / HZ / wall,
                  "idle": (d[3] + d[4]) / HZ / wall, "steal": d[7] / HZ / wall}
    return res

def round_figures(tag):
    wall, user, system = (float(x) for x in open(f"{work}/{tag}.time").read().split())
    sent = int(open(f"{work}/{tag}.sender").read().split()[1])
    x0, x1 = ethtool(f"{work}/{tag}-before.xdp"), ethtool(f"{work}/{tag}-after.xdp")
    xd = {k: x1[k] - x0.get(k, 0) for k in x1 if k.startswith("rx_queue_0_")}
    t0, t1 = tx_link(f"{work}/{tag}-before.tx.json"), tx_link(f"{work}/{tag}-after.tx.json")
    split = cpu_split(cpus(f"{work}/{tag}-before.stat"), cpus(f"{work}/{tag}-sent.stat"), wall)
    d0, d1 = (open(f"{work}/{tag}-{w}.dut").read().split() for w in ("before", "sent"))
    dut_cpu = (int(d1[0]) + int(d1[1]) - int(d0[0]) - int(d0[1])) / HZ / wall
    text = open(f"{work}/{tag}.out").read()
    if tag.startswith("quicsteer"):
        s = json.load(open(f"{work}/{tag}.json"))
        port = s["ports"][0]
        rx, missed, tx = port["ipackets"], port["imissed"], port["opackets"]
        cycles = s["total"]["busy_cycles"] / max(s["total"]["rx"], 1)
        hz = s["total"]["tsc_hz"]
        drops = s["total"]["drops_sum"]
        not_returned = s["mbufs"]["leaked"]
    else:
        m = re.findall(r"RX-packets: (\d+)\s+RX-missed: (\d+)", text)
        rx, missed = int(m[-1][0]), int(m[-1][1])
        tx = int(re.findall(r"TX-packets: (\d+)", text)[-1])
        c = re.search(r"CPU cycles/packet=([0-9.]+).* at (\d+) MHz Clock", text)
        if not c:
            sys.exit(f"afxdp.sh: no cycles per packet in {tag}'s testpmd output")
        cycles, hz = float(c.group(1)), int(c.group(2)) * 1e6
        drops = int(re.findall(r"TX-dropped: (\d+)", text)[-1])
        not_returned = None  # testpmd has no such check
    return {"sent": sent, "sender_wall_s": wall, "sender_pps": sent / wall,
            "sender_cpu": (user + system) / wall, "sender_user": user / wall, "sender_system": system / wall,
            "veth_tx_dropped": t1["tx"]["dropped"] - t0["tx"]["dropped"],
            "xdp_packets": xd.get("rx_queue_0_xdp_packets", 0), "xdp_redirect": xd.get("rx_queue_0_xdp_redirect", 0),
            "xdp_drops": xd.get("rx_queue_0_xdp_drops", 0) + xd.get("rx_queue_0_drops", 0),
            "received": rx, "imissed": missed, "sent_back": tx, "app_drops": drops, "mbufs_not_returned": not_returned,
            "received_pps": rx / wall, "busy_cycles_per_packet": cycles,
            "lcore_busy_share": cycles * rx / wall / hz, "app_cpu": dut_cpu, "cpus": split}

kinds = ("quicsteer", "testpmd")
rounds = {k: [round_figures(f"{k}-{r}") for r in range(1, runs + 1)] for k in kinds}
med = lambda k, f: statistics.median(x[f] for x in rounds[k])
summary = {k: {f: med(k, f) for f in ("sender_pps", "received_pps", "sender_cpu", "sender_system", "app_cpu",
                                      "busy_cycles_per_packet", "lcore_busy_share", "imissed", "veth_tx_dropped", "xdp_drops")}
           for k in kinds}
for k in kinds:
    for c in rounds[k][0]["cpus"]:
        for part in ("user", "system", "softirq", "idle", "steal"):
            summary[k][f"{c}_{part}"] = statistics.median(x["cpus"][c][part] for x in rounds[k])
# The spread of the rounds: min and max of the figures that vary.
spread_fields = ("sender_pps", "received_pps", "sender_cpu", "app_cpu", "busy_cycles_per_packet", "lcore_busy_share")
spread = {k: {f: [min(x[f] for x in rounds[k]), max(x[f] for x in rounds[k])] for f in spread_fields} for k in kinds}
ratios = {"received_pps_quicsteer_vs_testpmd": summary["quicsteer"]["received_pps"] / summary["testpmd"]["received_pps"],
          "busy_cycles_per_packet_quicsteer_vs_testpmd":
              summary["quicsteer"]["busy_cycles_per_packet"] / summary["testpmd"]["busy_cycles_per_packet"]}
json.dump({"benchmark": "afxdp", "cpu": cpu, "packets_per_round": packets, "runs": runs,
           "memory": "ordinary pages (--no-huge)", "summary": summary, "spread": spread, "ratios": ratios, "rounds": rounds},
          open(out, "w"), indent=2)
print(f"{'':10} {'sent/s':>9} {'recv/s':>9} {'imissed':>8} {'veth drop':>9} {'cyc/pkt':>8} "
      f"{'sender CPU':>10} {'app CPU':>8}   CPU0 usr/sys/si/idle   CPU1 usr/sys/si/idle")
for k in kinds:
    s = summary[k]
    print(f"{k:10} {s['sender_pps']:9.0f} {s['received_pps']:9.0f} {s['imissed']:8.0f} {s['veth_tx_dropped']:9.0f} "
          f"{s['busy_cycles_per_packet']:8.0f} {s['sender_cpu']:10.2f} {s['app_cpu']:8.2f}   "
          + "   ".join("/".join(f"{s[f'{c}_{p}']:.2f}" for p in ("user", "system", "softirq", "idle"))
                       for c in ("cpu0", "cpu1")))
for k in kinds:
    sp = spread[k]
    print(f"{k:10} min..max over {runs} rounds: sent/s {sp['sender_pps'][0]:.0f}..{sp['sender_pps'][1]:.0f}, "
          f"recv/s {sp['received_pps'][0]:.0f}..{sp['received_pps'][1]:.0f}, "
          f"cyc/pkt {sp['busy_cycles_per_packet'][0]:.0f}..{sp['busy_cycles_per_packet'][1]:.0f}, "
          f"lcore busy {100 * sp['lcore_busy_share'][0]:.0f}..{100 * sp['lcore_busy_share'][1]:.0f}%, "
          f"sender CPU {sp['sender_cpu'][0]:.2f}..{sp['sender_cpu'][1]:.2f}")
for k, v in ratios.items():
    print(f"ratio {k}: {v:.2f}")
for k in kinds:
    lost = [x["sent"] - x["received"] for x in rounds[k]]
    print(f"{k}: sent - received per round: {lost}; the forwarding lcore busy (moving packets) "
          f"{100 * summary[k]['lcore_busy_share']:.0f}% of the sender's window")
print(f"written to {out}")
PY
