#!/usr/bin/env bash
# The realquic fleet test: real QUIC connections (ngtcp2's gtlsclient) through
# quicsteer to four quicsteer-servers, more than its two owner lcores, behind
# one TX port and a Linux bridge; every server holds the service address and
# answers the clients directly (tests/realquic/fleet_topology.sh). MODE is the
# delivery: l2 (configs/realquic-fleet-l2.yaml) or vxlan
# (configs/realquic-fleet-vxlan.yaml).
#
#   0. The topology alone, the kernel in quicsteer's place (qsfl_standin MODE
#      N, for N = 0..3): one download over IPv4 and one over IPv6 to each
#      server, with the right sha256; only server N may see a connection, and
#      the captures in front of the servers must pass the checks of step 3
#      (the kernel delivers as MODE says, from one source MAC).
#   1. quicsteer with the fleet profile, over IPv4 and over IPv6: 20
#      downloads and 4 uploads of 5 MiB without migration; 10 and 2 with an
#      active migration to a new port, then to a new address; 10 downloads
#      with a NAT rebinding. Every transfer must arrive with the right sha256
#      and every migrated connection must have moved (the servers' logs).
#   2. Draining: 12 downloads start; the backend with most of them is set to
#      draining in the profile and quicsteer gets SIGHUP; 12 more start. All
#      24 must complete, and no connection may reach the drained server after
#      the reload.
#   3. Over everything: no server received a packet of a connection it does
#      not have; every packet that reached server N and carries a CID some
#      server issued carries one of server N's (the server of its server
#      ID); every CID issued decodes to its server's ID; the frames are
#      delivered as MODE says (l2: destination MAC the server's, one source
#      MAC, the TX port's; vxlan: VNI 42 from 10.78.2.2 / fd78:2::2, inner
#      destination MAC the server's VXLAN MAC); all four servers used; no
#      leaked mbuf.
#
# Steps 1-3 need a quicsteer that knows `backends:` and `action.delivery`
# (`quicsteer --check` of the profile): without one, step 0 runs alone and the
# test is skipped (exit 77) once it passed.
#
# usage: fleet_test.sh BUILD_DIR l2|vxlan     (as root; exit 77 = skipped)
set -uo pipefail
BUILD=$(cd "${1:?usage: fleet_test.sh BUILD_DIR l2|vxlan}" && pwd)
MODE=${2:?usage: fleet_test.sh BUILD_DIR l2|vxlan}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
case $MODE in l2 | vxlan) ;; *) echo "fleet: mode l2 or vxlan, not '$MODE'"; exit 2 ;; esac
# shellcheck source=tests/realquic/fleet_topology.sh
source "$SRC/tests/realquic/fleet_topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"

if ! qsfl_can_netns; then
  echo "SKIP: the fleet test needs root and network namespaces with veth pairs, a bridge and VXLAN (uid $(id -u))"
  exit 77
fi
for tool in gtlsclient tcpdump ethtool ss python3 bridge; do
  command -v "$tool" >/dev/null || { echo "fleet: '$tool' is missing (scripts/setup.sh installs it)"; exit 1; }
done

RQ_BUILD=$BUILD
RQ_PREFIX=qsfl$$
RQ_WORK=$(mktemp -d /tmp/qsfl-test.XXXXXX)
# rq_client (realquic_lib.sh) runs gtlsclient in "$(qsrq_ns cli)" towards
# $QSRQ_VIP: here the fleet's client namespace, and the family's service address.
qsrq_ns() { qsfl_ns "$@"; }
QSRQ_VIP=$QSFL_VIP
CHECK="python3 $SRC/tests/realquic/realquic_check.py"
FCHECK="python3 $SRC/tests/realquic/fleet_check.py"
PROFILE=$SRC/configs/realquic-fleet-$MODE.yaml
cleanup() {
  rq_stop_all
  qsfl_down
  if [ "${failed:-1}" -eq 0 ]; then rm -rf "$RQ_WORK"; else echo "fleet: files kept in $RQ_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failed=0
check() { "$@" || failed=1; }
start=$(date +%s)
fl_log() { echo "fleet $MODE: $*"; }

qsfl_up "$RQ_PREFIX" || { echo "fleet: could not make the namespaces"; exit 1; }
rq_make_files 4
# quicsteer-server wants its server ID in a profile's steering.servers (the
# owner it names is only printed): the QUIC-LB config and fallback key of
# configs/realquic.yaml, which the fleet profiles share, with all four IDs.
sed '/server_id: "0a02"/a\    - {server_id: "0a03", owner: 1}\n    - {server_id: "0a04", owner: 2}' \
  "$SRC/configs/realquic.yaml" >"$RQ_WORK/servers.yaml"
grep -q '"0a04"' "$RQ_WORK/servers.yaml" || { echo "fleet: could not make the servers' profile"; exit 1; }

# fl_start_servers: a quicsteer-server per server and family (quicsteer-server
# binds one address), logs server{N}v4.jsonl / server{N}v6.jsonl.
fl_start_servers() {
  local n fam listen
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for fam in v4 v6; do
      listen=$QSFL_VIP:$RQ_PORT
      [ "$fam" = v6 ] && listen="[$QSFL_VIP6]:$RQ_PORT"
      ip netns exec "$(qsfl_ns "srv$n")" "$BUILD/quicsteer-server" --profile "$RQ_WORK/servers.yaml" \
        --server-id "$(qsfl_srv_sid "$n")" --listen "$listen" --htdocs "$RQ_WORK/www" --timeout 10 \
        --log "$RQ_WORK/server$n$fam.jsonl" >"$RQ_WORK/server$n$fam.out" 2>&1 &
      RQ_PIDS+=($!)
    done
  done
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for fam in v4 v6; do
      rq_wait_for "$RQ_WORK/server$n$fam.out" "listening on" 10 || { cat "$RQ_WORK/server$n$fam.out"; return 1; }
    done
  done
}

# fl_stop_servers TAG: ends the servers (their summaries go to the logs) and
# files their logs under TAG-.
fl_stop_servers() {
  local n pid pids=() keep=" ${RQ_CAPTURES[*]:-} " f
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for pid in $(ip netns pids "$(qsfl_ns "srv$n")" 2>/dev/null); do
      [[ $keep == *" $pid "* ]] || pids+=("$pid")
    done
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
  for f in "$RQ_WORK"/server[0-9]*.jsonl "$RQ_WORK"/server[0-9]*.out; do
    [ -e "$f" ] && mv "$f" "$RQ_WORK/$1-$(basename "$f")"
  done
}

# fl_transfers TAG v4|v6 NDOWN NUP MIGRATION: rq_transfers over one family.
# MIGRATION: none, port (a new UDP port 1 s after the handshake, before the
# request at 1.5 s), address (the same, and the clients' source address
# changes to 10.78.0.3 / fd78::3 once every client has its socket), rebind (a
# new port with the same CID, no path validation by the client).
fl_transfers() {
  local tag=$1 fam=$2 ndown=$3 nup=$4 migration=$5
  local mig=() i
  case $migration in
    none) ;;
    rebind) mig=(--change-local-addr=1s --nat-rebinding --delay-stream=1500ms) ;;
    *) mig=(--change-local-addr=1s --delay-stream=1500ms) ;;
  esac
  QSRQ_VIP=$QSFL_VIP
  [ "$fam" = v6 ] && QSRQ_VIP=$QSFL_VIP6
  : >"$RQ_WORK/$tag-clients.tsv"
  RQ_CLIENTS=()
  local t0
  t0=$(date +%s%N)
  for ((i = 0; i < ndown; i++)); do rq_client "$tag" "down$i" "${mig[@]}" /file5m; done
  for ((i = 0; i < nup; i++)); do
    rq_client "$tag" "up$i" "${mig[@]}" --data="$RQ_WORK/up/up$i" -m POST "/upload$i"
  done
  if [ "$migration" = address ]; then
    local n
    for ((i = 0; i < 200; i++)); do
      n=$(ip netns exec "$(qsfl_ns cli)" ss -u -a -n -p 2>/dev/null | grep -c gtlsclient)
      [ "$n" -ge $((ndown + nup)) ] && break
      sleep 0.02
    done
    qsfl_client_source "${QSFL_CLIENTS[1]}" "${QSFL_CLIENTS6[1]}"
  fi
  local pid
  for pid in "${RQ_CLIENTS[@]}"; do wait "$pid"; done
  [ "$migration" = address ] && qsfl_client_source "${QSFL_CLIENTS[0]}" "${QSFL_CLIENTS6[0]}"
  echo "$t0 $(date +%s%N)" >"$RQ_WORK/$tag-window"
}

# fl_start_captures TAG: what reaches each server's segment interface
# (inbound, 256 octets: a VXLAN frame's headers and the inner QUIC header).
fl_start_captures() {
  local n
  RQ_CAPTURES=()
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    ip netns exec "$(qsfl_ns "srv$n")" tcpdump -n -i qsfl-e -Q in -s 256 -B 32768 -U \
      -w "$RQ_WORK/$1-srv$n.pcap" 2>"$RQ_WORK/$1-srv$n.tcpdump" &
    RQ_PIDS+=($!)
    RQ_CAPTURES+=($!)
  done
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    rq_wait_for "$RQ_WORK/$1-srv$n.tcpdump" "listening on" 10 || return 1
  done
}

# ---- 0. the topology with the kernel in quicsteer's place
fl_log "topology check: the kernel delivers ($MODE) to one server at a time"
fl_start_servers || { echo "fleet: the servers did not start"; exit 1; }
fl_start_captures standin || { echo "fleet: the captures did not start"; exit 1; }
for ((n = 0; n < QSFL_NSERVERS; n++)); do
  qsfl_standin "$MODE" "$n" || { echo "fleet: stand-in $MODE $n failed"; failed=1; continue; }
  fl_transfers "standin$n-v4" v4 1 0 none
  fl_transfers "standin$n-v6" v6 1 0 none
  check $CHECK transfers "$RQ_WORK" "standin$n-v4" --ndown 1 --nup 0 --migration none --expect ok
  check $CHECK transfers "$RQ_WORK" "standin$n-v6" --ndown 1 --nup 0 --migration none --expect ok
  check $FCHECK standin "$RQ_WORK" --server "$n" --tags "standin$n-v4,standin$n-v6"
done
qsfl_standin off 0
fl_stop_servers standin
rq_settle_captures standin
rq_stop_captures
check $FCHECK servers "$RQ_WORK" --logs 'standin-server*.jsonl' --count $((2 * QSFL_NSERVERS)) --unknown-cid zero
check $FCHECK routing "$RQ_WORK" standin --mode "$MODE" --logs 'standin-server*.jsonl' --ignore-mld

if ! "$BUILD/quicsteer" --check "$PROFILE" >"$RQ_WORK/check.out" 2>&1; then
  if [ "$failed" -ne 0 ]; then echo "fleet $MODE: FAILED (topology check)"; exit 1; fi
  echo "SKIP: fleet $MODE: the topology check passed; $BUILD/quicsteer does not take $PROFILE:"
  sed 's/^/  /' "$RQ_WORK/check.out" | tail -3
  exit 77
fi

# ---- 1. quicsteer with the fleet profile
cp "$PROFILE" "$RQ_WORK/fleet.yaml"
fl_log "quicsteer with $(basename "$PROFILE"); $(( $(date +%s) - start )) s so far"
fl_start_servers || { echo "fleet: the servers did not start"; exit 1; }
rq_start_quicsteer "$RQ_WORK/fleet.yaml" fleet || { echo "fleet: quicsteer did not start"; exit 1; }
fl_start_captures fleet || { echo "fleet: the captures did not start"; exit 1; }
for fam in v4 v6; do
  for phase in "plain 20 4 none" "port 10 2 port" "address 10 2 address" "rebind 10 0 rebind"; do
    read -r name ndown nup migration <<<"$phase"
    fl_log "$fam-$name: $ndown downloads and $nup uploads over $fam, migration: $migration"
    fl_transfers "$fam-$name" "$fam" "$ndown" "$nup" "$migration"
    check $CHECK transfers "$RQ_WORK" "$fam-$name" --ndown "$ndown" --nup "$nup" --migration "$migration" --expect ok
  done
done

# ---- 2. draining a backend mid-run
fl_log "drain: 12 downloads, then the busiest backend drains (SIGHUP), then 12 more; $(( $(date +%s) - start )) s so far"
QSRQ_VIP=$QSFL_VIP
: >"$RQ_WORK/drain-a-clients.tsv"
: >"$RQ_WORK/drain-b-clients.tsv"
RQ_CLIENTS=()
t0=$(date +%s%N)
for ((i = 0; i < 12; i++)); do rq_client drain-a "down$i" /file5m; done
# every connection made (its server logged it) before the choice
for ((i = 0; i < 200; i++)); do
  $FCHECK connections "$RQ_WORK" --since "$t0" --count 12 >/dev/null && break
  sleep 0.05
done
drained=$($FCHECK connections "$RQ_WORK" --since "$t0" --busiest)
fl_log "drain: srv$drained has the most of them"
sed -i "/name: srv$drained,/{n;s/state: active/state: draining/}" "$RQ_WORK/fleet.yaml"
grep -A1 "name: srv$drained," "$RQ_WORK/fleet.yaml" | grep -q 'state: draining' ||
  { echo "fleet: could not rewrite the profile"; failed=1; }
# quicsteer prints "quicsteer: reload (SIGHUP) applied: ..." or "... refused: ..."
kill -HUP "$RQ_QUICSTEER"
rq_wait_for "$RQ_WORK/fleet-quicsteer.out" "quicsteer: reload (SIGHUP)" 10 ||
  { echo "fleet: quicsteer did not report a reload after SIGHUP"; failed=1; }
grep "quicsteer: reload (SIGHUP)" "$RQ_WORK/fleet-quicsteer.out" | sed 's/^/  /'
grep -q "quicsteer: reload (SIGHUP) applied" "$RQ_WORK/fleet-quicsteer.out" ||
  { echo "  fleet: FAILED: the reload was not applied"; failed=1; }
t_drain=$(date +%s%N)
for ((i = 0; i < 12; i++)); do rq_client drain-b "down$i" /file5m; done
for pid in "${RQ_CLIENTS[@]}"; do wait "$pid"; done
t1=$(date +%s%N)
echo "$t0 $t1" >"$RQ_WORK/drain-a-window"
echo "$t_drain $t1" >"$RQ_WORK/drain-b-window"
check $CHECK transfers "$RQ_WORK" drain-a --ndown 12 --nup 0 --migration none --expect ok
check $CHECK transfers "$RQ_WORK" drain-b --ndown 12 --nup 0 --migration none --expect ok
check $FCHECK drain "$RQ_WORK" --server "$drained" --before "$t0" --reload "$t_drain"

sleep 0.5
fl_stop_servers fleet
rq_stop_quicsteer || { echo "  fleet: FAILED: quicsteer exited with an error"; failed=1; }
rq_settle_captures fleet
rq_stop_captures
sed -n '/== quicsteer summary/,$p' "$RQ_WORK/fleet-quicsteer.out"

# ---- 3. over everything
check $FCHECK servers "$RQ_WORK" --logs 'fleet-server*.jsonl' --count $((2 * QSFL_NSERVERS)) --unknown-cid zero
check $FCHECK routing "$RQ_WORK" fleet --mode "$MODE" --logs 'fleet-server*.jsonl'
mkdir -p "$RQ_WORK/cids"
cp "$RQ_WORK"/fleet-server*.jsonl "$RQ_WORK/cids/"
for f in "$RQ_WORK"/cids/fleet-server*.jsonl; do mv "$f" "$RQ_WORK/cids/${f##*/fleet-}"; done
check $CHECK cids "$RQ_WORK/cids" --cid-tool "$BUILD/quicsteer-cid" --cr 1 --sid-len 2 --nonce-len 14 \
  --key 72656171756963207175696373746565
check $FCHECK quicsteer "$RQ_WORK" fleet

fl_log "$(( $(date +%s) - start )) s"
if [ "$failed" -ne 0 ]; then
  echo "fleet $MODE: FAILED"
  exit 1
fi
echo "fleet $MODE: passed"
exit 0
