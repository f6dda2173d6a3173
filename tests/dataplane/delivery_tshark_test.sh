#!/usr/bin/env bash
# Wireshark's reading of delivery.h's output (delivery_pcap writes one frame
# per case, see its header): every layer's addresses, MACs, TTL / hop limit,
# DF, protocol, flow label, ports, VNI and the ICMP fields, dissected by
# tshark with the IPv4 and UDP checksums verified (ICMP and ICMPv6 ones always
# are), against the table below; and no frame with an error-level expert item
# (malformed, bad checksum). Checksum status: 1 good, 2 not verified (the UDP
# header quoted in an ICMP reply, cut short), 3 not present (VXLAN over IPv4).
set -euo pipefail
delivery_pcap=${1:?usage: delivery_tshark_test.sh DELIVERY_PCAP}
command -v tshark > /dev/null || { echo "FAIL: tshark not found (apt-get install tshark)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$delivery_pcap" "$work/d.pcap"
ts() { tshark -n -r "$work/d.pcap" -o udp.check_checksum:TRUE -o ip.check_checksum:TRUE "$@" 2> /dev/null; }

ts -T fields -E separator='|' -E occurrence=a -E aggregator=, \
  -e frame.number -e frame.protocols -e eth.dst -e eth.src -e vlan.id \
  -e ip.src -e ip.dst -e ip.ttl -e ip.flags.df -e ip.proto -e ip.checksum.status \
  -e ipv6.src -e ipv6.dst -e ipv6.hlim -e ipv6.nxt -e ipv6.flow \
  -e udp.srcport -e udp.dstport -e udp.checksum.status -e vxlan.vni \
  -e icmp.type -e icmp.code -e icmp.mtu -e icmp.checksum.status \
  -e icmpv6.type -e icmpv6.mtu -e icmpv6.checksum.status > "$work/fields.txt"

# Outer then inner values, comma-separated. Port MAC 02:..:01, backend
# 02:..:02, its VXLAN device 02:..:aa:02; outer 10.0.0.1 -> 10.0.0.2 or
# fd00::1 -> fd00::2, TTL 32; client 198.51.100.7 / 2001:db8:c::7 to the VIP
# 203.0.113.10 / 2001:db8:f::10; VNI 0x123456 = 1193046; flow hash
# 0x9e3779b9: VXLAN source port 49517, outer flow label 0x779b9.
cat > "$work/expected.txt" <<'TABLE'
1|eth:ethertype:vlan:ethertype:ip:udp:data|02:00:00:00:00:02|02:00:00:00:00:01|100|198.51.100.7|203.0.113.10|64|1|17|1||||||50000|443|1||||||||
2|eth:ethertype:ipv6:udp:data|02:00:00:00:00:02|02:00:00:00:00:01||||||||2001:db8:c::7|2001:db8:f::10|64|17|0x0abcde|50000|443|1||||||||
3|eth:ethertype:ip:ip:udp:data|02:00:00:00:00:02|02:00:00:00:00:01||10.0.0.1,198.51.100.7|10.0.0.2,203.0.113.10|32,64|1,1|4,17|1,1||||||50000|443|1||||||||
4|eth:ethertype:ipv6:ipv6:udp:data|02:00:00:00:00:02|02:00:00:00:00:01||||||||fd00::1,2001:db8:c::7|fd00::2,2001:db8:f::10|32,64|41,17|0x0779b9,0x0abcde|50000|443|1||||||||
5|eth:ethertype:ipv6:ip:udp:data|02:00:00:00:00:02|02:00:00:00:00:01||198.51.100.7|203.0.113.10|64|1|17|1|fd00::1|fd00::2|32|4|0x0779b9|50000|443|1||||||||
6|eth:ethertype:ip:ipv6:udp:data|02:00:00:00:00:02|02:00:00:00:00:01||10.0.0.1|10.0.0.2|32|1|41|1|2001:db8:c::7|2001:db8:f::10|64|17|0x0abcde|50000|443|1||||||||
7|eth:ethertype:ip:ip:udp:data|02:00:00:00:00:02|02:00:00:00:00:01||10.0.0.1,198.51.100.7|10.0.0.2,203.0.113.10|32,64|1,0|4,17|1,1||||||50000|443|1||||||||
8|eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:udp:data|02:00:00:00:00:02,02:00:00:00:aa:02|02:00:00:00:00:01,02:00:00:00:00:01||10.0.0.1,198.51.100.7|10.0.0.2,203.0.113.10|32,64|1,1|17,17|1,1||||||49517,50000|4789,443|3,1|1193046|||||||
9|eth:ethertype:ipv6:udp:vxlan:eth:ethertype:ipv6:udp:data|02:00:00:00:00:02,02:00:00:00:aa:02|02:00:00:00:00:01,02:00:00:00:00:01||||||||fd00::1,2001:db8:c::7|fd00::2,2001:db8:f::10|32,64|17,17|0x0779b9,0x0abcde|49517,50000|4789,443|1,1|1193046|||||||
10|eth:ethertype:ip:udp:vxlan:eth:ethertype:ipv6:udp:data|02:00:00:00:00:02,02:00:00:00:aa:02|02:00:00:00:00:01,02:00:00:00:00:01||10.0.0.1|10.0.0.2|32|1|17|1|2001:db8:c::7|2001:db8:f::10|64|17|0x0abcde|49517,50000|4789,443|3,1|1193046|||||||
11|eth:ethertype:ipv6:udp:vxlan:eth:ethertype:ip:udp:data|02:00:00:00:00:02,02:00:00:00:aa:02|02:00:00:00:00:01,02:00:00:00:00:01||198.51.100.7|203.0.113.10|64|1|17|1|fd00::1|fd00::2|32|17|0x0779b9|49517,50000|4789,443|1,1|1193046|||||||
12|eth:ethertype:vlan:ethertype:ip:icmp:ip:udp:data|02:00:00:00:cc:07|02:00:00:00:00:09|100|203.0.113.10,198.51.100.7|198.51.100.7,203.0.113.10|64,64|0,1|1,17|1,1||||||50000|443|2||3|4|1430|1|||
13|eth:ethertype:ipv6:icmpv6:ipv6:udp:data|02:00:00:00:cc:07|02:00:00:00:00:09||||||||2001:db8:f::10,2001:db8:c::7|2001:db8:c::7,2001:db8:f::10|64,64|58,17|0x000000,0x0abcde|50000|443|2||||||2|1430|1
TABLE
diff -u "$work/expected.txt" "$work/fields.txt" >&2 || fail "tshark's dissection differs from the expected table (- expected, + dissected)"

errors=$(ts -Y '_ws.malformed || _ws.expert.severity >= 8388608' -T fields -e frame.number | wc -l)
[ "$errors" -eq 0 ] || { ts -Y '_ws.malformed || _ws.expert.severity >= 8388608' -V | grep -iE 'expert|malformed|bad' | head -10 >&2; fail "$errors frames with errors"; }
echo "tshark: $(wc -l < "$work/fields.txt") frames as expected, none with errors"
