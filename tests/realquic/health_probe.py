#!/usr/bin/env python3
"""QUIC health-check packets by hand, for tests/realquic/health_test.sh and
scripts/bench.sh health (the fleet topology, tests/realquic/fleet_topology.sh).

  standin --out-iface IF --dst-mac MAC --src ADDR --dst ADDR [--dport 443]
          [--sport 61000] --watch-iface IF [--timeout S]
      The kernel-free stand-in of one quicsteer probe: an Ethernet frame
      written with an AF_PACKET socket on --out-iface (the router's leg on the
      fleet segment) to --dst-mac (a server), from --src:--sport (the
      appliance's address) to --dst:--dport (the service address), carrying a
      QUIC long header of a reserved version (0x?a?a?a?a, RFC 9000 sections
      6.3 and 15) padded to --size octets of UDP payload (default 1200:
      ngtcp2's servers answer a shorter one with nothing); then the Version
      Negotiation that comes back, watched for on --watch-iface (the router's
      link towards quicsteer, where the answer leaves); a new probe every
      --every seconds (0.2) until one is answered or --timeout. Prints one
      line and exits 0 when a Version Negotiation from --dst:--dport to
      --src:--sport echoes a probe's CIDs (its DCID the probe's SCID and its
      SCID the probe's DCID), 1 otherwise.
  forge --dst ADDR [--dport 61000] [--src ADDR --sport PORT] --count N
        [--over S] [--dcid-prefix HEX]
      N Version Negotiation packets with guessed CIDs (8 random octets each,
      the DCID's first ones --dcid-prefix), spread over S seconds (default
      1), to --dst:--dport (the appliance's probe port). With --src the
      datagrams claim that source (IP_TRANSPARENT / IPV6_TRANSPARENT: root),
      e.g. the service address and port the answers come from. Prints
      "sent N".
  initials --dst ADDR [--dport 443] --rate R --seconds S
      New connection attempts: every 1/R s one QUIC v1 Initial of 1200
      octets (random 8-octet DCID and SCID, RFC 9000 14.1) from a fresh UDP
      socket (a new source port each, which the kernel reuses in time), for
      S seconds. Prints "sent N".
"""
import argparse
import os
import random
import select
import socket
import struct
import sys
import time

from fleet_check import csum16

RESERVED_VERSION = 0x1A2A3A4A  # 0x?a?a?a?a: never a real version (RFC 9000 15)



def mac(text):
    return bytes.fromhex(text.replace(":", ""))


def udp_frame(src_mac, dst_mac, src, dst, sport, dport, payload):
    """An Ethernet/IP/UDP frame with valid checksums (IPv4 or IPv6 by the
    addresses' family)."""
    udp_len = 8 + len(payload)
    if ":" in src:
        s, d = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
        pseudo = s + d + struct.pack("!IxxxB", udp_len, 17)
        ip = struct.pack("!IHBB", 6 << 28, udp_len, 17, 64) + s + d
        ethertype = 0x86DD
    else:
        s, d = socket.inet_aton(src), socket.inet_aton(dst)
        pseudo = s + d + struct.pack("!BBH", 0, 17, udp_len)
        head = struct.pack("!BBHHHBBH", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0) + s + d
        ip = head[:10] + struct.pack("!H", 0xFFFF - csum16(head)) + head[12:]
        ethertype = 0x0800
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    c = 0xFFFF - csum16(pseudo + udp)
    udp = udp[:6] + struct.pack("!H", c or 0xFFFF) + udp[8:]
    return dst_mac + src_mac + struct.pack("!H", ethertype) + ip + udp


def probe_payload(dcid, scid, size=1200):
    """A long header of the reserved version, its CIDs, padded to size."""
    head = bytes([0xC0 | random.getrandbits(6)]) + struct.pack("!I", RESERVED_VERSION)
    head += bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    return head + bytes(size - len(head))


def vn_payload(dcid, scid, versions=(1,)):
    """A Version Negotiation packet (RFC 9000 17.2.1)."""
    return (bytes([0x80 | random.getrandbits(7)]) + struct.pack("!I", 0) + bytes([len(dcid)]) + dcid +
            bytes([len(scid)]) + scid + b"".join(struct.pack("!I", v) for v in versions))


def ip_udp(frame):
    """(src, dst, sport, dport, payload) of an Ethernet/IP/UDP frame, or None."""
    if len(frame) < 14:
        return None
    et = struct.unpack("!H", frame[12:14])[0]
    if et == 0x0800 and len(frame) >= 34 and frame[23] == 17:
        ihl = (frame[14] & 15) * 4
        src, dst = socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34])
        u = 14 + ihl
    elif et == 0x86DD and len(frame) >= 62 and frame[20] == 17:
        src = socket.inet_ntop(socket.AF_INET6, frame[22:38])
        dst = socket.inet_ntop(socket.AF_INET6, frame[38:54])
        u = 54
    else:
        return None
    if len(frame) < u + 8:
        return None
    sport, dport = struct.unpack("!HH", frame[u:u + 4])
    return src, dst, sport, dport, frame[u + 8:]


def norm(addr):
    """An address as inet_ntop writes it."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    return socket.inet_ntop(fam, socket.inet_pton(fam, addr))


def parse_vn(p):
    """(dcid, scid, versions) of a Version Negotiation packet, or None."""
    if len(p) < 7 or not p[0] & 0x80 or p[1:5] != b"\0\0\0\0":
        return None
    dl = p[5]
    if len(p) < 7 + dl:
        return None
    dcid = p[6:6 + dl]
    sl = p[6 + dl]
    scid = p[7 + dl:7 + dl + sl]
    rest = p[7 + dl + sl:]
    return dcid, scid, [struct.unpack("!I", rest[i:i + 4])[0] for i in range(0, len(rest) - 3, 4)]


def cmd_standin(a):
    watch = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    watch.bind((a.watch_iface, 0))
    out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    out.bind((a.out_iface, 0))
    src_mac = open(f"/sys/class/net/{a.out_iface}/address").read().strip()
    t_start = time.monotonic()
    deadline = t_start + a.timeout
    sent = {}  # (the probe's DCID, SCID) -> when it left
    seen = []
    while time.monotonic() < deadline:
        # a probe every --every seconds, as a checker would (a fresh
        # segment loses the first frame or so while its bridge ports settle)
        dcid, scid = os.urandom(8), os.urandom(8)
        frame = udp_frame(mac(src_mac), mac(a.dst_mac), a.src, a.dst, a.sport, a.dport,
                          probe_payload(dcid, scid, a.size))
        sent[(dcid, scid)] = time.monotonic()
        out.send(frame)
        next_probe = min(deadline, time.monotonic() + a.every)
        while True:
            left = next_probe - time.monotonic()
            if left <= 0 or not select.select([watch], [], [], left)[0]:
                break
            q = ip_udp(watch.recv(65535))
            if not q:
                continue
            src, dst, sport, dport, payload = q
            if src != norm(a.dst) or sport != a.dport or dport != a.sport:
                continue
            vn = parse_vn(payload)
            if not vn:
                seen.append(f"a datagram from {src}:{sport} that is no Version Negotiation")
                continue
            probe = (vn[1], vn[0])  # a VN's SCID is the probe's DCID, its DCID the probe's SCID
            if probe not in sent:
                seen.append("a Version Negotiation that echoes no probe's CIDs")
                continue
            us = (time.monotonic() - sent[probe]) * 1e6
            print(f"standin probe {a.src}:{a.sport} -> {a.dst}:{a.dport} via {a.dst_mac}: Version Negotiation "
                  f"in {us:.0f} us to {dst}:{dport}, versions {[hex(v) for v in vn[2]]}, CIDs echoed "
                  f"(probe {list(sent).index(probe) + 1} of {len(sent)})")
            return 0
    print(f"standin probe {a.src}:{a.sport} -> {a.dst}:{a.dport} via {a.dst_mac}: no Version Negotiation "
          f"to {len(sent)} probes in {a.timeout} s{'; ' + '; '.join(seen) if seen else ''}")
    return 1


def cmd_forge(a):
    fam = socket.AF_INET6 if ":" in a.dst else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if a.src:
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, 75, 1)  # IPV6_TRANSPARENT
        else:
            s.setsockopt(socket.IPPROTO_IP, 19, 1)  # IP_TRANSPARENT
        s.bind((a.src, a.sport))
    sent = 0
    gap = a.over / a.count if a.count else 0
    for _ in range(a.count):
        dcid = bytes.fromhex(a.dcid_prefix) + os.urandom(8 - len(a.dcid_prefix) // 2)
        if s.sendto(vn_payload(dcid, os.urandom(8)), (a.dst, a.dport)) > 0:
            sent += 1
        time.sleep(gap)
    print(f"sent {sent}")
    return 0 if sent == a.count else 1


def cmd_initials(a):
    fam = socket.AF_INET6 if ":" in a.dst else socket.AF_INET
    head_len = 1 + 4 + 1 + 8 + 1 + 8 + 1
    sent = 0
    t0 = time.monotonic()
    while True:
        due = t0 + sent / a.rate
        now = time.monotonic()
        if due - t0 >= a.seconds:
            break
        if due > now:
            time.sleep(due - now)
        # a random SCID as well, as every client has: quicsteer's setup
        # table keys a first Initial by 4-tuple and SCID, and the kernel
        # reuses source ports, so without one a later attempt from a reused
        # port would find an earlier one's entry instead of the hash
        dcid, scid = os.urandom(8), os.urandom(8)
        length = 1200 - head_len - 2
        p = (bytes([0xC3]) + struct.pack("!I", 1) + bytes([8]) + dcid + bytes([8]) + scid + b"\0" +
             struct.pack("!H", 0x4000 | length) + struct.pack("!I", 0) + bytes(length - 4))
        with socket.socket(fam, socket.SOCK_DGRAM) as s:
            s.sendto(p, (a.dst, a.dport))
        sent += 1
    print(f"sent {sent}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("standin")
    s.add_argument("--out-iface", required=True)
    s.add_argument("--dst-mac", required=True)
    s.add_argument("--src", required=True)
    s.add_argument("--dst", required=True)
    s.add_argument("--dport", type=int, default=443)
    s.add_argument("--sport", type=int, default=61000)
    s.add_argument("--watch-iface", required=True)
    s.add_argument("--timeout", type=float, default=1.0)
    s.add_argument("--every", type=float, default=0.2, help="a new probe this often until one is answered")
    s.add_argument("--size", type=int, default=1200, help="UDP payload octets (1200: RFC 9000 14.1)")
    f = sub.add_parser("forge")
    f.add_argument("--dst", required=True)
    f.add_argument("--dport", type=int, default=61000)
    f.add_argument("--src")
    f.add_argument("--sport", type=int, default=443)
    f.add_argument("--count", type=int, required=True)
    f.add_argument("--over", type=float, default=1.0)
    f.add_argument("--dcid-prefix", default="", help="hex: the DCIDs' first octets (the rest random)")
    i = sub.add_parser("initials")
    i.add_argument("--dst", required=True)
    i.add_argument("--dport", type=int, default=443)
    i.add_argument("--rate", type=float, required=True)
    i.add_argument("--seconds", type=float, required=True)
    a = ap.parse_args()
    return globals()["cmd_" + a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
