#!/usr/bin/env bash
# scripts/bench/scale.sh [--json FILE] [--runs N] [--seconds S] [--memory auto|hugepages|no-huge] [--before BUILD_DIR]
#                        [--counters on|off]
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
#   conn_1m_2slots, conn_1m_zipf_2slots, fwd_1m_2slots
#                                        the same with action.slots_per_connection
#                                        2: tables at most half full, half the
#                                        memory of the default 4 (against the
#                                        same bases)
#   new                                  every packet the first Initial of a new
#                                        connection (setup-table, CID and connection
#                                        inserts; expiry after 0.5 s idle), a shard of 2M
#                                        (at 1.6M/s and 1 s idle it overflowed: a
#                                        packet the full shard leaves untracked
#                                        skips the inserts, which flatters the rate,
#                                        so the output flags any)
# 1,024 frames circulate, as in ringloop.sh (with 2,048 the loop's own mbufs
# and frames outgrow this Intel host's 2 MB L2 and every configuration pays
# ~11 cycles more: solo as_is 90 at 128..1,024 frames, 102 at 2,048, 147 at
# 4,096). Runs are interleaved, N of each (default 3, S seconds each after
# 1.5 s of warm-up). Prints each configuration's median cycles per packet (TSC cycles
# of the one lcore / packets received) with min..max, and the ratios in the
# same run, with the issue's targets:
#   ratios.connections_1m_vs_1k      <= 1.5   (also _zipf, and 100k)
#   ratios.forwarding_1m_vs_10k      <= 1.5   (also each _2slots)
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
# With --counters on (the default; needs valgrind and cg_annotate:
# apt-get install valgrind), cache misses per packet, from valgrind's
# cachegrind (this VM has no PMU for perf stat), for conn_1k, conn_1m,
# conn_1m_2slots, fwd_10k and fwd_1m ($build's ring_loop, never --before's):
#   - the caches simulated are one core's own: D1 = its L1d, LL = its L2
#     (from /sys/devices/system/cpu/cpu0/cache, else lscpu -B), not the L3,
#     which a VM may report as one shared 480 MB: an LL miss is a line fetched
#     from beyond the core's own caches. Cachegrind wants a power-of-two number
#     of sets; a geometry without one is rounded down to it, and the output
#     says so.
#   - setup does not count: each configuration runs twice, with --warmup 8
#     --seconds 2 and --seconds 6, and the figures are the difference of the
#     two runs' counts over the difference of their "packets received from
#     launch to stop" (EAL start-up and the 1M inserts cancel). Valgrind runs
#     the loop 25..60x slower, which counts do not mind; --fair-sched=yes, or
#     the spinning lcore starves the main thread and the runs last ~5x longer.
#   - per function (cg_annotate), two parts are left out of the per-packet
#     path and reported apart: qs::ConnectionTable::expire, the idle sweep,
#     paced by wall-clock time rather than packets (so slowed packets would
#     inflate its share per packet 25..60x): its LL misses per second of the
#     difference; and the harness, every qs::bench:: function (the RX callback
#     rewrite_for_scale that makes the frames stand for many connections):
#     its LL misses per packet. Everything else (classifier, connection
#     stage, DPDK's ring driver, the loop) is the path: instructions, D1
#     misses (reads + writes) and LL misses (reads + writes) per packet, and
#     its 3 functions with the most LL misses per packet.
#   - the idle timeout is an hour (--idle-ms 3600000) in these runs: what is
#     paced by time would otherwise weigh 25..60x too much per packet. Each
#     CID refreshes its connection's entry (a line of the other table) once
#     per quarter timeout, and the sweep visits every slot as often: at the
#     default 30 s and 1M connections at ~17 Mpps, ~0.01 lines per packet for
#     the refreshes and ~0.06 for the sweep (8M one-line slots in 7.5 s);
#     here neither (the sweep's misses per second are still printed).
#   - cachegrind does not simulate software prefetches, so its misses are
#     demand misses: the lines the path needs from memory, whether or not a
#     prefetch hid their latency.
# They take about 2 minutes (10 runs); the JSON's counters and counters_ratios (e.g.
# ll_misses_per_packet_1m_vs_1k) hold them and the geometry.
# Last, the floor (tests/bench/random_line_cost, a few seconds): what a
# random 64-octet line costs this host outside quicsteer, prefetched a burst
# ahead of its use as the owner does, in tables of the CID table's sizes at
# 1k, 100k and 1M connections; and, with the counters, what conn_1m pays per
# line it needs beyond the L2 against that (the JSON's floor,
# floor.conn_1m_vs_floor_per_line): how much of the growth is the machine's.
# Then the floor again with one load a packet into a working set of 512 KB
# and of 1 MB (floor.with_working_set), about the owner's: what the line
# costs a loop that, as the owner does, needs more of the L2 than its table.
# Writes results/scale.json (or --json FILE). Takes about 90 s per run.
source "$(dirname "$0")/lib/common.sh"
cd "$root"

json=results/scale.json
runs=3
seconds=3
memory=auto
before=
counters=on
source "$root/scripts/bench/lib/args.sh"
bench_extra_arg() {
  case $1 in
    --memory) memory=$2 ;;
    --before) before=$(cd "$2" && pwd) ;;
    --counters) counters=$2 ;;
    *) return 1 ;;
  esac
}
bench_parse_args scale.sh "scripts/bench.sh scale [--json FILE] [--runs N] [--seconds S] [--memory auto|hugepages|no-huge] [--before BUILD_DIR] [--counters on|off]" "$@"
case $counters in
  on | off) ;;
  *) echo "scale.sh: --counters wants on or off" >&2; exit 2 ;;
esac
# --counters on: the tools, and the geometry of one core's own caches.
# cache_geometry LEVEL TYPE prints "size ways line" in bytes (cpu0's sysfs,
# else lscpu -B), nothing if there is no such cache.
cache_geometry() {
  local d size
  for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    if ! [ -r "$d/size" ] || [ "$(cat "$d/level")" != "$1" ] || [ "$(cat "$d/type")" != "$2" ]; then continue; fi
    size=$(cat "$d/size")
    case $size in
      *K) size=$(( ${size%K} * 1024 )) ;;
      *M) size=$(( ${size%M} * 1048576 )) ;;
    esac
    echo "$size $(cat "$d/ways_of_associativity") $(cat "$d/coherency_line_size") sysfs"
    return
  done
  lscpu -B --caches=ONE-SIZE,WAYS,COHERENCY-SIZE,LEVEL,TYPE 2>/dev/null |
    awk -v l="$1" -v t="$2" '$4 == l && $5 == t {print $1, $2, $3, "lscpu"; exit}'
}
# cachegrind_cache NAME LEVEL TYPE sets cg_NAME to cachegrind's
# "size,ways,line", with the number of sets rounded down to a power of two
# (cachegrind wants one), and cg_NAME_note to what was rounded, if anything.
cachegrind_cache() {
  local name=$1 size ways line source sets p=1 note=
  read -r size ways line source <<< "$(cache_geometry "$2" "$3")"
  if ! [[ ${size:-} =~ ^[0-9]+$ && ${ways:-} =~ ^[0-9]+$ && ${line:-} =~ ^[0-9]+$ ]] || [ "$ways" -eq 0 ] || [ "$line" -eq 0 ]; then
    echo "scale.sh: no level-$2 $3 cache in /sys/devices/system/cpu/cpu0/cache or lscpu -B: --counters off to go without" >&2
    exit 1
  fi
  sets=$(( size / (ways * line) ))
  while [ $(( p * 2 )) -le "$sets" ]; do p=$(( p * 2 )); done
  if [ "$p" -ne "$sets" ] || [ $(( sets * ways * line )) -ne "$size" ]; then
    note="$size B ($sets sets) rounded down to $(( p * ways * line )) B ($p sets): cachegrind wants a power of two"
    size=$(( p * ways * line ))
  fi
  printf -v "cg_$name" '%s,%s,%s' "$size" "$ways" "$line"
  printf -v "cg_${name}_note" '%s' "$note"
  printf -v "cg_${name}_source" '%s' "$source"
}
if [ "$counters" = on ]; then
  for tool in valgrind cg_annotate; do
    command -v "$tool" >/dev/null ||
      { echo "scale.sh: --counters on needs $tool (apt-get install valgrind), or --counters off" >&2; exit 1; }
  done
  cachegrind_cache d1 1 Data
  cachegrind_cache ll 2 Unified
  cg_i1=
  if [ -n "$(cache_geometry 1 Instruction)" ]; then cachegrind_cache i1 1 Instruction; fi
fi
eal_mb=1280
source "$root/scripts/bench/lib/memory.sh"
bench_memory scale.sh "$eal_mb" "$memory"
loop_memory=()
if [ "$memory" = hugepages ]; then loop_memory=(--hugepages); fi
build_bench scale.sh tests/bench/ring_loop quicsteer tests/bench/random_line_cost
if [ -n "$before" ] && [ ! -x "$before/tests/bench/ring_loop" ]; then
  echo "scale.sh: $before/tests/bench/ring_loop is missing: build it there first" >&2
  exit 1
fi

mkdir -p results "$(dirname "$json")"
work=$(mktemp -d /tmp/quicsteer-scale.XXXXXX)
# Kept when the report fails, so that a long run's measurements are not lost.
trap 'rc=$?; if [ $rc = 0 ]; then rm -rf "$work"; else echo "scale.sh: measurements kept in $work" >&2; fi' EXIT
cpu=$(cpu_model)
echo "scale: CPU $cpu, $(nproc) CPUs; solo layout: main lcore 0@CPU0, lcore 1@CPU1 receives and owns"
echo "       $runs run(s) of ${seconds} s per configuration; EAL memory: $memory_text"
if [ "$counters" = on ]; then
  echo "       counters: cachegrind with one core's caches, D1 (L1d) $cg_d1, LL (L2) $cg_ll (size,ways,line in bytes; from $cg_ll_source)"
  for note in "${cg_d1_note:+D1 $cg_d1_note}" "${cg_ll_note:+LL $cg_ll_note}"; do
    if [ -n "$note" ]; then echo "       counters: $note"; fi
  done
  # Both runs of a configuration, and the cycles, must be one build's.
  ring_loop_sum=$(sha256sum < "$build/tests/bench/ring_loop")
fi

configs=(
  "conn_1k --scale connections --connections 1000"
  "conn_100k --scale connections --connections 100000"
  "conn_1m --scale connections --connections 1000000"
  "conn_1m_2slots --scale connections --connections 1000000 --slots-per-connection 2"
  "conn_1k_zipf --scale connections --connections 1000 --zipf 0.99"
  "conn_100k_zipf --scale connections --connections 100000 --zipf 0.99"
  "conn_1m_zipf --scale connections --connections 1000000 --zipf 0.99"
  "conn_1m_zipf_2slots --scale connections --connections 1000000 --zipf 0.99 --slots-per-connection 2"
  "fwd_10k --scale forwarding --connections 10000"
  "fwd_1m --scale forwarding --connections 1000000"
  "fwd_1m_2slots --scale forwarding --connections 1000000 --slots-per-connection 2"
  "backends_4 --scale backends --backends 4 --connections 65536"
  "backends_100 --scale backends --backends 100 --connections 65536"
  "backends_4096 --scale backends --backends 4096 --connections 65536"
  "new --scale new --connections 2000000 --idle-ms 500"
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

# Cache misses per packet (--counters on): cachegrind, two runs of each
# configuration (see the header), cg_annotate's per-function table of each.
counter_configs=(conn_1k conn_1m conn_1m_2slots fwd_10k fwd_1m)
counter_seconds=(2 6)
# Long enough for the stream to lap once under valgrind (~0.2 Mpps at 1M):
# a connection's first packet inserts it, which is not the steady state the
# cycle runs measure after their 1.5 s (each run must see no new one).
counter_warmup=8
if [ "$counters" = on ]; then
  cg_caches=(--D1="$cg_d1" --LL="$cg_ll")
  if [ -n "$cg_i1" ]; then cg_caches+=(--I1="$cg_i1"); fi
  echo "scale: counters, cachegrind runs of ${counter_configs[*]} (--seconds ${counter_seconds[*]} each)"
  counters_start=$SECONDS
  for name in "${counter_configs[@]}"; do
    args=
    for c in "${configs[@]}"; do
      if [ "${c%% *}" = "$name" ]; then args=${c#* }; fi
    done
    [ -n "$args" ] || { echo "scale.sh: no configuration $name for the counters" >&2; exit 1; }
    for s in "${counter_seconds[@]}"; do
      out=$work/cg-$name-$s
      # shellcheck disable=SC2086  # the configuration's arguments, split
      valgrind --tool=cachegrind --cache-sim=yes --fair-sched=yes "${cg_caches[@]}" --cachegrind-out-file="$out.out" \
        "$build/tests/bench/ring_loop" --layout solo --packets 1024 --seconds "$s" --warmup "$counter_warmup" --eal-mb "$eal_mb" \
        "${loop_memory[@]}" $args --idle-ms 3600000 --json "$out.json" > "$out.txt" 2>&1 ||
        { echo "scale.sh: ring_loop $name under cachegrind failed:" >&2; tail -5 "$out.txt" >&2; exit 1; }
      cg_annotate --auto=no --threshold=0 --show-percs=no "$out.out" > "$out.annotate" 2> "$out.annotate.err" ||
        { echo "scale.sh: cg_annotate $out.out failed:" >&2; tail -5 "$out.annotate.err" >&2; exit 1; }
    done
    [ "$(sha256sum < "$build/tests/bench/ring_loop")" = "$ring_loop_sum" ] ||
      { echo "scale.sh: $build/tests/bench/ring_loop changed during the runs (rebuilt?): its figures would mix builds" >&2; exit 1; }
  done
  echo "scale: counters took $(( SECONDS - counters_start )) s"
  python3 - "$work" "$cg_d1" "$cg_ll" "$cg_d1_note" "$cg_ll_note" "$cg_ll_source" "$counter_warmup" "${counter_seconds[@]}" "${counter_configs[@]}" <<'PY'
# Per configuration: the 6 s run's counts less the 2 s run's, per function
# (cg_annotate's table), over the difference of packets received from launch
# to stop; written to WORK/counters.json for the report below.
import json, re, sys
work, d1, ll, d1_note, ll_note, source, warmup, s_short, s_long = sys.argv[1:10]
names = sys.argv[10:]
events = ["Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw"]

def strip_args(fn):
    # qs::A::f<T>(args) const [clone .isra.0] -> qs::A::f<T>; and no return type.
    fn = re.sub(r"( \[clone [^]]*\])+$", "", fn).strip()
    fn = re.sub(r"\s+const$", "", fn)
    if fn.endswith(")"):
        depth = 0
        for i in range(len(fn) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(fn[i], 0)
            if depth == 0:
                if i > 0:
                    fn = fn[:i]
                break
    depth, cut = 0, 0
    for i, ch in enumerate(fn):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            cut = i + 1
    return fn[cut:]

def readable(short):
    # For the table: no anonymous namespaces, template arguments elided.
    if short == "???":
        return "??? (stripped code, e.g. net_ring's rx/tx)"
    short = short.replace("(anonymous namespace)::", "")
    out, depth = "", 0
    for ch in short:
        if ch == "<":
            if depth == 0:
                out += "<>"
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out += ch
    return out

def table(path):
    # cg_annotate's per-function table: 9 counts, then file:function.
    funcs, header, rows = {}, None, re.compile(r"^\s*((?:[\d,]+|\.)\s+){9}(\S.*)$")
    for line in open(path):
        if line.split()[-1:] == ["file:function"] and line.split()[:9] == events:
            header = True
            continue
        if not header:
            continue
        m = rows.match(line)
        if not m:
            continue
        fields = line.split(None, 9)
        counts = [0 if f == "." else int(f.replace(",", "")) for f in fields[:9]]
        fn = fields[9].rstrip("\n").split(":", 1)[-1]  # file:function, a file with no ':'
        acc = funcs.setdefault(strip_args(fn), [0] * 9)
        for i, v in enumerate(counts):
            acc[i] += v
    if header is None or not funcs:
        sys.exit(f"scale.sh: no per-function table (Ir ... DLmw file:function) in {path}: cg_annotate's format?")
    return funcs

def received(path):
    m = re.search(r"(\d+) packets received from launch to stop", open(path).read())
    if not m:
        sys.exit(f"scale.sh: no 'packets received from launch to stop' in {path}")
    return int(m.group(1))

def figures(c):
    e = dict(zip(events, c))
    return {"instructions": e["Ir"], "d1_misses": e["D1mr"] + e["D1mw"], "ll_misses": e["DLmr"] + e["DLmw"],
            "ll_read_misses": e["DLmr"], "ll_write_misses": e["DLmw"]}

def per(f, d):
    return {k: v / d for k, v in f.items()}

def geometry(spec, note):
    size, ways, line = map(int, spec.split(","))
    g = {"size_bytes": size, "ways": ways, "line_bytes": line, "sets": size // (ways * line)}
    if note:
        g["rounded"] = note
    return g

result = {}
for name in names:
    short, long = (table(f"{work}/cg-{name}-{s}.annotate") for s in (s_short, s_long))
    p_short, p_long = (received(f"{work}/cg-{name}-{s}.txt") for s in (s_short, s_long))
    j_short, j_long = (json.load(open(f"{work}/cg-{name}-{s}.json")) for s in (s_short, s_long))
    packets = p_long - p_short
    for j, s in ((j_short, s_short), (j_long, s_long)):
        if j["new_connections_per_s"] > 0:
            sys.exit(f"scale.sh: {name}: the {s} s run under cachegrind still inserted connections in its window "
                     f"({j['new_connections_per_s']:.0f}/s): the warm-up ({warmup} s) did not lap the stream")
    if packets <= 0:
        sys.exit(f"scale.sh: {name}: the {s_long} s run received no more packets than the {s_short} s run")
    # The seconds between the two runs: their windows' (the warm-ups, alike, cancel).
    elapsed = j_long["window_s"] - j_short["window_s"]
    parts = {"path": [0] * 9, "expire": [0] * 9, "harness": [0] * 9}
    by_fn = {}
    for fn in set(short) | set(long):
        d = [b - a for a, b in zip(short.get(fn, [0] * 9), long.get(fn, [0] * 9))]
        part = "expire" if fn == "qs::ConnectionTable::expire" else "harness" if fn.startswith("qs::bench::") else "path"
        parts[part] = [x + y for x, y in zip(parts[part], d)]
        if part == "path":
            by_fn[fn] = d
    top = sorted(by_fn.items(), key=lambda kv: -figures(kv[1])["ll_misses"])[:3]
    result[name] = {
        "packets": packets, "packets_runs": [p_short, p_long], "seconds_runs": [float(s_short), float(s_long)],
        "seconds_between_runs": elapsed, "mpps_under_valgrind": j_long["mpps"],
        "per_packet": per(figures(parts["path"]), packets),
        "harness_per_packet": per(figures(parts["harness"]), packets),
        "expire_per_second": per(figures(parts["expire"]), elapsed),
        "top_ll_functions": [{"function": fn, "readable": readable(fn), **per(figures(d), packets)} for fn, d in top],
    }
json.dump({"tool": "valgrind --tool=cachegrind --cache-sim=yes --fair-sched=yes",
           "geometry": {"d1": geometry(d1, d1_note), "ll": geometry(ll, ll_note), "source": source,
                        "ll_is": "one core's L2 (not the L3): an LL miss is a line from beyond the core's own caches"},
           "method": f"the {s_long} s run's counts less the {s_short} s run's (--warmup {warmup} each, none inserting a connection in its window), over the difference of "
                     "packets received from launch to stop; expire (qs::ConnectionTable::expire) per second of the loop "
                     "between them, the harness (qs::bench::*) per packet, both left out of per_packet; demand misses "
                     "(cachegrind does not simulate software prefetches)",
           "configurations": result}, open(f"{work}/counters.json", "w"), indent=2)
PY
fi

# The floor: what a random line costs this host outside quicsteer
# (tests/bench/random_line_cost), in tables of the sizes the connection runs
# read: 32 KB (the L1), 256 KB (conn_1k's CID table, 4,096 slots), 32 MB
# (conn_100k's, 512k slots) and 256 MB (conn_1m's, 4M slots), on the same
# kind of pages. Its base work is set to cost about what conn_1k does.
floor_sizes=(0.03125 0.25 32 256)
floor_memory=()
if [ "$memory" = hugepages ]; then floor_memory=(--hugepages); fi
"$build/tests/bench/random_line_cost" "${floor_memory[@]}" --work 24 --burst 32 --seconds 1 "${floor_sizes[@]}" \
  > "$work/floor.json" 2> "$work/floor.err" ||
  { echo "scale.sh: random_line_cost failed:" >&2; tail -5 "$work/floor.err" >&2; exit 1; }
# The same with a working set of the owner's: one load a packet of a random
# line of a buffer of 512 KB or 1 MB (random_line_cost --near-loads), which
# misses the L1 and, once the table's lines stream through the L2, the L2
# too. The owner's own working set, apart from the CID table, is between
# the two (cachegrind, conn_1k: 0.13 lines a packet more from beyond an L2
# of 512 KB, none beyond 1 MB; tests/bench/RESULTS.md).
for kb in 512 1024; do
  "$build/tests/bench/random_line_cost" "${floor_memory[@]}" --work 24 --burst 32 --seconds 1 \
    --near-loads 1 --near-kb "$kb" "${floor_sizes[0]}" "${floor_sizes[-1]}" > "$work/floor-near$kb.json" 2> "$work/floor.err" ||
    { echo "scale.sh: random_line_cost --near-kb $kb failed:" >&2; tail -5 "$work/floor.err" >&2; exit 1; }
done

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
        # Not "new": the window's steady state inserts none (the warm-up lapped the stream).
        c["new_connections_in_window_per_s"] = [x["new_connections_per_s"] for x in rs]
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
    # action.slots_per_connection 2 (half the memory of the default 4), against the same
    # bases (at 1k and 10k the tables fit in the caches either way).
    "connections_1m_vs_1k_2slots": med("conn_1m_2slots") / med("conn_1k"),
    "connections_1m_vs_1k_zipf_2slots": med("conn_1m_zipf_2slots") / med("conn_1k_zipf"),
    "forwarding_1m_vs_10k_2slots": med("fwd_1m_2slots") / med("fwd_10k"),
    "connections_1m_4slots_vs_2slots": med("conn_1m") / med("conn_1m_2slots"),
    "backends_100_vs_4": med("backends_100") / med("backends_4"),
    "backends_4096_vs_4": med("backends_4096") / med("backends_4"),
}
for n in names:
    if n + "_before" in configs:
        ratios[f"{n}_after_vs_before"] = med(n) / med(n + "_before")
targets = {"connections_1m_vs_1k": 1.5, "connections_1m_vs_1k_zipf": 1.5, "forwarding_1m_vs_10k": 1.5,
           "connections_1m_vs_1k_2slots": 1.5, "connections_1m_vs_1k_zipf_2slots": 1.5,
           "forwarding_1m_vs_10k_2slots": 1.5, "backends_4096_vs_4": 1.1}
new = configs["new"]
new_per_s = new["new_connections_per_s"]["median"]
c1m, f1m = configs["conn_1m"], configs["fwd_1m"]
memory_figures = {
    "octets_per_connection": c1m["table_bytes"] / c1m["max_connections"],
    "octets_per_connection_2slots": configs["conn_1m_2slots"]["table_bytes"] / c1m["max_connections"],
    "startup_eal_bytes_1m_per_owner_2slots": configs["conn_1m_2slots"]["eal_startup_bytes"],
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
if any(new["untracked"]):
    print(f"  NOTE: {new['untracked']} packets untracked: the 2M shard overflowed and those skipped the inserts, so the "
          "rate above flatters; lower --idle-ms or raise --connections for this configuration")
print(f"memory: {memory_figures['octets_per_connection']:.0f} octets per connection (action.max_connections; "
      f"{memory_figures['octets_per_connection_2slots']:.0f} with slots_per_connection 2), "
      f"{memory_figures['octets_per_forwarding_entry']:.1f} per forwarding entry (steering.forwarding.max_entries); "
      f"start-up EAL memory with 1M connections per owner {memory_figures['startup_eal_bytes_1m_per_owner'] / 2**20:.0f} MB "
      f"(with 1k: {memory_figures['startup_eal_bytes_1k_per_owner'] / 2**20:.0f} MB)")
print(f"oversize profile (2 owners x 16M connections): exit {oversize_rc}, {'a clear start-up error' if oversize['clear'] else 'NOT a clear start-up error'}: {oversize['message']}")
# --counters on: cachegrind's figures (written by the block above).
counters, counters_ratios = None, None
if os.path.exists(f"{work}/counters.json"):
    counters = json.load(open(f"{work}/counters.json"))
    cc = counters["configurations"]
    def ratio(a, b, k="ll_misses"):
        # None when the base is (nearly) nothing: ~0 LL misses at 1k.
        x, y = cc[a]["per_packet"][k], cc[b]["per_packet"][k]
        return x / y if y > 1e-3 else None
    counters_ratios = {
        "ll_misses_per_packet_1m_vs_1k": ratio("conn_1m", "conn_1k"),
        "ll_misses_per_packet_1m_minus_1k": cc["conn_1m"]["per_packet"]["ll_misses"] - cc["conn_1k"]["per_packet"]["ll_misses"],
        "ll_misses_per_packet_1m_2slots_vs_1m": ratio("conn_1m_2slots", "conn_1m"),
        "ll_misses_per_packet_forwarding_1m_vs_10k": ratio("fwd_1m", "fwd_10k"),
        "ll_misses_per_packet_forwarding_1m_minus_10k": cc["fwd_1m"]["per_packet"]["ll_misses"] - cc["fwd_10k"]["per_packet"]["ll_misses"],
        "d1_misses_per_packet_1m_vs_1k": ratio("conn_1m", "conn_1k", "d1_misses"),
        "instructions_per_packet_1m_vs_1k": ratio("conn_1m", "conn_1k", "instructions"),
    }
    g = counters["geometry"]
    size = lambda c: f"{c['size_bytes'] // 1024} KiB" if c["size_bytes"] < 2**20 else f"{c['size_bytes'] / 2**20:g} MiB"
    rounded = "".join(f"; {k.upper()} {g[k]['rounded']}" for k in ("d1", "ll") if "rounded" in g[k])
    print(f"counters (cachegrind; D1 = L1d {size(g['d1'])} {g['d1']['ways']}-way, LL = the core's L2 {size(g['ll'])} "
          f"{g['ll']['ways']}-way, {g['ll']['line_bytes']} B lines{rounded}):")
    s_short, s_long = next(iter(cc.values()))["seconds_runs"]
    print(f"  per packet: the {s_long:g} s run less the {s_short:g} s run, over their packets' difference (setup cancels); LL misses are lines")
    print("  from beyond the core's L2, demand misses only (cachegrind does not simulate software prefetches); left out of")
    print("  the path: expire = qs::ConnectionTable::expire (paced by time: per second), harness = qs::bench::* (per packet)")
    print(f"{'configuration':16} {'instr/pkt':>9} {'D1/pkt':>7} {'LL/pkt':>7} {'expire LL/s':>12} {'harness LL/pkt':>14}  the path's top LL misses/pkt")
    for name, c in cc.items():
        p, h, e = c["per_packet"], c["harness_per_packet"], c["expire_per_second"]
        top = ", ".join(f"{t['readable']} {t['ll_misses']:.2f}" for t in c["top_ll_functions"])
        print(f"{name:16} {p['instructions']:9.0f} {p['d1_misses']:7.2f} {p['ll_misses']:7.3f} {e['ll_misses']:12,.0f} "
              f"{h['ll_misses']:14.2f}  {top}  [{cpu}]")
    for k, v in counters_ratios.items():
        print(f"counters_ratios.{k} = {'null (its base is ~0)' if v is None else f'{v:.2f}'}  [{cpu}]")
# The floor against quicsteer: cycles above the base per line needed.
floor = json.load(open(f"{work}/floor.json"))
fs = floor["sizes"]
base_floor, big_floor = fs[0], fs[-1]
floor["line_cost"] = {"prefetched": big_floor["prefetched"] - base_floor["prefetched"],
                      "plain": big_floor["plain"] - base_floor["plain"],
                      "chase_ns": big_floor["chase"] / floor["tsc_hz"] * 1e9}
print(f"floor (tests/bench/random_line_cost, {'hugepages' if floor['hugepages'] else '4 KB pages'}; a burst of "
      f"{floor['burst']}, each packet {floor['work']} rounds of work then a random 64-octet slot; TSC cycles per packet):")
print(f"{'table':>10} {'prefetched':>11} {'together':>9} {'plain':>8} {'chase (per slot)':>17}")
for z in fs:
    print(f"{z['mb']:>7g} MB {z['prefetched']:11.1f} {z['together']:9.1f} {z['plain']:8.1f} {z['chase']:17.1f}  [{cpu}]")
extra_1m = med("conn_1m") - med("conn_1k")
print(f"a random line prefetched a burst ahead costs this host {floor['line_cost']['prefetched']:.1f} cycles above the "
      f"{base_floor['mb']:g} MB base ({floor['line_cost']['plain']:.1f} without the prefetch; "
      f"{floor['line_cost']['chase_ns']:.0f} ns alone); conn_1m costs {extra_1m:.1f} above conn_1k  [{cpu}]")
floor["with_working_set"] = []
for kb in (512, 1024):
    near = json.load(open(f"{work}/floor-near{kb}.json"))
    nb, nbig = near["sizes"][0], near["sizes"][-1]
    floor["with_working_set"].append({"near_kb": kb, "near_loads": near["near_loads"], "sizes": near["sizes"],
                                      "line_cost_prefetched": nbig["prefetched"] - nb["prefetched"]})
print("  with one load a packet of a line of the packet's own working set, "
      + " and ".join(f"{w['near_kb']} KB: {w['line_cost_prefetched']:.1f}" for w in floor["with_working_set"])
      + f" cycles a line prefetched  [{cpu}]")
if counters is not None:
    lines = cc["conn_1m"]["per_packet"]["ll_misses"] - cc["conn_1k"]["per_packet"]["ll_misses"]
    floor["conn_1m_cycles_per_line"] = extra_1m / lines if lines > 0 else None
    floor["conn_1m_vs_floor_per_line"] = (extra_1m / lines) / floor["line_cost"]["prefetched"] if lines > 0 else None
    print(f"  per line beyond the L2 (counters: {lines:.2f} a packet more): {extra_1m / lines:.1f} cycles, "
          f"{floor['conn_1m_vs_floor_per_line']:.2f}x the floor's; the floor with the working set: "
          + " to ".join(f"{w['line_cost_prefetched']:.1f}" for w in floor["with_working_set"]) + f"  [{cpu}]")
json.dump({"benchmark": "scale", "cpu": cpu, "cpus": int(cpus), "tsc_hz": tsc_hz, "runs": runs, "seconds": seconds,
           "memory": memory, "lcores": "solo: main 0@CPU0, lcore 1@CPU1 receives and owns",
           "configurations": configs, "ratios": ratios, "new_connections_per_s": new_per_s,
           "new_connections_per_s_spread": n, "memory_figures": memory_figures, "oversize": oversize,
           "counters": counters, "counters_ratios": counters_ratios, "floor": floor,
           "targets": {**{k: f"<= {v:g}" for k, v in targets.items()}, "new_connections_per_s": ">= 1000000"}},
          open(out, "w"), indent=2)
print(f"wrote {out}")
PY
