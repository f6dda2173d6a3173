#!/usr/bin/env bash
# The exception path (issue 36): one quicsteer instance of the scale-out
# topology (tests/scaleout/scaleout_topology.sh) whose data port qsso-rx the
# kernel cannot see (no address, ARP and IPv6 off, every frame dropped at the
# kernel's netdev ingress: a NIC bound to vfio-pci). quicsteer reads it with
# net_af_packet, steers the service (10.79.1.1 UDP 443) to the fleet and
# hands the rest to the kernel through its TAP qsso-k, which holds the
# instance's addresses 10.79.10.2/30 and fd79:10::2/64; FRR peers with the
# router over it. As root, it checks:
#
#   reach    the router resolves the appliance by ARP and by ND (no static
#            neighbour entry: deleted first) through quicsteer (the arp and nd
#            classes count both ways) and pings it over IPv4 and IPv6;
#   routing  BGP Established and BFD up, on both ends, their packets through
#            quicsteer;
#   service  real QUIC downloads of the fleet through the VIP complete;
#   foreign  frames for another MAC from the router are dropped and counted
#            (quicsteer_drops_total{reason="foreign_mac"} grows by exactly
#            their number) and none reaches the TAP;
#   own      frames the instance's host sends out of qsso-rx itself (UDP to the
#            VIP's service port, broadcast), which net_af_packet shows
#            quicsteer too, are dropped as own_frame, never steered;
#   flood    a UDP flood at 10.79.10.2 port 9 from the router's namespace, as
#            fast as one sender goes (tests/scaleout/udp_flood.cpp; the rate
#            is printed), with downloads during it: BGP stays Established
#            (no new connection, its uptime runs on) and BFD never goes down
#            at either end, the router keeps its next hop, the downloads
#            complete, and class other's counters account for the flood, more
#            than 90 % of it policed (tests/scaleout/exception_check.py flood);
#   stop     quicsteer exits cleanly, its statistics JSON carries the same
#            exception counters, its TAP is gone, and the router can no longer
#            reach the appliance: nothing but quicsteer answered for it.
#
# usage: exception_path_test.sh BUILD_DIR UDP_FLOOD    (as root; exit 77 =
# skipped: no root, network namespaces or FRR)
set -uo pipefail
BUILD=$(cd "${1:?usage: exception_path_test.sh BUILD_DIR UDP_FLOOD}" && pwd)
FLOOD=${2:?usage: exception_path_test.sh BUILD_DIR UDP_FLOOD}
SO_SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/scaleout/scaleout_topology.sh
source "$SO_SRC/tests/scaleout/scaleout_topology.sh"
# shellcheck source=tests/realquic/realquic_lib.sh
source "$SO_SRC/tests/realquic/realquic_lib.sh"
# shellcheck source=tests/scaleout/scaleout_lib.sh
source "$SO_SRC/tests/scaleout/scaleout_lib.sh"

if ! qsso_can_run; then
  echo "SKIP: the exception-path test needs root, network namespaces with veth pairs and a bridge, and FRR (zebra, bgpd, bfdd, vtysh: Debian's frr) (uid $(id -u))"
  exit 77
fi
rq_require_tools exception gtlsclient tcpdump ethtool ss tc curl openssl python3 nft ping

QSSO_NINSTANCES=1       # one instance (the router's FRR still names a second: it stays idle)
RQ_BUILD=$BUILD
RQ_WORK=$(mktemp -d /tmp/qsso-exc.XXXXXX)
QSSO_WORK=$RQ_WORK
CHECK="python3 $SO_SRC/tests/scaleout/scaleout_check.py"
EXC="python3 $SO_SRC/tests/scaleout/exception_check.py"
cleanup() {
  rq_stop_all
  qsso_down
  if [ "${failed:-1}" -eq 0 ]; then rm -rf "$RQ_WORK"; else echo "exception: files kept in $RQ_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failed=0
check() { "$@" || failed=1; }
fail() { echo "  exception: FAILED: $*"; failed=1; }
# both_ways MIN CLASS...: between the reach0 and reach1 scrapes, at least MIN
# frames of each class went to the kernel and as many came back from it.
both_ways() {
  local min=$1 c dir
  shift
  for c in "$@"; do
    for dir in to_kernel from_kernel; do
      check $EXC delta "$RQ_WORK/reach0.metrics" "$RQ_WORK/reach1.metrics" \
        "quicsteer_exception_packets_total{port=\"wire\",class=\"$c\",direction=\"$dir\"}" ge "$min"
    done
  done
}
log() { echo "exception: $*"; }
start=$(date +%s)
N=8                     # downloads per batch: 40 MiB, ~4 s at the clients' 100 Mbit/s
FLOOD_S=10
OTHER_PPS=1000          # the policer of class other in the profile below
FOREIGN=5               # frames for another MAC
FOREIGN_MAC=02:00:00:79:99:99

ADDR=$(qsso_inst_addr 0)
ADDR6=$(qsso_inst_addr6 0)
PEER=$(qsso_rt_addr 0)
MAC=$(qsso_inst_mac 0)

# scrape TAG: quicsteer's /metrics now, to $RQ_WORK/TAG.metrics. The
# counters there are the statistics period's snapshot (1 s): callers wait
# that long after what they want counted.
scrape() {
  ip netns exec "$qs" curl -s -f -m 5 http://127.0.0.1:9100/metrics >"$RQ_WORK/$1.metrics" ||
    { fail "no /metrics from quicsteer ($1)"; return 1; }
}

# frr_json TAG: BGP summary, BFD peers and their counters of the router and
# the instance, to $RQ_WORK/TAG-{rt,qs0}-{bgp,bfd,bfdc}.json.
frr_json() {
  local n
  for n in rt qs0; do
    qsso_vtysh "$n" "show bgp summary json" >"$RQ_WORK/$1-$n-bgp.json"
    qsso_vtysh "$n" "show bfd peers json" >"$RQ_WORK/$1-$n-bfd.json"
    qsso_vtysh "$n" "show bfd peers counters json" >"$RQ_WORK/$1-$n-bfdc.json"
  done
}

# link_stat NS IFACE rx.packets|tx.dropped|...: one counter of a link.
link_stat() {
  ip -n "$1" -s -j link show dev "$2" |
    python3 -c 'import json, sys; s = json.load(sys.stdin)[0]["stats64"]; a, b = sys.argv[1].split("."); print(s[a][b])' "$3"
}

# neigh_ok FAMILY ADDR: the router's neighbour entry for ADDR on the link to
# the instance is the instance's MAC, learnt (not permanent).
neigh_ok() {
  local entry
  entry=$(ip -n "$rt" "$1" neigh show "$2" dev qsso-r0)
  echo "  router's neighbour: ${entry:-none}"
  [[ $entry == *"lladdr $MAC "* ]] && [[ $entry != *PERMANENT* ]] && [[ $entry != *NOARP* ]]
}

qsso_up "qssx$$" || { echo "exception: could not make the namespaces"; exit 1; }
rt=$(qsso_ns rt)
qs=$(qsso_ns qs0)
rq_make_files 0
so_start_servers quic || { echo "exception: the servers did not start"; exit 1; }
# configs/scaleout.yaml (services, the TAP) with class other's policer spelt
# out: the flood's checks compute with it.
SO_PROFILE=$RQ_WORK/exception.yaml
cat "$SO_SRC/configs/scaleout.yaml" - >"$SO_PROFILE" <<EOF

exception_path:
  police:
    other: {packets_per_s: $OTHER_PPS, bytes_per_s: 2000000}
EOF
so_all_up || { echo "exception: the instance did not come up"; exit 1; }
log "router's next hop for $QSSO_VIP: $(qsso_nexthops | tr '\n' ' ')($(($(date +%s) - start)) s)"

# ---- the data port is the kernel's no more
# Each listing is read whole before it is searched: under pipefail,
# `nft list ... | grep -q` fails when grep has its match and exits while nft
# still writes (nft writes its listing in many small pieces; the rest then
# meets a closed pipe). That failed one CI run on a chain that was there.
addrs=$(ip -n "$qs" addr show dev qsso-rx 2>&1)
grep -q inet <<<"$addrs" && fail "qsso-rx has an address: $(tr -s "\n" " " <<<"$addrs")"
chain=$(ip netns exec "$qs" nft list chain netdev qsso_nic_qsso-rx ingress 2>&1)
grep -q 'policy drop' <<<"$chain" || fail "qsso-rx has no netdev ingress chain that drops: $(tr -s "\n" " " <<<"$chain")"

# ---- reach: ARP, ND and ping through quicsteer
log "reach: the router resolves $ADDR and $ADDR6 and pings them"
scrape reach0
ip -n "$rt" neigh del "$ADDR" dev qsso-r0 2>/dev/null
ip -n "$rt" -6 neigh del "$ADDR6" dev qsso-r0 2>/dev/null
ip netns exec "$rt" ping -q -n -c 3 -i 0.2 -W 2 "$ADDR" >"$RQ_WORK/ping4.out" 2>&1 ||
  { cat "$RQ_WORK/ping4.out"; fail "ping $ADDR"; }
neigh_ok -4 "$ADDR" || fail "the router did not resolve $ADDR to $MAC by ARP"
ip netns exec "$rt" ping -6 -q -n -c 3 -i 0.2 -W 2 "$ADDR6" >"$RQ_WORK/ping6.out" 2>&1 ||
  { cat "$RQ_WORK/ping6.out"; fail "ping -6 $ADDR6"; }
neigh_ok -6 "$ADDR6" || fail "the router did not resolve $ADDR6 to $MAC by ND"
grep -h 'packet loss' "$RQ_WORK/ping4.out" "$RQ_WORK/ping6.out" | sed 's/^/  /'
sleep 1.5
scrape reach1
# Both ways through quicsteer's exception path: the request to the kernel,
# its answer from it; ICMP: 3 echo requests per family in, 3 replies out.
both_ways 1 arp nd
both_ways 6 icmp

# ---- routing: BGP and BFD over the TAP
log "routing: BGP and BFD between the router and the instance"
frr_json up
check $EXC up "$RQ_WORK/up-rt-bgp.json" "$RQ_WORK/up-rt-bfd.json" "$ADDR"
check $EXC up "$RQ_WORK/up-qs0-bgp.json" "$RQ_WORK/up-qs0-bfd.json" "$PEER"
# keepalives (1 s) and BFD (100 ms) crossed quicsteer both ways in the
# seconds since reach0
both_ways 1 bgp bfd

# ---- service: the VIP still reaches the fleet
log "service: $N downloads through $QSSO_VIP"
so_batch exc-base "$N" none 0
check $CHECK transfers "$RQ_WORK" exc-base --count "$N"

# ---- foreign: frames for another MAC
log "foreign: $FOREIGN frames for $FOREIGN_MAC from the router"
ip netns exec "$qs" tcpdump -n -i qsso-k -s 128 -U -w "$RQ_WORK/foreign-tap.pcap" "ether dst $FOREIGN_MAC" \
  2>"$RQ_WORK/foreign-tap.tcpdump" &
tap_capture=$!
RQ_PIDS+=("$tap_capture")
rq_wait_for "$RQ_WORK/foreign-tap.tcpdump" "listening on" 10 || fail "the TAP's capture did not start"
scrape foreign0
# UDP to the instance's own address, port 9 (not the service): what the
# exception path would hand to the kernel if it took frames for any MAC.
ip netns exec "$rt" $EXC send qsso-r0 "$FOREIGN_MAC" "$(qsso_rt_mac 0)" "$PEER" "$ADDR" 9 "$FOREIGN" \
  --payload "not for this MAC" ||
  fail "could not send the foreign frames"
sleep 1.5
scrape foreign1
check $EXC delta "$RQ_WORK/foreign0.metrics" "$RQ_WORK/foreign1.metrics" \
  'quicsteer_drops_total{reason="foreign_mac"}' eq "$FOREIGN"
sleep 0.5
kill -INT "$tap_capture" 2>/dev/null
wait "$tap_capture" 2>/dev/null
n=$(tcpdump -n -r "$RQ_WORK/foreign-tap.pcap" 2>/dev/null | grep -c .)
echo "  frames for $FOREIGN_MAC on the TAP: $n"
[ "$n" -eq 0 ] || fail "$n frames for another MAC reached the kernel"

# ---- own: the host's own frames out of the data port (issue 38 item 11)
OWN=7
log "own: $OWN frames to $QSSO_VIP:443 that the instance's host sends out of qsso-rx"
scrape own0
# Broadcast, so that only its source tells it apart; what a host process's
# QUIC datagram to the service would look like.
ip netns exec "$qs" $EXC send qsso-rx ff:ff:ff:ff:ff:ff "$(qsso_inst_mac 0)" "$ADDR" "$QSSO_VIP" 443 "$OWN" \
  --payload-len 1200 ||
  fail "could not send the host's frames"
sleep 1.5
scrape own1
check $EXC delta "$RQ_WORK/own0.metrics" "$RQ_WORK/own1.metrics" 'quicsteer_drops_total{reason="own_frame"}' eq "$OWN"

# ---- flood: the appliance's own address, downloads meanwhile
log "flood: $FLOOD_S s of UDP at $ADDR port 9 from the router, $N downloads 1 s into it"
frr_json flood0
scrape flood0
veth_dropped0=$(link_stat "$rt" qsso-r0 tx.dropped)
kernel_rx0=$(link_stat "$qs" qsso-rx rx.packets)
t0=$(so_now)
# the router's next hop for the service, every 0.1 s: one line per reading
# that lacks it
(
  while :; do
    [ "$(qsso_nexthops | grep -c .)" -eq 1 ] || echo "$(so_now) $(qsso_nexthops | tr '\n' ' ')"
    sleep 0.1
  done
) >"$RQ_WORK/flood-nexthops.log" 2>&1 &
monitor=$!
RQ_PIDS+=("$monitor")
ip netns exec "$rt" "$FLOOD" "$ADDR" 9 "$FLOOD_S" >"$RQ_WORK/flood.out" 2>&1 &
flood=$!
RQ_PIDS+=("$flood")
sleep 1
so_batch exc-flood "$N" none 0
wait "$flood" || fail "the flood's sender failed"
downloads_end=$(cat "$RQ_WORK/exc-flood-window" | cut -d' ' -f2)
kill "$monitor" 2>/dev/null
# the statistics period (1 s) and what was in flight
sleep 2
t1=$(so_now)
scrape flood1
frr_json flood1
veth_dropped=$(($(link_stat "$rt" qsso-r0 tx.dropped) - veth_dropped0))
kernel_rx=$(($(link_stat "$qs" qsso-rx rx.packets) - kernel_rx0))
cat "$RQ_WORK/flood.out"
read -r sent secs pps < <(sed -n 's/.*sent=\([0-9]*\) seconds=\([0-9.]*\) pps=\([0-9]*\).*/\1 \2 \3/p' "$RQ_WORK/flood.out")
if [ -z "${sent:-}" ]; then
  fail "the flood's sender reported nothing"
  sent=0 secs=$FLOOD_S pps=0
fi
# The issue asks for at least 100,000 packets per second from one sender;
# this machine's (2 CPUs shared with quicsteer, the router, FRR, the servers
# and the downloads) gave 500,000 and more. Below 100,000 is reported; only
# far below (50,000) fails, as then the flood no longer tests the policer
# against what one host can throw at it.
if [ "$pps" -lt 50000 ]; then
  fail "the flood reached $pps packets/s, far below the 100,000 asked for"
elif [ "$pps" -lt 100000 ]; then
  echo "  exception: the flood reached only $pps packets/s, below the 100,000 the issue asks for"
fi
if [ "$downloads_end" -gt $((t0 + (FLOOD_S + 1) * 1000000000)) ]; then
  echo "  exception: the downloads ended $(((downloads_end - t0) / 1000000)) ms after the flood began, after it"
fi
check $CHECK transfers "$RQ_WORK" exc-flood --count "$N"
elapsed_ms=$(((t1 - t0) / 1000000))
check $EXC steady "$RQ_WORK/flood0-rt-bgp.json" "$RQ_WORK/flood1-rt-bgp.json" \
  "$RQ_WORK/flood0-rt-bfdc.json" "$RQ_WORK/flood1-rt-bfdc.json" "$ADDR" "$elapsed_ms"
check $EXC steady "$RQ_WORK/flood0-qs0-bgp.json" "$RQ_WORK/flood1-qs0-bgp.json" \
  "$RQ_WORK/flood0-qs0-bfdc.json" "$RQ_WORK/flood1-qs0-bfdc.json" "$PEER" "$elapsed_ms"
if [ -s "$RQ_WORK/flood-nexthops.log" ]; then
  fail "the router lost its next hop during the flood ($(grep -c . "$RQ_WORK/flood-nexthops.log") readings of 0.1 s)"
  head -n 5 "$RQ_WORK/flood-nexthops.log"
fi
grep -q withdraw "$RQ_WORK/watch0.log" && { fail "the health watcher withdrew the route"; cat "$RQ_WORK/watch0.log"; }
check $EXC flood "$RQ_WORK/flood0.metrics" "$RQ_WORK/flood1.metrics" --port wire --sent "$sent" \
  --veth-dropped "$veth_dropped" --kernel-rx "$kernel_rx" --seconds "$secs" --packets-per-s "$OTHER_PPS"

# ---- stop: a clean exit, the same counters in the statistics JSON, and
# nothing answers for the appliance once quicsteer is gone
log "stop: quicsteer exits; the router can no longer reach $ADDR"
so_quicsteer_stop 0 || fail "quicsteer exited with an error"
python3 - "$RQ_WORK/${SO_QS_TAG[0]}.json" "$RQ_WORK/flood1.metrics" "$SO_SRC/tests/scaleout/exception_check.py" <<'PY' ||
import importlib.util, json, sys
stats, metrics, checker = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("exception_check", checker)
ec = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ec)
doc = json.load(open(stats))
rows = [r for r in doc.get("exception", []) if r.get("port") == "wire" and r.get("class") == "other"]
scraped = ec.total(ec.load(metrics), 'quicsteer_exception_policed_total{port="wire",class="other"}')
# The JSON is written at exit, after the last scrape: never less.
ok = len(rows) == 1 and scraped is not None and rows[0].get("policed", -1) >= scraped and doc["mbufs"]["ok"]
print(f"  statistics JSON: exception wire/other {rows[0] if rows else 'missing'}; scraped policed {scraped}; "
      f"mbufs ok {doc['mbufs']['ok']}")
sys.exit(0 if ok else 1)
PY
  fail "the statistics JSON does not carry the exception counters (or leaked mbufs)"
ip -n "$qs" link show qsso-k >/dev/null 2>&1 && fail "the TAP qsso-k outlived quicsteer"
ip -n "$rt" neigh del "$ADDR" dev qsso-r0 2>/dev/null
if ip netns exec "$rt" ping -q -n -c 2 -i 0.2 -W 1 "$ADDR" >/dev/null 2>&1; then
  fail "$ADDR answers without quicsteer: the kernel still sees qsso-rx"
fi

log "$(($(date +%s) - start)) s"
if [ "$failed" -ne 0 ]; then
  echo "exception: FAILED"
  exit 1
fi
echo "exception: passed"
exit 0
