# Network namespaces for a server fleet behind quicsteer: more servers than
# owner lcores, one TX port into a Linux bridge, every server holding the
# service address and answering the clients itself (direct server return).
# Sourced by tests/realquic/fleet_test.sh. Needs root (CAP_NET_ADMIN,
# CAP_SYS_ADMIN).
#
#   $P-cli   clients: 10.78.0.2, 10.78.0.3, fd78::2, fd78::3 on qsfl-c; every
#            route through the router (10.78.0.1, fd78::1)
#   $P-rt    the router (forwarding on): the service address 10.78.1.1 /
#            fd78:1::1 out of qsfl-ro to quicsteer (static neighbour, no
#            ARP/ND); the servers' replies arrive on qsfl-rb (10.78.2.1,
#            fd78:2::1, on the fleet segment) and go on to the clients
#   $P-qs    quicsteer: reads qsfl-rx (qsfl-ro's peer) with net_af_packet and
#            transmits on qsfl-tx, a port of the fleet bridge
#   $P-br    the fleet bridge qsfl-br: ports qsfl-pq (quicsteer), qsfl-pr (the
#            router), qsfl-p0..3 (the servers); static forwarding entries for
#            every MAC on the segment, learning and unknown-unicast flooding
#            off, so that a frame reaches the one server its MAC names or none
#   $P-srvN  server N (N = 0..3): qsfl-e on the segment (10.78.2.1N,
#            fd78:2::1N, MAC 02:00:00:78:02:1N), the service address on lo
#            (arp_ignore 1, arp_announce 2: it answers no ARP for it), a
#            default route via the router (MTU 1500: the clients' path), and
#            two VXLAN devices (VNI 42, port 4789, MAC 02:00:00:78:03:1N):
#            qsfl-vx4 on its IPv4 address and qsfl-vx6 on its IPv6 one, whose
#            decapsulated frames reach the service address on lo; for ipip
#            (qsfl_ipip_servers), the kernel's fallback tunnel devices tunl0
#            and ip6tnl0 up, which decapsulate IPv4-in-IPv4 and
#            IPv6-in-IPv6 to its addresses
#
# For the health checks (tests/realquic/health_test.sh), optionally:
# qsfl_appliance_up makes quicsteer's RX port qsfl-rx invisible to the kernel
# of $P-qs (no ARP, no IPv6, an nftables netdev ingress chain that drops
# every frame; quicsteer's af_packet sockets see them first) and routes the
# appliance's own addresses 10.78.9.2 and fd78:9::2 on the router out of
# qsfl-ro to a static neighbour, the port's MAC (qsfl-rx's, which the TAP
# takes); once quicsteer has made its TAP qsfl-k (the profile's
# `ports[].tap`), qsfl_tap_up gives it those addresses (IPv6 on for the TAP
# alone) and a default route through the router's qsfl-ro (a static
# neighbour 10.78.9.1 / fd78:9::1 with qsfl-ro's MAC; the router holds no
# address on that link). The servers' answers to quicsteer's probes, from
# the service address to 10.78.9.2 / fd78:9::2, go back through the router
# to quicsteer's RX port, as a VIP's answers would to an appliance's address.
#
# The fleet segment carries MTU 1600 (a VXLAN-encapsulated 1500-octet client
# packet is 1550 octets over IPv4, 1570 over IPv6; ipip makes 1520 and 1540).
# IPv6 is on only in the client, router and server namespaces, without router
# advertisements, DAD or link-local addresses (every neighbour is static):
# nothing but the clients' own traffic crosses quicsteer. Interface names are fixed (the fleet
# profiles name them); namespace names carry the caller's prefix.
# qsfl_down removes everything and is safe to call twice.

QSFL_VIP=10.78.1.1
QSFL_VIP6=fd78:1::1
QSFL_VIP_MAC=02:00:00:78:01:01
QSFL_CLIENTS=(10.78.0.2 10.78.0.3)
QSFL_CLIENTS6=(fd78::2 fd78::3)
QSFL_CLIENT_MAC=02:00:00:78:00:02
QSFL_RT_CLI_MAC=02:00:00:78:00:01   # qsfl-rc
QSFL_RT_OUT_MAC=02:00:00:78:01:02   # qsfl-ro
QSFL_RT_SEG_MAC=02:00:00:78:02:01   # qsfl-rb
QSFL_RT_SEG=10.78.2.1
QSFL_RT_SEG6=fd78:2::1
QSFL_TX_MAC=02:00:00:78:02:02       # qsfl-tx, quicsteer's TX port
QSFL_TX_ADDR=10.78.2.2              # quicsteer's outer source (vxlan, ipip)
QSFL_TX_ADDR6=fd78:2::2
QSFL_NSERVERS=4
QSFL_VNI=42
QSFL_SEG_MTU=1600
QSFL_QS_TAP=qsfl-k                  # quicsteer's TAP (ports[].tap of the wire port)
QSFL_QS_ADDR=10.78.9.2              # the appliance's own addresses, on the TAP
QSFL_QS_ADDR6=fd78:9::2
QSFL_QS_GW=10.78.9.1                # its next hop: the router's qsfl-ro (a static neighbour)
QSFL_QS_GW6=fd78:9::1

qsfl_ns() { echo "$QSFL_PREFIX-$1"; }
qsfl_srv_addr() { echo "10.78.2.1$1"; }
qsfl_srv_addr6() { echo "fd78:2::1$1"; }
qsfl_srv_mac() { echo "02:00:00:78:02:1$1"; }
qsfl_srv_vxmac() { echo "02:00:00:78:03:1$1"; }
qsfl_srv_sid() { echo "0a0$(($1 + 1))"; }  # QUIC-LB server ID of server N

# Offloads off: a checksum left for the NIC to fill or a GSO super-frame must
# not reach quicsteer (it forwards frames as they are).
qsfl_no_offload() {  # NS IFACE
  if command -v ethtool >/dev/null; then
    ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off tx-udp-segmentation off >/dev/null 2>&1 || true
  fi
}

# qsfl_ipv6 NS on|off: IPv6 for the namespace, without router
# advertisements, DAD, router solicitations or link-local addresses.
qsfl_ipv6() {
  local ns=$1
  if [ "$2" = on ]; then
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
      net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
      net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
      net.ipv6.conf.all.dad_transmits=0 net.ipv6.conf.default.dad_transmits=0 \
      net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0 \
      net.ipv6.conf.default.addr_gen_mode=1
  else
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  fi
}

# qsfl_link NS IFACE MAC MTU: an interface's MAC and MTU, no link-local
# address (addrgenmode none), offloads off, up.
qsfl_link() {
  ip -n "$1" link set "$2" address "$3" mtu "$4" || return 1
  ip -n "$1" link set "$2" addrgenmode none 2>/dev/null
  qsfl_no_offload "$1" "$2"
  ip -n "$1" link set "$2" up
}

# qsfl_can_netns: whether this process can make network namespaces at all.
qsfl_can_netns() {
  [ "$(id -u)" -eq 0 ] || return 1
  command -v ip >/dev/null && command -v bridge >/dev/null || return 1
  local probe="qsfl-probe-$$"
  ip netns add "$probe" 2>/dev/null || return 1
  ip -n "$probe" link add qsfl-p0 type veth peer name qsfl-p1 2>/dev/null &&
    ip -n "$probe" link add qsfl-pb type bridge 2>/dev/null &&
    ip -n "$probe" link add qsfl-pv type vxlan id 1 dstport 4789 local 127.0.0.1 2>/dev/null
  local rc=$?
  ip netns del "$probe" 2>/dev/null
  return $rc
}

# qsfl_has_ipip: whether new network namespaces get the kernel's fallback
# tunnel devices, tunl0 (module ipip: IPv4 inside IPv4 to any local address)
# and ip6tnl0 (module ip6_tunnel: IPv6 inside IPv6), which the servers
# decapsulate with. Asking for a device of each type in a scratch namespace
# loads the modules where the kernel has them; a second namespace made after
# that must have both devices (net.core.fb_tunnels_only_for_init_net keeps
# them out of all but the first namespace). When not, QSFL_IPIP_MISSING says
# why.
qsfl_has_ipip() {
  local probe="qsfl-ipip-$$" missing=() err4 err6
  QSFL_IPIP_MISSING=
  ip netns add "$probe-a" 2>/dev/null || { QSFL_IPIP_MISSING="cannot make a network namespace"; return 1; }
  err4=$(ip -n "$probe-a" link add qsfl-pi4 type ipip local 192.0.2.1 2>&1) && err4= || err4=${err4%%$'\n'*}
  err6=$(ip -n "$probe-a" link add qsfl-pi6 type ip6tnl mode ip6ip6 local 2001:db8::1 2>&1) && err6= || err6=${err6%%$'\n'*}
  ip netns del "$probe-a"
  if ! ip netns add "$probe-b" 2>/dev/null; then
    QSFL_IPIP_MISSING="cannot make a network namespace"
    return 1
  fi
  ip -n "$probe-b" link show tunl0 >/dev/null 2>&1 || missing+=(tunl0)
  ip -n "$probe-b" link show ip6tnl0 >/dev/null 2>&1 || missing+=(ip6tnl0)
  ip netns del "$probe-b"
  [ "${#missing[@]}" -eq 0 ] && return 0
  local none="no ${missing[0]}"
  [ "${#missing[@]}" -eq 2 ] && none+=" and no ${missing[1]}"
  if [ -n "$err4" ] || [ -n "$err6" ]; then
    QSFL_IPIP_MISSING="this kernel has no ipip (a new network namespace has $none;"
    [ -n "$err4" ] && QSFL_IPIP_MISSING+=" ip link add type ipip: $err4;"
    [ -n "$err6" ] && QSFL_IPIP_MISSING+=" ip link add type ip6tnl: $err6;"
    QSFL_IPIP_MISSING="${QSFL_IPIP_MISSING%;})"
  else
    QSFL_IPIP_MISSING="the kernel makes ipip and ip6tnl devices, but a new network namespace has $none"
    QSFL_IPIP_MISSING+=" (net.core.fb_tunnels_only_for_init_net is"
    QSFL_IPIP_MISSING+=" $(sysctl -n net.core.fb_tunnels_only_for_init_net 2>/dev/null || echo unknown))"
  fi
  return 1
}

# qsfl_up PREFIX: makes the namespaces and links.
qsfl_up() {
  QSFL_PREFIX=$1
  local cli rt qs br ns n
  cli=$(qsfl_ns cli); rt=$(qsfl_ns rt); qs=$(qsfl_ns qs); br=$(qsfl_ns br)
  QSFL_NAMESPACES=("$cli" "$rt" "$qs" "$br")
  for ((n = 0; n < QSFL_NSERVERS; n++)); do QSFL_NAMESPACES+=("$(qsfl_ns "srv$n")"); done
  for ns in "${QSFL_NAMESPACES[@]}"; do
    ip netns add "$ns" || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 || return 1
    ip -n "$ns" link set lo up || return 1
  done
  qsfl_ipv6 "$cli" on; qsfl_ipv6 "$rt" on; qsfl_ipv6 "$qs" off; qsfl_ipv6 "$br" off
  for ((n = 0; n < QSFL_NSERVERS; n++)); do qsfl_ipv6 "$(qsfl_ns "srv$n")" on; done

  # clients <-> router
  ip -n "$cli" link add qsfl-c type veth peer name qsfl-rc netns "$rt" || return 1
  qsfl_link "$cli" qsfl-c "$QSFL_CLIENT_MAC" 1500 || return 1
  qsfl_link "$rt" qsfl-rc "$QSFL_RT_CLI_MAC" 1500 || return 1
  local a
  for a in "${QSFL_CLIENTS[@]}"; do ip -n "$cli" addr add "$a/24" dev qsfl-c || return 1; done
  for a in "${QSFL_CLIENTS6[@]}"; do ip -n "$cli" addr add "$a/64" dev qsfl-c nodad || return 1; done
  ip -n "$cli" neigh replace 10.78.0.1 lladdr "$QSFL_RT_CLI_MAC" nud permanent dev qsfl-c
  ip -n "$cli" neigh replace fd78::1 lladdr "$QSFL_RT_CLI_MAC" nud permanent dev qsfl-c
  ip -n "$cli" route add default via 10.78.0.1 dev qsfl-c src "${QSFL_CLIENTS[0]}" || return 1
  ip -n "$cli" -6 route add default via fd78::1 dev qsfl-c src "${QSFL_CLIENTS6[0]}" || return 1
  ip -n "$rt" addr add 10.78.0.1/24 dev qsfl-rc || return 1
  ip -n "$rt" addr add fd78::1/64 dev qsfl-rc nodad || return 1
  for a in "${QSFL_CLIENTS[@]}" "${QSFL_CLIENTS6[@]}"; do
    ip -n "$rt" neigh replace "$a" lladdr "$QSFL_CLIENT_MAC" nud permanent dev qsfl-rc
  done

  # router -> quicsteer: the service address, to a MAC nobody answers ARP for
  ip netns exec "$rt" sysctl -q -w net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
    net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0 || return 1
  ip -n "$rt" link add qsfl-ro type veth peer name qsfl-rx netns "$qs" || return 1
  qsfl_link "$rt" qsfl-ro "$QSFL_RT_OUT_MAC" 1500 || return 1
  qsfl_link "$qs" qsfl-rx "$QSFL_VIP_MAC" 1500 || return 1
  ip -n "$rt" route add "$QSFL_VIP/32" dev qsfl-ro || return 1
  ip -n "$rt" -6 route add "$QSFL_VIP6/128" dev qsfl-ro || return 1
  ip -n "$rt" neigh replace "$QSFL_VIP" lladdr "$QSFL_VIP_MAC" nud permanent dev qsfl-ro
  ip -n "$rt" neigh replace "$QSFL_VIP6" lladdr "$QSFL_VIP_MAC" nud permanent dev qsfl-ro

  # the fleet bridge
  ip -n "$br" link add qsfl-br type bridge forward_delay 0 stp_state 0 || return 1
  # The bridge has no address, and no multicast either: nothing of its own
  # (IGMP reports) reaches the servers.
  ip -n "$br" link set qsfl-br mtu "$QSFL_SEG_MTU" multicast off type bridge mcast_snooping 0 || return 1
  # quicsteer's TX port
  ip -n "$qs" link add qsfl-tx type veth peer name qsfl-pq netns "$br" || return 1
  qsfl_link "$qs" qsfl-tx "$QSFL_TX_MAC" "$QSFL_SEG_MTU" || return 1
  qsfl_bridge_port qsfl-pq "$QSFL_TX_MAC" || return 1
  # the router's leg on the segment (where the replies come back)
  ip -n "$rt" link add qsfl-rb type veth peer name qsfl-pr netns "$br" || return 1
  qsfl_link "$rt" qsfl-rb "$QSFL_RT_SEG_MAC" "$QSFL_SEG_MTU" || return 1
  ip -n "$rt" addr add "$QSFL_RT_SEG/24" dev qsfl-rb || return 1
  ip -n "$rt" addr add "$QSFL_RT_SEG6/64" dev qsfl-rb nodad || return 1
  qsfl_bridge_port qsfl-pr "$QSFL_RT_SEG_MAC" || return 1

  for ((n = 0; n < QSFL_NSERVERS; n++)); do qsfl_server_up "$n" || return 1; done
  ip -n "$br" link set qsfl-br up
  return 0
}

# qsfl_bridge_port PORT MAC: a port of qsfl-br behind which only MAC lives.
qsfl_bridge_port() {
  local br
  br=$(qsfl_ns br)
  ip -n "$br" link set "$1" mtu "$QSFL_SEG_MTU" addrgenmode none 2>/dev/null || ip -n "$br" link set "$1" mtu "$QSFL_SEG_MTU"
  ip -n "$br" link set "$1" master qsfl-br || return 1
  bridge -n "$br" link set dev "$1" learning off flood off mcast_flood off bcast_flood off || return 1
  bridge -n "$br" fdb add "$2" dev "$1" master static || return 1
  qsfl_no_offload "$br" "$1"
  ip -n "$br" link set "$1" up
}

# qsfl_server_up N: server N's namespace on the segment.
qsfl_server_up() {
  local n=$1 srv br rt addr addr6
  srv=$(qsfl_ns "srv$n"); br=$(qsfl_ns br); rt=$(qsfl_ns rt)
  addr=$(qsfl_srv_addr "$n"); addr6=$(qsfl_srv_addr6 "$n")
  ip -n "$br" link add "qsfl-p$n" type veth peer name qsfl-e netns "$srv" || return 1
  qsfl_link "$srv" qsfl-e "$(qsfl_srv_mac "$n")" "$QSFL_SEG_MTU" || return 1
  qsfl_bridge_port "qsfl-p$n" "$(qsfl_srv_mac "$n")" || return 1
  ip -n "$srv" addr add "$addr/24" dev qsfl-e || return 1
  ip -n "$srv" addr add "$addr6/64" dev qsfl-e nodad || return 1
  # The service address on lo, never announced nor answered for on the
  # segment (every server has it).
  ip -n "$srv" addr add "$QSFL_VIP/32" dev lo || return 1
  ip -n "$srv" addr add "$QSFL_VIP6/128" dev lo nodad || return 1
  ip netns exec "$srv" sysctl -q -w net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
    net.ipv4.conf.qsfl-e.arp_ignore=1 net.ipv4.conf.qsfl-e.arp_announce=2 || return 1
  ip -n "$srv" neigh replace "$QSFL_RT_SEG" lladdr "$QSFL_RT_SEG_MAC" nud permanent dev qsfl-e
  ip -n "$srv" neigh replace "$QSFL_RT_SEG6" lladdr "$QSFL_RT_SEG_MAC" nud permanent dev qsfl-e
  # Replies go to the clients through the router, whose client side has MTU 1500.
  ip -n "$srv" route add default via "$QSFL_RT_SEG" dev qsfl-e mtu 1500 || return 1
  ip -n "$srv" -6 route add default via "$QSFL_RT_SEG6" dev qsfl-e mtu 1500 || return 1
  ip -n "$rt" neigh replace "$addr" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-rb
  ip -n "$rt" neigh replace "$addr6" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-rb
  # VXLAN termination: one device per outer family, both with the MAC the
  # inner frames are addressed to; what they decapsulate is for lo's address.
  local v
  ip -n "$srv" link add qsfl-vx4 address "$(qsfl_srv_vxmac "$n")" type vxlan id "$QSFL_VNI" dstport 4789 \
    local "$addr" dev qsfl-e nolearning || return 1
  ip -n "$srv" link add qsfl-vx6 address "$(qsfl_srv_vxmac "$n")" type vxlan id "$QSFL_VNI" dstport 4789 \
    local "$addr6" dev qsfl-e nolearning || return 1
  for v in qsfl-vx4 qsfl-vx6; do
    ip -n "$srv" link set "$v" mtu 1500 addrgenmode none || return 1
    ip netns exec "$srv" sysctl -q -w "net.ipv4.conf.$v.rp_filter=0" "net.ipv4.conf.$v.arp_ignore=1" || return 1
    qsfl_no_offload "$srv" "$v"
    ip -n "$srv" link set "$v" up || return 1
  done
}

# qsfl_ipip_servers: every server decapsulates ipip (qsfl_has_ipip first):
# tunl0 takes IPv4 inside IPv4 and ip6tnl0 IPv6 inside IPv6 (its fallback
# mode, ip6ip6) to any of the server's addresses, from any source; what they
# decapsulate is for the service address on lo. rp_filter 0 on them: the
# client's address is routed out of qsfl-e, not back through the tunnel.
qsfl_ipip_servers() {
  local n srv d
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    srv=$(qsfl_ns "srv$n")
    # ip6tnl0 was made with the namespace, before qsfl_ipv6 set the defaults
    # (only disable_ipv6 of "all" reaches existing devices)
    ip netns exec "$srv" sysctl -q -w net.ipv6.conf.ip6tnl0.disable_ipv6=0 net.ipv6.conf.ip6tnl0.accept_ra=0 \
      net.ipv6.conf.ip6tnl0.router_solicitations=0 || return 1
    for d in tunl0 ip6tnl0; do
      ip -n "$srv" link set "$d" addrgenmode none 2>/dev/null
      ip netns exec "$srv" sysctl -q -w "net.ipv4.conf.$d.rp_filter=0" || return 1
      qsfl_no_offload "$srv" "$d"
      ip -n "$srv" link set "$d" up || return 1
    done
  done
}

# qsfl_client_source ADDR ADDR6: the source addresses new client sockets take
# (a migration after this change moves to them).
qsfl_client_source() {
  ip -n "$(qsfl_ns cli)" route replace default via 10.78.0.1 dev qsfl-c src "$1" &&
    ip -n "$(qsfl_ns cli)" -6 route replace default via fd78::1 dev qsfl-c src "$2"
}

# qsfl_standin l2|vxlan|ipip|off N: the kernel in quicsteer's place, sending every
# client packet to server N only (no quicsteer may run meanwhile), by routing
# in the quicsteer namespace (qsfl-rx has the MAC the router sends the service
# address to): l2, the service address out of qsfl-tx to server N's MAC (a
# static neighbour; what l2 delivery does but for the TTL); vxlan, into a
# VXLAN device per family (VNI 42, from 10.78.2.2 or fd78:2::2) towards server
# N, inner destination MAC server N's VXLAN MAC; ipip, into an ipip device
# (IPv4 inside IPv4, from 10.78.2.2, DF the inner packet's, TTL inherited)
# and an ip6tnl device (IPv6 inside IPv6, from fd78:2::2, no encapsulation
# limit option, hop limit 64) towards server N (this needs a kernel with ipip
# and ip6_tunnel). It checks the topology with no quicsteer at all (this
# kernel has no tc pedit to rewrite MACs in place).
qsfl_standin() {
  local mode=$1 n=$2 qs
  qs=$(qsfl_ns qs)
  # off: undo whichever was on
  ip -n "$qs" link del qsfl-sv4 2>/dev/null
  ip -n "$qs" link del qsfl-sv6 2>/dev/null
  ip -n "$qs" route flush dev qsfl-tx 2>/dev/null
  ip -n "$qs" addr flush dev qsfl-tx 2>/dev/null
  ip -n "$qs" neigh flush dev qsfl-tx 2>/dev/null
  ip netns exec "$qs" sysctl -q -w net.ipv4.ip_forward=0
  qsfl_ipv6 "$qs" off
  [ "$mode" = off ] && return 0
  qsfl_ipv6 "$qs" on
  ip netns exec "$qs" sysctl -q -w net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 || return 1
  ip -n "$qs" addr add "$QSFL_TX_ADDR/24" dev qsfl-tx || return 1
  ip -n "$qs" addr add "$QSFL_TX_ADDR6/64" dev qsfl-tx nodad || return 1
  case $mode in
    l2)
      ip -n "$qs" route add "$QSFL_VIP/32" dev qsfl-tx || return 1
      ip -n "$qs" -6 route add "$QSFL_VIP6/128" dev qsfl-tx || return 1
      ip -n "$qs" neigh replace "$QSFL_VIP" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-tx
      ip -n "$qs" neigh replace "$QSFL_VIP6" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-tx
      ;;
    vxlan)
      ip -n "$qs" neigh replace "$(qsfl_srv_addr "$n")" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-tx
      ip -n "$qs" neigh replace "$(qsfl_srv_addr6 "$n")" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-tx
      # IPv4 inside IPv4, IPv6 inside IPv6 (the servers terminate both)
      ip -n "$qs" link add qsfl-sv4 type vxlan id "$QSFL_VNI" dstport 4789 local "$QSFL_TX_ADDR" \
        remote "$(qsfl_srv_addr "$n")" dev qsfl-tx nolearning || return 1
      ip -n "$qs" link add qsfl-sv6 type vxlan id "$QSFL_VNI" dstport 4789 local "$QSFL_TX_ADDR6" \
        remote "$(qsfl_srv_addr6 "$n")" dev qsfl-tx nolearning || return 1
      local v
      for v in qsfl-sv4 qsfl-sv6; do
        ip -n "$qs" link set "$v" mtu 1500 addrgenmode none multicast off && qsfl_no_offload "$qs" "$v" &&
          ip -n "$qs" link set "$v" up || return 1
      done
      ip -n "$qs" route add "$QSFL_VIP/32" dev qsfl-sv4 || return 1
      ip -n "$qs" -6 route add "$QSFL_VIP6/128" dev qsfl-sv6 || return 1
      ip -n "$qs" neigh replace "$QSFL_VIP" lladdr "$(qsfl_srv_vxmac "$n")" nud permanent dev qsfl-sv4
      ip -n "$qs" neigh replace "$QSFL_VIP6" lladdr "$(qsfl_srv_vxmac "$n")" nud permanent dev qsfl-sv6
      ;;
    ipip)
      ip -n "$qs" neigh replace "$(qsfl_srv_addr "$n")" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-tx
      ip -n "$qs" neigh replace "$(qsfl_srv_addr6 "$n")" lladdr "$(qsfl_srv_mac "$n")" nud permanent dev qsfl-tx
      # nopmtudisc: the outer DF is the inner one's, as quicsteer's ipip
      # (the kernel then allows only an inherited TTL)
      ip -n "$qs" link add qsfl-sv4 type ipip local "$QSFL_TX_ADDR" remote "$(qsfl_srv_addr "$n")" dev qsfl-tx \
        ttl inherit nopmtudisc || return 1
      # encaplimit none: no destination options header (RFC 2473's tunnel
      # encapsulation limit), next header 41 as quicsteer writes it
      ip -n "$qs" link add qsfl-sv6 type ip6tnl mode ip6ip6 local "$QSFL_TX_ADDR6" remote "$(qsfl_srv_addr6 "$n")" \
        dev qsfl-tx encaplimit none hoplimit 64 || return 1
      local v
      for v in qsfl-sv4 qsfl-sv6; do
        ip -n "$qs" link set "$v" mtu 1500 addrgenmode none 2>/dev/null || ip -n "$qs" link set "$v" mtu 1500 || return 1
        qsfl_no_offload "$qs" "$v"
        ip -n "$qs" link set "$v" up || return 1
      done
      ip -n "$qs" route add "$QSFL_VIP/32" dev qsfl-sv4 || return 1
      ip -n "$qs" -6 route add "$QSFL_VIP6/128" dev qsfl-sv6 || return 1
      ;;
    *) echo "qsfl_standin: l2, vxlan, ipip or off, not '$mode'"; return 1 ;;
  esac
}

# qsfl_appliance_up: (after qsfl_up, before quicsteer starts) quicsteer's RX
# port qsfl-rx hidden from the kernel of $P-qs as a NIC bound to a DPDK
# driver is, and the router's routes to the appliance's own addresses
# 10.78.9.2 and fd78:9::2: out of qsfl-ro to the port's MAC, a static
# neighbour (nothing answers ARP or ND for them but quicsteer's TAP, which
# qsfl_tap_up sets up once quicsteer runs).
qsfl_appliance_up() {
  local qs rt
  qs=$(qsfl_ns qs); rt=$(qsfl_ns rt)
  ip -n "$qs" link set qsfl-rx arp off || return 1
  ip netns exec "$qs" nft -f - <<EOF || return 1
table netdev qsfl_nic {
  chain ingress {
    type filter hook ingress device "qsfl-rx" priority 0; policy drop;
  }
}
EOF
  ip -n "$rt" route replace "$QSFL_QS_ADDR/32" dev qsfl-ro || return 1
  ip -n "$rt" -6 route replace "$QSFL_QS_ADDR6/128" dev qsfl-ro || return 1
  ip -n "$rt" neigh replace "$QSFL_QS_ADDR" lladdr "$QSFL_VIP_MAC" nud permanent dev qsfl-ro || return 1
  ip -n "$rt" neigh replace "$QSFL_QS_ADDR6" lladdr "$QSFL_VIP_MAC" nud permanent dev qsfl-ro || return 1
}

# qsfl_tap_up [SECONDS]: once quicsteer has made its TAP qsfl-k (at most
# SECONDS, default 10), the appliance's addresses on it, IPv6 on for it alone
# (no link-local address, DAD or router solicitations), and default routes
# through the router's qsfl-ro (static neighbours). The TAP goes when
# quicsteer exits; each start needs this again.
qsfl_tap_up() {
  local qs i
  qs=$(qsfl_ns qs)
  for ((i = 0; i < ${1:-10} * 20; i++)); do
    ip -n "$qs" link show "$QSFL_QS_TAP" >/dev/null 2>&1 && break
    sleep 0.05
  done
  ip -n "$qs" link show "$QSFL_QS_TAP" >/dev/null 2>&1 || { echo "fleet: quicsteer made no TAP $QSFL_QS_TAP"; return 1; }
  ip -n "$qs" link set "$QSFL_QS_TAP" addrgenmode none 2>/dev/null
  ip netns exec "$qs" sysctl -q -w "net.ipv6.conf.$QSFL_QS_TAP.accept_dad=0" \
    "net.ipv6.conf.$QSFL_QS_TAP.router_solicitations=0" "net.ipv6.conf.$QSFL_QS_TAP.accept_ra=0" \
    "net.ipv6.conf.$QSFL_QS_TAP.disable_ipv6=0" || return 1
  qsfl_no_offload "$qs" "$QSFL_QS_TAP"
  ip -n "$qs" link set "$QSFL_QS_TAP" up || return 1
  ip -n "$qs" addr replace "$QSFL_QS_ADDR/24" dev "$QSFL_QS_TAP" || return 1
  ip -n "$qs" addr replace "$QSFL_QS_ADDR6/64" dev "$QSFL_QS_TAP" nodad || return 1
  ip -n "$qs" neigh replace "$QSFL_QS_GW" lladdr "$QSFL_RT_OUT_MAC" nud permanent dev "$QSFL_QS_TAP" || return 1
  ip -n "$qs" neigh replace "$QSFL_QS_GW6" lladdr "$QSFL_RT_OUT_MAC" nud permanent dev "$QSFL_QS_TAP" || return 1
  ip -n "$qs" route replace default via "$QSFL_QS_GW" dev "$QSFL_QS_TAP" || return 1
  ip -n "$qs" -6 route replace default via "$QSFL_QS_GW6" dev "$QSFL_QS_TAP" || return 1
}

qsfl_down() {
  [ -n "${QSFL_PREFIX:-}" ] || return 0
  local ns n names=(cli rt qs br)
  for ((n = 0; n < QSFL_NSERVERS; n++)); do names+=("srv$n"); done
  for ns in "${names[@]}"; do
    ip netns pids "$(qsfl_ns "$ns")" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  for ns in "${names[@]}"; do
    ip netns del "$(qsfl_ns "$ns")" 2>/dev/null
  done
  return 0
}

# qsfl_server_captures TAG [TCPDUMP_OPTION...]: what reaches each server's
# segment interface (inbound, 256 octets: a VXLAN frame's headers and the
# inner QUIC header) into $RQ_WORK/TAG-srvN.pcap, the PIDs in RQ_PIDS and
# RQ_CAPTURES (realquic_lib.sh); returns once every capture listens.
qsfl_server_captures() {
  local tag=$1 n
  shift
  RQ_CAPTURES=()
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    ip netns exec "$(qsfl_ns "srv$n")" tcpdump -n -i qsfl-e -Q in -s 256 -B 32768 -U "$@" \
      -w "$RQ_WORK/$tag-srv$n.pcap" 2>"$RQ_WORK/$tag-srv$n.tcpdump" &
    RQ_PIDS+=($!)
    RQ_CAPTURES+=($!)
  done
  for ((n = 0; n < QSFL_NSERVERS; n++)); do
    rq_wait_for "$RQ_WORK/$tag-srv$n.tcpdump" "listening on" 10 || return 1
  done
}
