# The pieces of the health-check test (tests/realquic/health_test.sh) that
# scripts/bench.sh health shares: the fleet's servers started and killed one
# process at a time, quicsteer started with its TAP's addresses, its health
# lines waited for, captures in front of the servers. Source after
# tests/realquic/fleet_topology.sh and realquic_lib.sh, with these set:
#   SRC, BUILD   the source tree and the build directory
#   RQ_WORK      a scratch directory (RQ_PIDS, RQ_PREFIX as realquic_lib.sh)
#   RQ_SECRET    the quicsteer-servers' shared reset secret, and
#                $RQ_WORK/servers.yaml (their QUIC-LB profile), $RQ_WORK/www,
#                and for gtlsserver $RQ_WORK/server.key / server.crt
# QS_OUT and QS_METRICS name the running quicsteer's output and Prometheus
# port (hl_start_quicsteer sets them).

# realquic_lib.sh's rq_* run in "$(qsrq_ns NAME)": here the fleet's namespaces.
qsrq_ns() { qsfl_ns "$@"; }

# ---- servers: one process per server and family (each binds one address);
# HL_PID[N$FAM] is its pid. Each start logs to a file of its own.
declare -A HL_PID
hl_gen=0
# hl_start KIND N FAM...: KIND quicsteer-server (QUIC-LB, logs
# server{N}{FAM}-{gen}.jsonl) or gtlsserver (random CIDs); waits until each
# is bound to port 443.
hl_start() {
  local kind=$1 n=$2 fam addr listen i
  shift 2
  for fam in "$@"; do
    hl_gen=$((hl_gen + 1))
    addr=$QSFL_VIP; listen=$QSFL_VIP:$RQ_PORT
    [ "$fam" = v6 ] && addr=$QSFL_VIP6 && listen="[$QSFL_VIP6]:$RQ_PORT"
    if [ "$kind" = quicsteer-server ]; then
      ip netns exec "$(qsfl_ns "srv$n")" "$BUILD/quicsteer-server" --profile "$RQ_WORK/servers.yaml" \
        --server-id "$(qsfl_srv_sid "$n")" --secret "$RQ_SECRET" --listen "$listen" --htdocs "$RQ_WORK/www" \
        --timeout 10 --log "$RQ_WORK/server$n$fam-$hl_gen.jsonl" >"$RQ_WORK/server$n$fam-$hl_gen.out" 2>&1 &
    else
      ip netns exec "$(qsfl_ns "srv$n")" gtlsserver -q -d "$RQ_WORK/www" "$addr" "$RQ_PORT" \
        "$RQ_WORK/server.key" "$RQ_WORK/server.crt" >"$RQ_WORK/gtls$n$fam-$hl_gen.out" 2>&1 &
    fi
    HL_PID[$n$fam]=$!
    RQ_PIDS+=($!)
  done
  for fam in "$@"; do
    addr=$QSFL_VIP
    [ "$fam" = v6 ] && addr="\[$QSFL_VIP6\]"
    for ((i = 0; i < 200; i++)); do
      ip netns exec "$(qsfl_ns "srv$n")" ss -u -l -n "sport = :$RQ_PORT" | grep -q "$addr:$RQ_PORT " && break
      sleep 0.025
    done
    [ "$i" -lt 200 ] || { echo "health: $kind $n $fam did not bind"; return 1; }
  done
}

# hl_kill N FAM...: SIGKILL to those processes, waited for.
hl_kill() {
  local n=$1 fam pid
  shift
  for fam in "$@"; do
    pid=${HL_PID[$n$fam]:-}
    [ -n "$pid" ] || continue
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    HL_PID[$n$fam]=
  done
}

# ---- what quicsteer says. QS_OUT is the running quicsteer's output.
# hl_lines NAME STATE: how many "backend NAME STATE after" lines so far.
hl_lines() { grep -c "^quicsteer: health: backend $1 $2 after" "$QS_OUT"; }

# hl_wait NAME STATE BEFORE SECONDS: until there are more than BEFORE such
# lines (at most SECONDS). Sets HL_N (the count in the newest line), HL_T (ns
# when it was seen, within 10 ms) and HL_LINE; returns 1 on timeout.
hl_wait() {
  local i
  HL_N='' HL_T='' HL_LINE=''
  for ((i = 0; i < $4 * 100; i++)); do
    if [ "$(hl_lines "$1" "$2")" -gt "$3" ]; then
      HL_T=$(date +%s%N)
      HL_LINE=$(grep "^quicsteer: health: backend $1 $2 after" "$QS_OUT" | tail -n 1)
      HL_N=$(sed -n 's/.* after \([0-9]*\) .*/\1/p' <<<"$HL_LINE")
      return 0
    fi
    sleep 0.01
  done
  return 1
}


# hl_metrics [health_check.py metrics options]: /metrics of the running
# quicsteer, from its namespace.
hl_metrics() { ip netns exec "$(qsfl_ns qs)" python3 "$SRC/tests/realquic/health_check.py" metrics "$QS_METRICS" "$@"; }

# hl_start_quicsteer PROFILE TAG: quicsteer and its TAP's addresses.
hl_start_quicsteer() {
  rq_start_quicsteer "$1" "$2" || { echo "health: quicsteer did not start"; exit 1; }
  QS_OUT=$RQ_WORK/$2-quicsteer.out
  QS_METRICS=$(rq_metrics_port "$QS_OUT")
  qsfl_tap_up || exit 1
}


# hl_captures TAG: what reaches each server's segment interface (inbound).
# Immediate mode: a batch lasts a fraction of a second, and frames the
# kernel still held in a ring block (retired after a timeout of about a
# second) when the capture stopped were counted as received but never
# written.
hl_captures() {
  qsfl_server_captures "$1" --immediate-mode
}

# hl_captures_done: the captures stopped. The probes keep every capture
# growing (rq_settle_captures would wait its 10 s); in immediate mode what
# the servers received is written at once, and the batch's clients have
# their data, so its frames are in.
hl_captures_done() {
  sleep 0.2
  rq_stop_captures
}

