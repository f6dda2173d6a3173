#!/usr/bin/env bash
# The realquic fleet test: real QUIC connections (ngtcp2's gtlsclient) through
# quicsteer to four quicsteer-servers, more than its two owner lcores, behind
# one TX port and a Linux bridge; every server holds the service address and
# answers the clients directly (tests/realquic/fleet_topology.sh). MODE: l2
# (configs/realquic-fleet-l2.yaml), vxlan (configs/realquic-fleet-vxlan.yaml)
# or ipip (configs/realquic-fleet-ipip.yaml), the delivery, with
# quicsteer-servers that mint QUIC-LB CIDs (steps 0-3, and for l2 the
# baseline of step 4); or random-cid
# (configs/realquic-fleet-random-cid.yaml), l2 delivery to unmodified ngtcp2
# gtlsservers that mint random CIDs (steps 0 and R).
#
#   0. The topology alone, the kernel in quicsteer's place (qsfl_standin DELIVERY
#      N, for N = 0..3): one download over IPv4 and one over IPv6 to each
#      server, with the right sha256; only server N may see a connection, and
#      the captures in front of the servers must pass the checks of step 3
#      (the kernel delivers as DELIVERY says, from one source MAC; DELIVERY
#      is MODE, l2 for random-cid).
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
#      destination MAC the server's VXLAN MAC; ipip: IPv4 inside IPv4
#      (protocol 4) and IPv6 inside IPv6 (41) from 10.78.2.2 / fd78:2::2 to
#      the server's address, TTL 64, valid checksums, DF the inner one's,
#      the inner packet intact: fleet_check.py ipip_why); all four servers
#      used; no leaked mbuf.
#   4. (l2) The baseline, steering.mode four_tuple (the profile with that one
#      change), fresh servers: 10 downloads over IPv4 without migration must
#      complete; 10 downloads and 2 uploads per family with an active
#      migration to a new port must not all complete, and some packet must
#      reach a server that does not have its connection (the servers' logs):
#      a new 4-tuple hashes to another of the four servers. That is what CID
#      steering prevents.
#   R. random-cid: a gtlsserver per server and family; 4 uploads of 5 MiB
#      with a NAT rebinding before the request (2 per family, the servers
#      verbose: each upload's body must reach exactly one server, whole, with
#      its file's sha256), then quiet servers: 10 downloads per family without
#      migration and 5 with a NAT rebinding, and the drain of step 2 (its 12
#      first connections send their request 2 s after the handshake, after
#      the reload). The captures in front of the servers (gtlsserver logs
#      nothing of use) must show: every connection at exactly one server, the
#      one its first Initial reached, from every client port it used (the
#      rebound ones from two), delivered as l2 says, at all four servers, as
#      many frames per server as quicsteer counted for its backend; every
#      connection the drained server had kept reaching it after the reload
#      and no new one did. quicsteer must have routed by the forwarding
#      tables (learned_setup, learned_cid) and never by the hash of an
#      unknown short-header CID; no software drop, no leaked mbuf. Active
#      migration to a new CID is not asserted: without QUIC-LB CIDs nothing
#      can follow it (the README's "Forwarding tables").
#
# Steps 1-4 and R need a quicsteer that knows `backends:` and `action.delivery`
# (`quicsteer --check` of the profile): without one, step 0 runs alone and the
# test is skipped (exit 77) once it passed.
#
# ipip needs a kernel with the ipip and ip6_tunnel modules: the servers
# decapsulate with the fallback devices tunl0 and ip6tnl0 that every new
# network namespace then has, and the stand-in of step 0 encapsulates with
# ipip and ip6tnl devices. Without them (qsfl_has_ipip) nothing runs: the
# test says "SKIP: fleet ipip: this kernel has no ipip (...)" and exits 77.
# Its bytes are checked without a kernel: fleet_check_ipip_test.py runs this
# test's frame check on quicsteer's delivery code's output, and
# tests/dataplane/delivery_tshark_test.sh has tshark dissect it.
#
# usage: fleet_test.sh BUILD_DIR l2|vxlan|ipip|random-cid     (as root; exit 77 = skipped)
set -uo pipefail
BUILD=$(cd "${1:?usage: fleet_test.sh BUILD_DIR l2|vxlan|ipip|random-cid}" && pwd)
MODE=${2:?usage: fleet_test.sh BUILD_DIR l2|vxlan|ipip|random-cid}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
case $MODE in
  l2 | vxlan | ipip) DELIVERY=$MODE ;;
  random-cid) DELIVERY=l2 ;;
  *) echo "fleet: mode l2, vxlan, ipip or random-cid, not '$MODE'"; exit 2 ;;
esac
# shellcheck source=tests/realquic/fleet_topology.sh
source "$SRC/tests/realquic/fleet_topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"

if ! qsfl_can_netns; then
  echo "SKIP: the fleet test needs root and network namespaces with veth pairs, a bridge and VXLAN (uid $(id -u))"
  exit 77
fi
rq_require_tools fleet gtlsclient gtlsserver openssl tcpdump ethtool ss python3 bridge
if [ "$MODE" = ipip ] && ! qsfl_has_ipip; then
  echo "SKIP: fleet ipip: $QSFL_IPIP_MISSING"
  exit 77
fi

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
# The files stay for every exit but a pass or a skip (an early `exit 1`
# leaves failed at 0).
cleanup() {
  local rc=$?
  rq_stop_all
  qsfl_down
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then rm -rf "$RQ_WORK"; else echo "fleet: files kept in $RQ_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failed=0
check() { "$@" || failed=1; }
start=$(date +%s)
fl_log() { echo "fleet $MODE: $*"; }

qsfl_up "$RQ_PREFIX" || { echo "fleet: could not make the namespaces"; exit 1; }
if [ "$MODE" = ipip ]; then
  qsfl_ipip_servers || { echo "fleet: the servers' tunl0 and ip6tnl0 did not come up"; exit 1; }
  fl_log "the kernel has ipip: the servers decapsulate with tunl0 and ip6tnl0; end to end"
fi
rq_make_files 4
# quicsteer-server wants its server ID in a profile's steering.servers (the
# owner it names is only printed): the QUIC-LB config and fallback key of
# configs/realquic.yaml, which the fleet profiles share, with all four IDs.
sed '/server_id: "0a02"/a\    - {server_id: "0a03", owner: 1}\n    - {server_id: "0a04", owner: 2}' \
  "$SRC/configs/realquic.yaml" >"$RQ_WORK/servers.yaml"
grep -q '"0a04"' "$RQ_WORK/servers.yaml" || { echo "fleet: could not make the servers' profile"; exit 1; }

# fl_drain_and_finish OUT: sets backend srv$drained to draining in
# $RQ_WORK/fleet.yaml, reloads quicsteer (whose output is OUT) by SIGHUP, starts
# the 12 downloads of drain-b, waits for every client, and writes the windows of
# drain-a (from $t0) and drain-b.
fl_drain_and_finish() {
  local out=$1 i pid
  fl_log "drain: srv$drained has the most of them"
  sed -i "/name: srv$drained,/{n;s/state: active/state: draining/}" "$RQ_WORK/fleet.yaml"
  grep -A1 "name: srv$drained," "$RQ_WORK/fleet.yaml" | grep -q 'state: draining' ||
    { echo "fleet: could not rewrite the profile"; failed=1; }
  # quicsteer prints "quicsteer: reload (SIGHUP) reading PATH" as it starts,
  # then "quicsteer: reload (SIGHUP) applied: ..." or "... refused: ...".
  kill -HUP "$RQ_QUICSTEER"
  rq_wait_for "$out" "quicsteer: reload (SIGHUP) \(applied\|refused\)" 10 ||
    { echo "fleet: quicsteer did not report a reload after SIGHUP"; failed=1; }
  grep "quicsteer: reload (SIGHUP)" "$out" | sed 's/^/  /'
  grep -q "quicsteer: reload (SIGHUP) applied" "$out" ||
    { echo "  fleet: FAILED: the reload was not applied"; failed=1; }
  t_drain=$(date +%s%N)
  for ((i = 0; i < 12; i++)); do rq_client drain-b "down$i" /file5m; done
  for pid in "${RQ_CLIENTS[@]}"; do wait "$pid"; done
  t1=$(date +%s%N)
  echo "$t0 $t1" >"$RQ_WORK/drain-a-window"
  echo "$t_drain $t1" >"$RQ_WORK/drain-b-window"
}

# fl_start_servers: a quicsteer-server per server and family (quicsteer-server
# binds one address), logs server{N}v4.jsonl / server{N}v6.jsonl.
fl_start_servers() {
  local n fam listen
  # One reset secret for the fleet, as behind any one quicsteer.
  RQ_SECRET=${RQ_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for fam in v4 v6; do
      listen=$QSFL_VIP:$RQ_PORT
      [ "$fam" = v6 ] && listen="[$QSFL_VIP6]:$RQ_PORT"
      ip netns exec "$(qsfl_ns "srv$n")" "$BUILD/quicsteer-server" --profile "$RQ_WORK/servers.yaml" \
        --server-id "$(qsfl_srv_sid "$n")" --secret "$RQ_SECRET" --listen "$listen" --htdocs "$RQ_WORK/www" --timeout 10 \
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

# fl_start_gtlsservers [gtlsserver options...]: an unmodified ngtcp2
# gtlsserver per server and family (it binds one address), serving
# $RQ_WORK/www with the key and certificate of rq_make_cert; output
# gtls{N}v4.out / gtls{N}v6.out. Its output is buffered (stdbuf): unbuffered,
# a verbose gtlsserver makes a write per log line, and a 5 MiB upload took
# 10-25 s instead of 0.5; SIGINT ends it with its output flushed.
fl_start_gtlsservers() {
  local n fam addr i
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for fam in v4 v6; do
      addr=$QSFL_VIP
      [ "$fam" = v6 ] && addr=$QSFL_VIP6
      ip netns exec "$(qsfl_ns "srv$n")" stdbuf -o4M -e4M gtlsserver -d "$RQ_WORK/www" "$@" "$addr" "$RQ_PORT" \
        "$RQ_WORK/server.key" "$RQ_WORK/server.crt" >"$RQ_WORK/gtls$n$fam.out" 2>&1 &
      RQ_PIDS+=($!)
    done
  done
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for ((i = 0; i < 200; i++)); do
      [ "$(ip netns exec "$(qsfl_ns "srv$n")" ss -u -l -n "sport = :$RQ_PORT" | grep -c ":$RQ_PORT ")" -ge 2 ] && break
      sleep 0.05
    done
    [ "$i" -lt 200 ] || { echo "fleet: the gtlsservers of server $n did not bind:"; cat "$RQ_WORK"/gtls"$n"v*.out; return 1; }
  done
}

# fl_stop_servers TAG [SIGNAL]: ends the servers with SIGNAL (TERM; their
# summaries go to the logs) and files their logs under TAG-.
fl_stop_servers() {
  local n pid pids=() keep=" ${RQ_CAPTURES[*]:-} " f sig=${2:-TERM}
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    for pid in $(ip netns pids "$(qsfl_ns "srv$n")" 2>/dev/null); do
      [[ $keep == *" $pid "* ]] || pids+=("$pid")
    done
  done
  for pid in "${pids[@]}"; do kill "-$sig" "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
  for f in "$RQ_WORK"/server[0-9]*.jsonl "$RQ_WORK"/server[0-9]*.out "$RQ_WORK"/gtls[0-9]*.out; do
    [ -e "$f" ] && mv "$f" "$RQ_WORK/$1-$(basename "$f")"
  done
}

# fl_transfers TAG v4|v6 NDOWN NUP MIGRATION [FIRST_UP]: rq_transfers over
# one family; the uploads are up/upI for I = FIRST_UP (0) .. FIRST_UP+NUP-1.
# MIGRATION: none, port (a new UDP port 1 s after the handshake, before the
# request at 1.5 s), address (the same, and the clients' source address
# changes to 10.78.0.3 / fd78::3 once every client has its socket), rebind (a
# new port with the same CID, no path validation by the client).
fl_transfers() {
  local tag=$1 fam=$2 ndown=$3 nup=$4 migration=$5 first_up=${6:-0}
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
  for ((i = first_up; i < first_up + nup; i++)); do
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
  qsfl_server_captures "$1"
}

# ---- 0. the topology with the kernel in quicsteer's place
fl_log "topology check: the kernel delivers ($DELIVERY) to one server at a time"
fl_start_servers || { echo "fleet: the servers did not start"; exit 1; }
fl_start_captures standin || { echo "fleet: the captures did not start"; exit 1; }
for ((n = 0; n < QSFL_NSERVERS; n++)); do
  qsfl_standin "$DELIVERY" "$n" || { echo "fleet: stand-in $DELIVERY $n failed"; failed=1; continue; }
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
check $FCHECK routing "$RQ_WORK" standin --mode "$DELIVERY" --logs 'standin-server*.jsonl' --ignore-mld

if ! "$BUILD/quicsteer" --check "$PROFILE" >"$RQ_WORK/check.out" 2>&1; then
  if [ "$failed" -ne 0 ]; then echo "fleet $MODE: FAILED (topology check)"; exit 1; fi
  echo "SKIP: fleet $MODE: the topology check passed; $BUILD/quicsteer does not take $PROFILE:"
  sed 's/^/  /' "$RQ_WORK/check.out" | tail -3
  exit 77
fi

# fleet_quiclb: steps 1-3, quicsteer-servers with QUIC-LB server IDs.
fleet_quiclb() {
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
  fl_drain_and_finish "$RQ_WORK/fleet-quicsteer.out"
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
  # ipip: the outer TTL / hop limit is the profile's delivery.ttl
  local ttl=()
  [ "$MODE" = ipip ] && ttl=(--outer-ttl 64)
  check $FCHECK routing "$RQ_WORK" fleet --mode "$MODE" --logs 'fleet-server*.jsonl' "${ttl[@]}"
  mkdir -p "$RQ_WORK/cids"
  cp "$RQ_WORK"/fleet-server*.jsonl "$RQ_WORK/cids/"
  for f in "$RQ_WORK"/cids/fleet-server*.jsonl; do mv "$f" "$RQ_WORK/cids/${f##*/fleet-}"; done
  check $CHECK cids "$RQ_WORK/cids" --cid-tool "$BUILD/quicsteer-cid" --cr 1 --sid-len 2 --nonce-len 14 \
    --key 72656171756963207175696373746565
  check $FCHECK quicsteer "$RQ_WORK" fleet --connections-from 'fleet-server*.jsonl'
}

# fleet_four_tuple: step 4, the baseline (l2).
fleet_four_tuple() {
  local fam
  sed 's/^\(  mode: \)cid/\1four_tuple/' "$PROFILE" >"$RQ_WORK/four_tuple.yaml"
  grep -q '^  mode: four_tuple' "$RQ_WORK/four_tuple.yaml" || { echo "fleet: could not make the baseline profile"; failed=1; return; }
  fl_log "baseline: steering.mode four_tuple; $(( $(date +%s) - start )) s so far"
  fl_start_servers || { echo "fleet: the servers did not start"; exit 1; }
  rq_start_quicsteer "$RQ_WORK/four_tuple.yaml" tuple || { echo "fleet: quicsteer did not start"; exit 1; }
  # A client whose connection another server has gets nothing back from the
  # new 4-tuple: it ends at its idle timeout, 3 s here rather than 10.
  local RQ_CLIENT_TIMEOUT=3s
  fl_log "tuple-v4-plain: 10 downloads over v4, migration: none (must complete)"
  fl_transfers tuple-v4-plain v4 10 0 none
  check $CHECK transfers "$RQ_WORK" tuple-v4-plain --ndown 10 --nup 0 --migration none --expect ok
  for fam in v4 v6; do
    fl_log "tuple-$fam-port: 10 downloads and 2 uploads over $fam, migration: port (some must fail)"
    fl_transfers "tuple-$fam-port" "$fam" 10 2 port
    check $CHECK transfers "$RQ_WORK" "tuple-$fam-port" --ndown 10 --nup 2 --migration port --expect some-fail
  done
  sleep 0.5
  fl_stop_servers tuple
  rq_stop_quicsteer || { echo "  tuple: FAILED: quicsteer exited with an error"; failed=1; }
  sed -n '/== quicsteer summary/,$p' "$RQ_WORK/tuple-quicsteer.out" | grep -E '^  (routed|backends| +srv)'
  check $FCHECK servers "$RQ_WORK" --logs 'tuple-server*.jsonl' --count $((2 * QSFL_NSERVERS)) --unknown-cid some
}

# fleet_random_cid: step R, gtlsservers that mint random CIDs.
fleet_random_cid() {
  local fam phase name ndown nup migration i t0 t1 t_drain drained
  # ngtcp2's server CIDs are 18 octets (the profile's short_dcid_len)
  local cidlen=18
  rq_make_cert || { echo "fleet: could not make the servers' certificate"; exit 1; }
  for ((i = 0; i < 4; i++)); do echo "upload $i received" >"$RQ_WORK/www/upload$i"; done
  cp "$PROFILE" "$RQ_WORK/fleet.yaml"
  fl_log "quicsteer with $(basename "$PROFILE"); $(( $(date +%s) - start )) s so far"
  # Verbose servers for the uploads: they hex-dump every request body they
  # receive (and log every packet, so only the uploads run against them).
  fl_start_gtlsservers --no-quic-dump || { echo "fleet: the gtlsservers did not start"; exit 1; }
  rq_start_quicsteer "$RQ_WORK/fleet.yaml" random || { echo "fleet: quicsteer did not start"; exit 1; }
  fl_start_captures random || { echo "fleet: the captures did not start"; exit 1; }
  fl_log "v4-upload: up0 and up1 over v4, migration: rebind"
  fl_transfers v4-upload v4 0 2 rebind 0
  fl_log "v6-upload: up2 and up3 over v6, migration: rebind"
  fl_transfers v6-upload v6 0 2 rebind 2
  fl_stop_servers upload INT
  check $FCHECK uploads "$RQ_WORK" --tags v4-upload,v6-upload --nup 4 --logs 'upload-gtls*.out'
  fl_start_gtlsservers -q || { echo "fleet: the gtlsservers did not start"; exit 1; }
  for fam in v4 v6; do
    for phase in "plain 10 none" "rebind 5 rebind"; do
      read -r name ndown migration <<<"$phase"
      fl_log "$fam-$name: $ndown downloads over $fam, migration: $migration"
      fl_transfers "$fam-$name" "$fam" "$ndown" 0 "$migration"
      check $CHECK transfers "$RQ_WORK" "$fam-$name" --ndown "$ndown" --nup 0 --migration "$migration" --expect ok \
        --server-log none
    done
  done

  fl_log "drain: 12 downloads (requests 2 s after the handshake), then the busiest backend drains (SIGHUP)," \
    "then 12 more; $(( $(date +%s) - start )) s so far"
  QSRQ_VIP=$QSFL_VIP
  : >"$RQ_WORK/drain-a-clients.tsv"
  : >"$RQ_WORK/drain-b-clients.tsv"
  RQ_CLIENTS=()
  t0=$(date +%s%N)
  for ((i = 0; i < 12; i++)); do rq_client drain-a "down$i" --delay-stream=2s /file5m; done
  # every connection made (its first Initial reached a server) before the choice
  drained=
  for ((i = 0; i < 100; i++)); do
    drained=$($FCHECK busiest "$RQ_WORK" random --cid-len $cidlen --since "$t0" --count 12) && break
    sleep 0.1
  done
  if [ -z "$drained" ]; then
    echo "  drain: FAILED: 12 connections did not reach the servers"
    failed=1
    drained=0
  fi
  fl_drain_and_finish "$RQ_WORK/random-quicsteer.out"
  check $CHECK transfers "$RQ_WORK" drain-a --ndown 12 --nup 0 --migration none --expect ok --server-log none
  check $CHECK transfers "$RQ_WORK" drain-b --ndown 12 --nup 0 --migration none --expect ok --server-log none

  sleep 0.5
  fl_stop_servers random
  rq_stop_quicsteer || { echo "  random: FAILED: quicsteer exited with an error"; failed=1; }
  rq_settle_captures random
  rq_stop_captures
  sed -n '/== quicsteer summary/,$p' "$RQ_WORK/random-quicsteer.out"

  check $FCHECK drain-captures "$RQ_WORK" random --cid-len $cidlen --server "$drained" --before "$t0" --reload "$t_drain"
  # 4 uploads, 2 x 15 downloads, 24 in the drain
  check $FCHECK owners "$RQ_WORK" random --cid-len $cidlen --connections 58 \
    --moved v4-upload:2 --moved v6-upload:2 --moved v4-rebind:5 --moved v6-rebind:5
  check $FCHECK quicsteer "$RQ_WORK" random --routed-min learned_setup=1 --routed-min learned_cid=1 \
    --routed-max fallback_unknown_cid=0
}

case $MODE in
  random-cid) fleet_random_cid ;;
  l2) fleet_quiclb; fleet_four_tuple ;;
  *) fleet_quiclb ;;
esac

fl_log "$(( $(date +%s) - start )) s"
if [ "$failed" -ne 0 ]; then
  echo "fleet $MODE: FAILED"
  exit 1
fi
echo "fleet $MODE: passed"
exit 0
