#!/usr/bin/env python3
"""fleet_check.py's check of an IP-in-IP frame (ipip_why, what `routing
--mode ipip` applies to every frame that reaches a server) on the frames
quicsteer's delivery code writes: tests/dataplane/delivery_pcap's ipip cases
(4 in 4, 6 in 6, 4 in 6 to an IPv6-only backend, 6 in 4 to an IPv4-only one,
4 in 4 with the inner DF clear, whose outer DF is set all the same) must pass; its l2 and vxlan frames, and each
ipip frame with one field broken, must fail for the reason named. The fleet
test's end-to-end ipip run needs a kernel with ipip; this runs anywhere.

usage: fleet_check_ipip_test.py DELIVERY_PCAP
"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_check import csum16, ip_udp, ipip_why  # noqa: E402
from realquic_check import pcap_records  # noqa: E402

# tests/dataplane/delivery_fixtures.h
PORT_MAC = bytes.fromhex("020000000001")
BACKEND_MAC = bytes.fromhex("020000000002")
SOURCES = (bytes([10, 0, 0, 1]), bytes.fromhex("fd000000000000000000000000000001"))
BACKEND4 = bytes([10, 0, 0, 2])
BACKEND6 = bytes.fromhex("fd000000000000000000000000000002")
VIP = {4: bytes([203, 0, 113, 10]), 6: bytes.fromhex("20010db8000f00000000000000000010")}
TTL = 32
# delivery_pcap's cases (its header), 1-based: the ipip ones with the
# backend's addresses and the inner family
IPIP = {3: ((BACKEND4, BACKEND6), 4), 4: ((BACKEND4, BACKEND6), 6), 5: ((None, BACKEND6), 4),
        6: ((BACKEND4, None), 6), 7: ((BACKEND4, BACKEND6), 4)}
NOT_IPIP = {1: "Ethernet type 8100", 2: "outer protocol 17", 8: "outer protocol 17", 9: "outer protocol 17"}

failures = []


def expect(name, why, want):
    """want None: the check passes; otherwise its reason contains want."""
    ok = why is None if want is None else why is not None and want in why
    print(f"  {'ok' if ok else 'FAILED'}: {name}: {why or 'passes'}")
    if not ok:
        failures.append(f"{name}: {why or 'passes'}, want {want or 'a pass'}")


def fix_outer_checksum(f):
    f[24:26] = b"\0\0"
    f[24:26] = struct.pack("!H", 0xFFFF - csum16(bytes(f[14:34])))
    return f


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as work:
        pcap = os.path.join(work, "d.pcap")
        subprocess.run([sys.argv[1], pcap], check=True)
        frames = {i + 1: (f, orig) for i, (_, f, orig) in enumerate(pcap_records(pcap, with_length=True))}

    for n, ((b4, b6), iv) in IPIP.items():
        f, orig = frames[n]
        why, inner = ipip_why(f, orig, SOURCES, (b4, b6), TTL)
        expect(f"case {n}: IPv{iv} inside, backend {'IPv4' if b4 else ''} {'IPv6' if b6 else ''}", why, None)
        q = ip_udp(f, inner) if inner else None
        if f[0:12] != BACKEND_MAC + PORT_MAC or not q or q[0] != iv or q[2] != VIP[iv] or q[4] != 443:
            failures.append(f"case {n}: not the client's datagram to the VIP inside, from the port's MAC to the "
                            f"backend's")
    for n, want in NOT_IPIP.items():
        f, orig = frames[n]
        expect(f"case {n} (not ipip)", ipip_why(f, orig, SOURCES, (BACKEND4, BACKEND6))[0], want)

    # One field broken at a time, in the 4-in-4 (3) and 6-in-6 (4) frames.
    both = (BACKEND4, BACKEND6)
    f3, o3 = frames[3]
    f4, o4 = frames[4]

    def broken3(off, value, fix=True):
        f = bytearray(f3)
        f[off:off + len(value)] = value
        return bytes(fix_outer_checksum(f) if fix else f)

    def broken4(off, value):
        f = bytearray(f4)
        f[off:off + len(value)] = value
        return bytes(f)

    expect("4 in 4: to another address", ipip_why(broken3(30, bytes([10, 0, 0, 3])), o3, SOURCES, both)[0],
           "outer 0a000001 -> 0a000003")
    expect("4 in 4: from another source", ipip_why(broken3(26, bytes([10, 0, 0, 9])), o3, SOURCES, both)[0],
           "outer 0a000009 -> 0a000002")
    expect("4 in 4: protocol 17", ipip_why(broken3(23, b"\x11"), o3, SOURCES, both)[0], "outer protocol 17")
    expect("4 in 4: protocol 41", ipip_why(broken3(23, b"\x29"), o3, SOURCES, both)[0], "no IPv6 header inside")
    expect("4 in 4: bad header checksum", ipip_why(broken3(24, b"\x12\x34", fix=False), o3, SOURCES, both)[0],
           "bad outer IPv4 header checksum")
    expect("4 in 4: DF clear", ipip_why(broken3(20, b"\x00"), o3, SOURCES, both)[0], "outer DF 0, want 1")
    expect("4 in 4: a fragment", ipip_why(broken3(20, b"\x60"), o3, SOURCES, both)[0], "an outer fragment")
    expect("4 in 4: TTL 0", ipip_why(broken3(22, b"\x00"), o3, SOURCES, both)[0], "outer TTL 0")
    expect("4 in 4: TTL 32, want 64", ipip_why(f3, o3, SOURCES, both, 64)[0], "outer TTL 32, want 64")
    expect("4 in 4: outer length one more", ipip_why(broken3(16, struct.pack("!H", len(f3) - 13)), o3, SOURCES,
                                                     both)[0], "outer length")
    expect("4 in 4: octets after the packet", ipip_why(f3 + b"\0" * 4, o3 + 4, SOURCES, both)[0],
           "octets on the wire")
    expect("4 in 4: inner header checksum", ipip_why(broken3(34 + 10, b"\x00\x00"), o3, SOURCES, both)[0],
           "bad inner IPv4 header checksum")
    expect("4 in 4: inner payload changed", ipip_why(broken3(len(f3) - 1, bytes([f3[-1] ^ 1])), o3, SOURCES,
                                                     both)[0], "bad inner UDP checksum")
    expect("4 in 4: to an IPv6-only backend", ipip_why(f3, o3, SOURCES, (None, BACKEND6))[0],
           "IPv4 inside IPv4, want IPv6 outside")
    tagged = f3[:12] + b"\x81\x00\x00\x64" + f3[12:]
    expect("4 in 4: a VLAN tag", ipip_why(tagged, o3 + 4, SOURCES, both)[0], "Ethernet type 8100")
    expect("6 in 6: to another address", ipip_why(broken4(14 + 39, b"\x03"), o4, SOURCES, both)[0],
           "want fd000000000000000000000000000001 -> fd000000000000000000000000000002")
    expect("6 in 6: next header 17", ipip_why(broken4(14 + 6, b"\x11"), o4, SOURCES, both)[0], "outer protocol 17")
    expect("6 in 6: hop limit 0", ipip_why(broken4(14 + 7, b"\x00"), o4, SOURCES, both)[0], "outer TTL 0")
    expect("6 in 6: payload length one more", ipip_why(broken4(14 + 4, struct.pack("!H", len(f4) - 53)), o4,
                                                       SOURCES, both)[0], "outer length")
    expect("6 in 6: inner payload changed", ipip_why(broken4(len(f4) - 1, bytes([f4[-1] ^ 1])), o4, SOURCES,
                                                     both)[0], "bad inner UDP checksum")
    expect("6 in 6: to an IPv4-only backend", ipip_why(f4, o4, SOURCES, (BACKEND4, None))[0],
           "IPv6 inside IPv6, want IPv4 outside")
    # cut short by a capture (snaplen 256): checked as far as it goes
    f = frames[4][0][:100]
    expect("6 in 6: captured 100 octets", ipip_why(f, o4, SOURCES, both, TTL)[0], None)

    if failures:
        for f in failures:
            print(f"  fleet_check ipip: FAILED: {f}")
        return 1
    print(f"fleet_check ipip: {len(IPIP)} ipip frames of delivery_pcap pass, the others and every broken one fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
