#!/usr/bin/env bash
# scripts/bench/ringloop.sh [--json FILE] [--runs N] [--seconds S] [--packets N] [--before BUILD_DIR]
#                           [--memory auto|no-huge|hugepages] [--instructions on|off] [--delivery on|off]
#                           [--sync on|off|only]
#
# Cycles per packet on a copy-free closed loop: a ring port whose RX queue q
# receives what was sent on its TX queue q (a net_ring vdev's rings), so no
# frame is copied and the RX memcpy that dominates the net_pcap figures
# (e2e.sh) is gone. On the same loop and lcores (main 0 on CPU 0, forwarding
# lcores 1 on CPU 0 and 2 on CPU 1, as e2e.sh), runs interleaved, N of each:
#   testpmd_io       dpdk-testpmd io forwarding on net_ring0, port-topology
#                    loop, `start tx_first` (its own 64-byte packets): the
#                    floor, the cost of rx_burst + tx_burst alone
#   testpmd_macswap  the same touching every frame's header (macswap)
#   demo, split      quicsteer (tests/bench/ring_loop) on quicgen frames
#                    preloaded into the loop: e2e.sh's two layouts
#   solo_as_is, solo_l2, solo_ipip, solo_vxlan
#                    ring_loop's solo layout (one lcore, alone on CPU 1, polls
#                    both queues and owns everything) forwarding to 2 backends
#                    (each minting one of the traffic's server IDs) with each
#                    delivery mode (--delivery on, the default). An RX callback
#                    takes ipip's and vxlan's outer headers off again, as a
#                    backend's tunnel device would; it runs in all four with
#                    the same loads and stores (unchanged values where
#                    nothing comes off), so the harness costs them alike.
#                    One lcore, because with both vCPUs of this VM spinning a
#                    run's cycles swing by up to 2x (the host's scheduling),
#                    which buries differences of a few cycles; alone they hold
#                    within a few per cent
#   testpmd_io_solo  testpmd io with one forwarding core on CPU 1: their floor
#   solo_l2_1000     l2 to 1,000 backends (998 that only the hash picks)
# Targets: own cycles per packet (minus testpmd_io_solo's) of l2 <= 1.05 x,
# of ipip and vxlan <= 1.2 x those of solo_as_is (ratios.*_vs_as_is);
# ratios.l2_1000_vs_2_backends reports 1,000 backends against 2. Code layout
# alone moves a configuration by up to ~4 cycles between builds with the same
# instructions (measured: as_is 73 and 77 in two builds whose as_is code
# differed in nothing executed); --before shows it.
# With --before DIR, ring_loop from that build directory runs too, in the
# same rounds (demo_before, split_before, and with --delivery on each mode's
# demo_MODE_before): a change measured before and after on the same machine
# state. Cycles per packet = 2 forwarding lcores' TSC
# cycles / packets received; quicsteer's own work = demo's minus testpmd io's.
# Target (ratios.own_cycles_per_packet_demo), by the CPU's vendor (issue 40):
# <= 80 on Intel hosts, <= 60 on AMD hosts, <= 120 (the first goal) on any
# other. Writes results/ringloop.json.
#
# host: what one core of this host retires per TSC cycle, outside quicsteer
# (tests/bench/core_throughput on CPU 1, the solo lcore's, once per round;
# medians): core cycles per TSC cycle, and a ceiling in simple integer
# instructions per TSC cycle. A TSC cycle is a different amount of core work
# on each host kind, so cycles per packet alone do not compare across hosts.
# With --instructions on, each layout's instructions per packet over its
# cycles is the rate it retires at (instructions_per_tsc_cycle, and as a
# fraction of the ceiling), and over the ceiling a floor in TSC cycles per
# packet for that count of instructions here (cycles_floor_at_peak): a
# shortfall near that floor is instructions, one far above it stalls.
# ratios.demo_instructions_for_target: the instructions per packet at which
# the demo would meet its own-work target, at the rate it retires today.
#
# --sync on (the default) adds what peer sync (issue 37) costs the data path
# and puts on the wire, in the same rounds: ring_loop --scale learn (solo
# layout, random-CID handshakes to 2 backends with l2: each new connection's
# first Initial, then its next long header to the server's DCID, so that the
# established table learns 2 entries per connection; tables for 1M
# connections, 1 s idle timeout), each new connection as fast as the lcore
# goes:
#   learn_sync_off   the profile without peer_sync
#   learn_sync_on    with peer_sync (listen 127.0.0.1:<free port>, one peer
#                    127.0.0.1:<another free port> that nobody answers,
#                    resync_timeout_ms 0, ring_size 65536: no entry lost to a
#                    full ring, so every entry's enqueue is paid)
# (their order alternating from round to round), and
#   learn_sync_paced with peer_sync, 1,000 new connections per second (the
#                    other packets one known connection's; idle timeout 3 s,
#                    so that the refresh walk's period is 1 s): the sync
#                    thread's traffic at that rate.
# ratios.peer_sync_on_vs_off (target <= 1.05) is the ratio of the medians;
# peer_sync_on_vs_off_paired the median (min..max) of each round's on / off.
# sync_traffic: entries learned and offered to the peer per 1,000 new
# connections (full rate: the send rate, peer_sync.entries_per_s 20,000 by
# default, caps what goes out), and what went out at 1,000 new connections/s
# (entries, messages, octets with and without IPv4 + UDP headers). --sync
# only runs these alone.
#
# --memory: EAL memory for every configuration alike (lib/memory.sh): auto (the
# default) takes hugepages when 1024 MB of them are free (what -m asks for;
# scripts/setup.sh reserves that much as root) and --no-huge otherwise;
# hugepages insists on them, no-huge on ordinary pages. The output and the
# JSON's memory say which.
#
# --instructions on adds what cycles on a shared VM cannot settle: the demo
# layout's ring_loop (and with --before, the other build's) once under
# valgrind's callgrind, which counts instructions executed, not time. Reported
# per packet received: the forwarding lcores whole (qs::lcore_main), the
# classification (qs::MbufClassifier::classify) and the owner's connection
# stage (qs::run_connection_stage), in instructions_per_packet. Two runs of
# one build gave 744.3 and 746.6 per packet, so a change of a few per cent
# shows there while the cycle medians move by 30 % from run to run. The demo,
# and with --delivery on each delivery mode in the solo layout
# (ratios.MODE_vs_as_is_instructions); not split: valgrind runs one thread at
# a time, and in the split layout the owner spends its turns polling an empty
# ring, which says nothing per packet. With --sync, learn_sync_off and
# learn_sync_on too (ratios.peer_sync_on_vs_off_instructions).
source "$(dirname "$0")/lib/common.sh"
cd "$root"

json=results/ringloop.json
runs=5
seconds=3
packets=1024
before=
memory=auto
instructions=off
delivery=on
sync=on
source "$root/scripts/bench/lib/args.sh"
bench_extra_arg() {
  case $1 in
    --packets) packets=$2 ;;
    --before) before=$(cd "$2" && pwd) ;;
    --memory) memory=$2 ;;
    --instructions) instructions=$2 ;;
    --delivery) delivery=$2 ;;
    --sync) sync=$2 ;;
    *) return 1 ;;
  esac
}
bench_parse_args ringloop.sh "scripts/bench.sh ringloop [--json FILE] [--runs N] [--seconds S] [--packets N] [--before BUILD_DIR] [--memory auto|no-huge|hugepages] [--instructions on|off] [--delivery on|off] [--sync on|off|only]" "$@"
source "$root/scripts/bench/lib/memory.sh"
bench_memory ringloop.sh 1024 "$memory"
loop_memory=()
if [ "$memory" = hugepages ]; then loop_memory=(--hugepages); fi  # ring_loop: --huge-unlink, -m 1024
case $delivery in on | off) ;; *) echo "ringloop.sh: --delivery wants on or off" >&2; exit 2 ;; esac
case $sync in on | off | only) ;; *) echo "ringloop.sh: --sync wants on, off or only" >&2; exit 2 ;; esac
if [ "$sync" = only ]; then delivery=off; fi
case $instructions in
  on) command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
        { echo "ringloop.sh: --instructions on needs valgrind (apt-get install valgrind)" >&2; exit 1; } ;;
  off) ;;
  *) echo "ringloop.sh: --instructions wants on or off" >&2; exit 2 ;;
esac
[[ $packets =~ ^[1-9][0-9]*$ ]] && [ $((packets % 64)) = 0 ] ||
  { echo "ringloop.sh: --packets wants a multiple of 64 (testpmd sends bursts of 32 on 2 queues)" >&2; exit 2; }
command -v dpdk-testpmd >/dev/null || { echo "ringloop.sh: dpdk-testpmd is missing (scripts/setup.sh installs it)" >&2; exit 1; }
source "$root/scripts/bench/lib/testpmd.sh"
build_bench ringloop.sh tests/bench/ring_loop tests/bench/core_throughput
if [ -n "$before" ] && [ ! -x "$before/tests/bench/ring_loop" ]; then
  echo "ringloop.sh: $before/tests/bench/ring_loop is missing: build it there first" >&2
  exit 1
fi

mkdir -p results "$(dirname "$json")"
work=$(mktemp -d /tmp/quicsteer-ringloop.XXXXXX)
tp_pid=
cleanup() {
  if [ -n "$tp_pid" ]; then kill "$tp_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

eal=(--lcores "0@0,1@0,2@1" "${eal_memory[@]}" -m 1024 --no-shconf --no-pci --log-level "*:notice")
cpu=$(cpu_model)
vendor=$(grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2- | tr -d ' ' || true)
echo "ringloop: CPU $cpu, $(nproc) CPUs; lcores main 0@CPU0, forwarding 1@CPU0 and 2@CPU1;"
echo "          $runs run(s) of ${seconds} s per configuration, $packets packets circulating"
echo "ringloop: EAL memory: $memory_text"


run_loop() {
  local dir=$1 layout=$2 name=$3 r=$4
  shift 4
  "$dir/tests/bench/ring_loop" --layout "$layout" --seconds "$seconds" --packets "$packets" "${loop_memory[@]}" "$@" \
    --json "$work/$name-$r.json" > "$work/$name-$r.txt" 2>&1 ||
    { echo "ringloop.sh: ring_loop $name failed:" >&2; tail -5 "$work/$name-$r.txt" >&2; exit 1; }
}

# Two free UDP ports on loopback: peer sync's listen address and its peer's.
free_ports() {
  python3 -c 'import socket
s = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(",".join("127.0.0.1:%d" % x.getsockname()[1] for x in s))'
}
learn=(--scale learn --connections 1000000 --idle-ms 1000 --warmup 1.5)
run_sync() {
  local r=$1 first second
  if [ $((r % 2)) = 1 ]; then first=off second=on; else first=on second=off; fi
  for s in $first $second; do
    if [ "$s" = on ]; then
      run_loop "$build" solo learn_sync_on "$r" "${learn[@]}" --peer-sync "$(free_ports)"
    else
      run_loop "$build" solo learn_sync_off "$r" "${learn[@]}"
    fi
  done
  run_loop "$build" solo learn_sync_paced "$r" --scale learn --connections 1000000 --idle-ms 3000 --warmup 1.5 \
    --new-per-s 1000 --peer-sync "$(free_ports)"
}

for r in $(seq 1 "$runs"); do
  echo "ringloop: run $r/$runs"
  taskset -c 1 "$build/tests/bench/core_throughput" > "$work/host-$r.json" ||
    { echo "ringloop.sh: core_throughput failed" >&2; exit 1; }
  if [ "$sync" != off ]; then run_sync "$r"; fi
  if [ "$sync" = only ]; then continue; fi
  for mode in io macswap; do
    run_testpmd ringloop.sh "$work/testpmd_$mode-$r.txt" "$work" "$seconds" "start tx_first $((packets / 64))" \
      "${eal[@]}" --vdev net_ring0 -- -i --forward-mode="$mode" --port-topology=loop --nb-cores=2 \
      --rxq=2 --txq=2 --rxd=1024 --txd=1024 --burst=32 --total-num-mbufs=16383 --mbcache=256
  done
  if [ "$delivery" = on ]; then
    run_testpmd ringloop.sh "$work/testpmd_io_solo-$r.txt" "$work" "$seconds" "start tx_first $((packets / 64))" \
      --lcores "0@0,1@1" "${eal[@]:2}" --vdev net_ring0 -- -i --forward-mode=io --port-topology=loop --nb-cores=1 \
      --rxq=2 --txq=2 --rxd=1024 --txd=1024 --burst=32 --total-num-mbufs=16383 --mbcache=256
  fi
  for layout in demo split; do
    run_loop "$build" $layout $layout "$r"
    if [ -n "$before" ]; then run_loop "$before" $layout "${layout}_before" "$r"; fi
  done
  if [ "$delivery" = on ]; then
    for mode in as_is l2 ipip vxlan; do
      run_loop "$build" solo "solo_$mode" "$r" --delivery $mode
      if [ -n "$before" ]; then run_loop "$before" solo "solo_${mode}_before" "$r" --delivery $mode; fi
    done
    run_loop "$build" solo solo_l2_1000 "$r" --delivery l2 --backends 1000
  fi
done

# Instructions per packet: one callgrind run per layout and build. Its
# window is wall-clock time, which valgrind stretches: what counts is the
# packets received from launch to stop, which ring_loop prints.
count_instructions() {
  local dir=$1 layout=$2 name=$3
  shift 3
  echo "ringloop: instructions, $name (callgrind)"
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.callgrind" \
    "$dir/tests/bench/ring_loop" --layout "$layout" --seconds 4 --warmup 1 --packets "$packets" "${loop_memory[@]}" "$@" \
    > "$work/$name-instructions.txt" 2>&1 ||
    { echo "ringloop.sh: ring_loop $name under callgrind failed:" >&2; tail -5 "$work/$name-instructions.txt" >&2; exit 1; }
  callgrind_annotate --inclusive=yes "$work/$name.callgrind" > "$work/$name.inclusive" 2>/dev/null
}
if [ "$instructions" = on ] && [ "$sync" != off ]; then
  count_instructions "$build" solo learn_sync_off "${learn[@]}"
  count_instructions "$build" solo learn_sync_on "${learn[@]}" --peer-sync "$(free_ports)"
fi
if [ "$instructions" = on ] && [ "$sync" != only ]; then
  count_instructions "$build" demo demo
  if [ -n "$before" ]; then count_instructions "$before" demo demo_before; fi
  if [ "$delivery" = on ]; then
    for mode in as_is l2 ipip vxlan; do
      count_instructions "$build" solo "solo_$mode" --delivery $mode
      if [ -n "$before" ]; then count_instructions "$before" solo "solo_${mode}_before" --delivery $mode; fi
    done
  fi
fi

python3 - "$work" "$runs" "$json" "$cpu" "$(nproc)" "$packets" "$seconds" "$memory" "$vendor" <<'PY'
import json, os, re, statistics, sys
work, runs, out, cpu, cpus, packets, seconds, memory = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), float(sys.argv[7]), sys.argv[8]
vendor = sys.argv[9]
# Issue 40's own-work targets by host kind; the first goal elsewhere.
OWN_TARGET = {"GenuineIntel": 80, "AuthenticAMD": 60}.get(vendor, 120)
LCORES = 2
def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
def testpmd_mpps(path):
    text = open(path).read()
    rates = re.findall(r"Rx-pps:\s+(\d+)", text)
    return int(rates[-1]) / 1e6
loops = {}
tsc_hz = None
for name in ["demo", "split", "demo_before", "split_before", "solo_as_is", "solo_l2", "solo_ipip", "solo_vxlan",
             "solo_l2_1000", "solo_as_is_before", "solo_l2_before", "solo_ipip_before", "solo_vxlan_before",
             "learn_sync_off", "learn_sync_on", "learn_sync_paced"]:
    try:
        rs = [json.load(open(f"{work}/{name}-{r}.json")) for r in range(1, runs + 1)]
    except FileNotFoundError:
        continue
    tsc_hz = rs[0]["tsc_hz"]
    loops[name] = rs
configs = {}
for mode, lcores in [("io", LCORES), ("macswap", LCORES), ("io_solo", 1)]:
    if not os.path.exists(f"{work}/testpmd_{mode}-1.txt"):
        continue
    mpps = [testpmd_mpps(f"{work}/testpmd_{mode}-{r}.txt") for r in range(1, runs + 1)]
    configs[f"testpmd_{mode}"] = {"mpps": spread(mpps), "cycles_per_packet": spread([lcores * tsc_hz / (m * 1e6) for m in mpps])}
for name, rs in loops.items():
    configs[name] = {"mpps": spread([x["mpps"] for x in rs]), "cycles_per_packet": spread([x["cycles_per_packet"] for x in rs])}
med = lambda c: configs[c]["cycles_per_packet"]["median"]
ratios = {}
targets = {}
if "demo" in configs:
    ratios = {"own_cycles_per_packet_demo": med("demo") - med("testpmd_io"),
              "own_cycles_per_packet_split": med("split") - med("testpmd_io")}
    targets = {"own_cycles_per_packet_demo": OWN_TARGET}
# Peer sync (--sync): the data path with and without it, and what goes on
# the wire. A datagram: 44 octets of header, 17 per entry, a 16-octet MAC
# (steering/peer_sync.h); on the wire 20 of IPv4 and 8 of UDP more.
sync_traffic = None
if "learn_sync_on" in configs:
    on, off = loops["learn_sync_on"], loops["learn_sync_off"]
    ratios["peer_sync_on_vs_off"] = med("learn_sync_on") / med("learn_sync_off")
    paired = [a["cycles_per_packet"] / b["cycles_per_packet"] for a, b in zip(on, off)]
    ratios["peer_sync_on_vs_off_paired"] = statistics.median(paired)
    configs["learn_sync_on"]["on_vs_off_paired"] = spread(paired)
    targets["peer_sync_on_vs_off"] = 1.05
    for name in ["learn_sync_off", "learn_sync_on", "learn_sync_paced"]:
        rs = loops[name]
        configs[name]["new_connections_per_s"] = spread([x["handshakes"] / x["window_s"] for x in rs])
        configs[name]["learned_per_connection"] = spread([x["learned"] / x["handshakes"] for x in rs])
        configs[name]["table_full"] = [x["table_full"] for x in rs]
        if rs[0]["peer_sync"] is not None:
            configs[name]["peer_sync"] = [x["peer_sync"] for x in rs]
    per_k = lambda rs, f: spread([1000 * f(x) / x["handshakes"] for x in rs])
    paced = loops["learn_sync_paced"]
    wire = lambda x: x["peer_sync"]["messages_sent"] * (44 + 16 + 28) + 17 * x["peer_sync"]["entries_sent"]
    payload = lambda x: x["peer_sync"]["messages_sent"] * (44 + 16) + 17 * x["peer_sync"]["entries_sent"]
    sync_traffic = {
        "full_rate": {
            "learned_entries_per_1000_connections": per_k(on, lambda x: x["learned"]),
            # What the sync thread had for the peer: sent, or over the send rate.
            "entries_offered_per_1000_connections":
                per_k(on, lambda x: x["peer_sync"]["entries_sent"] + x["peer_sync"]["send_over_rate"]),
            "entries_sent_per_s": spread([x["peer_sync"]["entries_sent"] / x["window_s"] for x in on]),
            "ring_full": [x["peer_sync"]["ring_full"] for x in on],
        },
        "at_1000_new_connections_per_s": {
            "new_connections_per_s": spread([x["handshakes"] / x["window_s"] for x in paced]),
            "entries_per_1000_connections": per_k(paced, lambda x: x["peer_sync"]["entries_sent"]),
            "messages_per_1000_connections": per_k(paced, lambda x: x["peer_sync"]["messages_sent"]),
            "octets_per_1000_connections_udp_payload": per_k(paced, payload),
            "octets_per_1000_connections_on_wire": per_k(paced, wire),
            "entries_per_s": spread([x["peer_sync"]["entries_sent"] / x["window_s"] for x in paced]),
            "messages_per_s": spread([x["peer_sync"]["messages_sent"] / x["window_s"] for x in paced]),
            "octets_per_s_on_wire": spread([wire(x) / x["window_s"] for x in paced]),
            "send_over_rate": [x["peer_sync"]["send_over_rate"] for x in paced],
        },
        "octets": "datagram = 44 header + 17 per entry + 16 MAC; on the wire + 28 (IPv4 20, UDP 8); one peer",
    }
if "demo_before" in configs:
    ratios["demo_after_vs_before_cycles"] = med("demo") / med("demo_before")
    ratios["split_after_vs_before_cycles"] = med("split") / med("split_before")
if "solo_l2" in configs:
    own = lambda c: med(c) - med("testpmd_io_solo")
    ratios["own_cycles_per_packet_solo_as_is"] = own("solo_as_is")
    # Against as_is to the same backends, through the same RX callback.
    for mode in ["l2", "ipip", "vxlan"]:
        ratios[f"{mode}_vs_as_is"] = own(f"solo_{mode}") / own("solo_as_is")
    ratios["l2_1000_vs_2_backends"] = own("solo_l2_1000") / own("solo_l2")
    if "solo_l2_before" in configs:
        for mode in ["as_is", "l2", "ipip", "vxlan"]:
            ratios[f"{mode}_after_vs_before_cycles"] = med(f"solo_{mode}") / med(f"solo_{mode}_before")
            if mode != "as_is":
                ratios[f"{mode}_vs_as_is_before"] = own(f"solo_{mode}_before") / own("solo_as_is_before")
    targets.update({"l2_vs_as_is": 1.05, "ipip_vs_as_is": 1.2, "vxlan_vs_as_is": 1.2})
# Instructions per packet, from callgrind's inclusive counts (see the header).
# A stage is the first of its functions the compiler kept out of line (the
# connection stage's entry, and in builds before its burst loop was always
# inlined, that loop).
STAGES = {"lcores": [r"qs::lcore_main\("], "classify": [r"qs::MbufClassifier::classify\("],
          "connection_stage": [r"qs::\(anonymous namespace\)::run_connection_stage\(", r"qs::run_connection_burst<"]}
instructions = {}
for name in ["demo", "demo_before", "learn_sync_off", "learn_sync_on"] + [f"solo_{m}{b}" for m in ["as_is", "l2", "ipip", "vxlan"] for b in ["", "_before"]]:
    path = f"{work}/{name}.inclusive"
    if not os.path.exists(path):
        continue
    received = int(re.search(r"(\d+) packets received from launch to stop", open(f"{work}/{name}-instructions.txt").read()).group(1))
    text = open(path).read()
    per = {}
    for stage, patterns in STAGES.items():
        per[stage] = None
        for pattern in patterns:
            # "COUNT (PERCENT)  FILE:[void ]FUNCTION": the function's own name, not a
            # template argument or enclosing scope inside another's.
            counts = [int(m.group(1).replace(",", ""))
                      for m in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\S*?:(?:void )?" + pattern, text, re.M)]
            # The largest: with debug information callgrind may list one
            # function under two spellings of its file's path, each with the
            # whole inclusive count, and a sum would double it.
            if counts:
                per[stage] = round(max(counts) / received, 1)
                break
    per["packets"] = received
    instructions[name] = per
for mode in ["l2", "ipip", "vxlan"]:
    for b in ["", "_before"]:
        if f"solo_{mode}{b}" in instructions and f"solo_as_is{b}" in instructions:
            ratios[f"{mode}_vs_as_is{b}_instructions"] = (instructions[f"solo_{mode}{b}"]["lcores"] /
                                                           instructions[f"solo_as_is{b}"]["lcores"])
if "learn_sync_on" in instructions and "learn_sync_off" in instructions:
    ratios["peer_sync_on_vs_off_instructions"] = (instructions["learn_sync_on"]["lcores"] /
                                                  instructions["learn_sync_off"]["lcores"])
if "demo" in instructions and "demo_before" in instructions:
    ratios["demo_after_vs_before_instructions"] = instructions["demo"]["lcores"] / instructions["demo_before"]["lcores"]
# What one core retires per TSC cycle here (core_throughput), and each
# counted layout's rate against it (see the header).
hosts = [json.load(open(f"{work}/host-{r}.json")) for r in range(1, runs + 1) if os.path.exists(f"{work}/host-{r}.json")]
host = None
if hosts:
    host = {"vendor": vendor,
            "core_cycles_per_tsc_cycle": spread([h["core_cycles_per_tsc_cycle"] for h in hosts]),
            "peak_instructions_per_tsc_cycle": spread([h["peak_instructions_per_tsc_cycle"] for h in hosts]),
            "peak_instructions_per_core_cycle": spread([h["peak_instructions_per_core_cycle"] for h in hosts])}
    peak = host["peak_instructions_per_tsc_cycle"]["median"]
    for name, per in instructions.items():
        if per["lcores"] is None or name not in configs:
            continue
        rate = per["lcores"] / med(name)
        per["instructions_per_tsc_cycle"] = round(rate, 3)
        per["fraction_of_peak"] = round(rate / peak, 3)
        per["cycles_floor_at_peak"] = round(per["lcores"] / peak, 1)
    if "demo" in instructions and "instructions_per_tsc_cycle" in instructions["demo"]:
        ratios["demo_instructions_for_target"] = ((OWN_TARGET + med("testpmd_io")) *
                                                  instructions["demo"]["instructions_per_tsc_cycle"])
print(f"CPU {cpu}, {cpus} CPUs, TSC {tsc_hz / 1e9:.3f} GHz; {packets} packets circulating, {runs} runs of {seconds:g} s")
if host:
    m = lambda k: f"{host[k]['median']:.2f} ({host[k]['min']:.2f}..{host[k]['max']:.2f})"
    print(f"host (core_throughput on CPU 1): {m('core_cycles_per_tsc_cycle')} core cycles per TSC cycle; "
          f"at most {m('peak_instructions_per_tsc_cycle')} instructions per TSC cycle, "
          f"{m('peak_instructions_per_core_cycle')} per core cycle")
print(f"{'configuration':20} {'Mpps median (min..max)':>26} {'cycles/packet median (min..max)':>34}")
for name, c in configs.items():
    m, p = c["mpps"], c["cycles_per_packet"]
    print(f"{name:20} {m['median']:8.2f} ({m['min']:7.2f}..{m['max']:7.2f}) {p['median']:14.1f} ({p['min']:7.1f}..{p['max']:7.1f})")
if instructions:
    print(f"{'instructions/packet':20} {'lcores':>10} {'classify':>10} {'connection stage':>18}")
    for name, per in instructions.items():
        f = lambda v: "-" if v is None else f"{v:.1f}"
        rate = ""
        if "instructions_per_tsc_cycle" in per:
            rate = (f"  {per['instructions_per_tsc_cycle']:.2f} per TSC cycle ({per['fraction_of_peak']:.0%} of the "
                    f"host's peak; at the peak {per['cycles_floor_at_peak']:.1f} cycles/packet)")
        print(f"{name:20} {f(per['lcores']):>10} {f(per['classify']):>10} {f(per['connection_stage']):>18}{rate}")
if sync_traffic:
    f, p = sync_traffic["full_rate"], sync_traffic["at_1000_new_connections_per_s"]
    m = lambda s, d=0: f"{s['median']:,.{d}f} ({s['min']:,.{d}f}..{s['max']:,.{d}f})"
    print(f"peer sync, full rate: {m(configs['learn_sync_on']['new_connections_per_s'])} new connections/s; per 1,000: "
          f"{m(f['learned_entries_per_1000_connections'])} entries learned, "
          f"{m(f['entries_offered_per_1000_connections'])} offered to the peer (new + refresh walk); "
          f"sent {m(f['entries_sent_per_s'])} entries/s (the send rate)")
    print(f"peer sync, {m(p['new_connections_per_s'])} new connections/s: per 1,000 new connections "
          f"{m(p['entries_per_1000_connections'])} entries, {m(p['messages_per_1000_connections'])} messages, "
          f"{m(p['octets_per_1000_connections_on_wire'])} octets on the wire; per second "
          f"{m(p['entries_per_s'])} entries, {m(p['messages_per_s'], 1)} messages, {m(p['octets_per_s_on_wire'])} octets")
for k, v in ratios.items():
    t = targets.get(k)
    verdict = "" if t is None else f"  (target <= {t:g}: {'met' if v <= t else 'not met'})"
    print(f"ratios.{k} = {v:.2f}{verdict}")
json.dump({"cpu": cpu, "cpus": int(cpus), "tsc_hz": tsc_hz, "packets_circulating": packets, "runs": runs,
           "seconds": seconds, "memory": memory, "lcores": "main 0@CPU0, forwarding 1@CPU0 and 2@CPU1",
           "host": host, "configurations": configs, "instructions_per_packet": instructions, "ratios": ratios,
           "sync_traffic": sync_traffic,
           "targets": {k: f"<= {v:g}" for k, v in targets.items()}}, open(out, "w"), indent=2)
print(f"wrote {out}")
PY
