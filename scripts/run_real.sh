#!/usr/bin/env bash
# scripts/run.sh real [cid|four_tuple]
# Real QUIC through quicsteer: makes network namespaces (tests/realquic/
# topology.sh), starts one quicsteer-server per owner lcore and quicsteer on
# configs/realquic.yaml, runs 8 downloads and 2 uploads of 5 MiB with
# ngtcp2's gtlsclient, then the same with every client moving to a new
# address before its request, then 8 downloads behind a NAT rebinding (same
# CID, new port), prints each transfer's result, quicsteer's summary
# and the servers' summaries, and removes everything. As root.
#   four_tuple: the same with steering.mode four_tuple (the baseline):
#   migrated connections that change owner fail.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-cid}
case $mode in cid|four_tuple) ;; *) echo "usage: scripts/run.sh real [cid|four_tuple]" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "run.sh real: needs root (network namespaces)" >&2; exit 1; }

bash scripts/setup.sh || exit 1
[ -f build/build.ninja ] || meson setup build >/dev/null || exit 1
ninja -C build quicsteer quicsteer-server quicsteer-cid >/dev/null || exit 1

source tests/realquic/topology.sh
source tests/realquic/realquic_lib.sh
RQ_BUILD=$(pwd)/build
RQ_PREFIX=qsrqdemo$$
RQ_WORK=$(mktemp -d /tmp/qsrq-demo.XXXXXX)
trap 'rq_stop_all; qsrq_down; rm -rf "$RQ_WORK"' EXIT
trap 'exit 1' INT TERM

profile=configs/realquic.yaml
if [ "$mode" = four_tuple ]; then
  sed 's/^\(  mode: \)cid/\1four_tuple/' "$profile" >"$RQ_WORK/four_tuple.yaml"
  profile=$RQ_WORK/four_tuple.yaml
fi
echo "== namespaces $RQ_PREFIX-{cli,qs,srv0,srv1}: clients -> quicsteer (net_af_packet, 2 queues) -> owner N's TX queue -> server N; servers -> clients directly"
qsrq_up "$RQ_PREFIX" || exit 1
rq_make_files 2
rq_start_servers configs/realquic.yaml || exit 1
rq_start_quicsteer "$profile" demo || exit 1
sed -n '/^port /p;/^owners/p;/^quicsteer:/p' "$RQ_WORK/demo-quicsteer.out"
check="python3 tests/realquic/realquic_check.py"
# Under four_tuple, migrated connections that change owner are expected to fail.
moved_expect=ok
[ "$mode" = four_tuple ] && moved_expect=some-fail
echo "== 8 downloads and 2 uploads of 5 MiB at once (steering.mode $mode)"
rq_transfers plain 8 2 none
$check transfers "$RQ_WORK" plain --ndown 8 --nup 2 --migration none --expect ok
echo "== the same, each client moving to a new address (10.77.0.2 -> 10.77.0.3) before its request"
rq_transfers moved 8 2 address
$check transfers "$RQ_WORK" moved --ndown 8 --nup 2 --migration address --expect "$moved_expect"
echo "== 8 downloads whose clients rebind to a new port keeping their CID (a NAT rebinding): quicsteer follows them"
rq_transfers rebound 8 0 rebind
$check transfers "$RQ_WORK" rebound --ndown 8 --nup 0 --migration rebind --expect "$moved_expect"
sleep 0.5
rq_stop_servers
rq_stop_quicsteer
sed -n '/== quicsteer summary/,$p' "$RQ_WORK/demo-quicsteer.out"
grep -h 'server id .*connections' "$RQ_WORK"/server*.out
