#!/usr/bin/env bash
# scripts/bench/e2e.sh [--json FILE] [--runs N] [--seconds S]
#
# End-to-end benchmark, in one run, on one quicgen capture and the same
# virtual devices (net_pcap infinite_rx -> net_null no-rx) and lcores:
#   testpmd      dpdk-testpmd io forwarding: the baseline (no classification,
#                no hand-off)
#   demo, lossless, drop
#                quicsteer with those profiles (lossless and drop carry their
#                synthetic owner cost: they show the policies, not the ceiling)
#   split        the demo profile with lcore 1 receiving both queues and lcore
#                2 the only owner: every packet crosses a ring; once more on
#                DPDK's stack mempool driver (EAL --mbuf-pool-ops-name stack)
#   distributor  the DPDK-native alternative: tests/bench/distributor_pipeline
#                (rte_distributor burst mode, same classification and owner work)
#   eventdev     DPDK's flow-affine distribution: tests/bench/eventdev_pipeline
#                (event_sw, one atomic queue, events tagged by owner; its
#                scheduler runs on the receiving lcore: no core is spare)
#   eventdev_symmetric
#                the same with --symmetric: every lcore polls its own RX queue,
#                enqueues, runs the scheduler (serialized) and works, as
#                quicsteer's demo lcores all receive and own
# then tests/bench/bench_backpressure (park vs drop under an offered load one
# owner cannot carry). Runs are interleaved, N of each (default 5, each S
# seconds, default 3); the table shows medians and min..max. Writes
# results/e2e.json (or --json FILE) and results/e2e.png. EAL memory:
# hugepages when enough are free, --no-huge otherwise (lib/memory.sh; the
# output and the JSON's hardware.memory say which); bench_backpressure runs
# on the same (its --memory; its JSON's scenario.memory says which).
#
# Lcores: main 0 on CPU 0, forwarding lcores 1 on CPU 0 and 2 on CPU 1, for
# testpmd, quicsteer and the two DPDK-native pipelines alike. The main lcores are idle
# (testpmd waits at its prompt, quicsteer's wakes every 20 ms). Run it on an
# otherwise idle machine. QS_BUILD_DIR picks the build directory (./build).
source "$(dirname "$0")/lib/common.sh"
cd "$root"

json=results/e2e.json
runs=5
seconds=3
source "$root/scripts/bench/lib/args.sh"
bench_parse_args e2e.sh "scripts/bench.sh e2e [--json FILE] [--runs N] [--seconds S]" "$@"

for tool in dpdk-testpmd gnuplot python3; do
  command -v $tool >/dev/null || { echo "e2e.sh: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
source "$root/scripts/bench/lib/testpmd.sh"
source "$root/scripts/bench/lib/memory.sh"
build_bench e2e.sh quicsteer quicgen tests/bench/distributor_pipeline tests/bench/eventdev_pipeline \
  tests/bench/bench_backpressure

mkdir -p results "$(dirname "$json")"
work=$(mktemp -d /tmp/quicsteer-e2e.XXXXXX)
tp_pid=
cleanup() {
  if [ -n "$tp_pid" ]; then kill "$tp_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The capture: the demo's own (quicgen with the demo profile's QUIC-LB
# config, 400 connections), written afresh: it is deterministic.
capture=results/e2e.pcap
capture_info=$("$build/quicgen" --profile configs/demo.yaml --out "$capture" --connections 400 --seed 1)
pcap_abs=$(cd "$(dirname "$capture")" && pwd)/$(basename "$capture")

for p in demo lossless drop; do
  sed "s#results/demo.pcap#$pcap_abs#g" configs/$p.yaml > "$work/$p.yaml"
done
# split: the demo profile with one receiver and one owner. The top-level
# lcores block is replaced, and both servers go to the one owner.
awk '
  /^lcores:/ { print "lcores:\n  - {id: 1, rx: [\"wire:0\", \"wire:1\"]}\n  - {id: 2, owner: true}"; skip = 1; next }
  skip && /^[^ \t]/ { skip = 0 }
  skip { next }
  { print }
' "$work/demo.yaml" | sed -E 's/(server_id: "[0-9a-fA-F]+", owner: )1\}/\12}/' > "$work/split.yaml"
for p in demo lossless drop split; do
  "$build/quicsteer" --check "$work/$p.yaml" >/dev/null || { echo "e2e.sh: profile $p does not validate" >&2; exit 1; }
done

# Hugepages when 1024 MB are free (lib/memory.sh), for every run alike.
bench_memory e2e.sh 1024 auto
eal=(--lcores "0@0,1@0,2@1" "${eal_memory[@]}" -m 1024 --no-shconf --no-pci --log-level "*:notice")
vdevs=(--vdev "net_pcap0,rx_pcap=$pcap_abs,rx_pcap=$pcap_abs,infinite_rx=1" --vdev "net_null0,no-rx=1")
cpu=$(cpu_model)
# What else keeps the CPUs busy (nothing of ours runs yet): 1 s of /proc/stat.
cpu_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
read -r b0 t0 < <(cpu_busy); sleep 1; read -r b1 t1 < <(cpu_busy)
background=$(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v n="$(nproc)" 'BEGIN{printf "%.2f", t ? n * b / t : 0}')
echo "e2e: CPU $cpu, $(nproc) CPUs; lcores main 0@CPU0, forwarding 1@CPU0 and 2@CPU1 (3 lcores on 2 CPUs: the"
echo "     main lcore is oversubscribed with lcore 1 but idle); $runs run(s) of ${seconds} s per configuration"
echo "e2e: EAL memory: $memory_text"
echo "e2e: background load before the runs: $background of $(nproc) CPUs busy"
echo "e2e: ${capture_info#quicgen: }"


for r in $(seq 1 "$runs"); do
  echo "e2e: run $r/$runs"
  run_testpmd e2e.sh "$work/testpmd-$r.txt" "$work" "$seconds" start "${eal[@]}" "${vdevs[@]}" -- -i \
    --forward-mode=io --nb-cores=2 --rxq=2 --txq=2 --rxd=1024 --txd=1024 --burst=32 --total-num-mbufs=131071 --mbcache=256
  for p in demo split split_stack lossless drop; do
    # split_stack: the split profile on DPDK's stack mempool driver, whose LIFO
    # hands the receiver back the mbufs the owner freed last, still warm.
    extra=()
    profile=$p
    if [ "$p" = split_stack ]; then extra=(--mbuf-pool-ops-name stack); profile=split; fi
    "$build/quicsteer" "${eal[@]}" "${extra[@]}" -- --profile "$work/$profile.yaml" --duration "$seconds" \
      --stats-json "$work/$p-$r.json" > "$work/$p-$r.txt" 2>&1 ||
      { echo "e2e.sh: quicsteer $p failed:" >&2; tail -20 "$work/$p-$r.txt" >&2; exit 1; }
  done
  "$build/tests/bench/distributor_pipeline" "${eal[@]}" -- --profile "$work/demo.yaml" --duration "$seconds" \
    --json "$work/distributor-$r.json" > "$work/distributor-$r.txt" 2>&1 ||
    { echo "e2e.sh: distributor_pipeline failed:" >&2; tail -20 "$work/distributor-$r.txt" >&2; exit 1; }
  "$build/tests/bench/eventdev_pipeline" "${eal[@]}" -- --profile "$work/demo.yaml" --duration "$seconds" \
    --json "$work/eventdev-$r.json" > "$work/eventdev-$r.txt" 2>&1 ||
    { echo "e2e.sh: eventdev_pipeline failed:" >&2; tail -20 "$work/eventdev-$r.txt" >&2; exit 1; }
  "$build/tests/bench/eventdev_pipeline" "${eal[@]}" -- --profile "$work/demo.yaml" --duration "$seconds" \
    --json "$work/eventdev_symmetric-$r.json" --symmetric > "$work/eventdev_symmetric-$r.txt" 2>&1 ||
    { echo "e2e.sh: eventdev_pipeline --symmetric failed:" >&2; tail -20 "$work/eventdev_symmetric-$r.txt" >&2; exit 1; }
done

# Back-pressure, park vs drop, at 2x one owner's capacity: the owner cost of
# the lossless/drop profiles (3000 cycles/packet) and a slower owner (10000),
# each with the shipped 50 us idle back-off and with 10 us. The first is the
# headline (nothing tuned); the others show what park's goodput depends on.
echo "e2e: back-pressure (park vs drop)"
for cost in 3000 10000; do
  for idle in 50 10; do
    "$build/tests/bench/bench_backpressure" --runs "$runs" --seconds 1 --cost $cost --idle-sleep-us $idle \
      --memory "$memory" --json "$work/backpressure-$cost-$idle.json" > "$work/backpressure-$cost-$idle.txt" 2>&1 ||
      { cat "$work/backpressure-$cost-$idle.txt" >&2; exit 1; }
  done
done
grep -v '^port ' "$work/backpressure-3000-50.txt"

echo "e2e: measuring took ${SECONDS} s"
python3 "$root/scripts/bench/e2e_report.py" --work "$work" --runs "$runs" --seconds "$seconds" \
  --cpu "$cpu" --cpus "$(nproc)" --memory "$memory" --background "$background" --capture "$capture" --json "$json" --plot results/e2e.png
