#!/usr/bin/env bash
# scripts/bench/scale.sh [--json FILE] [--runs N] [--seconds S] [--memory auto|hugepages|no-huge] [--before BUILD_DIR]
#
# How quicsteer's cost grows with its work (issue 40), on ringloop.sh's
# copy-free loop in the solo layout (one lcore, alone on CPU 1, polls both
# queues and owns every connection: "per owner core" below is that lcore,
# which also receives), with tests/bench/ring_loop --scale (its header and
# tests/bench/scale_traffic.h say how ~2,000 circulating frames stand for a
# million connections: an RX callback rewrites each frame's DCID and 4-tuple
# from a stream read in order, the same harness cost at every scale):
#   conn_1k, conn_100k, conn_1m          live connections per owner (QUIC-LB
#                                        CIDs), every one touched each lap
#   conn_1k_zipf ... conn_1m_zipf        the same, packets drawn Zipf(0.99)
#   fwd_10k, fwd_1m                      random CIDs, each routed by its entry in
#                                        the forwarding tables' established table
#                                        (and tracked in a shard of as many)
#   backends_4, backends_100, backends_4096
#                                        l2 delivery to that many backends, 65,536
#                                        connections spread over them all
#   conn_1m_4slots, conn_1m_zipf_4slots, fwd_1m_4slots
#                                        the same with action.slots_per_connection
#                                        4: tables at most a quarter full, twice
#                                        the memory (against the same bases)
#   new                                  every packet the first Initial of a new
#                                        connection (setup-table, CID and connection
#                                        inserts; expiry after 1 s idle), a shard of 2M
# 1,024 frames circulate, as in ringloop.sh (with 2,048 the loop's own mbufs
# and frames outgrow this Intel host's 2 MB L2 and every configuration pays
# ~11 cycles more: solo as_is 90 at 128..1,024 frames, 102 at 2,048, 147 at
# 4,096). Runs are interleaved, N of each (default 3, S seconds each after
# 1.5 s of warm-up). Prints each configuration's median cycles per packet (TSC cycles
# of the one lcore / packets received) with min..max, and the ratios in the
# same run, with the issue's targets:
#   ratios.connections_1m_vs_1k      <= 1.5   (also _zipf, and 100k)
#   ratios.forwarding_1m_vs_10k      <= 1.5   (also each _4slots)
#   ratios.backends_4096_vs_4        <= 1.1
#   new_connections_per_s            >= 1,000,000 per owner core (Katran: 125,000)
# and memory: octets per connection (the shard's two tables over
# max_connections), per forwarding entry (the established table over
# max_entries), and the EAL memory start-up took with a shard of 1M.
# Then the profile's upper bound: quicsteer with a profile whose shards do not
# fit (2 owners x 16M connections, 16 GB) must refuse to start, naming the
# key; the JSON's oversize says what it printed.
# With --before DIR, that build's ring_loop runs the same configurations in
# the same rounds (NAME_before, ratios.NAME_after_vs_before).
# EAL memory: 1280 MB (-m) for every configuration, hugepages when that much
# is free (lib/memory.sh), which is more than scripts/setup.sh reserves:
#   echo 768 > /proc/sys/vm/nr_hugepages   (as root; 2 MB pages)
# Writes results/scale.json (or --json FILE). Takes about 90 s per run.
source "$(dirname "$0")/lib/common.sh"
cd "$root"

json=results/scale.json
runs=3
seconds=3
memory=auto
before=
source "$root/scripts/bench/lib/args.sh"
bench_extra_arg() {
  case $1 in
    --memory) memory=$2 ;;
    --before) before=$(cd "$2" && pwd) ;;
    *) return 1 ;;
  esac
}
bench_parse_args scale.sh "scripts/bench.sh scale [--json FILE] [--runs N] [--seconds S] [--memory auto|hugepages|no-huge] [--before BUILD_DIR]" "$@"
eal_mb=1280
source "$root/scripts/bench/lib/memory.sh"
bench_memory scale.sh "$eal_mb" "$memory"
loop_memory=()
if [ "$memory" = hugepages ]; then loop_memory=(--hugepages); fi
build_bench scale.sh tests/bench/ring_loop quicsteer
if [ -n "$before" ] && [ ! -x "$before/tests/bench/ring_loop" ]; then
  echo "scale.sh: $before/tests/bench/ring_loop is missing: build it there first" >&2
  exit 1
fi

mkdir -p results "$(dirname "$json")"
work=$(mktemp -d /tmp/quicsteer-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
cpu=$(cpu_model)
echo "scale: CPU $cpu, $(nproc) CPUs; solo layout: main lcore 0@CPU0, lcore 1@CPU1 receives and owns"
echo "       $runs run(s) of ${seconds} s per configuration; EAL memory: $memory_text"

configs=(
  "conn_1k --scale connections --connections 1000"
  "conn_100k --scale connections --connections 100000"
  "conn_1m --scale connections --connections 1000000"
  "conn_1m_4slots --scale connections --connections 1000000 --slots-per-connection 4"
  "conn_1k_zipf --scale connections --connections 1000 --zipf 0.99"
  "conn_100k_zipf --scale connections --connections 100000 --zipf 0.99"
  "conn_1m_zipf --scale connections --connections 1000000 --zipf 0.99"
  "conn_1m_zipf_4slots --scale connections --connections 1000000 --zipf 0.99 --slots-per-connection 4"
  "fwd_10k --scale forwarding --connections 10000"
  "fwd_1m --scale forwarding --connections 1000000"
  "fwd_1m_4slots --scale forwarding --connections 1000000 --slots-per-connection 4"
  "backends_4 --scale backends --backends 4 --connections 65536"
  "backends_100 --scale backends --backends 100 --connections 65536"
  "backends_4096 --scale backends --backends 4096 --connections 65536"
  "new --scale new --connections 2000000 --idle-ms 1000"
)
run_loop() {
  local dir=$1 name=$2 r=$3
  shift 3
  "$dir/tests/bench/ring_loop" --layout solo --packets 1024 --seconds "$seconds" --warmup 1.5 --eal-mb "$eal_mb" \
    "${loop_memory[@]}" \
    "$@" --json "$work/$name-$r.json" > "$work/$name-$r.txt" 2>&1 ||
    { echo "scale.sh: ring_loop $name failed:" >&2; tail -5 "$work/$name-$r.txt" >&2; exit 1; }
}
for r in $(seq 1 "$runs"); do
  echo "scale: run $r/$runs"
  for c in "${configs[@]}"; do
    read -r name args <<< "$c"
    # shellcheck disable=SC2086  # the configuration's arguments, split
    run_loop "$build" "$name" "$r" $args
    # shellcheck disable=SC2086
    if [ -n "$before" ]; then run_loop "$before" "${name}_before" "$r" $args; fi
  done
done

# The upper bound: shards that cannot fit must stop quicsteer at start-up
# with a message naming what to change (not a crash, not an OOM kill).
cat > "$work/oversize.yaml" <<'YAML'
ports:
  - {name: p, device: "net_null0", rx_queues: 2, tx_queues: 2}
mempool: {mbufs: 4095, cache: 64}
lcores:
  - {id: 1, rx: ["p:0"], owner: true}
  - {id: 2, rx: ["p:1"], owner: true}
steering:
  quic_ports: [443]
  servers:
    - {server_id: "0001", owner: 1}
    - {server_id: "0002", owner: 2}
  quic_lb:
    - {config_id: 0, server_id_len: 2, nonce_len: 14, key: "7175696373746565722064656d6f2121"}
  fallback: {key: "000102030405060708090a0b0c0d0e0f"}
action: {type: sink, max_connections: 16777216}
stats: {period_ms: 0}
YAML
oversize_rc=0
"$build/quicsteer" --lcores 0@0,1@1,2@1 --no-pci --no-shconf --log-level "*:warning" -- \
  --profile "$work/oversize.yaml" --duration 1 > "$work/oversize.txt" 2>&1 || oversize_rc=$?

python3 - "$work" "$runs" "$json" "$cpu" "$(nproc)" "$seconds" "$memory" "$oversize_rc" "${configs[@]}" <<'PY'
import json, os, statistics, sys
work, runs, out, cpu, cpus, seconds, memory, oversize_rc = sys.argv[1:9]
runs, seconds, oversize_rc = int(runs), float(seconds), int(oversize_rc)
names = [c.split()[0] for c in sys.argv[9:]]
def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
configs, raw = {}, {}
for base in names:
    for name in [base, base + "_before"]:
        if not os.path.exists(f"{work}/{name}-1.json"):
            continue
        rs = [json.load(open(f"{work}/{name}-{r}.json")) for r in range(1, runs + 1)]
        raw[name] = rs
        c = {"cycles_per_packet": spread([x["cycles_per_packet"] for x in rs]), "mpps": spread([x["mpps"] for x in rs])}
        for k in ["connections", "zipf", "max_connections", "slots_per_connection", "forwarding_entries", "backends", "table_bytes",
                  "established_bytes", "eal_startup_bytes"]:
            c[k] = rs[0][k]
        c["untracked"] = [x["untracked"] for x in rs]
        c["connections_live_at_end"] = [x["connections_live"] for x in rs]
        if base == "new":
            c["new_connections_per_s"] = spread([x["new_connections_per_s"] for x in rs])
            c["expired_per_s"] = [x["expired"] / x["window_s"] for x in rs]
        configs[name] = c
tsc_hz = raw["conn_1k"][0]["tsc_hz"]
med = lambda n: configs[n]["cycles_per_packet"]["median"]
ratios = {
    "connections_100k_vs_1k": med("conn_100k") / med("conn_1k"),
    "connections_1m_vs_1k": med("conn_1m") / med("conn_1k"),
    "connections_100k_vs_1k_zipf": med("conn_100k_zipf") / med("conn_1k_zipf"),
    "connections_1m_vs_1k_zipf": med("conn_1m_zipf") / med("conn_1k_zipf"),
    "forwarding_1m_vs_10k": med("fwd_1m") / med("fwd_10k"),
    # action.slots_per_connection 4 (twice the memory), against the same
    # bases (at 1k and 10k the tables fit in the caches either way).
    "connections_1m_vs_1k_4slots": med("conn_1m_4slots") / med("conn_1k"),
    "connections_1m_vs_1k_zipf_4slots": med("conn_1m_zipf_4slots") / med("conn_1k_zipf"),
    "forwarding_1m_vs_10k_4slots": med("fwd_1m_4slots") / med("fwd_10k"),
    "connections_1m_4slots_vs_2slots": med("conn_1m_4slots") / med("conn_1m"),
    "backends_100_vs_4": med("backends_100") / med("backends_4"),
    "backends_4096_vs_4": med("backends_4096") / med("backends_4"),
}
for n in names:
    if n + "_before" in configs:
        ratios[f"{n}_after_vs_before"] = med(n) / med(n + "_before")
targets = {"connections_1m_vs_1k": 1.5, "connections_1m_vs_1k_zipf": 1.5, "forwarding_1m_vs_10k": 1.5,
           "connections_1m_vs_1k_4slots": 1.5, "connections_1m_vs_1k_zipf_4slots": 1.5,
           "forwarding_1m_vs_10k_4slots": 1.5, "backends_4096_vs_4": 1.1}
new = configs["new"]
new_per_s = new["new_connections_per_s"]["median"]
c1m, f1m = configs["conn_1m"], configs["fwd_1m"]
memory_figures = {
    "octets_per_connection": c1m["table_bytes"] / c1m["max_connections"],
    "octets_per_connection_4slots": configs["conn_1m_4slots"]["table_bytes"] / c1m["max_connections"],
    "startup_eal_bytes_1m_per_owner_4slots": configs["conn_1m_4slots"]["eal_startup_bytes"],
    "octets_per_forwarding_entry": f1m["established_bytes"] / f1m["forwarding_entries"],
    "forwarding_entries_of_1m": f1m["forwarding_entries"],
    "startup_eal_bytes_1m_per_owner": c1m["eal_startup_bytes"],
    "startup_eal_bytes_1k_per_owner": configs["conn_1k"]["eal_startup_bytes"],
}
oversize_text = open(f"{work}/oversize.txt").read().strip().splitlines()
oversize = {"exit_code": oversize_rc, "message": next((l for l in oversize_text if "cannot allocate" in l), oversize_text[-1] if oversize_text else ""),
            "clear": oversize_rc not in (0,) and oversize_rc < 128 and any("cannot allocate" in l and "max_connections" in l for l in oversize_text)}
print(f"CPU {cpu}, {cpus} CPUs, TSC {tsc_hz / 1e9:.3f} GHz; {runs} runs of {seconds:g} s; EAL memory {memory}")
print(f"{'configuration':22} {'Mpps median (min..max)':>26} {'cycles/packet median (min..max)':>34}")
for name, c in configs.items():
    m, p = c["mpps"], c["cycles_per_packet"]
    print(f"{name:22} {m['median']:8.2f} ({m['min']:7.2f}..{m['max']:7.2f}) {p['median']:14.1f} ({p['min']:7.1f}..{p['max']:7.1f})  [{cpu}]")
for k, v in ratios.items():
    t = targets.get(k)
    verdict = "" if t is None else f"  (target <= {t:g}: {'met' if v <= t else 'not met'})"
    print(f"ratios.{k} = {v:.2f}{verdict}  [{cpu}]")
n = new["new_connections_per_s"]
print(f"new_connections_per_s = {n['median']:,.0f} per owner core ({n['min']:,.0f}..{n['max']:,.0f}; "
      f"{tsc_hz / n['median']:.0f} cycles each; Katran 125,000: {n['median'] / 125000:.1f}x; "
      f"target >= 1,000,000: {'met' if n['median'] >= 1e6 else 'not met'}); untracked {new['untracked']}  [{cpu}]")
print(f"memory: {memory_figures['octets_per_connection']:.0f} octets per connection (action.max_connections; "
      f"{memory_figures['octets_per_connection_4slots']:.0f} with slots_per_connection 4), "
      f"{memory_figures['octets_per_forwarding_entry']:.1f} per forwarding entry (steering.forwarding.max_entries); "
      f"start-up EAL memory with 1M connections per owner {memory_figures['startup_eal_bytes_1m_per_owner'] / 2**20:.0f} MB "
      f"(with 1k: {memory_figures['startup_eal_bytes_1k_per_owner'] / 2**20:.0f} MB)")
print(f"oversize profile (2 owners x 16M connections): exit {oversize_rc}, {'a clear start-up error' if oversize['clear'] else 'NOT a clear start-up error'}: {oversize['message']}")
json.dump({"benchmark": "scale", "cpu": cpu, "cpus": int(cpus), "tsc_hz": tsc_hz, "runs": runs, "seconds": seconds,
           "memory": memory, "lcores": "solo: main 0@CPU0, lcore 1@CPU1 receives and owns",
           "configurations": configs, "ratios": ratios, "new_connections_per_s": new_per_s,
           "new_connections_per_s_spread": n, "memory_figures": memory_figures, "oversize": oversize,
           "targets": {**{k: f"<= {v:g}" for k, v in targets.items()}, "new_connections_per_s": ">= 1000000"}},
          open(out, "w"), indent=2)
print(f"wrote {out}")
PY
