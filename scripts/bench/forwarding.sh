#!/usr/bin/env bash
# scripts/bench/forwarding.sh [--json FILE] [--runs N] [--seconds S]
#
# What the forwarding tables (steering.forwarding) cost end to end: the demo
# profile (two lcores, each receiving one net_pcap queue and owning, into
# net_null) with the tables on and off, in one run, on two quicgen captures:
#   quic_lb      the demo's own traffic (servers mint QUIC-LB CIDs: the tables
#                see only first Initials and unroutable CIDs)
#   random_cids  the same connections from servers that mint random CIDs
#                (quicgen --server-cids random, client to server only): with
#                the tables every packet after a first Initial is routed by a
#                learned DCID, without them by the hash (and connections split)
# and, on random_cids, the tables without the per-source budget
# (max_entries_per_source: 0, "unbounded"), whose check and charge every
# entry taught pays.
# Runs are interleaved, N of each (default 5, S seconds each, default 3).
# Prints the median busy TSC cycles per received packet (the lcores' own
# accounting: TSC time of iterations that moved packets) with min..max, and
# the ratios tables on / off, target <= 1.10 (JSON ratios.forwarding_on_vs_off_*),
# and budget / unbounded, target <= 1.02 (ratios.source_budget_vs_unbounded_random_cids).
# Writes results/forwarding.json (or --json FILE). Run it on an otherwise
# idle machine. EAL memory: hugepages when enough are free, --no-huge
# otherwise (lib/memory.sh; the output and the JSON say which).
# QS_BUILD_DIR picks the build directory (./build).
source "$(dirname "$0")/lib/common.sh"
cd "$root"

json=results/forwarding.json
runs=5
seconds=3
source "$root/scripts/bench/lib/args.sh"
bench_parse_args forwarding.sh "scripts/bench.sh forwarding [--json FILE] [--runs N] [--seconds S]" "$@"

source "$root/scripts/bench/lib/memory.sh"
build_bench forwarding.sh quicsteer quicgen

work=$(mktemp -d -t qs-forwarding.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p results
"$build/quicgen" --profile configs/demo.yaml --out "$work/quic_lb.pcap" --connections 400 --seed 1 >/dev/null
"$build/quicgen" --profile configs/demo.yaml --out "$work/random_cids.pcap" --connections 400 --seed 1 \
  --server-cids random --client-to-server-only >/dev/null
cases=(quic_lb-on quic_lb-off random_cids-on random_cids-off random_cids-unbounded)
for case in "${cases[@]}"; do
  capture=${case%-*} tables=${case#*-}
  enabled=true per_source=16384
  [ "$tables" = off ] && enabled=false
  [ "$tables" = unbounded ] && per_source=0
  sed -e "s#results/demo.pcap#$work/$capture.pcap#g" \
      -e "s#^\(    enabled: \)true#\1$enabled#" \
      -e "s#^\(    max_entries_per_source: \)16384#\1$per_source#" configs/demo.yaml > "$work/$case.yaml"
  grep -q "enabled: $enabled" "$work/$case.yaml" && grep -q "max_entries_per_source: $per_source" "$work/$case.yaml" ||
    { echo "forwarding.sh: could not set steering.forwarding in the demo profile" >&2; exit 1; }
  "$build/quicsteer" --check "$work/$case.yaml" >/dev/null
done

# Hugepages when 1024 MB are free (lib/memory.sh), for every run alike.
bench_memory forwarding.sh 1024 auto
eal=(--lcores "0@0,1@0,2@1" "${eal_memory[@]}" -m 1024 --no-shconf --no-pci --log-level "*:notice")
cpu=$(cpu_model)
echo "forwarding: CPU $cpu, $(nproc) CPUs; demo layout, lcores 1@CPU0 and 2@CPU1; $runs run(s) of ${seconds} s each"
echo "forwarding: EAL memory: $memory_text"
for r in $(seq 1 "$runs"); do
  for case in "${cases[@]}"; do
    "$build/quicsteer" "${eal[@]}" -- --profile "$work/$case.yaml" --duration "$seconds" \
      --stats-json "$work/$case-$r.json" > "$work/$case-$r.txt" 2>&1 ||
      { echo "forwarding.sh: quicsteer $case failed:" >&2; tail -20 "$work/$case-$r.txt" >&2; exit 1; }
  done
done

python3 - "$work" "$runs" "$cpu" "$json" "$memory" <<'PY'
import json, statistics, sys
work, runs, cpu, out, memory = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
cases = {}
for capture, tables in (("quic_lb", "on"), ("quic_lb", "off"), ("random_cids", "on"), ("random_cids", "off"),
                        ("random_cids", "unbounded")):
        cyc, mpps, learned = [], [], []
        for r in range(1, runs + 1):
            d = json.load(open(f"{work}/{capture}-{tables}-{r}.json"))
            t = d["total"]
            if not d["mbufs"]["ok"]:
                sys.exit(f"forwarding.sh: {capture}-{tables} run {r} leaked mbufs")
            cyc.append(t["busy_cycles"] / t["rx"])
            mpps.append(t["rx"] / d["elapsed_s"] / 1e6)
            learned.append(t["routed"]["learned_cid"] / t["rx"])
        cases[f"{capture}_{tables}"] = {
            "cycles_per_packet": {"median": statistics.median(cyc), "min": min(cyc), "max": max(cyc)},
            "rx_mpps": {"median": statistics.median(mpps), "min": min(mpps), "max": max(mpps)},
            "routed_by_learned_cid": statistics.median(learned), "runs": runs}
median = lambda name: cases[name]["cycles_per_packet"]["median"]
ratios = {f"forwarding_on_vs_off_{c}": median(f"{c}_on") / median(f"{c}_off") for c in ("quic_lb", "random_cids")}
ratios["source_budget_vs_unbounded_random_cids"] = median("random_cids_on") / median("random_cids_unbounded")
targets = {k: 1.10 for k in ratios}
targets["source_budget_vs_unbounded_random_cids"] = 1.02
print(f"{'capture, tables':24} {'cycles/pkt':>10} {'min..max':>15} {'RX Mpps':>8} {'by learned CID':>15}")
for name, c in cases.items():
    k = c["cycles_per_packet"]
    print(f"{name:24} {k['median']:10.0f} {k['min']:7.0f}..{k['max']:<7.0f} {c['rx_mpps']['median']:8.2f} "
          f"{100 * c['routed_by_learned_cid']:14.1f}%")
print("ratios:")
for k, v in ratios.items():
    print(f"  {k}: {v:.3f} (target <= {targets[k]:.2f}) {'met' if v <= targets[k] else 'NOT MET'}")
json.dump({"cpu": cpu, "memory": memory, "unit": "busy TSC cycles per received packet", "cases": cases, "ratios": ratios,
           "targets": {k: f"<= {v:.2f}" for k, v in targets.items()}}, open(out, "w"), indent=2)
print(f"wrote {out}")
PY
