#!/usr/bin/env bash
# Capturing a running quicsteer with Debian's dpdk-dumpcap. quicsteer runs on
# hugepages with EAL's shared configuration (its own --file-prefix), which is
# when it calls rte_pdump_init; its port reads a veth with net_af_packet.
# dpdk-dumpcap attaches to it as a secondary process and captures the port
# while a sender in another namespace sends N QUIC Initials (tests/realquic/
# quic_sender.py, a fixed seed). Asserted:
#   - quicsteer says dpdk-dumpcap can attach, and dumpcap captured;
#   - the capture holds exactly what quicsteer received: as many frames as the
#     port's ipackets and quicsteer's rx (= N), and dumpcap dropped none;
#   - every captured frame is the datagram the sender sent in that place
#     (UDP to port 443, the same 1200 octets, decoded by tshark);
#   - quicsteer dropped nothing and leaked no mbuf.
#
# usage: dumpcap_test.sh BUILD_DIR    (root; exit 77 where the machine cannot
# make namespaces, has no dpdk-dumpcap or tshark, or cannot reserve hugepages)
set -uo pipefail
BUILD=$(cd "${1:?usage: dumpcap_test.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/realquic/topology.sh
source "$SRC/tests/realquic/topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SRC/tests/realquic/realquic_lib.sh"

qsrq_need_netns
for tool in dpdk-dumpcap tshark; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool (scripts/setup.sh installs it)"; exit 77; }
done

N=5000
NEED_MB=192  # quicsteer's -m 128 and dumpcap's capture pool, with room
P=qsdc$$
S=$P-s
Q=$P-q
WORK=$(mktemp -d /tmp/qsdc-dumpcap.XXXXXX)
QS_PID=
DC_PID=
cleanup() {
  [ -n "$DC_PID" ] && kill -INT "$DC_PID" 2>/dev/null && wait "$DC_PID" 2>/dev/null
  [ -n "$QS_PID" ] && kill -INT "$QS_PID" 2>/dev/null && wait "$QS_PID" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$Q" 2>/dev/null
  rq_huge_release "$P"
  if [ "${failed:-1}" -eq 0 ]; then rm -rf "$WORK"; else echo "dumpcap: files kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failed=1

# Hugepages of the default size, mounted, with NEED_MB free: reserved here
# (and given back at the end) when fewer are free.
rq_huge_reserve "$NEED_MB" || { echo "SKIP: $RQ_HUGE_WHY"; exit 77; }

qsrq_pair_up "$S" "$Q" qsdc 79 || exit 1
qsrq_no_offload "$S" qsdc-tx
qsrq_no_offload "$Q" qsdc-rx

# No --no-huge and no --no-shconf: what rte_pdump_init needs. 128 MB of
# hugepages at start (-m), of which the pool and the owners' tables, kept
# small, take a third; dumpcap's capture pool comes on top.
{
  cat <<YAML
eal: ["--lcores", "(0-2)@(0,1)", "-m", "128", "--file-prefix", "$P", "--no-pci", "--log-level", "*:notice"]
ports:
  - name: wire
    device: "net_af_packet0,iface=qsdc-rx"
    rx_queues: 1
    tx_queues: 1
    rss: false
mempool:
  mbufs: 8191
lcores:
  - {id: 1, rx: ["wire:0"], owner: true}
  - {id: 2, owner: true}
YAML
  rq_test_steering_yaml
  cat <<YAML
action:
  type: sink
  max_connections: 4096
YAML
  rq_test_tail_yaml
} >"$WORK/profile.yaml"

rq_start_on_profile dumpcap "$BUILD" "$Q" "$WORK"
grep -E "^memory:|^capture:" "$WORK/quicsteer.out"
METRICS_PORT=$(rq_metrics_port "$WORK/quicsteer.out")
attachable=1
grep -q "^capture: dpdk-dumpcap can attach" "$WORK/quicsteer.out" || attachable=0

# dumpcap runs until told to stop; it starts counting ("Packets captured:")
# once the capture is enabled in quicsteer, and only then does the sender
# start.
ip netns exec "$Q" dpdk-dumpcap --file-prefix="$P" -i net_af_packet0 -w "$WORK/capture.pcapng" \
  >"$WORK/dumpcap.out" 2>&1 &
DC_PID=$!
if ! rq_wait_for "$WORK/dumpcap.out" "Packets captured:" 20 "$DC_PID"; then
  cat "$WORK/dumpcap.out"
  echo "dumpcap: FAIL: dpdk-dumpcap did not attach to quicsteer (capture line in quicsteer: $attachable)"
  exit 1
fi

# Paced (32 datagrams per 2 ms) so that dumpcap, on the same two CPUs, keeps
# up with the capture ring.
ip netns exec "$S" python3 "$SRC/tests/realquic/quic_sender.py" 10.79.0.2 443 "$N" --pause-us 2000 --seed 7 \
  >"$WORK/sender.out" || exit 1

# Until quicsteer has received all N (at most 60 s), then dumpcap is stopped
# (it writes its counts), then quicsteer.
received() {
  local t rx
  read -r t rx < <(rq_metric_sums "$Q" "$METRICS_PORT" "quicsteer_port_rx_packets_total{")
  [ -n "$rx" ] && [ "$rx" -ge "$N" ]
}
for _ in $(seq 1 600); do
  received && break
  sleep 0.1
done
sleep 0.5  # what pdump copied reaches dumpcap's ring and file
kill -INT "$DC_PID"
wait "$DC_PID"
dc_rc=$?
DC_PID=
kill -INT "$QS_PID"
wait "$QS_PID"
rc=$?
QS_PID=
tr '\r' '\n' <"$WORK/dumpcap.out" | grep -v '^Packets captured' | grep -v '^$'
[ "$rc" -eq 0 ] || echo "dumpcap: quicsteer exited with $rc"

tshark -r "$WORK/capture.pcapng" -T fields -e udp.dstport -e udp.payload >"$WORK/capture.tsv" 2>"$WORK/tshark.err" ||
  { cat "$WORK/tshark.err"; echo "dumpcap: tshark could not read the capture"; }

python3 - "$SRC/tests/realquic" "$WORK" "$N" "$rc" "$dc_rc" <<'PY' && failed=0
import json, random, re, sys
sys.path.insert(0, sys.argv[1])
from quic_sender import initial
work, n, rc, dc_rc = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
stats = json.load(open(f"{work}/stats.json"))
total, port, mbufs = stats["total"], stats["ports"][0], stats["mbufs"]
sent = int(open(f"{work}/sender.out").read().split()[1])
rows = [line.rstrip("\n").split("\t") for line in open(f"{work}/capture.tsv") if line.strip()]
m = re.search(r"Packets received/dropped on interface '[^']*': (\d+)/(\d+)", open(f"{work}/dumpcap.out").read())
dc_received, dc_dropped = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)

# What the sender sent, datagram by datagram (its connections' DCIDs come
# from the seed, in the order it makes them; 64 connections round robin).
rng = random.Random(7)
dcids = [rng.randbytes(8) for _ in range(64)]
expected = [initial(dcids[i % 64], i) for i in range(n)]
differ = [i for i, row in enumerate(rows[:n])
          if len(row) < 2 or row[0] != "443" or bytes.fromhex(row[1]) != expected[i]]

print(f"dumpcap: sender sent {sent}; quicsteer received {total['rx']} (port ipackets {port['ipackets']}); "
      f"capture holds {len(rows)} frames, {len(differ)} of them not the datagram sent in their place; "
      f"dumpcap received {dc_received}, dropped {dc_dropped}; software drops {total['drops_sum']}, "
      f"mbufs leaked {mbufs['leaked']}")
bad = []
if sent != n: bad.append(f"the sender sent {sent} of {n}")
if total["rx"] != n or port["ipackets"] != n: bad.append(f"quicsteer received {total['rx']} (ipackets {port['ipackets']}), not {n}")
if len(rows) != port["ipackets"]: bad.append(f"the capture holds {len(rows)} frames, the port received {port['ipackets']}")
if dc_received != port["ipackets"] or dc_dropped != 0:
    bad.append(f"dumpcap counted {dc_received} received and {dc_dropped} dropped, the port received {port['ipackets']}")
if differ: bad.append(f"{len(differ)} captured frames differ from what was sent, the first at {differ[0]}")
if dc_rc != 0: bad.append(f"dpdk-dumpcap exited with {dc_rc}")
if total["drops_sum"] != 0: bad.append(f"software drops: {total['drops_total']}")
if not mbufs["ok"] or rc != 0: bad.append(f"mbuf leak check or exit status: {mbufs}, exit {rc}")
for b in bad: print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
[ "$failed" -eq 0 ] && echo "dumpcap: passed"
exit "$failed"
