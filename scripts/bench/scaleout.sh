#!/usr/bin/env bash
# scripts/bench/scaleout.sh [--json FILE] [--rounds N]
#
# Failover of quicsteer instances behind a router's ECMP with BGP and BFD
# (FRR), in the network namespaces of the scaleout suite
# (tests/scaleout/scaleout_topology.sh: two instances on configs/scaleout.yaml,
# four quicsteer-servers with QUIC-LB server IDs, 20 concurrent 5 MiB
# downloads per event, every sha256 checked). Per round, an event on one
# instance 1 s into each batch of downloads:
#   crash    quicsteer gets SIGKILL; its health watcher withdraws the route
#   return   quicsteer starts again; the watcher announces it
#   drain    withdraw, wait for the router, 1 s grace, SIGINT
#   silent   the instance's machine goes silent (BFD on: 100 ms x 3)
#   silent   the same with BGP timers alone (keepalive 1 s, hold 3 s)
# and the crash, return and drain events again with servers that mint random
# CIDs (ngtcp2's gtlsserver, configs/scaleout-random-cid.yaml).
# Failover: from the event until the router sent the first packet of one of
# the victim's connections to the other instance (its captures). Prints and
# writes (results/scaleout.json or --json FILE) the median over N rounds
# (default 3) per event, min and max, and the share of downloads complete per
# event. As root. Everything (clients, router, instances, servers) shares
# this machine's CPUs.
source "$(dirname "$0")/lib/common.sh"
set +e  # as before: a failed round is reported, not fatal
cd "$root"

json=results/scaleout.json
rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --json) json=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: scripts/bench.sh scaleout [--json FILE] [--rounds N]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench scaleout: needs root (network namespaces)" >&2; exit 1; }
bash scripts/setup.sh || exit 1
build_bench "bench scaleout" quicsteer quicsteer-server quicsteer-cid

SO_SRC=$root
source tests/scaleout/scaleout_topology.sh
source tests/realquic/realquic_lib.sh
source tests/scaleout/scaleout_lib.sh
RQ_BUILD=$(cd "$build" && pwd)
RQ_WORK=$(mktemp -d /tmp/qsso-bench.XXXXXX)
QSSO_WORK=$RQ_WORK
trap 'rq_stop_all; qsso_down; rm -rf "$RQ_WORK"' EXIT
trap 'exit 1' INT TERM
check="python3 tests/scaleout/scaleout_check.py"
figures=$RQ_WORK/figures.json
hw="$(cpu_model), $(nproc) CPUs"
echo "bench scaleout: $hw; $rounds rounds"

# bench_batch TAG EVENT I: a batch with captures; its figures into $figures.
bench_batch() {
  so_start_captures "$1" || exit 1
  so_batch "$1" 20 "$2" "$3"
  rq_settle_captures "$1"
  rq_stop_captures
  $check transfers "$RQ_WORK" "$1" --count 20 --expect report --json "$figures" | tail -1
  case $2 in crash | silent) $check failover "$RQ_WORK" "$1" --victim "$3" --json "$figures" | tail -1 ;; esac
  [ "$2" = drain ] && { so_quicsteer_start "$3" && qsso_wait_nexthops 2 10 || exit 1; }
  [ "$2" = silent ] && { so_instance_back "$3" || exit 1; }
}

# bench_setup PREFIX bfd|nobfd quic|gtls PROFILE
bench_setup() {
  rq_stop_all
  qsso_down
  SO_BFD=$2
  qsso_up "$1" || exit 1
  so_start_servers "$3" || exit 1
  SO_PROFILE=$SO_SRC/configs/$4
  so_all_up || exit 1
}

rq_make_files 0
bench_setup "qssob$$" bfd quic scaleout.yaml
for ((r = 1; r <= rounds; r++)); do
  for ev in "crash 0" "return 0" "drain 1" "silent 1"; do
    read -r event i <<<"$ev"
    tag=$event
    [ "$event" = silent ] && tag=silent_bfd
    bench_batch "$tag-$r" "$event" "$i"
  done
done
bench_setup "qssoc$$" nobfd quic scaleout.yaml
for ((r = 1; r <= rounds; r++)); do bench_batch "silent_bgp-$r" silent 1; done
bench_setup "qssod$$" bfd gtls scaleout-random-cid.yaml
for ((r = 1; r <= rounds; r++)); do
  for ev in "crash 0" "return 0" "drain 1"; do
    read -r event i <<<"$ev"
    bench_batch "random_$event-$r" "$event" "$i"
  done
done

mkdir -p "$(dirname "$json")"
python3 - "$figures" "$rounds" "$json" "$hw" <<'PY'
import json, statistics, sys
figs, rounds, out, hw = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], sys.argv[4]
events = ["crash", "return", "drain", "silent_bfd", "silent_bgp", "random_crash", "random_return", "random_drain"]
res = {}
for ev in events:
    runs = [figs[f"{ev}-{r}"] for r in range(1, rounds + 1) if f"{ev}-{r}" in figs]
    done, total = sum(x["completed"] for x in runs), sum(x["transfers"] for x in runs)
    e = {"transfers": total, "completed": done, "completed_share": done / total if total else None}
    ms = [x["failover_ms"] for x in runs if x.get("failover_ms") is not None]
    if ms:
        e.update(failover_ms_median=statistics.median(ms), failover_ms_min=min(ms), failover_ms_max=max(ms))
    res[ev] = e
doc = {"benchmark": "scaleout", "hardware": hw, "rounds": rounds, "downloads_per_event": 20,
       "size_bytes": 5242880, "instances": 2, "servers": 4,
       "bfd": {"interval_ms": 100, "multiplier": 3}, "bgp": {"keepalive_s": 1, "hold_s": 3},
       "events": res}
json.dump(doc, open(out, "w"), indent=2)
print(f"{'event':14} {'failover ms median (min..max)':>30} {'downloads complete':>20}")
for ev in events:
    e = res[ev]
    fo = (f"{e['failover_ms_median']:10.0f} ({e['failover_ms_min']:.0f}..{e['failover_ms_max']:.0f})"
          if "failover_ms_median" in e else "-")
    print(f"{ev:14} {fo:>30} {e['completed']:>10}/{e['transfers']} ({100 * (e['completed_share'] or 0):.0f} %)")
print(f"written to {out}")
PY
