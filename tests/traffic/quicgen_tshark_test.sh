#!/usr/bin/env bash
# Wireshark's verdict on a quicgen capture with every feature on: no malformed
# packet, no bad IPv4/UDP checksum (both verified), every datagram on the QUIC
# port dissected as QUIC, every Initial decrypted (one ClientHello and one
# ServerHello per connection, v1 and v2), the Version Negotiation exchanges
# and the DNS/NTP datagrams recognised. Handshake, 0-RTT and 1-RTT payloads
# are random octets, so "Secrets are not available" warnings are expected.
set -euo pipefail
quicgen=${1:?usage: quicgen_tshark_test.sh QUICGEN}
command -v tshark > /dev/null || { echo "FAIL: tshark not found (apt-get install tshark)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

connections=300 vn=5 non_quic=10
summary=$("$quicgen" --out "$work/t.pcap" --truth "$work/t.csv" --seed 3 --connections $connections \
  --packets-per-connection 12 --ipv6 0.5 --vlan 0.2 --qinq 0.1 --migrate 0.1 --nat-rebind 0.1 --coalesce 0.5 \
  --v2 0.2 --zero-rtt 0.2 --vn $vn --non-quic $non_quic --malformed 0)
echo "$summary"
frames=$(sed -E 's/.*: ([0-9]+) frames.*/\1/' <<< "$summary")

ts() { tshark -n -r "$work/t.pcap" -o udp.check_checksum:TRUE -o ip.check_checksum:TRUE "$@" 2> /dev/null; }

ts -T fields -E separator='|' -e frame.number -e frame.protocols -e udp.srcport -e udp.dstport \
  -e ip.checksum.status -e udp.checksum.status -e tls.handshake.type -e quic.version > "$work/fields.txt"
[ "$(wc -l < "$work/fields.txt")" -eq "$frames" ] || fail "tshark read $(wc -l < "$work/fields.txt") frames, quicgen wrote $frames"

# Frames with an error-level expert item (malformed, bad checksum, ...).
errors=$(ts -Y '_ws.malformed || _ws.expert.severity >= 8388608' -T fields -e frame.number | wc -l)
[ "$errors" -eq 0 ] || { ts -Y '_ws.malformed || _ws.expert.severity >= 8388608' | head -5 >&2; fail "$errors frames with errors"; }

# Join with the ground truth: tshark cannot know a CID that the server issued
# inside encrypted 1-RTT (NEW_CONNECTION_ID), so after an active migration the
# client's packets to the new CID may show as plain UDP data; only those may.
awk -F'|' -v port=443 '
  NR == FNR { if (FNR > 1) { split($0, t, ","); exempt[t[1]] = (t[4] == "c2s" && t[5] == "one_rtt" && t[11] == 1) } next }
  {
    n = $1; protos = $2
    if ($5 != "" && $5 != 1) { print "frame " n ": IPv4 checksum status " $5; bad++ }
    if ($6 != 1) { print "frame " n ": UDP checksum status " $6; bad++ }
    if ($3 == port || $4 == port) {
      if (protos !~ /:quic/) { if (exempt[n]) undecoded_migrated++; else { print "frame " n ": not QUIC: " protos; bad++ } }
    } else if (protos ~ /:(dns|ntp)$/) non_quic++
    else { print "frame " n ": not DNS/NTP: " protos; bad++ }
    if ($7 ~ /(^|,)1(,|$)/) client_hello++
    if ($7 ~ /(^|,)2(,|$)/) server_hello++
    if ($8 ~ /^(0x)?0+$/ && protos ~ /:quic/) vn++
  }
  END {
    printf "ClientHello %d, ServerHello %d, VN %d, DNS/NTP %d, undecoded post-migration %d\n", client_hello, server_hello, vn, non_quic, undecoded_migrated
    if (client_hello != conns || server_hello != conns) { print "Initials not all decrypted"; bad++ }
    if (vn != vns) { print "expected " vns " Version Negotiation packets"; bad++ }
    if (non_quic != others) { print "expected " others " DNS/NTP datagrams"; bad++ }
    exit bad > 0
  }' conns=$connections vns=$vn others=$non_quic "$work/t.csv" "$work/fields.txt" || fail "tshark disagrees with the capture"
echo "tshark: $frames frames clean"
