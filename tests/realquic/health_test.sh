#!/usr/bin/env bash
# The backend health-check test: quicsteer probes each of the fleet's four
# servers (tests/realquic/fleet_topology.sh) with a QUIC long header of a
# reserved version, through the backend's own delivery, from the appliance's
# address on its TAP (10.78.9.2 / fd78:9::2, UDP 61000) to the service address
# (both families: configs/realquic-fleet-health.yaml); each server answers with
# a Version Negotiation that returns through the router to quicsteer's RX
# port. interval 200 ms, timeout 150 ms, rise 2, fall 3 (read from the
# profile). Every assertion is on behaviour; the times are printed, never
# compared with a bound.
#
#   0. The topology alone, no quicsteer: a stand-in probe written on the
#      fleet segment to each server (health_probe.py standin) from the
#      appliance's address, both families, is answered with a Version
#      Negotiation that echoes its CIDs and leaves the router towards
#      quicsteer.
#   l2, QUIC-LB quicsteer-servers (one per server and family):
#   a. quicsteer starts; the appliance's addresses answer ping through the
#      exception path; every backend is marked up after one answered round
#      (from unchecked), none down first (no round before quicsteer has its
#      TAP's addresses), /metrics says up with a probe RTT for each; 12
#      downloads each reach the server the whole fleet's hash names.
#   b. server 1's processes are killed (SIGKILL): its backend is marked
#      down after exactly `fall` failed probes, no other; 12 downloads
#      complete with the right sha256, none reaches server 1, those the
#      whole fleet would send there reach others (captures in front of the
#      servers, quicsteer-cid classify), and the probes keep reaching it
#      (another batch while no connection hashes to it, at most 3); every
#      probe in those captures came as l2 delivers, both families at every
#      server.
#   c. they start again: marked up after exactly `rise` answered probes;
#      downloads complete, and those the hash names for server 1 reach it.
#   d. the service addresses leave server 2's lo (the server still answers
#      ping at its own address): marked down after `fall`; back: up after
#      `rise`.
#   e. only server 3's IPv6 process is killed (its IPv4 one answers): marked
#      down after `fall` (the IPv6 target is probed, and a round passes only
#      when every target answered); restarted: up after `rise`.
#   f. server 0 killed and marked down; Version Negotiation packets with
#      guessed CIDs sent to 10.78.9.2 / fd78:9::2 port 61000 from the client
#      namespace, from its own address and claiming the service address and
#      port as source (IP_TRANSPARENT), for 1 s: server 0 stays down, every
#      one is counted as a forged answer; restarted: up after `rise`.
#   g. every server killed: all four marked down, /healthz answers 503 with
#      "health_checks: no backend answers its probes". quicsteer stops:
#      its JSON has the per-backend health and probe counters and the
#      forged answers, nothing deferred over the budget, no leaked mbuf.
#   vxlan, random-CID gtlsservers (the profile with delivery vxlan and the
#   random-CID steering of configs/realquic-fleet-random-cid.yaml):
#   v. every backend up as in a (the probes at the servers came inside VXLAN as the
#      delivery writes it, both families); server 2's gtlsservers killed: marked
#      down after `fall`, 8 downloads complete; started again: up after
#      `rise`; quicsteer's JSON as in g.
#
# Without a quicsteer that takes the profile (`quicsteer --check`), step 0
# runs alone and the test is skipped (exit 77) once it passed.
#
# usage: health_test.sh BUILD_DIR     (as root; exit 77 = skipped)
set -uo pipefail
BUILD=$(cd "${1:?usage: health_test.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/realquic/fleet_topology.sh
source "$SRC/tests/realquic/fleet_topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"
# shellcheck source=tests/realquic/health_lib.sh
source "$SRC/tests/realquic/health_lib.sh"

if ! qsfl_can_netns; then
  echo "SKIP: the health test needs root and network namespaces with veth pairs, a bridge and VXLAN (uid $(id -u))"
  exit 77
fi
rq_require_tools health gtlsclient gtlsserver openssl tcpdump ethtool ss python3 bridge nft ping

RQ_BUILD=$BUILD
RQ_PREFIX=qshc$$
HL_FILE_PREFIX=qshc$$   # EAL's (hl_prefix)
RQ_WORK=$(mktemp -d /tmp/qshc-test.XXXXXX)
QSRQ_VIP=$QSFL_VIP
CHECK="python3 $SRC/tests/realquic/realquic_check.py"
HCHECK="python3 $SRC/tests/realquic/health_check.py"
PROBE="python3 $SRC/tests/realquic/health_probe.py"
PROFILE=$SRC/configs/realquic-fleet-health.yaml
FALL=$(sed -n 's/^  fall: *\([0-9]*\).*/\1/p' "$PROFILE")
RISE=$(sed -n 's/^  rise: *\([0-9]*\).*/\1/p' "$PROFILE")
PROBE_PORT=$(sed -n 's/^  probe_udp_port: *\([0-9]*\).*/\1/p' "$PROFILE")
REASON="health_checks: no backend answers its probes"
# A client whose connection went to a dead server would wait for its
# handshake timeout: 5 s rather than 10 bounds a failing run.
RQ_CLIENT_TIMEOUT=5s
cleanup() {
  local rc=$?
  rq_stop_all
  qsfl_down
  rm -rf "/var/run/dpdk/$HL_FILE_PREFIX"
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then rm -rf "$RQ_WORK"; else echo "health: files kept in $RQ_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failed=0
check() { "$@" || failed=1; }
fail() { echo "  health: FAILED: $*"; failed=1; }
start=$(date +%s%N)
hl_log() { echo "health: $*"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

qsfl_up "$RQ_PREFIX" || { echo "health: could not make the namespaces"; exit 1; }
qsfl_appliance_up || { echo "health: could not hide quicsteer's port or route the appliance's addresses"; exit 1; }
mkdir -p "$RQ_WORK/www"
head -c 262144 /dev/urandom >"$RQ_WORK/www/small"
sed '/server_id: "0a02"/a\    - {server_id: "0a03", owner: 1}\n    - {server_id: "0a04", owner: 2}' \
  "$SRC/configs/realquic.yaml" >"$RQ_WORK/servers.yaml"
grep -q '"0a04"' "$RQ_WORK/servers.yaml" || { echo "health: could not make the servers' profile"; exit 1; }
RQ_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')

# hl_expect NAME STATE WANT_N T0 WHAT: waits (5 s) for the next STATE line of
# NAME (hl_lines counted before T0's event into HL_BEFORE) and asserts that
# its count is WANT_N; prints the time from T0.
hl_expect() {
  local name=$1 state=$2 want=$3 t0=$4 what=$5
  if ! hl_wait "$name" "$state" "$HL_BEFORE" 5; then
    fail "$name was not marked $state within 5 s of $what"
    return 1
  fi
  echo "  $HL_LINE"
  echo "  $name marked $state $(( (HL_T - t0) / 1000000 )) ms after $what"
  [ "$HL_N" = "$want" ] || fail "$name marked $state after $HL_N probes, want $want"
}

# hl_all_up T0: every backend marked up after one answered round (it starts
# unchecked, counted as up), none marked down first (no round starts before
# quicsteer has read its TAP's addresses, which qsfl_tap_up gives once the
# TAP exists), and so in /metrics, with a probe RTT.
hl_all_up() {
  local n downs
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    if ! hl_wait "srv$n" up 0 5; then
      fail "srv$n was not marked up within 5 s of quicsteer's start"
      continue
    fi
    echo "  $HL_LINE"
    echo "  srv$n marked up $(( (HL_T - $1) / 1000000 )) ms after quicsteer's start"
    [ "$HL_N" = 1 ] || fail "srv$n marked up after $HL_N answered rounds, want 1 (from unchecked)"
    # the down lines before its first up line
    downs=$(awk -v up="^quicsteer: health: backend srv$n up after" -v down="^quicsteer: health: backend srv$n down after" \
      '$0 ~ up {exit} $0 ~ down {n++} END {print n + 0}' "$QS_OUT")
    [ "$downs" -eq 0 ] || fail "srv$n was marked down at the start ($(grep -m1 "backend srv$n down" "$QS_OUT"))"
  done
  check hl_metrics --want srv0=up,srv1=up,srv2=up,srv3=up --rtt
}

# ---- downloads and captures
# hl_batch TAG FAM N: N downloads of /small at once over FAM, waited for;
# the window goes to TAG-window. Then the sha256 check.
hl_batch() {
  local tag=$1 fam=$2 n=$3 i pid t0
  QSRQ_VIP=$QSFL_VIP
  [ "$fam" = v6 ] && QSRQ_VIP=$QSFL_VIP6
  : >"$RQ_WORK/$tag-clients.tsv"
  RQ_CLIENTS=()
  t0=$(date +%s%N)
  for ((i = 0; i < n; i++)); do rq_client "$tag" "down$i" /small; done
  for pid in "${RQ_CLIENTS[@]}"; do wait "$pid"; done
  echo "$t0 $(date +%s%N)" >"$RQ_WORK/$tag-window"
  local out
  if out=$($CHECK transfers "$RQ_WORK" "$tag" --ndown "$n" --nup 0 --migration none --expect ok --server-log none \
    --file small); then
    tail -n 1 <<<"$out"
  else
    echo "$out"
    failed=1
  fi
}

# hl_placed TAG EXPECT VICTIM SINCE: batches of 12 downloads over IPv4
# (TAG-1, TAG-2, ...; at most 3) with captures, until one shows a connection
# the whole fleet's hash names for VICTIM; each checked against EXPECT
# (health_check.py placement).
hl_placed() {
  local tag=$1 expect=$2 victim=$3 since=$4 k rc
  for k in 1 2 3; do
    hl_captures "$tag-$k" || { fail "the captures did not start"; return; }
    hl_batch "$tag-$k" v4 12
    hl_captures_done
    $HCHECK placement "$RQ_WORK" "$tag-$k" --since "$since" --profile "$RQ_WORK/all-active.yaml" \
      --cid-tool "$BUILD/quicsteer-cid" --expect "$expect" --victim "$victim" --probe-port "$PROBE_PORT"
    rc=$?
    [ "$rc" -eq 3 ] && continue
    [ "$rc" -eq 0 ] || failed=1
    return
  done
  fail "$tag: in 3 batches no connection hashed to srv$victim: the step proved nothing"
}

# ---- 0. the topology alone: stand-in probes
hl_log "topology check: a stand-in probe to each server from the appliance's address, no quicsteer"
for ((n = 0; n < QSFL_NSERVERS; n++)); do hl_start quicsteer-server "$n" v4 v6 || exit 1; done
for ((n = 0; n < QSFL_NSERVERS; n++)); do
  for pair in "$QSFL_QS_ADDR $QSFL_VIP" "$QSFL_QS_ADDR6 $QSFL_VIP6"; do
    read -r s d <<<"$pair"
    out=$(ip netns exec "$(qsfl_ns rt)" $PROBE standin --out-iface qsfl-rb --dst-mac "$(qsfl_srv_mac "$n")" \
      --src "$s" --dst "$d" --sport "$PROBE_PORT" --watch-iface qsfl-ro --timeout 2 2>&1) || failed=1
    echo "  server $n: $out"
  done
done

if ! "$BUILD/quicsteer" --check "$PROFILE" >"$RQ_WORK/check.out" 2>&1; then
  if [ "$failed" -ne 0 ]; then echo "health: FAILED (topology check)"; exit 1; fi
  echo "SKIP: health: the topology check passed; $BUILD/quicsteer does not take $PROFILE:"
  sed 's/^/  /' "$RQ_WORK/check.out" | tail -3
  exit 77
fi
# What the whole fleet's hash picks (quicsteer-cid classify): the profile
# lists every backend active; health is quicsteer's run-time state.
cp "$PROFILE" "$RQ_WORK/all-active.yaml"

# hl_prefix FILE: the profile's EAL arguments with this run's --file-prefix,
# so that its telemetry socket is its own.
TELEMETRY=/var/run/dpdk/$HL_FILE_PREFIX/dpdk_telemetry.v2
hl_prefix() {
  sed -i "s/^\(eal: \[\)/\1\"--file-prefix\", \"$HL_FILE_PREFIX\", /" "$1"
  grep -q "\"--file-prefix\", \"$HL_FILE_PREFIX\"" "$1" || { echo "health: could not give $1 a file prefix"; exit 1; }
}

# ---- a. start
cp "$PROFILE" "$RQ_WORK/health.yaml"
hl_prefix "$RQ_WORK/health.yaml"
hl_log "a. quicsteer with $(basename "$PROFILE") (interval $(sed -n 's/^  interval_ms: *\([0-9]*\).*/\1/p' "$PROFILE") ms," \
  "rise $RISE, fall $FALL); $(ms_since "$start") ms so far"
t0=$(date +%s%N)
hl_start_quicsteer "$RQ_WORK/health.yaml" l2
for a in "$QSFL_QS_ADDR" "$QSFL_QS_ADDR6"; do
  ip netns exec "$(qsfl_ns cli)" ping -c 1 -W 2 "$a" >/dev/null ||
    fail "the appliance's address $a does not answer ping (the exception path, qsfl_tap_up)"
done
hl_all_up "$t0"
hl_placed a all-up 1 "$(date +%s%N)"

# ---- b. a server dies
hl_log "b. server 1's processes killed; $(ms_since "$start") ms so far"
HL_BEFORE=$(hl_lines srv1 down)
others_down=$(hl_lines 'srv[023]' down)
t_kill=$(date +%s%N)
hl_kill 1 v4 v6
hl_expect srv1 down "$FALL" "$t_kill" "the kill"
t_down=${HL_T:-$(date +%s%N)}
[ "$(hl_lines 'srv[023]' down)" -eq "$others_down" ] || fail "another backend was marked down too"
check hl_metrics --want srv0=up,srv1=down,srv2=up,srv3=up
check $HCHECK telemetry "$TELEMETRY" --want srv0=up,srv1=down,srv2=up,srv3=up
hl_placed b avoided 1 "$t_down"
check $HCHECK probe-delivery "$RQ_WORK" b-1 --mode l2 --probe-port "$PROBE_PORT"

# ---- c. it comes back
hl_log "c. server 1 starts again; $(ms_since "$start") ms so far"
HL_BEFORE=$(hl_lines srv1 up)
t_restart=$(date +%s%N)
hl_start quicsteer-server 1 v4 v6 || exit 1
hl_expect srv1 up "$RISE" "$t_restart" "the restart"
t_up=${HL_T:-$(date +%s%N)}
check hl_metrics --want srv0=up,srv1=up,srv2=up,srv3=up
hl_placed c back 1 "$t_up"

# ---- d. the service address leaves a live server
hl_log "d. the service addresses leave server 2's lo; $(ms_since "$start") ms so far"
srv2=$(qsfl_ns srv2)
HL_BEFORE=$(hl_lines srv2 down)
t_del=$(date +%s%N)
if ! ip -n "$srv2" addr del "$QSFL_VIP/32" dev lo || ! ip -n "$srv2" addr del "$QSFL_VIP6/128" dev lo; then
  fail "could not remove the service addresses"
fi
hl_expect srv2 down "$FALL" "$t_del" "the removal"
if ip netns exec "$(qsfl_ns rt)" ping -c 1 -W 2 "$(qsfl_srv_addr 2)" >/dev/null; then
  echo "  server 2 still answers ping at $(qsfl_srv_addr 2)"
else
  fail "server 2 does not answer ping at its own address"
fi
check hl_metrics --want srv0=up,srv1=up,srv2=down,srv3=up
HL_BEFORE=$(hl_lines srv2 up)
t_add=$(date +%s%N)
if ! ip -n "$srv2" addr add "$QSFL_VIP/32" dev lo || ! ip -n "$srv2" addr add "$QSFL_VIP6/128" dev lo nodad; then
  fail "could not put the service addresses back"
fi
hl_expect srv2 up "$RISE" "$t_add" "the addresses' return"

# ---- e. the IPv6 target
hl_log "e. only server 3's IPv6 process killed (its IPv4 one answers); $(ms_since "$start") ms so far"
HL_BEFORE=$(hl_lines srv3 down)
t_kill6=$(date +%s%N)
hl_kill 3 v6
hl_expect srv3 down "$FALL" "$t_kill6" "the kill of the IPv6 server"
check hl_metrics --want srv0=up,srv1=up,srv2=up,srv3=down
HL_BEFORE=$(hl_lines srv3 up)
t_restart6=$(date +%s%N)
hl_start quicsteer-server 3 v6 || exit 1
hl_expect srv3 up "$RISE" "$t_restart6" "the IPv6 server's restart"

# ---- f. forged answers
hl_log "f. server 0 killed, then forged Version Negotiation to the probe port; $(ms_since "$start") ms so far"
HL_BEFORE=$(hl_lines srv0 down)
t_kill0=$(date +%s%N)
hl_kill 0 v4 v6
hl_expect srv0 down "$FALL" "$t_kill0" "the kill"
ups_before=$(hl_lines srv0 up)
forged_before=$(hl_metrics | sed -n 's/.*answers unmatched \([0-9]*\)$/\1/p' | head -n 1)
cli=$(qsfl_ns cli)
FORGED=20
ip netns exec "$cli" $PROBE forge --dst "$QSFL_QS_ADDR" --dport "$PROBE_PORT" --count $FORGED --over 1 \
  >"$RQ_WORK/forge-own.out" 2>&1 &
f1=$!
# Claiming the service address and port, with DCIDs that lead with srv0's
# backend index (0) and the target's (IPv4 0, IPv6 1) as the probes' SCIDs
# do (dataplane/runtime/health_book.h): they find srv0's round out, and only
# the comparison of the whole CIDs refuses them.
ip netns exec "$cli" $PROBE forge --dst "$QSFL_QS_ADDR" --dport "$PROBE_PORT" --src "$QSFL_VIP" --sport "$RQ_PORT" \
  --dcid-prefix 000000 --count $FORGED --over 1 >"$RQ_WORK/forge-vip.out" 2>&1 &
f2=$!
ip netns exec "$cli" $PROBE forge --dst "$QSFL_QS_ADDR6" --dport "$PROBE_PORT" --src "$QSFL_VIP6" --sport "$RQ_PORT" \
  --dcid-prefix 000001 --count $FORGED --over 1 >"$RQ_WORK/forge-vip6.out" 2>&1 &
f3=$!
sent=0
for p in $f1 $f2 $f3; do wait "$p" || fail "a forger failed"; done
for f in own vip vip6; do
  n=$(sed -n 's/^sent //p' "$RQ_WORK/forge-$f.out")
  echo "  forged from $f: sent ${n:-0} ($(tail -n 1 "$RQ_WORK/forge-$f.out"))"
  sent=$((sent + ${n:-0}))
done
sleep 0.5
[ "$(hl_lines srv0 up)" -eq "$ups_before" ] || fail "srv0 was marked up while it was dead (forged answers)"
check hl_metrics --want srv0=down,srv1=up,srv2=up,srv3=up --forged-min $(( ${forged_before:-0} + sent ))
echo "  $sent forged answers sent; quicsteer had counted ${forged_before:-?} unmatched answers before"
HL_BEFORE=$ups_before
t_restart0=$(date +%s%N)
hl_start quicsteer-server 0 v4 v6 || exit 1
hl_expect srv0 up "$RISE" "$t_restart0" "the restart"

# ---- g. nothing answers
hl_log "g. every server killed; $(ms_since "$start") ms so far"
t_all=$(date +%s%N)
downs=()
for n in 0 1 2 3; do
  downs[n]=$(hl_lines "srv$n" down)
  hl_kill "$n" v4 v6
done
for n in 0 1 2 3; do
  HL_BEFORE=${downs[n]}
  hl_expect "srv$n" down "$FALL" "$t_all" "the kill of every server"
done
check ip netns exec "$(qsfl_ns qs)" $HCHECK healthz "$QS_METRICS" --want 503 --reason "$REASON"
rq_stop_quicsteer || fail "quicsteer exited with an error"
sed -n '/== quicsteer summary/,$p' "$QS_OUT" | grep -i -E 'health|probe|srv[0-3]' | sed 's/^/  /'
check $HCHECK summary "$RQ_WORK" l2 --forged-min "$sent" --health srv0=down,srv1=down,srv2=down,srv3=down

# ---- v. VXLAN delivery, random-CID gtlsservers
hl_log "v. delivery vxlan, random-CID gtlsservers; $(ms_since "$start") ms so far"
rq_make_cert || { echo "health: could not make the servers' certificate"; exit 1; }
python3 - "$PROFILE" "$RQ_WORK/vxlan.yaml" <<'PY' || { echo "health: could not make the vxlan profile"; exit 1; }
import re, sys
text = open(sys.argv[1]).read()
# VXLAN delivery (configs/realquic-fleet-vxlan.yaml's keys)
text, n1 = re.subn(r"^    mode: l2\b.*$", "    mode: vxlan\n    source_ipv4: 10.78.2.2\n    source_ipv6: \"fd78:2::2\"\n"
                   "    vxlan_vni: 42\n    vxlan_port: 4789", text, flags=re.M)
# random-CID servers (configs/realquic-fleet-random-cid.yaml): no QUIC-LB
# config, no server IDs, ngtcp2's 18-octet CIDs through the forwarding tables
text, n2 = re.subn(r"^  quic_lb:\n(?:    .*\n)+", "  short_dcid_len: 18\n  forwarding:\n    enabled: true\n", text,
                   flags=re.M)
text, n3 = re.subn(r' server_ids: \["0a0[1-4]"\],', "", text)
if (n1, n2, n3) != (1, 1, 4):
    sys.exit(f"rewrites {n1, n2, n3}, want (1, 1, 4)")
open(sys.argv[2], "w").write(text)
PY
hl_prefix "$RQ_WORK/vxlan.yaml"
for ((n = 0; n < QSFL_NSERVERS; n++)); do hl_start gtlsserver "$n" v4 v6 || exit 1; done
t0=$(date +%s%N)
hl_captures vx-up || fail "the captures did not start"
hl_start_quicsteer "$RQ_WORK/vxlan.yaml" vxlan
hl_all_up "$t0"
hl_captures_done
check $HCHECK probe-delivery "$RQ_WORK" vx-up --mode vxlan --probe-port "$PROBE_PORT"
HL_BEFORE=$(hl_lines srv2 down)
t_kill=$(date +%s%N)
hl_kill 2 v4 v6
hl_expect srv2 down "$FALL" "$t_kill" "the kill"
check hl_metrics --want srv0=up,srv1=up,srv2=down,srv3=up
hl_batch vx-down v4 8
HL_BEFORE=$(hl_lines srv2 up)
t_restart=$(date +%s%N)
hl_start gtlsserver 2 v4 v6 || exit 1
hl_expect srv2 up "$RISE" "$t_restart" "the restart"
check hl_metrics --want srv0=up,srv1=up,srv2=up,srv3=up
rq_stop_quicsteer || fail "quicsteer exited with an error"
check $HCHECK summary "$RQ_WORK" vxlan --health srv0=up,srv1=up,srv2=up,srv3=up

hl_log "$(ms_since "$start") ms"
if [ "$failed" -ne 0 ]; then
  echo "health: FAILED"
  exit 1
fi
echo "health: passed"
exit 0
