#!/usr/bin/env bash
# The scale-out test: two quicsteer instances behind a router's ECMP, each
# announcing the service address by BGP (FRR) while it is healthy, BFD on
# every session, one shared fleet of four quicsteer-servers with QUIC-LB
# server IDs (tests/scaleout/scaleout_topology.sh). Every instance runs the
# same profile (configs/scaleout.yaml); the servers answer the clients
# directly through the router. Real QUIC: batches of 20 concurrent 5 MiB
# downloads (ngtcp2's gtlsclient) from four client addresses, an event on
# one instance 1 s into each batch:
#
#   crash    quicsteer of instance 0 gets SIGKILL; its watcher withdraws the
#            route. Every download completes; prints the time from the kill
#            until the router sent the first packet of one of instance 0's
#            connections to instance 1.
#   return   quicsteer of instance 0 starts again and is announced: the ECMP
#            set grows and flows move back. Every download completes.
#   drain    instance 1 drains: the route is withdrawn, the router moves the
#            traffic, a grace of 1 s, then SIGINT. Every download completes,
#            and the drained quicsteer counts no software drop.
#   silent   instance 1's machine falls silent and everything on it dies:
#            only BFD tells the router. Every download completes; prints the
#            failover time as for crash.
#
# Over each batch's captures (the router towards each instance, what reached
# each server; scaleout_check.py routing): both instances route every frame
# alike, owner and backend, client-chosen Initial DCIDs included (their
# profiles agree on each capture replayed through its instance's tables, and
# an instance that has seen nothing of a connection, the profile without
# tables, routes its frames as the replay does), and each frame that reached
# a server reached the backend classify names. Over the whole QUIC-LB run: no
# server received a packet of a connection it does not have.
#
# Then servers that mint random CIDs (ngtcp2's gtlsserver,
# configs/scaleout-random-cid.yaml: forwarding tables, per instance; what no
# table knows, a first Initial or a short header with an unknown DCID, is
# hashed by its 4-tuple, steering.fallback.hash: tuple, alike on every
# instance): a batch without an event, then crash, return and drain as
# above. Every download completes (and the drained quicsteer counts no
# software drop), and both instances route every frame alike, as above.
#
# Then rebind-failover: the clients rebind their NAT (a new UDP port, the
# same CID) before their request, and quicsteer of instance 0 crashes
# mid-transfer. Without peer_sync no instance knows what another learned:
# the test reports how many downloads complete, by what moved them (the
# rebinding, the crash, both or neither); the routing check holds for the
# frames on the 4-tuple each connection started on, and counts those on the
# new one that an instance without the connection's DCID would send
# elsewhere. With configs/scaleout-random-cid-sync.yaml present (the same
# with peer_sync) it runs again on that, and every download must complete.
#
# usage: scaleout_test.sh BUILD_DIR    (as root; exit 77 = skipped: no root,
# network namespaces or FRR; SO_KEEP_WORK=1 keeps the files of a run that
# passed, as one that failed keeps them)
set -uo pipefail
BUILD=$(cd "${1:?usage: scaleout_test.sh BUILD_DIR}" && pwd)
SO_SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/scaleout/scaleout_topology.sh
source "$SO_SRC/tests/scaleout/scaleout_topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SO_SRC/tests/realquic/realquic_lib.sh"
# shellcheck source=tests/scaleout/scaleout_lib.sh
source "$SO_SRC/tests/scaleout/scaleout_lib.sh"

if ! qsso_can_run; then
  echo "SKIP: the scale-out test needs root, network namespaces with veth pairs and a bridge, and FRR (zebra, bgpd, bfdd, vtysh: Debian's frr) (uid $(id -u))"
  exit 77
fi
rq_require_tools scaleout gtlsclient gtlsserver tcpdump ethtool ss tc curl openssl python3

RQ_BUILD=$BUILD
RQ_WORK=$(mktemp -d /tmp/qsso-test.XXXXXX)
QSSO_WORK=$RQ_WORK
CHECK="python3 $SO_SRC/tests/scaleout/scaleout_check.py"
cleanup() {
  rq_stop_all
  qsso_down
  if [ "${failed:-1}" -eq 0 ] && [ -z "${SO_KEEP_WORK:-}" ]; then rm -rf "$RQ_WORK"; else echo "scaleout: files kept in $RQ_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failed=0
check() { "$@" || failed=1; }
# announced N WHAT: the router has N next hops within 30 s of the clock (after
# a restart: the BGP session's reconnection, BFD, the watcher's health check
# and the route's installation, about 1.2 s here); how long it took goes to
# the log. A FAILED line, not an exit, when it does not.
announced() {
  if qsso_wait_nexthops "$1" 30; then
    so_log "$2 after $QSSO_WAITED_MS ms"
  else
    echo "  scaleout: FAILED: $2 not within 30 s: the router's next hops: $(qsso_nexthops | tr '\n' ' ')"
    failed=1
  fi
}
start=$(date +%s)
N=20

qsso_up "qsso$$" || { echo "scaleout: could not make the namespaces"; exit 1; }
rq_make_files 0
so_start_servers quic || { echo "scaleout: the servers did not start"; exit 1; }
SO_PROFILE=$SO_SRC/configs/scaleout.yaml
so_all_up || { echo "scaleout: the instances did not come up"; exit 1; }
so_log "router's next hops for $QSSO_VIP: $(qsso_nexthops | tr '\n' ' ')($(( $(date +%s) - start )) s)"

# so_run TAG EVENT I: a batch with its captures.
so_run() {
  so_log "$1: $N downloads, $2 of instance $3 after ${SO_EVENT_AFTER:-1} s"
  so_start_captures "$1" || { echo "scaleout: the captures did not start"; failed=1; }
  so_batch "$1" "$N" "$2" "$3"
  rq_settle_captures "$1"
  rq_stop_captures
  so_stop_route_monitor
  so_log "$1: router's next hops now: $(qsso_nexthops | tr '\n' ' ')"
}
routing() {
  local shared=()
  grep -q '^peer_sync:' "$RQ_WORK/profile-qs0.yaml" && shared=(--shared)
  check $CHECK routing "$RQ_WORK" "$1" --cid-tool "$BUILD/quicsteer-cid" \
    --profile "$RQ_WORK/profile-qs0.yaml" --profile "$RQ_WORK/profile-qs1.yaml" "${shared[@]}"
}

# ---- QUIC-LB: no connection may break
so_run lb-crash crash 0
check $CHECK transfers "$RQ_WORK" lb-crash --count $N
check $CHECK failover "$RQ_WORK" lb-crash --victim 0
routing lb-crash
sed 's/^/  watcher 0: /' "$RQ_WORK/watch0.log"

so_run lb-return return 0
check $CHECK transfers "$RQ_WORK" lb-return --count $N
announced 2 "instance 0 announced again"
routing lb-return

so_run lb-drain drain 1
check $CHECK transfers "$RQ_WORK" lb-drain --count $N
read -r rc tag <"$RQ_WORK/lb-drain-drained"
[ "$rc" -eq 0 ] || { echo "  scaleout: FAILED: the drained quicsteer exited with $rc"; failed=1; }
check $CHECK drops "$RQ_WORK" "$tag.json"
routing lb-drain
so_quicsteer_start 1 || { echo "scaleout: instance 1 did not start again"; exit 1; }
announced 2 "instance 1 announced again"

so_run lb-silent silent 1
check $CHECK transfers "$RQ_WORK" lb-silent --count $N
check $CHECK failover "$RQ_WORK" lb-silent --victim 1
routing lb-silent
so_instance_back 1 || { echo "scaleout: instance 1 did not come back"; exit 1; }

for i in 0 1; do
  so_quicsteer_stop "$i" || { echo "  scaleout: FAILED: quicsteer of instance $i exited with an error"; failed=1; }
  $CHECK drops "$RQ_WORK" "${SO_QS_TAG[$i]}.json" --report
done
so_stop_servers
check python3 "$SO_SRC/tests/realquic/fleet_check.py" servers "$RQ_WORK" --logs 'server*.jsonl' \
  --count "$QSSO_NSERVERS" --unknown-cid zero

# ---- random CIDs: what no forwarding table knows is hashed by its 4-tuple,
# alike on every instance (steering.fallback_hash: tuple): no download may break
so_log "random CIDs (gtlsserver): $(( $(date +%s) - start )) s so far"
so_start_servers gtls || { echo "scaleout: the gtlsservers did not start"; exit 1; }
SO_PROFILE=$SO_SRC/configs/scaleout-random-cid.yaml
for i in 0 1; do so_quicsteer_start "$i" || exit 1; done
qsso_wait_nexthops 2 30 || { echo "scaleout: the instances were not announced"; exit 1; }
so_log "both instances announced on the random-CID profile after $QSSO_WAITED_MS ms"
summary=()
for ev in "none 0" "crash 0" "return 0" "drain 1"; do
  read -r event i <<<"$ev"
  so_run "random-$event" "$event" "$i"
  line=$($CHECK transfers "$RQ_WORK" "random-$event" --count $N) || failed=1
  echo "$line"
  summary+=("$event $(grep -o '[0-9]*/[0-9]*' <<<"$line" | head -1)")
  [ "$event" = crash ] && check $CHECK failover "$RQ_WORK" random-crash --victim 0
  routing "random-$event"
  if [ "$event" = drain ]; then
    read -r rc tag <"$RQ_WORK/random-drain-drained"
    [ "$rc" -eq 0 ] || { echo "  scaleout: FAILED: the drained quicsteer exited with $rc"; failed=1; }
    check $CHECK drops "$RQ_WORK" "$tag.json"
    so_quicsteer_start 1 || { echo "scaleout: instance 1 did not start again"; exit 1; }
    announced 2 "instance 1 announced again"
  fi
done
so_log "random CIDs, downloads complete per event: ${summary[*]}"

# rebind_failover TAG PROFILE ok|report: both instances on PROFILE (started
# again if they run another), $N downloads whose clients rebind their NAT 1 s
# after the handshake (gtlsclient --nat-rebinding: a new UDP port, the same
# CID, no path validation) and send their request from the new port 0.5 s
# later; quicsteer of instance 0 crashes 2.5 s after the last client
# started, mid-transfer; then it starts again. Before the request, not
# mid-transfer: gtlsclient (ngtcp2 0.12) ignores what reaches its old socket
# after a simulated rebinding, so a client that has nothing to send at that
# moment never speaks again, and its download stalls with no load balancer
# in the way at all. The router's ECMP hash takes the ports: the rebinding
# may move a connection to the other instance by itself. scaleout_check.py
# rebinding sorts the downloads by what moved them (the captures and the
# clients' ports) and counts the complete ones; ok: every one must complete.
rebind_failover() {
  local tag=$1 profile=$2 expect=$3 i
  if [ "$profile" != "$SO_PROFILE" ]; then
    # Both stopped and withdrawn before either starts again: the router must
    # not count a next hop whose session is about to go down.
    SO_PROFILE=$profile
    for i in 0 1; do so_quicsteer_stop "$i"; done
    qsso_wait_nexthops 0 30 || { echo "scaleout: the router kept a next hop of a stopped instance"; exit 1; }
    for i in 0 1; do so_quicsteer_start "$i" || { echo "scaleout: instance $i did not start on $profile"; exit 1; }; done
    qsso_wait_nexthops 2 30 || { echo "scaleout: the instances were not announced on $profile"; exit 1; }
    so_log "both instances announced on $(basename "$profile") after $QSSO_WAITED_MS ms"
  fi
  SO_CLIENT_OPTS=(--change-local-addr=1s --nat-rebinding --delay-stream=1500ms) SO_SAMPLE_PORTS=1 SO_EVENT_AFTER=2.5
  so_run "$tag" crash 0
  SO_CLIENT_OPTS=() SO_SAMPLE_PORTS=0 SO_EVENT_AFTER=1
  if [ "$expect" = ok ]; then
    check $CHECK rebinding "$RQ_WORK" "$tag" --count $N --victim 0
  else
    $CHECK rebinding "$RQ_WORK" "$tag" --count $N --victim 0 --expect report
  fi
  routing "$tag"
  so_quicsteer_start 0 || { echo "scaleout: instance 0 did not start again"; exit 1; }
  announced 2 "instance 0 announced again"
}

# ---- a NAT rebinding, then the instance carrying the connection fails:
# without peer_sync the other instance never saw the CID, and the new
# 4-tuple hashes anywhere. Reported, not asserted.
rebind_failover random-rebind-failover "$SO_SRC/configs/scaleout-random-cid.yaml" report
# With peer_sync (the instances share what their tables learn) every download
# must complete: the profile is configs/scaleout-random-cid-sync.yaml, once
# there is one (so_quicsteer_start gives each instance its own peer_sync
# listen address and the others as peers).
if [ -f "$SO_SRC/configs/scaleout-random-cid-sync.yaml" ]; then
  rebind_failover random-sync-rebind-failover "$SO_SRC/configs/scaleout-random-cid-sync.yaml" ok
fi

so_log "$(( $(date +%s) - start )) s"
if [ "$failed" -ne 0 ]; then
  echo "scaleout: FAILED"
  exit 1
fi
echo "scaleout: passed"
exit 0
