#!/usr/bin/env python3
"""Sends N QUIC-looking UDP datagrams (long-header Initials of 1200 octets,
one 8-octet DCID per connection, CONNECTIONS connections round robin) to
ADDRESS:PORT and prints how many the kernel took: one line, "sent N".

Paced in bursts (BURST datagrams, then PAUSE_US microseconds) so that the
sending veth's peer ring (256 frames when the peer runs XDP) never overflows:
every datagram sent reaches the receiving side's XDP program, which the caller
checks with the veth's tx_dropped counter.

usage: quic_sender.py ADDRESS PORT N [--connections C] [--burst B] [--pause-us U] [--seed S]
"""
import argparse
import random
import socket
import struct
import sys
import time


def initial(dcid, pn):
    """A QUIC v1 long-header Initial: no token, a 2-octet Length, a 4-octet
    packet number and a payload that pads the datagram to 1200 octets (what
    RFC 9000 section 14.1 asks of a client's first datagrams)."""
    size = 1200
    head = bytes([0xc3]) + struct.pack("!I", 1) + bytes([len(dcid)]) + dcid + bytes([0]) + bytes([0])
    length = size - len(head) - 2
    return head + struct.pack("!H", 0x4000 | length) + struct.pack("!I", pn) + bytes(length - 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("address")
    ap.add_argument("port", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--burst", type=int, default=32)
    ap.add_argument("--pause-us", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    conns = []
    for _ in range(a.connections):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", 0))
        conns.append((s, rng.randbytes(8)))
    sent = 0
    for i in range(a.count):
        s, dcid = conns[i % len(conns)]
        n = s.sendto(initial(dcid, i), (a.address, a.port))
        if n != 1200:
            print(f"quic_sender: short send {n}", file=sys.stderr)
            return 1
        sent += 1
        if sent % a.burst == 0:
            time.sleep(a.pause_us / 1e6)
    print(f"sent {sent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
