#!/usr/bin/env bash
# Smoke test of the e2e benchmark's DPDK-native baselines (distributor:
# rte_distributor; eventdev: event_sw atomic): on a small quicgen capture
# replayed by net_pcap, every packet the first lcore reads is handed over and
# sent by a worker or counted as unclassifiable, and every mbuf comes back
# (the pipeline exits 1 otherwise); and packets really flowed. The event_sw
# run must also have processed every event before the device stopped (none
# flushed at the stop).
#   baseline_pipeline_test.sh distributor|eventdev PIPELINE QUICGEN SOURCE_ROOT
set -euo pipefail
kind=$1 pipeline=$2 quicgen=$3 src=$4
case $kind in
  distributor) handed_over=distributed ;;
  eventdev) handed_over=enqueued ;;
  *) echo "usage: baseline_pipeline_test.sh distributor|eventdev PIPELINE QUICGEN SOURCE_ROOT" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$quicgen" --profile "$src/configs/demo.yaml" --out "$work/t.pcap" --connections 40 --seed 3 >/dev/null
# The demo profile on this capture, with a pool sized for a small capture.
sed -e "s#results/demo.pcap#$work/t.pcap#g" -e 's/^  mbufs: 131071/  mbufs: 16383/' \
  "$src/configs/demo.yaml" > "$work/p.yaml"
grep -q "mbufs: 16383" "$work/p.yaml" || { echo "FAIL: could not resize the pool in the demo profile"; exit 1; }

status=0
"$pipeline" --lcores "(0-2)@(0,1)" --no-huge -m 512 --no-shconf --no-pci --log-level "*:warning" \
  -- --profile "$work/p.yaml" --duration 0.3 --json "$work/out.json" > "$work/log.txt" 2>&1 || status=$?
if [ $status -ne 0 ]; then
  cat "$work/log.txt"
  # The JSON, when written, says which count is off (checked below as well).
  if [ -f "$work/out.json" ]; then cat "$work/out.json"; fi
  echo "FAIL: $(basename "$pipeline") exited with status $status"
  exit 1
fi

python3 - "$work/out.json" "$kind" "$handed_over" <<'PY'
import json, sys
d, kind, handed_over = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
problems = []
if d["rx"] == 0:
    problems.append("no packet was read")
if d[handed_over] == 0:
    problems.append(f"nothing was {handed_over}")
if d["tx"] + d["tx_dropped"] + d["unclassifiable"] != d["rx"]:
    problems.append(f"rx {d['rx']} != tx {d['tx']} + tx_dropped {d['tx_dropped']} + unclassifiable {d['unclassifiable']}")
if d["rx"] != d[handed_over] + d["unclassifiable"]:
    problems.append(f"rx {d['rx']} != {handed_over} {d[handed_over]} + unclassifiable {d['unclassifiable']}")
if d["tx_dropped"] != 0:
    problems.append(f"net_null refused {d['tx_dropped']} packets")
if sum(w["processed"] for w in d["workers"]) != d[handed_over]:
    problems.append(f"the workers processed a different number of packets than were {handed_over}")
if kind == "eventdev":
    if d["flushed_at_stop"] != 0 or d["drain_timed_out"]:
        problems.append(f"{d['flushed_at_stop']} events were still in the device at stop")
    for w in d["workers"]:
        # The demo profile has two owners, hence two flow_ids; a worker that
        # processed packets saw at least one, and never more than exist.
        if w["processed"] and not 1 <= w["flows_seen"] <= 2:
            problems.append(f"worker lcore {w['lcore']} reports {w['flows_seen']} flow_ids")
if d["mbufs"]["leaked"] != 0:
    problems.append(f"{d['mbufs']['leaked']} mbufs leaked")
if not d["accounted"]:
    problems.append("the pipeline itself reports packets unaccounted for")
if problems:
    print("FAIL: " + "; ".join(problems))
    sys.exit(1)
print(f"ok: {d['rx']} packets read, {d[handed_over]} {handed_over}, {d['tx']} sent, "
      f"{d['unclassifiable']} unclassifiable, no mbuf leaked")
PY
