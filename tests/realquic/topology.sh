# Network namespaces for real QUIC through quicsteer. Sourced by
# tests/realquic/realquic_test.sh, scripts/run.sh real and scripts/bench.sh
# realquic. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
#
#   $P-cli   clients: 10.77.0.2 and 10.77.0.3 on qsrq-c; the service address
#            10.77.1.1 through qsrq-c (static neighbour, no ARP), replies
#            arrive on qsrq-b0 / qsrq-b1 (the direct return path)
#   $P-qs    quicsteer: reads qsrq-rx (qsrq-c's peer) with net_af_packet
#            (configs/realquic.yaml) or net_af_xdp (realquic-afxdp.yaml),
#            owner N writes to qsrq-sN with net_pcap
#   $P-srvN  the server of owner N: 10.77.1.1 on qsrq-vN (qsrq-sN's peer),
#            replies out of qsrq-rN (qsrq-bN's peer) straight to the clients
#
# Every address lives inside these namespaces; IPv6 is off in all of them so
# that no router or neighbour solicitation crosses quicsteer. Interface names
# are fixed (configs/realquic.yaml names them); namespace names carry the
# caller's prefix. qsrq_down removes everything and is safe to call twice.

QSRQ_VIP=10.77.1.1
QSRQ_VIP_MAC=02:00:00:77:01:01
QSRQ_CLIENT=10.77.0.2
QSRQ_CLIENT2=10.77.0.3

qsrq_ns() { echo "$QSRQ_PREFIX-$1"; }

# qsrq_can_netns: whether this process can make network namespaces at all.
qsrq_can_netns() {
  [ "$(id -u)" -eq 0 ] || return 1
  command -v ip >/dev/null || return 1
  local probe="qsrq-probe-$$"
  ip netns add "$probe" 2>/dev/null || return 1
  ip -n "$probe" link add qsrq-p0 type veth peer name qsrq-p1 2>/dev/null
  local rc=$?
  ip netns del "$probe" 2>/dev/null
  return $rc
}

# qsrq_need_netns: as qsrq_can_netns, or the caller (a test) exits 77, skipped.
qsrq_need_netns() {
  qsrq_can_netns && return 0
  echo "SKIP: needs root and network namespaces with veth pairs (uid $(id -u))"
  exit 77
}

# qsrq_can_afxdp: whether this machine can do AF_XDP: the kernel makes
# AF_XDP sockets (address family 44) and DPDK has its net_af_xdp PMD.
qsrq_can_afxdp() {
  python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null || return 1
  local pmds
  pmds=$(pkg-config --variable=pmdsdir libdpdk 2>/dev/null || true)
  [ -z "$pmds" ] && pmds=$(ls -d /usr/lib/*/dpdk/pmds-* 2>/dev/null | head -1)
  ls "$pmds"/librte_net_af_xdp.so* >/dev/null 2>&1
}

# Offloads off: a checksum left for the NIC to fill (veth never does, quicsteer
# forwards the frame as it is) or a GSO super-frame would reach the server.
qsrq_no_offload() {  # NS IFACE
  if command -v ethtool >/dev/null; then
    ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off tx-udp-segmentation off >/dev/null 2>&1 || true
  fi
}

# qsrq_pair_up S Q NAME N: namespaces S (a sender) and Q (quicsteer), IPv6
# off in both (no router or neighbour solicitation may reach quicsteer's port
# and spoil its count), joined by a veth pair: NAME-tx in S, 10.N.0.1/24 and
# 02:00:00:N:00:01, to NAME-rx in Q, 02:00:00:N:00:02, which S reaches as
# 10.N.0.2 through a static neighbour. Offloads stay as they are.
qsrq_pair_up() {
  local s=$1 q=$2 tx=$3-tx rx=$3-rx n=$4 ns
  for ns in "$s" "$q"; do
    ip netns add "$ns" || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || return 1
    ip -n "$ns" link set lo up
  done
  ip -n "$s" link add "$tx" type veth peer name "$rx" netns "$q" || return 1
  ip -n "$s" link set "$tx" address "02:00:00:$n:00:01"
  ip -n "$q" link set "$rx" address "02:00:00:$n:00:02"
  ip -n "$s" addr add "10.$n.0.1/24" dev "$tx"
  ip -n "$s" neigh replace "10.$n.0.2" lladdr "02:00:00:$n:00:02" nud permanent dev "$tx"
  ip -n "$s" link set "$tx" up
  ip -n "$q" link set "$rx" up
}

# qsrq_up PREFIX [bridge]: makes the namespaces and links. With "bridge", the
# quicsteer namespace bridges qsrq-rx to qsrq-s0 in the kernel instead (the
# benchmark's baseline: every connection to server 0).
qsrq_up() {
  QSRQ_PREFIX=$1
  local mode=${2:-quicsteer}
  local cli qs s0 s1
  cli=$(qsrq_ns cli); qs=$(qsrq_ns qs); s0=$(qsrq_ns srv0); s1=$(qsrq_ns srv1)
  local ns
  for ns in "$cli" "$qs" "$s0" "$s1"; do
    ip netns add "$ns" || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 || return 1
    ip -n "$ns" link set lo up || return 1
  done
  # client -> quicsteer
  ip -n "$cli" link add qsrq-c type veth peer name qsrq-rx netns "$qs" || return 1
  ip -n "$cli" link set qsrq-c address 02:00:00:77:00:0c
  ip -n "$cli" addr add "$QSRQ_CLIENT/32" dev qsrq-c
  ip -n "$cli" addr add "$QSRQ_CLIENT2/32" dev qsrq-c
  ip -n "$cli" link set qsrq-c up
  ip -n "$qs" link set qsrq-rx up
  ip -n "$cli" route add "$QSRQ_VIP/32" dev qsrq-c src "$QSRQ_CLIENT"
  ip -n "$cli" neigh replace "$QSRQ_VIP" lladdr "$QSRQ_VIP_MAC" nud permanent dev qsrq-c
  qsrq_no_offload "$cli" qsrq-c
  qsrq_no_offload "$qs" qsrq-rx
  local n srv
  for n in 0 1; do
    srv=$(qsrq_ns "srv$n")
    # quicsteer owner n -> server n
    ip -n "$qs" link add "qsrq-s$n" type veth peer name "qsrq-v$n" netns "$srv" || return 1
    ip -n "$srv" link set "qsrq-v$n" address "$QSRQ_VIP_MAC"
    ip -n "$srv" addr add "$QSRQ_VIP/32" dev "qsrq-v$n"
    ip -n "$qs" link set "qsrq-s$n" up
    ip -n "$srv" link set "qsrq-v$n" up
    qsrq_no_offload "$qs" "qsrq-s$n"
    qsrq_no_offload "$srv" "qsrq-v$n"
    # server n -> clients, directly
    ip -n "$srv" link add "qsrq-r$n" type veth peer name "qsrq-b$n" netns "$cli" || return 1
    ip -n "$cli" link set "qsrq-b$n" address "02:00:00:77:00:b$n"
    ip -n "$srv" link set "qsrq-r$n" up
    ip -n "$cli" link set "qsrq-b$n" up
    ip netns exec "$cli" sysctl -q -w "net.ipv4.conf.qsrq-b$n.rp_filter=0"
    ip -n "$srv" route add 10.77.0.0/24 dev "qsrq-r$n"
    ip -n "$srv" neigh replace "$QSRQ_CLIENT" lladdr "02:00:00:77:00:b$n" nud permanent dev "qsrq-r$n"
    ip -n "$srv" neigh replace "$QSRQ_CLIENT2" lladdr "02:00:00:77:00:b$n" nud permanent dev "qsrq-r$n"
  done
  if [ "$mode" = bridge ]; then qsrq_bridge on || return 1; fi
  return 0
}

# qsrq_bridge on|off: a kernel bridge from qsrq-rx to qsrq-s0 in the
# quicsteer namespace, in quicsteer's place (no quicsteer may run meanwhile).
qsrq_bridge() {
  local qs
  qs=$(qsrq_ns qs)
  if [ "$1" = on ]; then
    ip -n "$qs" link add qsrq-br type bridge || return 1
    ip -n "$qs" link set qsrq-rx master qsrq-br &&
      ip -n "$qs" link set qsrq-s0 master qsrq-br &&
      ip -n "$qs" link set qsrq-br up
  else
    ip -n "$qs" link del qsrq-br
  fi
}

# qsrq_client_source ADDR: the source address new client sockets take (gtlsclient
# binds where the route says; a migration after this change moves to ADDR).
qsrq_client_source() {
  ip -n "$(qsrq_ns cli)" route replace "$QSRQ_VIP/32" dev qsrq-c src "$1"
}

qsrq_down() {
  [ -n "${QSRQ_PREFIX:-}" ] || return 0
  local ns
  for ns in cli qs srv0 srv1; do
    ip netns pids "$(qsrq_ns $ns)" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  for ns in cli qs srv0 srv1; do
    ip netns del "$(qsrq_ns $ns)" 2>/dev/null
  done
  return 0
}
