#!/usr/bin/env bash
# scripts/run.sh scaleout
# Several quicsteer instances behind a router's ECMP, live: makes the network
# namespaces of tests/scaleout/scaleout_topology.sh (clients, a router with
# FRR, two instances each with quicsteer on configs/scaleout.yaml, FRR and a
# health watcher, four quicsteer-servers with QUIC-LB server IDs; each
# instance's data port is quicsteer's alone, its addresses, BGP and BFD on
# the TAP of quicsteer's exception path), shows the router's BGP sessions,
# BFD peers, its neighbour entries for the instances (learnt by ARP and ND
# through quicsteer) and ECMP route, then runs 20 downloads of
# 5 MiB around each event (instance 0 crashes; it returns; instance 1
# drains; instance 1 falls silent, BFD notices) while a line per change of
# the router's next hops shows the ECMP set move. Each transfer's sha256 is
# checked; everything is removed at the end. As root.
set -uo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "run.sh scaleout: needs root (network namespaces)" >&2; exit 1; }
bash scripts/setup.sh || exit 1
build=${QS_BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null || exit 1
ninja -C "$build" quicsteer quicsteer-server quicsteer-cid >/dev/null || exit 1

SO_SRC=$(pwd)
source tests/scaleout/scaleout_topology.sh
source tests/realquic/realquic_lib.sh
source tests/scaleout/scaleout_lib.sh
RQ_BUILD=$(cd "$build" && pwd)
RQ_WORK=$(mktemp -d /tmp/qsso-demo.XXXXXX)
QSSO_WORK=$RQ_WORK
monitor=
trap '[ -n "$monitor" ] && kill "$monitor"; rq_stop_all; qsso_down; rm -rf "$RQ_WORK"' EXIT
trap 'exit 1' INT TERM
check="python3 tests/scaleout/scaleout_check.py"

echo "== namespaces qssodemo$$-{cli,rt,qs0,qs1,br,srv0..3}: clients -> router (ECMP, BGP, BFD) -> quicsteer 0 | 1 -> fleet bridge -> 4 servers -> clients"
qsso_up "qssodemo$$" || exit 1
rq_make_files 0
so_start_servers quic || exit 1
SO_PROFILE=$SO_SRC/configs/scaleout.yaml
so_all_up || exit 1
qsso_vtysh rt "show bgp summary" | sed -n '/^Neighbor/,/^$/p'
qsso_vtysh rt "show bfd peers brief"
for i in 0 1; do  # a ping each way of the instance's addresses: ARP and ND through quicsteer
  ip netns exec "$(qsso_ns rt)" ping -q -c 1 -W 1 "$(qsso_inst_addr "$i")" | grep 'packet loss'
  ip netns exec "$(qsso_ns rt)" ping -6 -q -c 1 -W 1 "$(qsso_inst_addr6 "$i")" | grep 'packet loss'
  ip -n "$(qsso_ns rt)" neigh show dev "qsso-r$i"
done
ip -n "$(qsso_ns rt)" route show "$QSSO_VIP/32"

# one line per change of the router's ECMP set
(
  last=
  while :; do
    now=$(qsso_nexthops | tr '\n' ' ')
    [ "$now" != "$last" ] && echo "   [router $(date +%T.%N | cut -c1-12)] $QSSO_VIP via: ${now:-nothing}" && last=$now
    sleep 0.05
  done
) &
monitor=$!

for ev in "crash 0" "return 0" "drain 1" "silent 1"; do
  read -r event i <<<"$ev"
  echo "== 20 downloads; 1 s in: $event of instance $i"
  so_start_captures "$event" || exit 1
  so_batch "$event" 20 "$event" "$i"
  rq_settle_captures "$event"
  rq_stop_captures
  so_stop_route_monitor
  $check transfers "$RQ_WORK" "$event" --count 20
  [ "$event" = crash ] || [ "$event" = silent ] && $check failover "$RQ_WORK" "$event" --victim "$i"
  [ "$event" = drain ] && read -r _ tag <"$RQ_WORK/drain-drained" && $check drops "$RQ_WORK" "$tag.json"
  [ "$event" = drain ] && { so_quicsteer_start 1 && qsso_wait_nexthops 2 30; }
done
so_instance_back 1
sleep 0.5
echo "== watchers' log (announce / withdraw)"
sed 's/^/  instance 0: /' "$RQ_WORK/watch0.log"
sed 's/^/  instance 1: /' "$RQ_WORK/watch1.log"
