# Real QUIC transfers through quicsteer: the pieces the realquic test, the
# `scripts/run.sh real` demo and `scripts/bench.sh realquic` share. Source
# after tests/realquic/topology.sh, with these set:
#   RQ_BUILD   build directory (quicsteer, quicsteer-server)
#   RQ_WORK    a scratch directory of the caller's
#   RQ_PREFIX  namespace prefix (unique per run)
# Every background process is recorded in RQ_PIDS and ended by rq_stop_all.
# rq_wait_for, rq_metrics_port, rq_metric_sums, rq_huge_* and rq_afxdp_* need
# none of them: the tests and benchmarks that start quicsteer and
# dpdk-dumpcap themselves (dumpcap_test.sh, afxdp_imissed_test.sh,
# afxdp_forward_test.sh, scripts/bench/capture.sh) use only those.

RQ_PIDS=()
RQ_PORT=443

rq_log() { echo "realquic: $*"; }

# rq_require_tools NAME TOOL...: exits 1, naming the first TOOL missing from
# PATH, as test NAME (scripts/setup.sh installs them all; a missing one is a
# broken set-up, not a reason to skip).
rq_require_tools() {
  local name=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$name: '$tool' is missing (scripts/setup.sh installs it)"; exit 1; }
  done
}

# rq_with_rx_port PROFILE FROM: PROFILE with the wire port (its lines from
# "  - name: wire" to the next port) and the lcores section (which lcore
# polls which of the port's queues) taken from FROM, to stdout: the other
# realquic profiles over the RX port of configs/realquic-afxdp.yaml.
rq_with_rx_port() {
  python3 - "$1" "$2" <<'PY'
import re, sys
SECTIONS = [r"^  - name: wire\n(?:    .*\n)+", r"^lcores:\n(?:[ #].*\n)+"]
into, source = open(sys.argv[1]).read(), open(sys.argv[2]).read()
for pattern in SECTIONS:
    a, b = re.search(pattern, into, re.M), re.search(pattern, source, re.M)
    if not a or not b:
        sys.exit(f"no {pattern!r} in {sys.argv[1]} or {sys.argv[2]}")
    into = into[:a.start()] + b.group(0) + into[a.end():]
sys.stdout.write(into)
PY
}

# rq_make_files NUP: one 5 MB download and NUP distinct 5 MB uploads.
rq_make_files() {
  mkdir -p "$RQ_WORK/www" "$RQ_WORK/up"
  head -c 5242880 /dev/urandom >"$RQ_WORK/www/file5m"
  local i
  for ((i = 0; i < $1; i++)); do head -c 5242880 /dev/urandom >"$RQ_WORK/up/up$i"; done
}

# rq_wait_for FILE PATTERN SECONDS [PID]: until FILE holds PATTERN; with PID,
# no longer than that process runs.
rq_wait_for() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null && break
    sleep 0.05
  done
  grep -q "$2" "$1" 2>/dev/null
}

# rq_start_on_profile NAME BUILD NS WORK: quicsteer (BUILD/quicsteer) in
# namespace NS on WORK/profile.yaml, its output in WORK/quicsteer.out and its
# statistics in WORK/stats.json. Sets QS_PID and returns once it runs; exits
# 1, naming NAME, when it does not start.
rq_start_on_profile() {
  local name=$1 build=$2 ns=$3 work=$4
  ip netns exec "$ns" "$build/quicsteer" -- --profile "$work/profile.yaml" --stats-json "$work/stats.json" \
    >"$work/quicsteer.out" 2>&1 &
  QS_PID=$!
  rq_wait_for "$work/quicsteer.out" "running until" 30 "$QS_PID" ||
    { cat "$work/quicsteer.out"; echo "$name: quicsteer did not start"; exit 1; }
}

# rq_metrics_port FILE: the Prometheus port quicsteer's output FILE gives
# (prometheus_listen "127.0.0.1:0").
rq_metrics_port() {
  sed -n 's/^prometheus: .* (port \([0-9]*\)).*/\1/p' "$1" | head -n 1
}

# rq_metric_sums NS PORT PREFIX...: one scrape of quicsteer's /metrics on
# 127.0.0.1:PORT, from namespace NS (none when empty): the scrape's
# time.monotonic(), then per PREFIX the sum of the samples whose line starts
# with it, on one line.
rq_metric_sums() {
  local run=()
  [ -n "$1" ] && run=(ip netns exec "$1")
  shift
  "${run[@]}" python3 - "$@" <<'PY'
import sys, time, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
t = time.monotonic()
lines = text.splitlines()
print(t, *(sum(int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith(p)) for p in sys.argv[2:]))
PY
}

# rq_huge_reserve MB: MB of hugepages of the default size free on a mounted
# hugetlbfs, the difference reserved (as root) when fewer are. Sets
# RQ_HUGE_DIR (the mount) and RQ_HUGE_BEFORE (nr_hugepages before, when it
# reserved); 1 with RQ_HUGE_WHY when they cannot be had. rq_huge_release
# gives them back.
rq_huge_free() { awk '/^HugePages_Free:/ {print $2}' /proc/meminfo; }
rq_huge_reserve() {
  RQ_HUGE_BEFORE=
  RQ_HUGE_DIR=$(awk '$3 == "hugetlbfs" && $4 !~ /pagesize=1G/ {print $2; exit}' /proc/mounts)
  if [ -z "$RQ_HUGE_DIR" ]; then
    RQ_HUGE_WHY="no hugetlbfs mounted (scripts/setup.sh mounts one at /dev/hugepages)"
    return 1
  fi
  local page_kb need
  page_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
  need=$(($1 * 1024 / page_kb))
  if [ "$(rq_huge_free)" -lt "$need" ] && [ "$(id -u)" -eq 0 ]; then
    RQ_HUGE_BEFORE=$(cat /proc/sys/vm/nr_hugepages)
    echo $((RQ_HUGE_BEFORE + need - $(rq_huge_free))) >/proc/sys/vm/nr_hugepages 2>/dev/null || true
  fi
  if [ "$(rq_huge_free)" -lt "$need" ]; then
    RQ_HUGE_WHY="$need hugepages of $page_kb kB needed, $(rq_huge_free) free and no more could be reserved"
    return 1
  fi
}

# rq_huge_release PREFIX: after a run on hugepages with EAL's shared
# configuration under --file-prefix PREFIX: its hugepage files (EAL leaves
# them behind, holding the pages until a run with the same prefix starts)
# and runtime directory removed, the pages rq_huge_reserve reserved given back.
rq_huge_release() {
  [ -n "${RQ_HUGE_DIR:-}" ] && rm -f "$RQ_HUGE_DIR/${1}map_"*
  rm -rf "/var/run/dpdk/$1"
  [ -n "${RQ_HUGE_BEFORE:-}" ] && echo "$RQ_HUGE_BEFORE" >/proc/sys/vm/nr_hugepages
  return 0
}

# rq_start_servers PROFILE: one quicsteer-server per owner, in srv0 / srv1,
# with server IDs 0a01 / 0a02 (configs/realquic.yaml routes them to owners
# lcore 1 / 2, which transmit on qsrq-s0 / qsrq-s1).
rq_start_servers() {
  local n
  # One reset secret for both, as behind any one quicsteer: a packet steered
  # to the wrong server draws a reset its client recognises.
  RQ_SECRET=${RQ_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}
  for n in 0 1; do
    ip netns exec "$(qsrq_ns srv$n)" "$RQ_BUILD/quicsteer-server" --profile "$1" --server-id "0a0$((n + 1))" \
      --secret "$RQ_SECRET" --listen "$QSRQ_VIP:$RQ_PORT" --htdocs "$RQ_WORK/www" --timeout 10 --log "$RQ_WORK/server$n.jsonl" \
      >"$RQ_WORK/server$n.out" 2>&1 &
    RQ_PIDS+=($!)
  done
  for n in 0 1; do
    rq_wait_for "$RQ_WORK/server$n.out" "listening on" 10 || { cat "$RQ_WORK/server$n.out"; return 1; }
  done
}

# rq_make_cert: a self-signed key and certificate for gtlsserver
# ($RQ_WORK/server.key, server.crt; gtlsclient does not verify them).
rq_make_cert() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost -days 2 \
    -keyout "$RQ_WORK/server.key" -out "$RQ_WORK/server.crt" >"$RQ_WORK/openssl.out" 2>&1 ||
    { cat "$RQ_WORK/openssl.out"; return 1; }
}

# rq_start_gtlsservers [gtlsserver options...]: one unmodified ngtcp2
# gtlsserver per owner, in srv0 / srv1 on $QSRQ_VIP:$RQ_PORT, serving
# $RQ_WORK/www (after rq_make_cert). Their CIDs are 18 random octets, which
# QUIC-LB cannot route. Quiet: they log errors only, to
# $RQ_WORK/gtlsserverN.out.
rq_start_gtlsservers() {
  local n i
  for n in 0 1; do
    ip netns exec "$(qsrq_ns srv$n)" gtlsserver -q -d "$RQ_WORK/www" "$@" "$QSRQ_VIP" "$RQ_PORT" \
      "$RQ_WORK/server.key" "$RQ_WORK/server.crt" >"$RQ_WORK/gtlsserver$n.out" 2>&1 &
    RQ_PIDS+=($!)
  done
  for n in 0 1; do
    for ((i = 0; i < 200; i++)); do
      ip netns exec "$(qsrq_ns srv$n)" ss -u -l -n "sport = :$RQ_PORT" | grep -q "$QSRQ_VIP:$RQ_PORT" && break
      sleep 0.05
    done
    [ "$i" -lt 200 ] || { echo "gtlsserver $n did not bind:"; cat "$RQ_WORK/gtlsserver$n.out"; return 1; }
  done
}

# Ends the servers of either kind: every process in the server namespaces
# but the captures (rq_stop_captures ends those once they have settled).
rq_stop_servers() {
  local n pid keep=" ${RQ_CAPTURES[*]:-} " pids=()
  for n in 0 1; do
    for pid in $(ip netns pids "$(qsrq_ns srv$n)" 2>/dev/null); do
      [[ $keep == *" $pid "* ]] || pids+=("$pid")
    done
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
}

# rq_start_captures TAG: client->quicsteer on qsrq-c (outbound) and
# quicsteer->servers on qsrq-v0 / qsrq-v1 (inbound), 128-octet snaplen.
rq_start_captures() {
  local tag=$1
  ip netns exec "$(qsrq_ns cli)" tcpdump -n -i qsrq-c -Q out -s 128 -B 32768 -U -w "$RQ_WORK/$tag-rx.pcap" \
    2>"$RQ_WORK/$tag-rx.tcpdump" &
  RQ_PIDS+=($!)
  RQ_CAPTURES=($!)
  local n
  for n in 0 1; do
    ip netns exec "$(qsrq_ns srv$n)" tcpdump -n -i "qsrq-v$n" -Q in -s 128 -B 32768 -U \
      -w "$RQ_WORK/$tag-tx$n.pcap" 2>"$RQ_WORK/$tag-tx$n.tcpdump" &
    RQ_PIDS+=($!)
    RQ_CAPTURES+=($!)
  done
  rq_wait_for "$RQ_WORK/$tag-rx.tcpdump" "listening on" 10 &&
    rq_wait_for "$RQ_WORK/$tag-tx0.tcpdump" "listening on" 10 &&
    rq_wait_for "$RQ_WORK/$tag-tx1.tcpdump" "listening on" 10
}

# rq_settle_captures TAG: until no capture of TAG has grown for 0.5 s (at
# most 10 s). What quicsteer sent last may still wait in a veth peer's
# backlog when quicsteer exits; stopping the captures at once missed up to a
# backlog's worth of frames (~900 once).
rq_settle_captures() {
  local tag=$1 before after i
  after=$(cat "$RQ_WORK/$tag"-*.pcap 2>/dev/null | wc -c)
  for i in $(seq 1 20); do
    before=$after
    sleep 0.5
    after=$(cat "$RQ_WORK/$tag"-*.pcap 2>/dev/null | wc -c)
    [ "$after" = "$before" ] && return 0
  done
}

rq_stop_captures() {
  local pid
  for pid in "${RQ_CAPTURES[@]}"; do kill -INT "$pid" 2>/dev/null; done
  for pid in "${RQ_CAPTURES[@]}"; do wait "$pid" 2>/dev/null; done
  RQ_CAPTURES=()
}

# rq_start_quicsteer PROFILE TAG: quicsteer in the qs namespace; its output in
# $RQ_WORK/TAG-quicsteer.out, statistics in $RQ_WORK/TAG-quicsteer.json.
rq_start_quicsteer() {
  local tag=$2
  ip netns exec "$(qsrq_ns qs)" "$RQ_BUILD/quicsteer" -- --profile "$1" --stats-json "$RQ_WORK/$tag-quicsteer.json" \
    >"$RQ_WORK/$tag-quicsteer.out" 2>&1 &
  RQ_QUICSTEER=$!
  RQ_PIDS+=($!)
  rq_wait_for "$RQ_WORK/$tag-quicsteer.out" "running until" 30 || { cat "$RQ_WORK/$tag-quicsteer.out"; return 1; }
}

# rq_stop_quicsteer: SIGINT, then its exit status (1 on a leak).
rq_stop_quicsteer() {
  kill -INT "$RQ_QUICSTEER" 2>/dev/null
  wait "$RQ_QUICSTEER"
}

# rq_client TAG NAME [gtlsclient options...] PATH: one transfer, in the
# background, with idle and handshake timeouts $RQ_CLIENT_TIMEOUT (default
# 10s, gtlsclient's own handshake timeout); its line
# goes to $RQ_WORK/TAG-clients.tsv when it ends:
#   NAME  exit-status  seconds
rq_client() {
  local tag=$1 name=$2
  shift 2
  local path=${*: -1}
  local opts=("${@:1:$#-1}")
  mkdir -p "$RQ_WORK/$tag-dl/$name"
  (
    local t0 t1 rc
    t0=$(date +%s%N)
    ip netns exec "$(qsrq_ns cli)" timeout 60 gtlsclient -q --exit-on-all-streams-close --timeout="${RQ_CLIENT_TIMEOUT:-10s}" \
      --handshake-timeout="${RQ_CLIENT_TIMEOUT:-10s}" \
      --download="$RQ_WORK/$tag-dl/$name" "${opts[@]}" "$QSRQ_VIP" "$RQ_PORT" "https://localhost$path" \
      >"$RQ_WORK/$tag-dl/$name.log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(( (t1 - t0) / 1000000 ))" >>"$RQ_WORK/$tag-clients.tsv"
  ) &
  RQ_CLIENTS+=($!)
}

# rq_transfers TAG NDOWN NUP MIGRATION: NDOWN downloads of /file5m and NUP
# uploads of up/upI, all at once. MIGRATION: none; port (each client moves
# to a new UDP port 1 s after its handshake, before it sends its request at
# 1.5 s); address (the same, and the client namespace's source address
# changes to 10.77.0.3 once every client has its socket, so the move is to a
# new address); rebind (a NAT rebinding: a new port with the same CID, no
# path validation by the client). Waits for all; the phase's wall-clock window goes to
# $RQ_WORK/TAG-window.
rq_transfers() {
  local tag=$1 ndown=$2 nup=$3 migration=$4
  local mig=()
  case $migration in
    none) ;;
    rebind) mig=(--change-local-addr=1s --nat-rebinding --delay-stream=1500ms) ;;
    *) mig=(--change-local-addr=1s --delay-stream=1500ms) ;;
  esac
  : >"$RQ_WORK/$tag-clients.tsv"
  RQ_CLIENTS=()
  local t0 i
  t0=$(date +%s%N)
  for ((i = 0; i < ndown; i++)); do rq_client "$tag" "down$i" "${mig[@]}" /file5m; done
  for ((i = 0; i < nup; i++)); do
    rq_client "$tag" "up$i" "${mig[@]}" --data="$RQ_WORK/up/up$i" -m POST "/upload$i"
  done
  if [ "$migration" = address ]; then
    # every client bound (gtlsclient binds before its first Initial)
    local n
    for ((i = 0; i < 200; i++)); do
      n=$(ip netns exec "$(qsrq_ns cli)" ss -u -a -n -p 2>/dev/null | grep -c gtlsclient)
      [ "$n" -ge $((ndown + nup)) ] && break
      sleep 0.02
    done
    qsrq_client_source "$QSRQ_CLIENT2"
  fi
  local pid
  for pid in "${RQ_CLIENTS[@]}"; do wait "$pid"; done
  [ "$migration" = address ] && qsrq_client_source "$QSRQ_CLIENT"
  echo "$t0 $(date +%s%N)" >"$RQ_WORK/$tag-window"
}

# rq_link_stats TAG: the veth counters between quicsteer and the servers
# (what the kernel dropped on the way counts there), to $RQ_WORK/TAG-links.json.
rq_link_stats() {
  {
    echo "{"
    echo "\"qs\": $(ip -n "$(qsrq_ns qs)" -s -j link show),"
    echo "\"srv0\": $(ip -n "$(qsrq_ns srv0)" -s -j link show),"
    echo "\"srv1\": $(ip -n "$(qsrq_ns srv1)" -s -j link show),"
    echo "\"cli\": $(ip -n "$(qsrq_ns cli)" -s -j link show)"
    echo "}"
  } >"$RQ_WORK/$1-links.json"
}

# Ends whatever rq_* started that is still running.
rq_stop_all() {
  local pid
  for pid in "${RQ_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${RQ_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  RQ_PIDS=()
}

# The AF_XDP tests (afxdp_imissed_test.sh, afxdp_forward_test.sh): one
# quicsteer on an AF_XDP socket on a veth, a sender in another namespace.
#
# rq_afxdp_setup NAME TAG OCTET: skips (77) where namespaces or AF_XDP sockets
# cannot be had, then sets S and Q (the sender's and quicsteer's namespaces),
# WORK, QS_PID and failed=1, an EXIT trap that stops quicsteer, removes the
# namespaces and keeps WORK when failed is not 0, and the veth pair TAG-tx
# (10.OCTET.0.1, in S) and TAG-rx (10.OCTET.0.2, in Q).
rq_afxdp_setup() {
  RQ_AFXDP_NAME=$1
  local tag=$2 octet=$3
  qsrq_need_netns
  if ! qsrq_can_afxdp; then
    echo "SKIP: this machine cannot do AF_XDP (no AF_XDP sockets in the kernel or no net_af_xdp PMD)"
    exit 77
  fi
  S=$tag$$-s
  Q=$tag$$-q
  WORK=$(mktemp -d "/tmp/$tag-$RQ_AFXDP_NAME.XXXXXX")
  QS_PID=
  failed=1
  trap rq_afxdp_cleanup EXIT
  trap 'exit 1' INT TERM
  qsrq_pair_up "$S" "$Q" "$tag" "$octet" || exit 1
}

rq_afxdp_cleanup() {
  [ -n "$QS_PID" ] && kill -INT "$QS_PID" 2>/dev/null && wait "$QS_PID" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$Q" 2>/dev/null
  if [ "${failed:-1}" -eq 0 ]; then rm -rf "$WORK"; else echo "$RQ_AFXDP_NAME: files kept in $WORK"; fi
}

# rq_afxdp_port_yaml IFACE: the profile's ports and mempool for one AF_XDP
# socket on IFACE's RX queue 0. rx_descriptors 2048: the driver prefills 2048
# fill-ring entries, so only an RX ring at least that large fills before the
# fill ring runs dry, which the kernel counts as rx_dropped (imissed) too but
# DPDK 22.11 does not report.
rq_afxdp_port_yaml() {
  cat <<YAML
ports:
  - name: wire
    device: "net_af_xdp0,iface=$1,start_queue=0,queue_count=1,busy_budget=0"
    rx_queues: 1
    tx_queues: 1
    rx_descriptors: 2048
    rss: false
mempool:
  mbufs: 16383
YAML
}

# rq_afxdp_send_and_stop IFACE ADDR N METRIC: starts quicsteer in Q on
# WORK/profile.yaml (its port must be net_af_xdp), sends N QUIC Initials from
# S to ADDR:443 through IFACE, waits (at most 60 s) until the port has
# accounted for every datagram (received or missed) and METRIC plus the drops
# for every packet received (none still in a ring or a parking ticket, which
# stopping would drop as `shutdown`), and stops quicsteer. Sets SENT,
# TX_DROPPED (the sending veth's) and QS_RC.
rq_afxdp_send_and_stop() {
  local iface=$1 addr=$2 n=$3 metric=$4 metrics_port
  rq_start_on_profile "$RQ_AFXDP_NAME" "$BUILD" "$Q" "$WORK"
  grep "^port wire" "$WORK/quicsteer.out"
  grep -q "driver net_af_xdp" "$WORK/quicsteer.out" || { echo "$RQ_AFXDP_NAME: the port is not net_af_xdp"; exit 1; }
  metrics_port=$(rq_metrics_port "$WORK/quicsteer.out")
  ip netns exec "$S" python3 "$SRC/tests/realquic/quic_sender.py" "$addr" 443 "$n" >"$WORK/sender.out" || exit 1
  SENT=$(sed -n 's/^sent //p' "$WORK/sender.out")
  TX_DROPPED=$(ip -n "$S" -s -j link show "$iface" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["dropped"])')
  local t received missed done dropped
  for _ in $(seq 1 600); do
    read -r t received missed done dropped < <(rq_metric_sums "$Q" "$metrics_port" \
      "quicsteer_port_rx_packets_total{" "quicsteer_port_rx_missed_total{" "$metric" "quicsteer_drops_total{")
    [ -n "$dropped" ] && [ $((received + missed)) -ge "$SENT" ] && [ $((done + dropped)) -ge "$received" ] && break
    sleep 0.1
  done
  kill -INT "$QS_PID"
  wait "$QS_PID"
  QS_RC=$?
  QS_PID=
  sed -n '/== quicsteer summary/,$p' "$WORK/quicsteer.out"
  [ "$QS_RC" -eq 0 ] || echo "$RQ_AFXDP_NAME: quicsteer exited with $QS_RC"
}

# rq_test_steering_yaml: the steering section the single-port tests share
# (QUIC on 443, a fixed fallback key: the tests compare no hash).
rq_test_steering_yaml() {
  cat <<'YAML'
steering:
  quic_ports: [443]
  fallback:
    key: "5172f08c2cd54a9b8e0e4b6f1d3a7c21"
YAML
}

# rq_test_tail_yaml: how those tests watch quicsteer: a short nap, no
# periodic table, Prometheus on a port of the kernel's choosing
# (rq_metrics_port).
rq_test_tail_yaml() {
  cat <<'YAML'
polling:
  idle_sleep_us: 50
stats:
  period_ms: 0
telemetry: {prometheus_listen: "127.0.0.1:0"}
YAML
}
