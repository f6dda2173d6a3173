#!/usr/bin/env bash
# scripts/bench/realquic.sh [--json FILE] [--rounds N] [--parallel P] [--also KIND=PROFILE]...
#
# Time per real QUIC transfer (ngtcp2's gtlsclient downloading 5 MiB from
# quicsteer-server) through quicsteer against a kernel bridge, in the same
# network namespaces (tests/realquic/topology.sh) and the same run:
#   quicsteer  configs/realquic.yaml: net_af_packet in, each owner's net_pcap
#              TX queue to its own server
#   quicsteer_afxdp
#              configs/realquic-afxdp.yaml: the same with net_af_xdp in (one
#              receiver for both owners); left out where the machine cannot
#              do AF_XDP
#   bridge     a Linux bridge from the clients' veth to server 0's veth, in
#              quicsteer's place (every connection to server 0)
#   KIND       with --also KIND=PROFILE (repeatable): quicsteer on PROFILE as
#              well, after the others in each round (an experiment's variant)
# Rounds alternate (quicsteer, quicsteer_afxdp, the --also kinds, bridge), N
# of each (default 3), each P downloads at once (default 4). Every
# transfer's sha256 is checked. For each quicsteer kind the CPU time its
# threads took during a round's transfers (/proc/PID/task/*/schedstat) is
# recorded too. Prints the median time per transfer and per round for each
# and their ratios, and
# writes them to results/realquic.json (or --json FILE). As root. The
# servers and clients run on the same 2 CPUs as quicsteer's 3 lcores, so this
# measures the whole path on a shared machine, not quicsteer alone.
source "$(dirname "$0")/lib/common.sh"
set +e  # as before: a failed round is reported, not fatal
cd "$root"

json=results/realquic.json
rounds=3
parallel=4
also=()
while [ $# -gt 0 ]; do
  case $1 in
    --json) json=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --also) [[ $2 == ?*=?* ]] || { echo "bench realquic: --also KIND=PROFILE, got '$2'" >&2; exit 2; }
      also+=("$2"); shift 2 ;;
    *) echo "usage: scripts/bench.sh realquic [--json FILE] [--rounds N] [--parallel P] [--also KIND=PROFILE]..." >&2
      exit 2 ;;
  esac
done
bench_need_root "bench realquic"
bash scripts/setup.sh || exit 1
build_bench "bench realquic" quicsteer quicsteer-server

source tests/realquic/topology.sh
source tests/realquic/realquic_lib.sh
RQ_BUILD=$build
RQ_PREFIX=qsrqbench$$
RQ_WORK=$(mktemp -d /tmp/qsrq-bench.XXXXXX)
trap 'rq_stop_all; qsrq_down; rm -rf "$RQ_WORK"' EXIT
trap 'exit 1' INT TERM

echo "bench realquic: $(cpu_model), $(nproc) CPUs"
qsrq_up "$RQ_PREFIX" || exit 1
rq_make_files 0
rq_start_servers configs/realquic.yaml || exit 1
check="python3 tests/realquic/realquic_check.py"
kinds=(quicsteer)
profiles=(configs/realquic.yaml)
if qsrq_can_afxdp; then
  kinds+=(quicsteer_afxdp)
  profiles+=(configs/realquic-afxdp.yaml)
else
  echo "bench realquic: this machine cannot do AF_XDP: quicsteer_afxdp left out"
fi
for a in "${also[@]}"; do
  kinds+=("${a%%=*}")
  profiles+=("${a#*=}")
done
# cpu_ns PID: the CPU time all of PID's threads have had, in ns.
cpu_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}
failed=0
for ((r = 1; r <= rounds; r++)); do
  for k in "${!kinds[@]}"; do
    rq_start_quicsteer "${profiles[$k]}" "${kinds[$k]}$r" || exit 1
    c0=$(cpu_ns "$RQ_QUICSTEER")
    rq_transfers "${kinds[$k]}$r" "$parallel" 0 none
    echo $(($(cpu_ns "$RQ_QUICSTEER") - c0)) >"$RQ_WORK/${kinds[$k]}$r-cpu"
    rq_stop_quicsteer || failed=1
    $check transfers "$RQ_WORK" "${kinds[$k]}$r" --ndown "$parallel" --nup 0 --migration none --expect ok | tail -2 ||
      failed=1
  done
  qsrq_bridge on || exit 1
  rq_transfers "bridge$r" "$parallel" 0 none
  qsrq_bridge off
  $check transfers "$RQ_WORK" "bridge$r" --ndown "$parallel" --nup 0 --migration none --expect ok | tail -2 || failed=1
done
mkdir -p "$(dirname "$json")"
python3 - "$RQ_WORK" "$rounds" "$parallel" "$json" "$failed" "${kinds[@]}" bridge <<'PY'
import json, statistics, sys
work, rounds, parallel, out, failed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
kinds = sys.argv[6:]
res = {}
for kind in kinds:
    per, walls = [], []
    for r in range(1, rounds + 1):
        rows = [l.split("\t") for l in open(f"{work}/{kind}{r}-clients.tsv").read().splitlines()]
        per += [int(ms) / 1000 for _, rc, ms in rows]
        t0, t1 = (int(x) for x in open(f"{work}/{kind}{r}-window").read().split())
        walls.append((t1 - t0) / 1e9)
    res[kind] = {"transfer_s_median": statistics.median(per), "transfer_s_min": min(per), "transfer_s_max": max(per),
                 "round_s_median": statistics.median(walls), "transfers": len(per)}
    if kind != "bridge":
        cpu = [int(open(f"{work}/{kind}{r}-cpu").read()) / 1e6 for r in range(1, rounds + 1)]
        res[kind].update({"cpu_ms_per_round_median": statistics.median(cpu), "cpu_ms_per_round_min": min(cpu),
                          "cpu_ms_per_round_max": max(cpu)})
ratios = {}
for kind in kinds[:-1]:
    ratios[f"transfer_time_{kind}_vs_bridge"] = res[kind]["transfer_s_median"] / res["bridge"]["transfer_s_median"]
    ratios[f"round_time_{kind}_vs_bridge"] = res[kind]["round_s_median"] / res["bridge"]["round_s_median"]
if "quicsteer_afxdp" in res:
    ratios["transfer_time_afxdp_vs_af_packet"] = (res["quicsteer_afxdp"]["transfer_s_median"] /
                                                  res["quicsteer"]["transfer_s_median"])
doc = {"benchmark": "realquic", "size_bytes": 5242880, "parallel": parallel, "rounds": rounds,
       "all_sha256_ok": failed == 0, **res, "ratios": ratios}
json.dump(doc, open(out, "w"), indent=2)
print(f"{'path':16} {'s/transfer median (min..max)':>30} {'s/round median':>15} "
      f"{'quicsteer CPU ms/round median (min..max)':>42}")
for kind in kinds:
    x = res[kind]
    cpu = (f"{x['cpu_ms_per_round_median']:8.1f} ({x['cpu_ms_per_round_min']:.1f}..{x['cpu_ms_per_round_max']:.1f})"
           if "cpu_ms_per_round_median" in x else "")
    print(f"{kind:16} {x['transfer_s_median']:12.3f} ({x['transfer_s_min']:.3f}..{x['transfer_s_max']:.3f}) "
          f"{x['round_s_median']:15.3f} {cpu:>42}")
for kind in kinds[:-1]:
    print(f"ratio {kind}/bridge: {ratios[f'transfer_time_{kind}_vs_bridge']:.2f} per transfer, "
          f"{ratios[f'round_time_{kind}_vs_bridge']:.2f} per round of {parallel}")
print(f"written to {out}")
PY
exit $failed
