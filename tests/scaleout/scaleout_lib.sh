# The scale-out pieces that tests/scaleout/scaleout_test.sh, scripts/run.sh
# scaleout and scripts/bench.sh scaleout share: servers, instances (FRR,
# quicsteer, the health watcher), the events (crash, return, drain, silent
# failure), captures and batches of downloads. Source after
# tests/scaleout/scaleout_topology.sh and tests/realquic/realquic_lib.sh,
# with these set:
#   RQ_BUILD   build directory (quicsteer, quicsteer-server)
#   RQ_WORK    a scratch directory of the caller's (QSSO_WORK is the same)
#   SO_SRC     the source tree
# Every background process goes to RQ_PIDS (rq_stop_all ends them).

# rq_client (realquic_lib.sh) runs gtlsclient in "$(qsrq_ns cli)" towards $QSRQ_VIP.
qsrq_ns() { qsso_ns "$@"; }
QSRQ_VIP=$QSSO_VIP
SO_PROFILE=             # what so_quicsteer_start runs
SO_BFD=bfd              # or nobfd: FRR without BFD (the BGP hold time alone)
declare -A SO_QS_PID SO_WATCH_PID
SO_STARTS=0

so_log() { echo "scaleout: $*"; }
so_now() { date +%s%N; }

# so_start_servers quic|gtls: quicsteer-server with QUIC-LB server ID 0a0(N+1)
# (its profile: configs/realquic.yaml's QUIC-LB config with all four IDs), or
# ngtcp2's gtlsserver (random CIDs), on every server, logs under $RQ_WORK.
so_start_servers() {
  local n i
  if [ "$1" = quic ]; then
    sed '/server_id: "0a02"/a\    - {server_id: "0a03", owner: 1}\n    - {server_id: "0a04", owner: 2}' \
      "$SO_SRC/configs/realquic.yaml" >"$RQ_WORK/servers.yaml"
    grep -q '"0a04"' "$RQ_WORK/servers.yaml" || { echo "scaleout: could not make the servers' profile"; return 1; }
    for ((n = 0; n < QSSO_NSERVERS; n++)); do
      ip netns exec "$(qsso_ns "srv$n")" "$RQ_BUILD/quicsteer-server" --profile "$RQ_WORK/servers.yaml" \
        --server-id "$(qsso_srv_sid "$n")" --listen "$QSSO_VIP:$RQ_PORT" --htdocs "$RQ_WORK/www" --timeout 10 \
        --log "$RQ_WORK/server$n.jsonl" >"$RQ_WORK/server$n.out" 2>&1 &
      RQ_PIDS+=($!)
    done
    for ((n = 0; n < QSSO_NSERVERS; n++)); do
      rq_wait_for "$RQ_WORK/server$n.out" "listening on" 10 || { cat "$RQ_WORK/server$n.out"; return 1; }
    done
  else
    [ -f "$RQ_WORK/server.crt" ] || rq_make_cert || return 1
    for ((n = 0; n < QSSO_NSERVERS; n++)); do
      ip netns exec "$(qsso_ns "srv$n")" gtlsserver -q -d "$RQ_WORK/www" "$QSSO_VIP" "$RQ_PORT" \
        "$RQ_WORK/server.key" "$RQ_WORK/server.crt" >"$RQ_WORK/gtlsserver$n.out" 2>&1 &
      RQ_PIDS+=($!)
    done
    for ((n = 0; n < QSSO_NSERVERS; n++)); do
      for ((i = 0; i < 200; i++)); do
        ip netns exec "$(qsso_ns "srv$n")" ss -u -l -n "sport = :$RQ_PORT" | grep -q "$QSSO_VIP:$RQ_PORT" && break
        sleep 0.05
      done
      [ "$i" -lt 200 ] || { echo "gtlsserver $n did not bind:"; cat "$RQ_WORK/gtlsserver$n.out"; return 1; }
    done
  fi
}

# so_stop_servers: every process in the server namespaces but the captures.
so_stop_servers() {
  local n pid pids=() keep=" ${RQ_CAPTURES[*]:-} "
  for ((n = 0; n < QSSO_NSERVERS; n++)); do
    for pid in $(ip netns pids "$(qsso_ns "srv$n")" 2>/dev/null); do
      [[ $keep == *" $pid "* ]] || pids+=("$pid")
    done
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
}

# so_router_up: the router's FRR.
so_router_up() {
  qsso_frr_start rt "$SO_SRC/tests/scaleout/frr/router.conf" "$SO_BFD"
}

# so_instance_profile I: $SO_PROFILE as instance I runs it, to stdout. Every
# instance runs the same file, but for its top-level peer_sync block, if it
# has one: that names the addresses of one instance, and the copy gets
# instance I's own (`listen: ADDRESS:PORT`, on its TAP, the file's port) and
# the others' (`peers: [...]`, the same port), on one line each.
so_instance_profile() {
  local i=$1 j port peers=
  port=$(sed -n '/^peer_sync:/,/^[^ #]/s/^ *listen: *"\{0,1\}[^"]*:\([0-9]*\)"\{0,1\} *$/\1/p' "$SO_PROFILE")
  if [ -z "$port" ]; then
    cat "$SO_PROFILE"
    return
  fi
  for ((j = 0; j < QSSO_NINSTANCES; j++)); do
    [ "$j" -eq "$i" ] || peers+="${peers:+, }\"$(qsso_inst_addr "$j"):$port\""
  done
  sed -e "/^peer_sync:/,/^[^ #]/s/^\( *listen:\).*/\1 \"$(qsso_inst_addr "$i"):$port\"/" \
    -e "/^peer_sync:/,/^[^ #]/s/^\( *peers:\).*/\1 [$peers]/" "$SO_PROFILE"
}

# so_quicsteer_start I: quicsteer in instance I on $RQ_WORK/profile-qsI.yaml,
# $SO_PROFILE as so_instance_profile gives it to instance I; output in
# $RQ_WORK/qsI-K.out and statistics (at exit) in qsI-K.json, K counting the
# starts; its pid in $RQ_WORK/qsI.pid (the watcher reads it). Then the
# instance's addresses on the TAP it made (qsso_tap_up): what an operator's
# ExecStartPost= does.
so_quicsteer_start() {
  local i=$1 tag
  SO_STARTS=$((SO_STARTS + 1))
  tag=qs$i-$SO_STARTS
  SO_QS_TAG[$i]=$tag
  so_instance_profile "$i" >"$RQ_WORK/profile-qs$i.yaml"
  ip netns exec "$(qsso_ns "qs$i")" "$RQ_BUILD/quicsteer" -- --profile "$RQ_WORK/profile-qs$i.yaml" \
    --stats-json "$RQ_WORK/$tag.json" >"$RQ_WORK/$tag.out" 2>&1 &
  SO_QS_PID[$i]=$!
  RQ_PIDS+=($!)
  echo "$!" >"$RQ_WORK/qs$i.pid"
  rq_wait_for "$RQ_WORK/$tag.out" "running until" 30 || { cat "$RQ_WORK/$tag.out"; return 1; }
  qsso_tap_up "$i" || { cat "$RQ_WORK/$tag.out"; return 1; }
}
declare -A SO_QS_TAG

# so_quicsteer_stop I [SIGNAL]: SIGINT (or SIGNAL) and its exit status.
so_quicsteer_stop() {
  local pid=${SO_QS_PID[$1]:-}
  [ -n "$pid" ] || return 0
  kill -"${2:-INT}" "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local rc=$?
  SO_QS_PID[$1]=
  return $rc
}

# so_watcher_start I: the health watcher (tests/scaleout/scaleout_watch.sh)
# in instance I; its changes in $RQ_WORK/watchI.log.
so_watcher_start() {
  local i=$1
  ip netns exec "$(qsso_ns "qs$i")" bash "$SO_SRC/tests/scaleout/scaleout_watch.sh" "$QSSO_VIP" \
    "$RQ_WORK/qs$i.pid" "$RQ_WORK/drain$i" "$RQ_WORK/watch$i.log" &
  SO_WATCH_PID[$i]=$!
  RQ_PIDS+=($!)
}

# so_instance_up I: FRR, quicsteer and the watcher of instance I.
so_instance_up() {
  qsso_frr_start "qs$1" "$SO_SRC/tests/scaleout/frr/instance$1.conf" "$SO_BFD" &&
    so_quicsteer_start "$1" && so_watcher_start "$1"
}

# so_all_up: the router and every instance, until the router has a next hop
# per instance.
so_all_up() {
  local i
  so_router_up || return 1
  for ((i = 0; i < QSSO_NINSTANCES; i++)); do so_instance_up "$i" || return 1; done
  qsso_wait_nexthops "$QSSO_NINSTANCES" 30 || { echo "scaleout: the router did not learn every instance:"; qsso_nexthops; return 1; }
}

# ---- the events; each records its time (ns) in $RQ_WORK/TAG-event
# crash: quicsteer of instance I gets SIGKILL (its FRR and watcher live on: the
# watcher withdraws the route; the TAP goes with quicsteer, so the BGP
# session and BFD go down too).
so_event_crash() {
  # quicsteer's counters as last published (each stats.period_ms), kept for
  # the check: whether the router's traffic reached it before the kill.
  ip netns exec "$(qsso_ns "qs$2")" curl -s -m 1 http://127.0.0.1:9100/metrics >"$RQ_WORK/$1-qs$2-metrics.txt" 2>/dev/null
  echo "$(so_now) crash $2" >"$RQ_WORK/$1-event"
  so_quicsteer_stop "$2" KILL
}

# return: quicsteer of instance I starts again, its TAP gets the instance's
# addresses again, FRR's session comes back up and the watcher announces it.
so_event_return() {
  echo "$(so_now) return $2" >"$RQ_WORK/$1-event"
  so_quicsteer_start "$2"
}

# drain: withdraw first (the watcher's drain file), wait until the router has
# moved the traffic (its next hops lack the instance) and a grace of
# $SO_GRACE s (default 1), then SIGINT; the drain file goes once stopped.
so_event_drain() {
  local tag=$1 i=$2 j
  echo "$(so_now) drain $i" >"$RQ_WORK/$tag-event"
  touch "$RQ_WORK/drain$i"
  for ((j = 0; j < 500; j++)); do
    qsso_nexthops | grep -qx "$(qsso_inst_addr "$i")" || break
    sleep 0.02
  done
  echo "$(so_now) withdrawn" >>"$RQ_WORK/$tag-event"
  sleep "${SO_GRACE:-1}"
  so_quicsteer_stop "$i"
  echo "$? ${SO_QS_TAG[$i]}" >"$RQ_WORK/$tag-drained"
  rm -f "$RQ_WORK/drain$i"
}

# silent: instance I's machine fails without a word: nothing it sends reaches
# the router (qsso_silence), then everything in it dies. Only BFD or the BGP
# hold time tells the router.
so_event_silent() {
  local i=$2 pid
  echo "$(so_now) silent $i" >"$RQ_WORK/$1-event"
  qsso_silence "$i" on
  kill -KILL "${SO_WATCH_PID[$i]}" 2>/dev/null
  so_quicsteer_stop "$i" KILL
  qsso_frr_stop "qs$i" KILL
  for pid in $(ip netns pids "$(qsso_ns "qs$i")"); do kill -KILL "$pid" 2>/dev/null; done
}

# so_instance_back I: after so_event_silent, the machine and all on it again.
so_instance_back() {
  qsso_silence "$1" off
  rm -f "$RQ_WORK/drain$1"
  so_instance_up "$1" && qsso_wait_nexthops "$QSSO_NINSTANCES" 30
}

# so_start_captures TAG: what the router sends each instance (qsso-rI, out)
# and what reaches each server (qsso-e, in); 256 octets of each frame. And
# the router's next hops for the service address and its neighbours: those
# at the start ("start T_NS HOP...", "neighbour T_NS ADDRESS dev ... STATE"),
# then every change to its IPv4 routes and neighbours (ip monitor, one line
# each) in $RQ_WORK/TAG-routes.log, which scaleout_check.py reads to tell
# how traffic was spread over the batch.
so_start_captures() {
  local n rt
  rt=$(qsso_ns rt)
  RQ_CAPTURES=()
  # The monitor before the snapshot: a change between the two is in the log
  # with a time before the snapshot's, and the check orders by time. Stopped
  # with SIGTERM (so_stop_route_monitor): a background job ignores SIGINT,
  # and ip, unlike tcpdump, does not take it back.
  : >"$RQ_WORK/$1-routes.log"
  ip -n "$rt" -ts -o -4 monitor route neigh >>"$RQ_WORK/$1-routes.log" 2>&1 &
  SO_ROUTE_MONITOR=$!
  RQ_PIDS+=($!)
  echo "start $(so_now) $(qsso_nexthops | tr '\n' ' ')" >>"$RQ_WORK/$1-routes.log"
  ip -n "$rt" -4 neigh show | sed "s/^/neighbour $(so_now) /" >>"$RQ_WORK/$1-routes.log"
  for ((n = 0; n < QSSO_NINSTANCES; n++)); do
    ip netns exec "$rt" tcpdump -n -i "qsso-r$n" -Q out -s 256 -B 32768 -U -w "$RQ_WORK/$1-qs$n.pcap" \
      2>"$RQ_WORK/$1-qs$n.tcpdump" &
    RQ_PIDS+=($!); RQ_CAPTURES+=($!)
  done
  for ((n = 0; n < QSSO_NSERVERS; n++)); do
    ip netns exec "$(qsso_ns "srv$n")" tcpdump -n -i qsso-e -Q in -s 256 -B 32768 -U \
      -w "$RQ_WORK/$1-srv$n.pcap" 2>"$RQ_WORK/$1-srv$n.tcpdump" &
    RQ_PIDS+=($!); RQ_CAPTURES+=($!)
  done
  local f
  for f in qs0 qs1 srv0 srv1 srv2 srv3; do
    rq_wait_for "$RQ_WORK/$1-$f.tcpdump" "listening on" 20 || { echo "scaleout: capture $1-$f:"; cat "$RQ_WORK/$1-$f.tcpdump"; return 1; }
  done
  # The captures' start has silenced the router's side of BFD for over
  # 300 ms: in two batches of one CI run, BFD took a session down 320-350 ms
  # after the captures started (in one, both instances' sessions at once,
  # each instance seeing the router fall silent), and the router had no next
  # hop to an instance for the batch's first second; an earlier CI failure
  # looked the same. The router's side stalled, not quicsteer: a tcpdump
  # with its 32 MB ring takes 50-110 ms of the kernel to start here (5-30 ms
  # with 4 MB), and six start at once on two vCPUs. So the batch waits out BFD's detection time, then
  # for a next hop per running instance.
  sleep 0.5
  local want=0
  for ((n = 0; n < QSSO_NINSTANCES; n++)); do [ -n "${SO_QS_PID[$n]:-}" ] && want=$((want + 1)); done
  if ! qsso_wait_nexthops "$want" 30; then
    echo "scaleout: $1: the router has not a next hop per running instance ($want) within 30 s of the captures' start: $(qsso_nexthops | tr '\n' ' ')"
    return 1
  fi
  [ "$QSSO_WAITED_MS" -lt 100 ] || so_log "$1: the router had its $want next hops again $QSSO_WAITED_MS ms after the captures started"
}

# so_stop_route_monitor: ends so_start_captures' route monitor.
so_stop_route_monitor() {
  [ -n "${SO_ROUTE_MONITOR:-}" ] || return 0
  kill -TERM "$SO_ROUTE_MONITOR" 2>/dev/null
  wait "$SO_ROUTE_MONITOR" 2>/dev/null
  SO_ROUTE_MONITOR=
}

# so_sample_ports TAG: until $RQ_WORK/TAG-ports.stop exists, every 0.2 s, the
# local UDP address and port of each socket a gtlsclient of batch TAG holds,
# as lines "NAME ADDRESS PORT" in $RQ_WORK/TAG-ports.tsv (NAME: the download,
# from the client's --download directory). A NAT rebinding (gtlsclient
# --nat-rebinding) opens a second socket and keeps the first: a rebound
# download shows two ports, and the captures tell which came first.
so_sample_ports() {
  local tag=$1 cli
  cli=$(qsso_ns cli)
  rm -f "$RQ_WORK/$tag-ports.stop"
  : >"$RQ_WORK/$tag-ports.tsv"
  (
    declare -A name
    while [ ! -e "$RQ_WORK/$tag-ports.stop" ]; do
      while read -r local pid; do
        [ -n "${name[$pid]:-}" ] ||
          name[$pid]=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n "s,^--download=.*/$tag-dl/,,p")
        [ -n "${name[$pid]}" ] && echo "${name[$pid]} ${local%:*} ${local##*:}"
      done < <(ip netns exec "$cli" ss -u -a -n -p 2>/dev/null |
        sed -n 's/^[A-Z-]* *[0-9]* *[0-9]* *\([0-9.]*:[0-9]*\) .*"gtlsclient",pid=\([0-9]*\),.*/\1 \2/p')
      sleep 0.2
    done | sort -u >"$RQ_WORK/$tag-ports.tsv"
  ) &
  SO_SAMPLER=$!
  RQ_PIDS+=($!)
}

# so_batch TAG N EVENT I: N downloads of /file5m at once from the four client
# addresses in turn; EVENT (crash, return, drain, silent, or none) on instance
# I once they are under way ($SO_EVENT_AFTER s after the start, default 1);
# waits for every download. The window goes to $RQ_WORK/TAG-window. Each
# gtlsclient gets the options in the array SO_CLIENT_OPTS (none by default);
# with SO_SAMPLE_PORTS=1, so_sample_ports records the clients' ports.
so_batch() {
  local tag=$1 n=$2 event=$3 i=$4 k j bound
  : >"$RQ_WORK/$tag-clients.tsv"
  RQ_CLIENTS=()
  [ "${SO_SAMPLE_PORTS:-0}" = 1 ] && so_sample_ports "$tag"
  local t0
  t0=$(so_now)
  for ((k = 0; k < n; k++)); do
    # the next client address for each quarter, once the clients before have their sockets
    if ((k > 0 && k % ((n + 3) / 4) == 0)); then
      for ((j = 0; j < 50; j++)); do
        bound=$(ip netns exec "$(qsso_ns cli)" ss -u -a -n -p 2>/dev/null | grep -c gtlsclient)
        [ "$bound" -ge "$k" ] && break
        sleep 0.02
      done
      qsso_client_source "${QSSO_CLIENTS[$((k / ((n + 3) / 4)))]}"
    fi
    rq_client "$tag" "down$k" "${SO_CLIENT_OPTS[@]}" /file5m
  done
  qsso_client_source "${QSSO_CLIENTS[0]}"
  if [ "$event" != none ]; then
    sleep "${SO_EVENT_AFTER:-1}"
    "so_event_$event" "$tag" "$i"
  fi
  local pid
  for pid in "${RQ_CLIENTS[@]}"; do wait "$pid"; done
  echo "$t0 $(so_now)" >"$RQ_WORK/$tag-window"
  if [ "${SO_SAMPLE_PORTS:-0}" = 1 ]; then
    touch "$RQ_WORK/$tag-ports.stop"
    wait "$SO_SAMPLER"
  fi
}
SO_CLIENT_OPTS=()
