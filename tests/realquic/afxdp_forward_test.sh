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

N=20000
rq_afxdp_setup afxdp_forward qsxf 77

# One lcore receives and owns; every datagram goes back out of the port with
# l2 delivery to the sender's veth, whose IP layer drops it (not its address).
{
  echo 'eal: ["--lcores", "(0-1)@(0,1)", "--no-huge", "-m", "1024", "--no-shconf", "--no-pci", "--log-level", "*:notice"]'
  rq_afxdp_port_yaml qsxf-rx
  cat <<YAML
lcores:
  - {id: 1, rx: ["wire:0"], owner: true}
YAML
  rq_test_steering_yaml
  cat <<YAML
backpressure:
  policy: park
backends:
  - {name: sender, mac: "02:00:00:77:00:01"}
action:
  type: forward
  tx_port: wire
  delivery: {mode: l2}
YAML
  rq_test_tail_yaml
} >"$WORK/profile.yaml"

sender_rx() {
  ip -n "$S" -s -j link show qsxf-tx | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["packets"])'
}

RX_BEFORE=$(sender_rx)
# The port accounts for a packet by sending it back (or the owner by dropping it).
rq_afxdp_send_and_stop qsxf-tx 10.77.0.2 "$N" "quicsteer_port_tx_packets_total{"
rc=$QS_RC
SENDER_RX=$(($(sender_rx) - RX_BEFORE))

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
