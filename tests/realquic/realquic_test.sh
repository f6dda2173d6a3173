#!/usr/bin/env bash
# The realquic suite: real QUIC connections (ngtcp2's gtlsclient) through
# quicsteer to one quicsteer-server per owner lcore, in network namespaces
# this script makes and always removes (tests/realquic/topology.sh).
#
#   1. CID steering (configs/realquic.yaml): 20 parallel downloads and 4
#      uploads of 5 MiB, three times: no migration, active migration to a new
#      port, active migration to a new address; then 10 downloads with a NAT
#      rebinding (same CID, new port: quicsteer must count those migrations).
#      Every transfer must arrive
#      with the right sha256, every migrated connection must have moved (the
#      servers' logs), no server may see a packet of a connection it does not
#      have, every CID the servers issued must decode to their server ID, and
#      quicsteer's rx and tx must equal what captures on both sides saw, per
#      owner, with no software drop and no leaked mbuf.
#   2. The baseline, steering.mode four_tuple, in the same topology: without
#      migration the transfers still complete; with migration to a new port
#      some connections land on the other owner, whose server does not have
#      them, and fail. That is what CID steering prevents.
#   3. Servers that mint random CIDs (configs/realquic-random-cid.yaml): an
#      unmodified ngtcp2 gtlsserver per owner, whose 18-octet CIDs QUIC-LB
#      cannot route, so every packet after a connection's first Initial
#      reaches its owner through the forwarding tables alone. 20 downloads
#      without migration, then 10 with a NAT rebinding: every transfer must
#      arrive with the right sha256; the captures in front of the servers
#      must show each server only packets of the connections it made (the
#      server of a connection's first Initial), every rebound connection
#      reaching its server from two client ports, both servers used; no
#      software drop, no leaked mbuf, and quicsteer must have routed packets
#      by learned_setup and learned_cid and none by the hash of an unknown
#      short-header CID.
#   4. Its baseline, steering.forwarding.enabled false: 20 downloads, of
#      which some must fail, and the captures must show packets at a server
#      without their connection.
#
# RX selects quicsteer's RX port: af_packet (configs/realquic.yaml) or af_xdp
# (configs/realquic-afxdp.yaml; the other profiles take its wire port).
#
# usage: realquic_test.sh BUILD_DIR [af_packet|af_xdp]    (as root; exit 77 = skipped)
set -uo pipefail
BUILD=$(cd "${1:?usage: realquic_test.sh BUILD_DIR [af_packet|af_xdp]}" && pwd)
RX=${2:-af_packet}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/realquic/topology.sh
source "$SRC/tests/realquic/topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"

if ! qsrq_can_netns; then
  echo "SKIP: realquic needs root and network namespaces with veth pairs (uid $(id -u)): cannot make them here"
  exit 77
fi
case $RX in
  af_packet) ;;
  af_xdp)
    if ! qsrq_can_afxdp; then
      echo "SKIP: this machine cannot do AF_XDP (no AF_XDP sockets in the kernel or no net_af_xdp PMD)"
      exit 77
    fi ;;
  *) echo "realquic: RX must be af_packet or af_xdp, not '$RX'"; exit 2 ;;
esac
rq_require_tools realquic gtlsclient gtlsserver openssl tcpdump ethtool ss python3

RQ_BUILD=$BUILD
RQ_PREFIX=qsrq$$
RQ_WORK=$(mktemp -d /tmp/qsrq-test.XXXXXX)
CHECK="python3 $SRC/tests/realquic/realquic_check.py"
PROFILE=$SRC/configs/realquic.yaml
[ "$RX" = af_xdp ] && PROFILE=$SRC/configs/realquic-afxdp.yaml
rq_log "RX port: $RX ($PROFILE)"
cleanup() {
  rq_stop_all
  qsrq_down
  if [ "${failed:-1}" -eq 0 ]; then rm -rf "$RQ_WORK"; else echo "realquic: files kept in $RQ_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failed=0
check() { "$@" || failed=1; }
start=$(date +%s)

qsrq_up "$RQ_PREFIX" || { echo "realquic: could not make the namespaces"; exit 1; }
rq_make_files 4
sed 's/^\(  mode: \)cid/\1four_tuple/' "$PROFILE" >"$RQ_WORK/four_tuple.yaml"
grep -q 'mode: four_tuple' "$RQ_WORK/four_tuple.yaml" || { echo "realquic: could not make the baseline profile"; exit 1; }
RANDOM_CID=$SRC/configs/realquic-random-cid.yaml
if [ "$RX" = af_xdp ]; then
  rq_with_rx_port "$RANDOM_CID" "$PROFILE" >"$RQ_WORK/random_cid.yaml" ||
    { echo "realquic: could not make the AF_XDP random-CID profile"; exit 1; }
  RANDOM_CID=$RQ_WORK/random_cid.yaml
fi
sed 's/^\(    enabled: \)true/\1false/' "$RANDOM_CID" >"$RQ_WORK/no_tables.yaml"
grep -q '^    enabled: false' "$RQ_WORK/no_tables.yaml" || { echo "realquic: could not make the no-tables profile"; exit 1; }
rq_make_cert || { echo "realquic: could not make the servers' certificate"; exit 1; }

# run_quicsteer TAG PROFILE PHASE...: servers, quicsteer and captures up, the
# phases (NAME NDOWN NUP MIGRATION EXPECT), then everything down in the order
# that leaves nothing in flight: servers, quicsteer, captures. SERVERS:
# quicsteer (quicsteer-server, which logs what it saw) or gtls (gtlsserver
# with the options in GTLS_OPTS, which logs nothing of use: see the owners
# check). COUNTS_OPTS: more options of the counts check.
SERVERS=quicsteer
GTLS_OPTS=()
COUNTS_OPTS=()
run_quicsteer() {
  local tag=$1 profile=$2
  shift 2
  if [ "$SERVERS" = gtls ]; then
    rq_start_gtlsservers "${GTLS_OPTS[@]}" || return 1
  else
    rq_start_servers "$PROFILE" || return 1
  fi
  rq_start_quicsteer "$profile" "$tag" || return 1
  rq_start_captures "$tag" || return 1
  local name ndown nup migration expect
  while [ $# -gt 0 ]; do
    name=$1 ndown=$2 nup=$3 migration=$4 expect=$5
    shift 5
    rq_log "$name: $ndown downloads and $nup uploads, migration: $migration"
    rq_transfers "$name" "$ndown" "$nup" "$migration"
    check $CHECK transfers "$RQ_WORK" "$name" --ndown "$ndown" --nup "$nup" --migration "$migration" --expect "$expect" \
      --server-log "$([ "$SERVERS" = gtls ] && echo none || echo quicsteer)"
  done
  sleep 0.5
  rq_stop_servers
  if ! rq_stop_quicsteer; then
    echo "  $tag: FAILED: quicsteer exited with an error"
    failed=1
  fi
  # Everything quicsteer sent has reached the captures (or a counted drop)
  # before they stop and the links' drop counters are read.
  rq_settle_captures "$tag"
  rq_link_stats "$tag"
  rq_stop_captures
  sed -n '/== quicsteer summary/,$p' "$RQ_WORK/$tag-quicsteer.out"
  check $CHECK counts "$RQ_WORK" "$tag" --min-migrations "$MIN_MIGRATIONS" "${COUNTS_OPTS[@]}"
}

rq_log "CID steering (configs/realquic.yaml)"
MIN_MIGRATIONS=10  # the NAT rebinding phase: 10 known CIDs from new 4-tuples
run_quicsteer cid "$PROFILE" \
  cid-plain 20 4 none ok \
  cid-port 20 4 port ok \
  cid-address 20 4 address ok \
  cid-rebind 10 0 rebind ok || failed=1
check $CHECK servers "$RQ_WORK" --unknown-cid zero
check $CHECK classify "$RQ_WORK" cid --cid-tool "$BUILD/quicsteer-cid" --profile "$PROFILE"
check $CHECK cids "$RQ_WORK" --cid-tool "$BUILD/quicsteer-cid" --cr 1 --sid-len 2 --nonce-len 14 \
  --key 72656171756963207175696373746565
for f in "$RQ_WORK"/server*.jsonl "$RQ_WORK"/server*.out; do mv "$f" "$RQ_WORK/cid-$(basename "$f")"; done

rq_log "baseline: steering.mode four_tuple"
MIN_MIGRATIONS=0
run_quicsteer tuple "$RQ_WORK/four_tuple.yaml" \
  tuple-plain 20 4 none ok \
  tuple-port 20 4 port some-fail || failed=1
check $CHECK servers "$RQ_WORK" --unknown-cid some
for f in "$RQ_WORK"/server*.jsonl "$RQ_WORK"/server*.out; do mv "$f" "$RQ_WORK/tuple-$(basename "$f")"; done

rq_log "servers that mint random CIDs (gtlsserver), forwarding tables (configs/realquic-random-cid.yaml);" \
  "$(( $(date +%s) - start )) s so far"
SERVERS=gtls
MIN_MIGRATIONS=10  # the NAT rebinding phase: 10 learned CIDs from new 4-tuples
COUNTS_OPTS=(--forwarding on --routed-min learned_setup=1 --routed-min learned_cid=1
  --routed-max fallback_unknown_cid=0)
run_quicsteer random "$RANDOM_CID" \
  random-plain 20 0 none ok \
  random-rebind 10 0 rebind ok || failed=1
check $CHECK owners "$RQ_WORK" random --cid-len 18 --expect own --connections 30 --moved random-rebind:10

# Without the tables, a connection's packets after its first Initial (to the
# server's CID) are hashed independently of it: the hash of the server's CID
# picks the other owner than the hash of the client's Initial DCID with
# probability about 1/2, and then the client's Handshake reaches the server
# that does not have the connection, which never completes. With 20
# connections the chance that none fails is about 2^-20 (one run in a
# million), so only "at least one failed" is asserted, never how many (the
# owners check also wants at least one packet at the wrong server). A failed
# client ends at its idle timeout once the server that has its connection
# gives up the handshake: both timeouts are 3 s here (failed clients take
# 3-9 s, ngtcp2's idle timeout being at least 3 PTOs) instead of 10 s
# (14-16 s).
rq_log "baseline: gtlsserver, steering.forwarding.enabled false; $(( $(date +%s) - start )) s so far"
MIN_MIGRATIONS=0
COUNTS_OPTS=(--forwarding off --routed-max learned_setup=0 --routed-max learned_cid=0)
GTLS_OPTS=(--handshake-timeout=3s)
RQ_CLIENT_TIMEOUT=3s
run_quicsteer notables "$RQ_WORK/no_tables.yaml" \
  notables-plain 20 0 none some-fail || failed=1
check $CHECK owners "$RQ_WORK" notables --cid-len 18 --expect misrouted

rq_log "$(( $(date +%s) - start )) s"
if [ "$failed" -ne 0 ]; then
  echo "realquic: FAILED"
  exit 1
fi
echo "realquic: passed"
exit 0
