#!/usr/bin/env bash
# scripts/bench/health.sh [--json FILE] [--rounds N] [--attempts-per-s R] [--interval-ms MS --timeout-ms MS]
#
# Backend health checks (issue 39) on the realquic fleet
# (tests/realquic/fleet_topology.sh, configs/realquic-fleet-health.yaml: four
# QUIC-LB quicsteer-servers, l2 delivery, probes of both families; with
# --interval-ms / --timeout-ms the profile's values rewritten). As root.
#
#   detection  per round (N, default 5; the victim server rotates), while
#              new connection attempts arrive at R per second (default 200:
#              QUIC v1 Initials of 1200 octets, each from a fresh UDP port,
#              tests/realquic/health_probe.py initials; which backend each
#              would reach with the whole fleet is what quicsteer-cid
#              classify says of it, and where each went is what the
#              captures in front of the servers saw):
#                kill_to_down_ms      SIGKILL of the victim's server processes
#                                     -> quicsteer's line "backend srvN down
#                                     after F failed probe rounds" (when it
#                                     was written: each line is stamped as
#                                     tail -F reads it)
#                kill_to_elsewhere_ms -> the first attempt that the whole
#                                     fleet's hash sends to the victim and
#                                     that reached another server
#                down_to_elsewhere_ms the hash rebuild and the next such
#                                     attempt, after the line
#                restart_to_up_ms     the victim's servers started again ->
#                                     "up after R answered probe rounds"
#                bound_to_up_ms       the same from when both servers were
#                                     bound to port 443
#                restart_to_back_ms   -> the first attempt hashed to the
#                                     victim that reached it again
#   two_instances  what two instances that probe on their own disagree
#              (tests/bench/health_disagreement: two checkers' HealthBooks on
#              one made-up clock, each with its own phase, 400 deaths and
#              returns at random moments): detection and the window in which
#              one has marked the backend and the other not yet, median, p99
#              and max, with the defaults (interval 1000 ms, timeout 500) and
#              with this run's profile.
#   probe_traffic  5 s with every backend up and no clients: what a capture
#              on server 0's segment interface saw of the probes (in) and
#              their answers (out), per second and in octets on the wire
#              (Ethernet included), and quicsteer's probes sent per second
#              over all backends (its counters, over the whole run: they
#              are published once a second).
# Prints medians with min..max and writes results/health.json (or --json
# FILE). Everything (quicsteer's 3 lcores, the servers, the captures, the
# sender) shares this machine's CPUs.
source "$(dirname "$0")/lib/common.sh"
set +e  # as the other namespace benchmarks: a failed round is reported, not fatal
cd "$root"

json=results/health.json
rounds=5
rate=200
interval=
timeout=
usage="scripts/bench.sh health [--json FILE] [--rounds N] [--attempts-per-s R] [--interval-ms MS --timeout-ms MS]"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "usage: $usage" >&2; exit 2; }
  case $1 in
    --json) json=$2 ;;
    --rounds) rounds=$2 ;;
    --attempts-per-s) rate=$2 ;;
    --interval-ms) interval=$2 ;;
    --timeout-ms) timeout=$2 ;;
    *) echo "usage: $usage" >&2; exit 2 ;;
  esac
  shift 2
done
bench_whole_number "bench health" --rounds "$rounds"
bench_whole_number "bench health" --attempts-per-s "$rate"
bench_need_root "bench health"
bash scripts/setup.sh || exit 1
build_bench "bench health" quicsteer quicsteer-server quicsteer-cid tests/bench/health_disagreement

SRC=$root
BUILD=$(cd "$build" && pwd)
source tests/realquic/fleet_topology.sh
source tests/realquic/realquic_lib.sh
source tests/realquic/health_lib.sh
RQ_BUILD=$BUILD
RQ_PREFIX=qshb$$
RQ_WORK=$(mktemp -d /tmp/qshc-bench.XXXXXX)
trap 'rq_stop_all; qsfl_down; rm -rf "$RQ_WORK"' EXIT
trap 'exit 1' INT TERM
HCHECK="python3 tests/realquic/health_check.py"
PROBE="python3 tests/realquic/health_probe.py"
hw="$(cpu_model), $(nproc) CPUs"

profile=$RQ_WORK/health.yaml
cp configs/realquic-fleet-health.yaml "$profile"
[ -n "$interval" ] && sed -i "s/^  interval_ms: *[0-9]*/  interval_ms: $interval/" "$profile"
[ -n "$timeout" ] && sed -i "s/^  timeout_ms: *[0-9]*/  timeout_ms: $timeout/" "$profile"
"$BUILD/quicsteer" --check "$profile" >"$RQ_WORK/check.out" 2>&1 ||
  { tail -3 "$RQ_WORK/check.out"; echo "bench health: the profile is refused" >&2; exit 1; }
key() { sed -n "s/^  $1: *\\([0-9]*\\).*/\\1/p" "$profile"; }
INTERVAL=$(key interval_ms) TIMEOUT=$(key timeout_ms) RISE=$(key rise) FALL=$(key fall) PROBE_PORT=$(key probe_udp_port)
echo "bench health: $hw; $rounds rounds; interval $INTERVAL ms, timeout $TIMEOUT ms, rise $RISE, fall $FALL;" \
  "$rate new connection attempts/s"

qsfl_up "$RQ_PREFIX" || exit 1
qsfl_appliance_up || exit 1
mkdir -p "$RQ_WORK/www"
sed '/server_id: "0a02"/a\    - {server_id: "0a03", owner: 1}\n    - {server_id: "0a04", owner: 2}' \
  configs/realquic.yaml >"$RQ_WORK/servers.yaml"
RQ_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
for ((n = 0; n < QSFL_NSERVERS; n++)); do hl_start quicsteer-server "$n" v4 v6 || exit 1; done
hl_start_quicsteer "$profile" bench
# Each line of quicsteer's output with the time it was written (tail follows
# the file with inotify): when a backend was marked down or up, without the
# latency of polling the file from a loaded shell.
tail -n +1 -F "$QS_OUT" 2>/dev/null |
  python3 -u -c 'import sys, time
for line in sys.stdin: print(time.time_ns(), line, end="", flush=True)' >"$RQ_WORK/stamped.out" &
RQ_PIDS+=($!)
# stamped NAME STATE SINCE: when the first "backend NAME STATE after" line
# after SINCE (ns) was written, or nothing.
stamped() {
  awk -v pat="quicsteer: health: backend $1 $2 after" -v since="$3" \
    'index($0, pat) && $1 > since {print $1; exit}' "$RQ_WORK/stamped.out"
}
for ((n = 0; n < QSFL_NSERVERS; n++)); do
  hl_wait "srv$n" up 0 10 || { echo "bench health: srv$n never came up" >&2; exit 1; }
done
hl_metrics --want srv0=up,srv1=up,srv2=up,srv3=up --timeout 5 >/dev/null ||
  { echo "bench health: not every backend is up" >&2; exit 1; }

# ---- the probes' traffic
figures=$RQ_WORK/figures.tsv
: >"$figures"
# quicsteer's probes sent, from its counters (published once a second:
# taken over the whole run, from here to after the last round)
probes_sent() { hl_metrics --totals | sed -n 's/.*quicsteer_health_probes_sent_total \([0-9]*\).*/\1/p'; }
sent0=$(probes_sent) t_sent0=$(date +%s%N)
ip netns exec "$(qsfl_ns srv0)" timeout -s INT 5 tcpdump -n -i qsfl-e -s 128 -B 32768 -U --immediate-mode \
  -w "$RQ_WORK/traffic.pcap" "udp port $PROBE_PORT" 2>"$RQ_WORK/traffic.tcpdump"
$HCHECK probe-traffic "$RQ_WORK/traffic.pcap" --probe-port "$PROBE_PORT" --seconds 5 >"$RQ_WORK/traffic.json" ||
  echo "bench health: no probe in 5 s at server 0"

# ---- detection rounds
# attempts TAG SECONDS: new connection attempts, in the background (pid in
# $sender), over IPv4 from the client namespace.
attempts() {
  ip netns exec "$(qsfl_ns cli)" $PROBE initials --dst "$QSFL_VIP" --rate "$rate" --seconds "$2" \
    >"$RQ_WORK/$1-sender.out" 2>&1 &
  sender=$!
}
# ms T0 T1: T1 - T0 in ms, or - when either is missing.
ms() { if [ -n "$1" ] && [ -n "$2" ]; then echo $(( ($2 - $1) / 1000000 )); else echo -; fi; }
# transition TAG ATTEMPT_S SETTLE_S STATE AT COMMAND...: with new connection
# attempts running, COMMAND changes server $v, and quicsteer must mark it
# STATE; sets t_act (COMMAND's start), t_done (its end), t_state and n_state
# (when and after how many rounds it was marked STATE), and t_first (the first
# attempt AT victim/elsewhere after t_act).
transition() {
  local tag=$1 seconds=$2 settle=$3 state=$4 at=$5
  shift 5
  hl_captures "$tag" || return 1
  attempts "$tag" "$seconds"
  sleep "$settle"
  HL_BEFORE=$(hl_lines "srv$v" "$state")
  t_act=$(date +%s%N)
  "$@" || return 1
  t_done=$(date +%s%N)
  t_state='' n_state=''
  hl_wait "srv$v" "$state" "$HL_BEFORE" 5 && n_state=$HL_N && sleep 0.05 && t_state=$(stamped "srv$v" "$state" "$t_act")
  wait "$sender"
  hl_captures_done
  t_first=$($HCHECK first-attempt "$RQ_WORK" "$tag" --victim "$v" --at "$at" --since "$t_act" \
    --profile "$profile" --cid-tool "$BUILD/quicsteer-cid" --probe-port "$PROBE_PORT")
}
for ((r = 1; r <= rounds; r++)); do
  v=$(( (r - 1) % QSFL_NSERVERS ))
  transition "kill$r" 3 1 down elsewhere hl_kill "$v" v4 v6 || exit 1
  t_kill=$t_act t_down=$t_state n_down=$n_state t_else=$t_first
  transition "back$r" 2.5 0.3 up victim hl_start quicsteer-server "$v" v4 v6 || exit 1
  t_restart=$t_act t_bound=$t_done t_up=$t_state n_up=$n_state t_back=$t_first
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "srv$v" "$(ms "$t_kill" "$t_down")" \
    "$(ms "$t_kill" "$t_else")" "$(ms "$t_down" "$t_else")" "$(ms "$t_restart" "$t_up")" \
    "$(ms "$t_bound" "$t_up")" "$(ms "$t_restart" "$t_back")" "${n_down:-}" "${n_up:-}" >>"$figures"
  echo "round $r (srv$v): kill->down $(ms "$t_kill" "$t_down") ms (after ${n_down:-?} rounds)," \
    "kill->first attempt elsewhere $(ms "$t_kill" "$t_else") ms; restart->up $(ms "$t_restart" "$t_up") ms" \
    "(bound->up $(ms "$t_bound" "$t_up") ms, after ${n_up:-?} rounds), restart->first attempt back $(ms "$t_restart" "$t_back") ms"
done
sent1=$(probes_sent) t_sent1=$(date +%s%N)
rq_stop_quicsteer || echo "bench health: quicsteer exited with an error"

# ---- two instances' disagreement, with the defaults and with this profile
"$BUILD/tests/bench/health_disagreement" 400 1000 500 2 3 >"$RQ_WORK/disagree-defaults.json" ||
  echo "bench health: health_disagreement (defaults) failed"
"$BUILD/tests/bench/health_disagreement" 400 "$INTERVAL" "$TIMEOUT" "$RISE" "$FALL" >"$RQ_WORK/disagree-profile.json" ||
  echo "bench health: health_disagreement (profile) failed"

mkdir -p "$(dirname "$json")"
python3 - "$figures" "$RQ_WORK/traffic.json" "$json" "$hw" "$rounds" "$rate" "$INTERVAL" "$TIMEOUT" "$RISE" "$FALL" \
  "${sent0:-0}" "${sent1:-0}" "$(( (t_sent1 - t_sent0) / 1000000 ))" "$QSFL_NSERVERS" \
  "$RQ_WORK/disagree-defaults.json" "$RQ_WORK/disagree-profile.json" <<'PY'
import json, statistics, sys
figs, traffic_path, out, hw = sys.argv[1:5]
rounds, rate, interval, timeout, rise, fall = (int(x) for x in sys.argv[5:11])
sent0, sent1, span_s, nservers = float(sys.argv[11]), float(sys.argv[12]), int(sys.argv[13]) / 1000, int(sys.argv[14])
names = ["kill_to_down_ms", "kill_to_elsewhere_ms", "down_to_elsewhere_ms", "restart_to_up_ms", "bound_to_up_ms",
         "restart_to_back_ms"]
rows = [line.rstrip("\n").split("\t") for line in open(figs) if line.strip()]
det, per_round = {}, []
for row in rows:
    per_round.append({"round": int(row[0]), "victim": row[1],
                      **{k: (int(x) if x not in ("-", "") else None) for k, x in zip(names, row[2:8])},
                      "down_after_rounds": int(row[8]) if row[8] else None,
                      "up_after_rounds": int(row[9]) if row[9] else None})
for k in names:
    xs = [r[k] for r in per_round if r[k] is not None]
    det[k] = ({"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)} if xs
              else {"median": None, "n": 0})
def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}


traffic = load(traffic_path)
two = {"defaults": load(sys.argv[15]), "profile": load(sys.argv[16])}
ok = sent1 > sent0 and span_s > 0
traffic["probes_sent_per_s_all_backends"] = (sent1 - sent0) / span_s if ok else None
traffic["probes_sent_per_s_per_backend"] = (sent1 - sent0) / span_s / nservers if ok else None
traffic["probes_sent_span_s"] = span_s
# What the schedule allows: the first failed round leaves within an
# interval of the kill and is judged a timeout later, the fall-th one
# (fall - 1) intervals after it; the first answered round leaves within an
# interval of the server's return, the rise-th (rise - 1) intervals later.
expected = {"kill_to_down_ms": [(fall - 1) * interval + timeout, fall * interval + timeout],
            "bound_to_up_ms": [(rise - 1) * interval, rise * interval]}
doc = {"benchmark": "health", "hardware": hw, "rounds": rounds, "attempts_per_s": rate,
       "health_checks": {"interval_ms": interval, "timeout_ms": timeout, "rise": rise, "fall": fall,
                         "targets": ["10.78.1.1:443", "[fd78:1::1]:443"]},
       "backends": nservers, "detection": det, "expected_by_the_schedule_ms": expected, "per_round": per_round,
       "probe_traffic_per_backend": traffic, "two_instances": two}
json.dump(doc, open(out, "w"), indent=2)
print(f"{'measure':24} {'median ms (min..max)':>24}  rounds")
for k in names:
    d = det[k]
    text = f"{d['median']:.0f} ({d['min']}..{d['max']})" if d["n"] else "-"
    window = (f"  (the schedule: {expected[k][0]}..{expected[k][1]} plus the RTT)" if k in expected else "")
    print(f"{k:24} {text:>24}  {d['n']}{window}")
if traffic.get("probes_per_s"):
    print(f"probes per backend: {traffic['probes_per_s']:.1f}/s, {traffic['probe_octets_per_s']:.0f} octets/s on the "
          f"wire ({traffic['probe_frame_octets']:.0f} per frame); answers {traffic['answers_per_s']:.1f}/s, "
          f"{traffic['answer_octets_per_s']:.0f} octets/s ({traffic['answer_frame_octets']:.0f} per frame)")
if traffic.get("probes_sent_per_s_all_backends"):
    print(f"quicsteer sent {traffic['probes_sent_per_s_all_backends']:.1f} probes/s for {nservers} backends "
          f"({traffic['probes_sent_per_s_per_backend']:.1f} each)")
for name, d in two.items():
    if d.get("down"):
        print(f"two instances ({name}: interval {d['interval_ms']} ms, timeout {d['timeout_ms']} ms, "
              f"{d['trials']} trials): a death detected in {d['down']['detect_ms_median']} ms median, the window "
              f"{d['down']['window_ms_median']} ms median, {d['down']['window_ms_p99']} ms p99; a return "
              f"{d['up']['detect_ms_median']} ms, window {d['up']['window_ms_median']} / {d['up']['window_ms_p99']} ms")
print(f"written to {out}")
PY
