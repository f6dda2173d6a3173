# Network namespaces for several quicsteer instances behind a router's ECMP,
# with BGP and BFD (FRR), in front of one server fleet. Sourced by
# tests/scaleout/scaleout_test.sh, scripts/run.sh scaleout and
# scripts/bench.sh scaleout. Needs root and Debian's frr.
#
#   $P-cli   clients: 10.79.0.2 .. 10.79.0.5 on qsso-c, everything through
#            the router 10.79.0.1 (towards them: $QSSO_RATE)
#   $P-rt    the router (forwarding on, fib_multipath_hash_policy 1: the
#            ECMP hash takes the UDP ports): FRR (zebra, bgpd, bfdd;
#            tests/scaleout/frr/router.conf) learns the service address
#            10.79.1.1/32 from every instance that announces it and installs
#            one route with a next hop per instance; qsso-rI (10.79.1I.1/30,
#            fd79:1I::1/64: the only IPv6 in the topology) leads to instance I; the servers' replies arrive on qsso-rb
#            (10.79.2.1, on the fleet segment) and go on to the clients
#   $P-qsI   instance I (I = 0, 1): qsso-rx (MAC 02:00:00:79:1I:02), the data
#            port, stands in for a NIC bound to vfio-pci: no address, ARP off,
#            IPv6 off, and an nftables netdev ingress chain that drops every
#            frame, so the kernel sees nothing on it (af_packet sockets see
#            the frames before that hook: quicsteer reads them with
#            net_af_packet). quicsteer's exception path (the profile's
#            `services` and the port's `tap: qsso-k`) creates the TAP qsso-k
#            with qsso-rx's MAC; once it is there, qsso_tap_up gives it the
#            instance's addresses 10.79.1I.2/30 and fd79:1I::2/64, and the
#            kernel's ARP, ND, ICMP, BGP and BFD go through quicsteer. The
#            TAP goes when quicsteer exits (its addresses with it: a
#            quicsteer that stops takes the BGP session down); each start
#            gives them again. qsso-tx (MAC 02:00:00:79:02:0(2+I)), its port
#            on the fleet bridge; FRR (tests/scaleout/frr/instanceI.conf)
#            announces 10.79.1.1/32 over qsso-k while the instance's table
#            holds that route, which the health watcher (scaleout_watch.sh)
#            adds and deletes
#   $P-br    the fleet bridge qsso-br: ports qsso-pq0 / qsso-pq1 (the
#            instances), qsso-pr (the router), qsso-p0..3 (the servers);
#            static forwarding entries, learning and flooding off
#   $P-srvN  server N (N = 0..3): qsso-e (10.79.2.1N, MAC 02:00:00:79:02:1N),
#            the service address on lo (answers no ARP for it), default route
#            via the router: it answers the clients directly
#
# IPv6 is off in every namespace but on the links between the router and the
# instances (the router's qsso-rI, the instance's qsso-k), for ND through the
# exception path. Interface names are fixed (the
# profiles configs/scaleout*.yaml name them: every instance runs the same
# file); namespace names carry the caller's prefix, and FRR's run directory
# is /var/run/frr/NAMESPACE. qsso_down removes everything and is safe to call
# twice.

QSSO_VIP=10.79.1.1
QSSO_CLIENTS=(10.79.0.2 10.79.0.3 10.79.0.4 10.79.0.5)
QSSO_CLIENT_MAC=02:00:00:79:00:02
QSSO_RT_CLI_MAC=02:00:00:79:00:01
QSSO_RT_SEG=10.79.2.1
QSSO_RT_SEG_MAC=02:00:00:79:02:01
QSSO_NSERVERS=4
QSSO_NINSTANCES=2
QSSO_SEG_MTU=1500
QSSO_FRR=/usr/lib/frr
QSSO_RATE=${QSSO_RATE:-100mbit}

qsso_ns() { echo "$QSSO_PREFIX-$1"; }
qsso_srv_addr() { echo "10.79.2.1$1"; }
qsso_srv_mac() { echo "02:00:00:79:02:1$1"; }
qsso_srv_sid() { echo "0a0$(($1 + 1))"; }    # QUIC-LB server ID of server N
qsso_inst_addr() { echo "10.79.1$1.2"; }     # instance I's BGP next hop, on its TAP
qsso_rt_addr() { echo "10.79.1$1.1"; }       # the router's side of instance I's link
qsso_inst_addr6() { echo "fd79:1$1::2"; }    # instance I's IPv6 address, on its TAP
qsso_rt_addr6() { echo "fd79:1$1::1"; }
qsso_inst_mac() { echo "02:00:00:79:1$1:02"; }
qsso_rt_mac() { echo "02:00:00:79:1$1:01"; }
qsso_tx_mac() { echo "02:00:00:79:02:0$(($1 + 2))"; }

qsso_no_offload() {  # NS IFACE: quicsteer forwards frames as they are
  ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off tx-udp-segmentation off >/dev/null 2>&1 || true
}

qsso_link() {  # NS IFACE MAC
  ip -n "$1" link set "$2" address "$3" mtu "$QSSO_SEG_MTU" || return 1
  qsso_no_offload "$1" "$2"
  ip -n "$1" link set "$2" up
}

# qsso_can_run: root, network namespaces with veth pairs and a bridge, FRR.
qsso_can_run() {
  [ "$(id -u)" -eq 0 ] || return 1
  local d
  for d in zebra bgpd bfdd; do [ -x "$QSSO_FRR/$d" ] || return 1; done
  command -v vtysh >/dev/null && command -v ip >/dev/null && command -v bridge >/dev/null || return 1
  local probe="qsso-probe-$$"
  ip netns add "$probe" 2>/dev/null || return 1
  ip -n "$probe" link add qsso-p0 type veth peer name qsso-p1 2>/dev/null &&
    ip -n "$probe" link add qsso-pb type bridge 2>/dev/null
  local rc=$?
  ip netns del "$probe" 2>/dev/null
  return $rc
}

# qsso_up PREFIX: makes the namespaces and links (no daemon yet).
qsso_up() {
  QSSO_PREFIX=$1
  local cli rt br ns n a
  cli=$(qsso_ns cli); rt=$(qsso_ns rt); br=$(qsso_ns br)
  QSSO_NAMESPACES=("$cli" "$rt" "$br")
  for ((n = 0; n < QSSO_NINSTANCES; n++)); do QSSO_NAMESPACES+=("$(qsso_ns "qs$n")"); done
  for ((n = 0; n < QSSO_NSERVERS; n++)); do QSSO_NAMESPACES+=("$(qsso_ns "srv$n")"); done
  for ns in "${QSSO_NAMESPACES[@]}"; do
    ip netns add "$ns" || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
      net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 || return 1
    ip -n "$ns" link set lo up || return 1
  done
  ip netns exec "$rt" sysctl -q -w net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1 \
    net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0 || return 1

  # clients <-> router
  ip -n "$cli" link add qsso-c type veth peer name qsso-rc netns "$rt" || return 1
  qsso_link "$cli" qsso-c "$QSSO_CLIENT_MAC" || return 1
  qsso_link "$rt" qsso-rc "$QSSO_RT_CLI_MAC" || return 1
  for a in "${QSSO_CLIENTS[@]}"; do ip -n "$cli" addr add "$a/24" dev qsso-c || return 1; done
  ip -n "$cli" neigh replace 10.79.0.1 lladdr "$QSSO_RT_CLI_MAC" nud permanent dev qsso-c
  ip -n "$cli" route add default via 10.79.0.1 dev qsso-c src "${QSSO_CLIENTS[0]}" || return 1
  ip -n "$rt" addr add 10.79.0.1/24 dev qsso-rc || return 1
  for a in "${QSSO_CLIENTS[@]}"; do
    ip -n "$rt" neigh replace "$a" lladdr "$QSSO_CLIENT_MAC" nud permanent dev qsso-rc
  done
  # The clients' access link: $QSSO_RATE towards the clients, so that a batch
  # of downloads lasts seconds (an event lands mid-transfer) rather than a
  # fraction of one.
  ip netns exec "$rt" tc qdisc add dev qsso-rc root tbf rate "$QSSO_RATE" burst 32kb latency 100ms || return 1

  # the fleet bridge, and the router's leg on it (where the replies come back)
  ip -n "$br" link add qsso-br type bridge forward_delay 0 stp_state 0 || return 1
  ip -n "$br" link set qsso-br multicast off type bridge mcast_snooping 0 || return 1
  ip -n "$rt" link add qsso-rb type veth peer name qsso-pr netns "$br" || return 1
  qsso_link "$rt" qsso-rb "$QSSO_RT_SEG_MAC" || return 1
  ip -n "$rt" addr add "$QSSO_RT_SEG/24" dev qsso-rb || return 1
  qsso_bridge_port qsso-pr "$QSSO_RT_SEG_MAC" || return 1

  for ((n = 0; n < QSSO_NINSTANCES; n++)); do qsso_instance_up "$n" || return 1; done
  for ((n = 0; n < QSSO_NSERVERS; n++)); do qsso_server_up "$n" || return 1; done
  ip -n "$br" link set qsso-br up
}

# qsso_bridge_port PORT MAC: a port of qsso-br behind which only MAC lives.
qsso_bridge_port() {
  local br
  br=$(qsso_ns br)
  ip -n "$br" link set "$1" master qsso-br || return 1
  bridge -n "$br" link set dev "$1" learning off flood off mcast_flood off bcast_flood off || return 1
  bridge -n "$br" fdb add "$2" dev "$1" master static || return 1
  qsso_no_offload "$br" "$1"
  ip -n "$br" link set "$1" up
}

# qsso_instance_up I: instance I's link to the router and port on the bridge.
qsso_instance_up() {
  local i=$1 qs rt
  qs=$(qsso_ns "qs$i"); rt=$(qsso_ns rt)
  ip -n "$rt" link add "qsso-r$i" type veth peer name qsso-rx netns "$qs" || return 1
  qsso_link "$rt" "qsso-r$i" "$(qsso_rt_mac "$i")" || return 1
  qsso_link "$qs" qsso-rx "$(qsso_inst_mac "$i")" || return 1
  ip -n "$rt" addr add "$(qsso_rt_addr "$i")/30" dev "qsso-r$i" || return 1
  ip netns exec "$rt" sysctl -q -w "net.ipv6.conf.qsso-r$i.disable_ipv6=0" || return 1
  ip -n "$rt" addr add "$(qsso_rt_addr6 "$i")/64" dev "qsso-r$i" nodad || return 1
  qsso_nic_hidden "$qs" qsso-rx || return 1
  ip -n "$qs" link add qsso-tx type veth peer name "qsso-pq$i" netns "$(qsso_ns br)" || return 1
  qsso_link "$qs" qsso-tx "$(qsso_tx_mac "$i")" || return 1
  qsso_bridge_port "qsso-pq$i" "$(qsso_tx_mac "$i")"
}

# qsso_nic_hidden NS IFACE: the kernel of NS sees nothing of IFACE, as if a
# DPDK driver held the NIC: no address, no ARP, no IPv6 (so no link-local
# address, ND or MLD), and a netdev ingress chain with policy drop. Frames
# still reach af_packet sockets (their taps run before that hook), and
# af_packet's transmissions leave.
qsso_nic_hidden() {
  ip -n "$1" link set "$2" arp off || return 1
  ip netns exec "$1" sysctl -q -w "net.ipv6.conf.$2.disable_ipv6=1" || return 1
  ip netns exec "$1" nft -f - <<EOF
table netdev qsso_nic_$2 {
  chain ingress {
    type filter hook ingress device "$2" priority 0; policy drop;
  }
}
EOF
}

# qsso_tap_up I [SECONDS]: once instance I's quicsteer has made its TAP
# qsso-k (at most SECONDS, default 10), the instance's addresses on it: IPv4
# and IPv6 (nodad: usable at once; the router's side is nodad too), and a
# route to each other instance's address through the router (for what the
# instances say to each other: peer_sync).
qsso_tap_up() {
  local i=$1 qs n j
  qs=$(qsso_ns "qs$i")
  for ((n = 0; n < ${2:-10} * 20; n++)); do
    ip -n "$qs" link show qsso-k >/dev/null 2>&1 && break
    sleep 0.05
  done
  ip -n "$qs" link show qsso-k >/dev/null 2>&1 || { echo "scaleout: instance $i has no TAP qsso-k"; return 1; }
  ip netns exec "$qs" sysctl -q -w net.ipv6.conf.qsso-k.disable_ipv6=0 || return 1
  ip -n "$qs" addr replace "$(qsso_inst_addr "$i")/30" dev qsso-k || return 1
  ip -n "$qs" addr replace "$(qsso_inst_addr6 "$i")/64" dev qsso-k nodad || return 1
  ip -n "$qs" link set qsso-k up || return 1
  for ((j = 0; j < QSSO_NINSTANCES; j++)); do
    [ "$j" -eq "$i" ] || ip -n "$qs" route replace "$(qsso_inst_addr "$j")/32" via "$(qsso_rt_addr "$i")" dev qsso-k ||
      return 1
  done
}

# qsso_server_up N: server N on the segment.
qsso_server_up() {
  local n=$1 srv br rt addr
  srv=$(qsso_ns "srv$n"); br=$(qsso_ns br); rt=$(qsso_ns rt)
  addr=$(qsso_srv_addr "$n")
  ip -n "$br" link add "qsso-p$n" type veth peer name qsso-e netns "$srv" || return 1
  qsso_link "$srv" qsso-e "$(qsso_srv_mac "$n")" || return 1
  qsso_bridge_port "qsso-p$n" "$(qsso_srv_mac "$n")" || return 1
  ip -n "$srv" addr add "$addr/24" dev qsso-e || return 1
  ip -n "$srv" addr add "$QSSO_VIP/32" dev lo || return 1
  ip netns exec "$srv" sysctl -q -w net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
    net.ipv4.conf.qsso-e.arp_ignore=1 net.ipv4.conf.qsso-e.arp_announce=2 || return 1
  ip -n "$srv" neigh replace "$QSSO_RT_SEG" lladdr "$QSSO_RT_SEG_MAC" nud permanent dev qsso-e
  ip -n "$srv" route add default via "$QSSO_RT_SEG" dev qsso-e || return 1
  ip -n "$rt" neigh replace "$addr" lladdr "$(qsso_srv_mac "$n")" nud permanent dev qsso-rb
}

# qsso_frr_start NAME CONF [nobfd]: zebra, bgpd and bfdd in namespace
# $P-NAME, all on CONF (a copy under $QSSO_WORK/frr, readable by the frr
# user they drop to). nobfd: without BFD (the BGP hold time alone).
qsso_frr_start() {
  local ns conf d
  ns=$(qsso_ns "$1")
  mkdir -p "$QSSO_WORK/frr" && chmod 755 "$QSSO_WORK" && chown frr:frr "$QSSO_WORK/frr"
  conf=$QSSO_WORK/frr/$1.conf
  # A log per instance of FRR, in milliseconds: which session went down and
  # why (BFD, the hold time) is what explains a route the router lost.
  {
    echo "log file $QSSO_WORK/frr/$1.log informational"
    echo "log timestamp precision 3"
    if [ "${3:-}" = nobfd ]; then
      sed -e '/^ neighbor .* bfd$/d' -e '/^bfd$/,$d' "$2"
    else
      cat "$2"
    fi
  } >"$conf"
  chmod 644 "$conf"
  mkdir -p "/var/run/frr/$ns" && chown frr:frr "/var/run/frr/$ns" || return 1
  # At a real-time priority (round robin), as the control plane of an
  # appliance whose CPUs poll must be: BFD at 100 ms x 3 declares a session
  # down after 300 ms without a packet. On two CPUs shared by the instances'
  # lcores, the clients and the servers, with two CPU-bound processes beside
  # them, daemons at the default priority took both sessions down at the
  # same millisecond and left the router with no next hop for seconds; at
  # round-robin 10 no session went down but by the test's events. The
  # daemons use little CPU; where real-time scheduling is refused (chrt
  # fails), they run as they are.
  local prio=()
  chrt -r 10 true 2>/dev/null && prio=(chrt -r 10)
  for d in zebra bgpd bfdd; do
    ip netns exec "$ns" "${prio[@]}" "$QSSO_FRR/$d" -N "$ns" -d -f "$conf" -i "/var/run/frr/$ns/$d.pid" \
      >>"$QSSO_WORK/frr/$1.out" 2>&1 || { cat "$QSSO_WORK/frr/$1.out"; return 1; }
  done
}

# qsso_frr_stop NAME [KILL]: ends FRR's daemons in $P-NAME (SIGTERM, or KILL).
qsso_frr_stop() {
  local ns p
  ns=$(qsso_ns "$1")
  for p in /var/run/frr/"$ns"/*.pid; do
    [ -f "$p" ] && kill -"${2:-TERM}" "$(cat "$p")" 2>/dev/null
    rm -f "$p"
  done
}

qsso_vtysh() {  # NAME COMMAND...
  local ns
  ns=$(qsso_ns "$1"); shift
  local args=() c
  for c in "$@"; do args+=(-c "$c"); done
  vtysh -N "$ns" "${args[@]}" 2>/dev/null
}

# qsso_nexthops: the router's next hops for the service address, one a line.
qsso_nexthops() {
  ip -n "$(qsso_ns rt)" route show "$QSSO_VIP/32" 2>/dev/null | grep -o 'via [0-9.]*' | cut -d' ' -f2 | sort
}

# qsso_wait_nexthops N SECONDS: until the router has N next hops, for at most
# SECONDS of the clock; how long it took (ms, or how long it gave up after)
# in QSSO_WAITED_MS.
qsso_wait_nexthops() {
  local t0 now
  t0=$(date +%s%N)
  while :; do
    now=$(date +%s%N)
    QSSO_WAITED_MS=$(((now - t0) / 1000000))
    [ "$(qsso_nexthops | grep -c .)" -eq "$1" ] && return 0
    [ "$QSSO_WAITED_MS" -lt $(($2 * 1000)) ] || return 1
    sleep 0.02
  done
}
QSSO_WAITED_MS=0

# qsso_silence I on|off: instance I's machine falls silent (nothing it sends
# reaches the router: no BGP keepalive, BFD, TCP reset or ARP reply; the link
# stays up), or speaks again. The router notices only by BFD or the BGP hold
# time. The router drops what arrives on its side of the link (an nftables
# netdev ingress chain): a qdisc on the instance's qsso-rx would not do,
# quicsteer's net_af_packet transmits with PACKET_QDISC_BYPASS (the default),
# past any qdisc, and everything the instance sends now leaves that way.
qsso_silence() {
  local rt
  rt=$(qsso_ns rt)
  if [ "$2" = on ]; then
    ip netns exec "$rt" nft -f - <<EOF
table netdev qsso_silence_$1 {
  chain ingress {
    type filter hook ingress device "qsso-r$1" priority 0; policy drop;
  }
}
EOF
  else
    ip netns exec "$rt" nft delete table netdev "qsso_silence_$1"
  fi
}

# qsso_client_source ADDR: the source address new client sockets take.
qsso_client_source() {
  ip -n "$(qsso_ns cli)" route replace default via 10.79.0.1 dev qsso-c src "$1"
}

qsso_down() {
  [ -n "${QSSO_PREFIX:-}" ] || return 0
  local ns n names=(cli rt br)
  for ((n = 0; n < QSSO_NINSTANCES; n++)); do names+=("qs$n"); done
  for ((n = 0; n < QSSO_NSERVERS; n++)); do names+=("srv$n"); done
  for ns in "${names[@]}"; do
    ip netns pids "$(qsso_ns "$ns")" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  for ns in "${names[@]}"; do
    ip netns del "$(qsso_ns "$ns")" 2>/dev/null
    rm -rf "/var/run/frr/$(qsso_ns "$ns")"
  done
  return 0
}
