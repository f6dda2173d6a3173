#!/usr/bin/env bash
# Forwarding out of an AF_XDP port gives every mbuf back: quicsteer reads an
# AF_XDP socket on a veth (net_af_xdp), steers each datagram and forwards it
# out of the same port to the sender's MAC (delivery l2), as
# scripts/bench/afxdp.sh does. A frame the port sent stays the driver's until
# it reaps the frame's completion, which DPDK 22.11's net_af_xdp does only in
# its TX burst and never at close; quicsteer reaps what is left before it
# closes the port (Dataplane::close_ports_and_count_leaks). Asserted, after a
# sender in another namespace sent N QUIC Initials:
#   - the sending veth dropped nothing and quicsteer received all N (no imissed);
#   - quicsteer sent all N back out of the port (opackets), and the sender's
#     veth received them;
#   - quicsteer dropped nothing in software, and the mbuf leak check passes
#     (leaked 0, exit status 0).
#
# usage: afxdp_forward_test.sh BUILD_DIR    (root; exit 77 where the machine
# cannot make namespaces or AF_XDP sockets)
set -uo pipefail
BUILD=$(cd "${1:?usage: afxdp_forward_test.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/realquic/topology.sh
source "$SRC/tests/realquic/topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"

qsrq_need_netns
if ! qsrq_can_afxdp; then
  echo "SKIP: this machine cannot do AF_XDP (no AF_XDP sockets in the kernel or no net_af_xdp PMD)"
  exit 77
fi

N=20000
P=qsxf$$
S=$P-s
Q=$P-q
WORK=$(mktemp -d /tmp/qsxf-forward.XXXXXX)
QS_PID=
cleanup() {
  [ -n "$QS_PID" ] && kill -INT "$QS_PID" 2>/dev/null && wait "$QS_PID" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$Q" 2>/dev/null
  if [ "${failed:-1}" -eq 0 ]; then rm -rf "$WORK"; else echo "afxdp_forward: files kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failed=1

qsrq_pair_up "$S" "$Q" qsxf 77 || exit 1

# One lcore receives and owns; every datagram goes back out of the port with
# l2 delivery to the sender's veth, whose IP layer drops it (not its address).
cat >"$WORK/profile.yaml" <<YAML
eal: ["--lcores", "(0-1)@(0,1)", "--no-huge", "-m", "1024", "--no-shconf", "--no-pci", "--log-level", "*:notice"]
ports:
  - name: wire
    device: "net_af_xdp0,iface=qsxf-rx,start_queue=0,queue_count=1,busy_budget=0"
    rx_queues: 1
    tx_queues: 1
    rx_descriptors: 2048
    rss: false
mempool:
  mbufs: 16383
lcores:
  - {id: 1, rx: ["wire:0"], owner: true}
steering:
  quic_ports: [443]
  fallback:
    key: "5172f08c2cd54a9b8e0e4b6f1d3a7c21"
backpressure:
  policy: park
backends:
  - {name: sender, mac: "02:00:00:77:00:01"}
action:
  type: forward
  tx_port: wire
  delivery: {mode: l2}
polling:
  idle_sleep_us: 50
stats:
  period_ms: 0
telemetry: {prometheus_listen: "127.0.0.1:0"}
YAML

sender_rx() {
  ip -n "$S" -s -j link show qsxf-tx | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["packets"])'
}

rq_start_on_profile afxdp_forward "$BUILD" "$Q" "$WORK"
grep "^port wire" "$WORK/quicsteer.out"
grep -q "driver net_af_xdp" "$WORK/quicsteer.out" || { echo "afxdp_forward: the port is not net_af_xdp"; exit 1; }
METRICS_PORT=$(rq_metrics_port "$WORK/quicsteer.out")

RX_BEFORE=$(sender_rx)
ip netns exec "$S" python3 "$SRC/tests/realquic/quic_sender.py" 10.77.0.2 443 "$N" >"$WORK/sender.out" || exit 1
SENT=$(sed -n 's/^sent //p' "$WORK/sender.out")
TX_DROPPED=$(ip -n "$S" -s -j link show qsxf-tx | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["dropped"])')

# Until the port has accounted for every datagram (received or missed) and
# sent or dropped every packet it received, at most 60 s.
accounted() {
  local t received missed sent dropped
  read -r t received missed sent dropped < <(rq_metric_sums "$Q" "$METRICS_PORT" \
    "quicsteer_port_rx_packets_total{" "quicsteer_port_rx_missed_total{" \
    "quicsteer_port_tx_packets_total{" "quicsteer_drops_total{")
  [ -n "$dropped" ] && [ $((received + missed)) -ge "$SENT" ] && [ $((sent + dropped)) -ge "$received" ]
}
for _ in $(seq 1 600); do
  accounted && break
  sleep 0.1
done
kill -INT "$QS_PID"
wait "$QS_PID"
rc=$?
QS_PID=
SENDER_RX=$(($(sender_rx) - RX_BEFORE))
sed -n '/== quicsteer summary/,$p' "$WORK/quicsteer.out"
[ "$rc" -eq 0 ] || echo "afxdp_forward: quicsteer exited with $rc"

python3 - "$WORK/stats.json" "$SENT" "$N" "$TX_DROPPED" "$SENDER_RX" "$rc" <<'PY' && failed=0
import json, sys
stats = json.load(open(sys.argv[1]))
sent, n, tx_dropped, sender_rx, rc = (int(x) for x in sys.argv[2:])
total, port, mbufs = stats["total"], stats["ports"][0], stats["mbufs"]
print(f"afxdp_forward: sender sent {sent} (veth dropped {tx_dropped}); quicsteer received {total['rx']} "
      f"(port ipackets {port['ipackets']}, imissed {port['imissed']}), sent back {port['opackets']} "
      f"(the sender's veth received {sender_rx}), software drops {total['drops_sum']}, "
      f"mbufs leaked {mbufs['leaked']} (kept by net_af_xdp's fill ring {mbufs['kept_by_drivers']})")
bad = []
if sent != n: bad.append(f"the sender sent {sent} of {n}")
if tx_dropped != 0: bad.append(f"the sending veth dropped {tx_dropped}: not every datagram reached XDP")
if port["imissed"] != 0 or total["rx"] != sent:
    bad.append(f"quicsteer received {total['rx']} of {sent} (imissed {port['imissed']})")
if port["opackets"] != total["rx"]: bad.append(f"sent back {port['opackets']} of {total['rx']} received")
if sender_rx < port["opackets"]: bad.append(f"the sender's veth received {sender_rx} of {port['opackets']} sent back")
if total["drops_sum"] != 0: bad.append(f"software drops: {total['drops_total']}")
if not mbufs["ok"] or mbufs["leaked"] != 0 or rc != 0:
    bad.append(f"mbuf leak check or exit status: {mbufs}, exit {rc}")
for b in bad: print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
[ "$failed" -eq 0 ] && echo "afxdp_forward: passed"
exit "$failed"
