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
# CIDs (ngtcp2's gtlsserver, configs/scaleout-random-cid.yaml), and with them
#   rebind_failover  the clients rebind their NAT (a new UDP port, the same
#            CID) before their request, then quicsteer of instance 0 crashes
#            mid-transfer (tests/scaleout/scaleout_test.sh's rebind_failover):
#            the downloads complete per class of scaleout_check.py rebinding
#            (moved by the rebinding, by the crash, by both, by neither).
#   sync_rebind_failover  the same with the instances sharing what their
#            forwarding tables learn (configs/scaleout-random-cid-sync.yaml,
#            peer_sync)
# and, for peer_sync's cost (scripts/bench.sh ringloop --sync only, on this
# machine in the same run): the data path's cycles per packet with sharing on
# against off, and the sync traffic per 1,000 new connections.
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
bench_need_root "bench scaleout"
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

# bench_batch TAG EVENT I [rebind]: a batch with captures; its figures into
# $figures. rebind: the clients rebind their NAT first (as the test's
# rebind_failover: 1 s after the handshake, the request 0.5 s later, the
# event 2.5 s after the last client started).
bench_batch() {
  so_start_captures "$1" || exit 1
  if [ "${4:-}" = rebind ]; then
    SO_CLIENT_OPTS=(--change-local-addr=1s --nat-rebinding --delay-stream=1500ms) SO_SAMPLE_PORTS=1 SO_EVENT_AFTER=2.5
  fi
  so_batch "$1" 20 "$2" "$3"
  SO_CLIENT_OPTS=() SO_SAMPLE_PORTS=0 SO_EVENT_AFTER=1
  rq_settle_captures "$1"
  rq_stop_captures
  so_stop_route_monitor
  if [ "${4:-}" = rebind ]; then
    $check rebinding "$RQ_WORK" "$1" --count 20 --victim "$3" --expect report --json "$figures" | tail -1
  else
    $check transfers "$RQ_WORK" "$1" --count 20 --expect report --json "$figures" | tail -1
  fi
  case $2 in crash | silent) $check failover "$RQ_WORK" "$1" --victim "$3" --json "$figures" | tail -1 ;; esac
  [ "${4:-}" = rebind ] && { so_quicsteer_start "$3" && qsso_wait_nexthops 2 30 || exit 1; }
  [ "$2" = drain ] && { so_quicsteer_start "$3" && qsso_wait_nexthops 2 30 || exit 1; }
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
  bench_batch "random_rebind_failover-$r" crash 0 rebind
done
bench_setup "qssoe$$" bfd gtls scaleout-random-cid-sync.yaml
for ((r = 1; r <= rounds; r++)); do bench_batch "random_sync_rebind_failover-$r" crash 0 rebind; done
rq_stop_all
qsso_down
# peer_sync's cost on the copy-free loop, in this same run.
sync_json=$RQ_WORK/ringloop-sync.json
bash scripts/bench/ringloop.sh --sync only --runs 5 --json "$sync_json" || echo "bench scaleout: ringloop --sync only failed"

mkdir -p "$(dirname "$json")"
python3 - "$figures" "$rounds" "$json" "$hw" "$sync_json" <<'PY'
import json, os, statistics, sys
figs, rounds, out, hw = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], sys.argv[4]
sync = json.load(open(sys.argv[5])) if os.path.exists(sys.argv[5]) else {}
events = ["crash", "return", "drain", "silent_bfd", "silent_bgp", "random_crash", "random_return", "random_drain",
          "random_rebind_failover", "random_sync_rebind_failover"]
classes = ["not_moved", "moved_at_rebinding", "moved_at_crash", "moved_back", "not_rebound"]
res = {}
for ev in events:
    runs = [figs[f"{ev}-{r}"] for r in range(1, rounds + 1) if f"{ev}-{r}" in figs]
    done, total = sum(x["completed"] for x in runs), sum(x["transfers"] for x in runs)
    e = {"transfers": total, "completed": done, "completed_share": done / total if total else None}
    if any(c in x for x in runs for c in classes):  # the rebinding: downloads complete per class
        e["classes"] = {c: {k: sum(x.get(c, {}).get(k, 0) for x in runs) for k in ("transfers", "completed")}
                        for c in classes}
    ms = [x["failover_ms"] for x in runs if x.get("failover_ms") is not None]
    if ms:
        e.update(failover_ms_median=statistics.median(ms), failover_ms_min=min(ms), failover_ms_max=max(ms))
    res[ev] = e
doc = {"benchmark": "scaleout", "hardware": hw, "rounds": rounds, "downloads_per_event": 20,
       "size_bytes": 5242880, "instances": 2, "servers": 4,
       "bfd": {"interval_ms": 100, "multiplier": 3}, "bgp": {"keepalive_s": 1, "hold_s": 3},
       "events": res,
       # peer_sync's cost (scripts/bench/ringloop.sh --sync only, this run)
       "peer_sync": {"ratios": {k: v for k, v in sync.get("ratios", {}).items() if k.startswith("peer_sync")},
                     "sync_traffic": sync.get("sync_traffic")}}
json.dump(doc, open(out, "w"), indent=2)
print(f"{'event':24} {'failover ms median (min..max)':>30} {'downloads complete':>20}")
for ev in events:
    e = res[ev]
    fo = (f"{e['failover_ms_median']:10.0f} ({e['failover_ms_min']:.0f}..{e['failover_ms_max']:.0f})"
          if "failover_ms_median" in e else "-")
    print(f"{ev:24} {fo:>30} {e['completed']:>10}/{e['transfers']} ({100 * (e['completed_share'] or 0):.0f} %)")
    for c, n in e.get("classes", {}).items():
        if n["transfers"]:
            print(f"  {c:22} {'':>30} {n['completed']:>10}/{n['transfers']}")
for k, v in doc["peer_sync"]["ratios"].items():
    print(f"ratios.{k} = {v:.2f}" + ("  (target <= 1.05: " + ("met" if v <= 1.05 else "NOT met") + ")"
                                  if k == "peer_sync_on_vs_off" else ""))
print(f"written to {out}")
PY
