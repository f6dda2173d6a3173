#!/usr/bin/env bash
# A parked RX queue as a NIC shows it: quicsteer reads an AF_XDP socket on a
# veth (net_af_xdp), one owner is made slow (lcores[].cost_cycles), and a
# sender in another namespace sends N QUIC Initials to it. The slow owner's
# ring fills, the receiver parks its queue, the socket's RX ring (2048
# descriptors) fills and the kernel drops what follows: the socket's
# rx_dropped, which the driver reports as imissed. Asserted:
#   - the sending veth dropped nothing (every datagram reached the XDP program);
#   - the receiver parked (parks > 0) and the kernel dropped (imissed > 0);
#   - sent = quicsteer's port ipackets + imissed, and = its received count
#     (total rx) + imissed;
#   - quicsteer dropped nothing in software, and the mbuf leak check passes.
#
# usage: afxdp_imissed_test.sh BUILD_DIR    (root; exit 77 where the machine
# cannot make namespaces or AF_XDP sockets)
set -uo pipefail
BUILD=$(cd "${1:?usage: afxdp_imissed_test.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/realquic/topology.sh
source "$SRC/tests/realquic/topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"

N=20000
rq_afxdp_setup afxdp_imissed qsxd 78

# One RX queue on lcore 1 (an owner too); lcore 2 owns half the connections
# and spends a million cycles on each packet, so its ring (1024) fills within
# the first few thousand datagrams and lcore 1 parks. The park timeout is the
# longest there is (10 s): nothing may be dropped in software. (The RX ring's
# size: rq_afxdp_port_yaml.)
{
  echo 'eal: ["--lcores", "(0-2)@(0,1)", "--no-huge", "-m", "1024", "--no-shconf", "--no-pci", "--log-level", "*:notice"]'
  rq_afxdp_port_yaml qsxd-rx
  cat <<YAML
lcores:
  - {id: 1, rx: ["wire:0"], owner: true}
  - {id: 2, owner: true, cost_cycles: 1000000}
YAML
  rq_test_steering_yaml
  cat <<YAML
backpressure:
  policy: park
  park_timeout_us: 10000000
action:
  type: sink
YAML
  rq_test_tail_yaml
} >"$WORK/profile.yaml"

# The owners account for a packet by processing it (or dropping it).
rq_afxdp_send_and_stop qsxd-tx 10.78.0.2 "$N" "quicsteer_owner_processed_packets_total{"
rc=$QS_RC

python3 - "$WORK/stats.json" "$SENT" "$N" "$TX_DROPPED" "$rc" <<'PY' && failed=0
import json, sys
stats = json.load(open(sys.argv[1]))
sent, n, tx_dropped, rc = (int(x) for x in sys.argv[2:])
total, port, mbufs = stats["total"], stats["ports"][0], stats["mbufs"]
print(f"afxdp_imissed: sender sent {sent} (veth dropped {tx_dropped}); quicsteer received {total['rx']} "
      f"(port ipackets {port['ipackets']}), imissed {port['imissed']}, parks {total['parks']}, "
      f"software drops {total['drops_sum']}, mbufs leaked {mbufs['leaked']} "
      f"(kept by net_af_xdp's fill ring {mbufs['kept_by_drivers']})")
bad = []
if sent != n: bad.append(f"the sender sent {sent} of {n}")
if tx_dropped != 0: bad.append(f"the sending veth dropped {tx_dropped}: not every datagram reached XDP")
if total["parks"] == 0: bad.append("the receiver never parked")
if port["imissed"] == 0: bad.append("the kernel dropped nothing (imissed 0): the stall did not reach the socket")
if sent != port["ipackets"] + port["imissed"]:
    bad.append(f"sent {sent} != ipackets {port['ipackets']} + imissed {port['imissed']}")
if sent != total["rx"] + port["imissed"]:
    bad.append(f"sent {sent} != received {total['rx']} + imissed {port['imissed']}")
if total["drops_sum"] != 0: bad.append(f"software drops: {total['drops_total']}")
if not mbufs["ok"] or rc != 0: bad.append(f"mbuf leak check or exit status: {mbufs}, exit {rc}")
for b in bad: print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
[ "$failed" -eq 0 ] && echo "afxdp_imissed: passed"
exit "$failed"
