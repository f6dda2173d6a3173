#!/usr/bin/env bash
# Smoke test of the e2e benchmark's rte_distributor baseline: on a small
# quicgen capture replayed by net_pcap, every packet the distributor reads is
# sent by a worker or counted as unclassifiable, and every mbuf comes back
# (distributor_pipeline exits 1 otherwise); and packets really flowed.
#   distributor_pipeline_test.sh DISTRIBUTOR_PIPELINE QUICGEN SOURCE_ROOT
set -euo pipefail
pipeline=$1 quicgen=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$quicgen" --profile "$src/configs/demo.yaml" --out "$work/t.pcap" --connections 40 --seed 3 >/dev/null
# The demo profile on this capture, with a pool sized for a small capture.
sed -e "s#results/demo.pcap#$work/t.pcap#g" -e 's/^  mbufs: 131071/  mbufs: 16383/' \
  "$src/configs/demo.yaml" > "$work/p.yaml"
grep -q "mbufs: 16383" "$work/p.yaml" || { echo "FAIL: could not resize the pool in the demo profile"; exit 1; }

"$pipeline" --lcores "(0-2)@(0,1)" --no-huge -m 512 --no-shconf --no-pci --log-level "*:warning" \
  -- --profile "$work/p.yaml" --duration 0.3 --json "$work/out.json" > "$work/log.txt" 2>&1 ||
  { cat "$work/log.txt"; echo "FAIL: distributor_pipeline exited with an error"; exit 1; }

python3 - "$work/out.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
problems = []
if d["rx"] == 0:
    problems.append("no packet was read")
if d["tx"] + d["tx_dropped"] + d["unclassifiable"] != d["rx"]:
    problems.append(f"rx {d['rx']} != tx {d['tx']} + tx_dropped {d['tx_dropped']} + unclassifiable {d['unclassifiable']}")
if d["tx_dropped"] != 0:
    problems.append(f"net_null refused {d['tx_dropped']} packets")
if sum(w["processed"] for w in d["workers"]) != d["distributed"]:
    problems.append("the workers processed a different number of packets than were distributed")
if d["mbufs"]["leaked"] != 0:
    problems.append(f"{d['mbufs']['leaked']} mbufs leaked")
if problems:
    print("FAIL: " + "; ".join(problems))
    sys.exit(1)
print(f"ok: {d['rx']} packets read, {d['tx']} sent, {d['unclassifiable']} unclassifiable, no mbuf leaked")
EOF
