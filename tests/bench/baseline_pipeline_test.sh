#!/usr/bin/env bash
# Smoke test of the e2e benchmark's DPDK-native baselines (distributor:
# rte_distributor; eventdev: event_sw atomic; eventdev_symmetric: the same,
# --symmetric, every lcore receiving and working): on a small quicgen capture
# replayed by net_pcap, every packet read is handed over and sent by a worker
# or counted as unclassifiable, and every mbuf comes back (the pipeline exits
# 1 otherwise); and packets really flowed. The event_sw runs must also have
# processed every event before the device stopped (none flushed at the stop);
# the symmetric run must have read on every lcore (each polls its own RX
# queue) and worked on every lcore that was given events.
#   baseline_pipeline_test.sh distributor|eventdev|eventdev_symmetric PIPELINE QUICGEN SOURCE_ROOT
set -euo pipefail
kind=$1 pipeline=$2 quicgen=$3 src=$4
options=()
case $kind in
  distributor) handed_over=distributed ;;
  eventdev) handed_over=enqueued ;;
  eventdev_symmetric) handed_over=enqueued options=(--symmetric) ;;
  *) echo "usage: baseline_pipeline_test.sh distributor|eventdev|eventdev_symmetric PIPELINE QUICGEN SOURCE_ROOT" >&2; exit 2 ;;
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
  -- --profile "$work/p.yaml" --duration 0.3 --json "$work/out.json" "${options[@]}" > "$work/log.txt" 2>&1 || status=$?
if [ $status -ne 0 ]; then
  cat "$work/log.txt"
  # The JSON, when written, says which count is off (checked below as well).
  if [ -f "$work/out.json" ]; then cat "$work/out.json"; fi
  echo "FAIL: $(basename "$pipeline") exited with status $status"
  exit 1
fi

python3 - "$work/out.json" "$kind" "$handed_over" "$work/t.pcap" 40 <<'PY'
import json, struct, sys
d, kind, handed_over = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
connections = int(sys.argv[5])
frames = 0
with open(sys.argv[4], "rb") as f:  # classic pcap, little-endian (quicgen's)
    f.read(24)
    while len(h := f.read(16)) == 16:
        f.seek(struct.unpack("<IIII", h)[2], 1)
        frames += 1
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
if kind.startswith("eventdev"):
    if d["flushed_at_stop"] != 0 or d["drain_timed_out"]:
        problems.append(f"{d['flushed_at_stop']} events were still in the device at stop")
    if d["abandoned"] != 0:
        problems.append(f"{d['abandoned']} events were given up for want of room when the lcores stopped")
    for w in d["workers"]:
        # The demo profile has two owners, hence two flow_ids; a worker that
        # processed packets saw at least one, and never more than exist.
        if w["processed"] and not 1 <= w["flows_seen"] <= 2:
            problems.append(f"worker lcore {w['lcore']} reports {w['flows_seen']} flow_ids")
if kind == "eventdev_symmetric":
    if d["pipeline"] != "event_sw atomic, symmetric":
        problems.append(f"pipeline {d['pipeline']!r}: --symmetric was not taken")
    # The demo profile's two lcores each poll one RX queue and are each a worker.
    if len(d["workers"]) != 2:
        problems.append(f"{len(d['workers'])} lcores reported, the demo profile has 2")
    for w in d["workers"]:
        if w["rx"] == 0:
            problems.append(f"lcore {w['lcore']} read nothing from its RX queue")
        if w["rx"] != w["enqueued"] + w["unclassifiable"]:
            problems.append(f"lcore {w['lcore']}: rx {w['rx']} != enqueued {w['enqueued']} + unclassifiable {w['unclassifiable']}")
    if sum(w["rx"] for w in d["workers"]) != d["rx"]:
        problems.append("the lcores' rx do not add up to the total")
    # Two flows (owners) and atomic scheduling: a flow goes to one lcore at a
    # time, so an lcore may see few events, but over 0.3 s both work.
    if not all(w["processed"] for w in d["workers"]):
        problems.append("an lcore processed nothing: the events went to one worker only")
# The workers run quicsteer's connection stage on the metadata the
# classification left in each mbuf; read from the wrong offsets, the 4-tuples
# change on most packets. net_pcap replays the capture in a loop, and per
# replay a connection's 4-tuple changes at most twice (a migration or NAT
# rebinding, and back when the capture starts over).
processed = sum(w["processed"] for w in d["workers"])
migrations = sum(w["migrations"] for w in d["workers"])
bound = 2 * connections * (processed // frames + 1)
if migrations > bound:
    problems.append(f"the workers counted {migrations} migrations in {processed} packets "
                    f"({frames}-frame capture of {connections} connections: at most {bound})")
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
