#!/usr/bin/env python3
"""quicsteer-cid as a user runs it: encode/decode against the QUIC-LB draft's
vectors, classify over a pcap of the steering fixtures (with and without a
profile), and bad input (one line on stderr, non-zero exit, nothing on stdout).

usage: cid_cli_test.py QUICSTEER_CID SOURCE_ROOT QUICGEN

Also: a quicgen capture whose servers mint random CIDs, classified with the
forwarding tables on, keeps every connection on the owner of its first
Initial (what the data path does with the same rules), and with them off
does not.

The capture is written here from tests/steering/packet_fixtures.h, so the C++
tests and this one share one table. The fallback owners are recomputed with
an independent Python SipHash, AES-CBC-MAC (steering/cid_hash.h, through the
cryptography package) and hash ring, as a second appliance with the same key
and owners would.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

TOOL, ROOT, QUICGEN = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def expect_ok(args, stdout):
    rc, out, err = run(*args)
    check(rc == 0 and out == stdout and err == "",
          f"{' '.join(args)}: rc {rc}, stdout {out!r} (want {stdout!r}), stderr {err!r}")


def expect_error(args, rc_want, words):
    rc, out, err = run(*args)
    lines = err.splitlines()
    check(rc == rc_want and out == "" and len(lines) == 1 and words in err,
          f"{' '.join(args)}: rc {rc} (want {rc_want}), stdout {out!r}, stderr {err!r} (want one line with {words!r})")


# --- encode / decode: draft-ietf-quic-load-balancers-21 appendix B ---------
KEY = "8f95f09245765f80256934e50c66207f"
vectors = [  # cr, sid, nonce, cid (the last is printed with config 0, see quic_lb_test.cpp)
    (0, "ed793a", "ee080dbf", "0720b1d07b359d3c"),
    (1, "ed793a51d49b8f5fab65", "ee080dbf48", "2fcc381bc74cb4fbad2823a3d1f8fed2"),
    (2, "ed793a51d49b8f5f", "ee080dbf48c0d1e5", "504dd2d05a7b0de9b2b9907afb5ecf8cc3"),
    (0, "ed793a51d49b8f5fab", "ee080dbf48c0d1e55d", "125779c9cc86beb3a3a4a3ca96fce4bfe0cdbc"),
]
for cr, sid, nonce, cid in vectors:
    shape = ["--cr", str(cr), "--sid-len", str(len(sid) // 2), "--nonce-len", str(len(nonce) // 2),
             "--key", KEY, "--len-self-encode"]
    expect_ok(["encode", *shape, "--server-id", sid, "--nonce", nonce], cid + "\n")
    expect_ok(["decode", *shape, cid], sid + "\n")
    expect_ok(["decode", *shape, cid.upper()], sid + "\n")
plain = ["--cr", "0", "--sid-len", "3", "--nonce-len", "4", "--len-self-encode"]
expect_ok(["encode", *plain, "--server-id", "c4605e", "--nonce", "4504cc4f"], "07c4605e4504cc4f\n")
expect_ok(["decode", *plain, "07c4605e4504cc4f"], "c4605e\n")
expect_ok(["decode", *plain, "27c4605e4504cc4f"], "unroutable\n")  # config 1
expect_ok(["decode", *plain, "07c4605e4504cc"], "unroutable\n")    # too short
no_self = ["--cr", "5", "--sid-len", "2", "--nonce-len", "4", "--key", KEY]
rc, out, _ = run("encode", *no_self, "--first-octet-bits", "17", "--server-id", "abcd", "--nonce", "01020304")
check(rc == 0 and len(out.strip()) == 14 and int(out[:2], 16) == (5 << 5 | 17), f"first octet bits: {out!r}")
expect_ok(["decode", *no_self, out.strip()], "abcd\n")

expect_error(["encode", "--sid-len", "3", "--nonce-len", "4", "--server-id", "aa", "--nonce", "bb"], 2, "--cr")
expect_error(["encode", "--cr", "7", "--sid-len", "3", "--nonce-len", "4"], 2, "--cr")
expect_error(["encode", *plain, "--server-id", "c4605", "--nonce", "4504cc4f"], 2, "odd number")
expect_error(["encode", *plain, "--server-id", "c460", "--nonce", "4504cc4f"], 2, "expected 3 octets")
expect_error(["encode", *plain, "--server-id", "c4605e", "--nonce", "zz04cc4f"], 2, "not hex")
expect_error(["encode", "--cr", "0", "--sid-len", "15", "--nonce-len", "5"], 2, "at most 19")
expect_error(["decode", *plain, "--key", "0011"], 2, "32 hex digits")
expect_error(["decode", *plain], 2, "no CID")
expect_error(["decode", *plain, "07c4", "07c5"], 2, "more than one")
expect_error(["decode", *plain, "07" * 21], 2, "1..20")
expect_error(["decode", *plain, "--bogus", "07c4"], 2, "unknown option")
expect_error(["frobnicate"], 2, "unknown command")
expect_error(["encode", "--cr"], 2, "missing value")
rc, out, err = run("--help")
check(rc == 0 and "classify" in out and err == "", "--help")

# --- classify ---------------------------------------------------------------
header = open(os.path.join(ROOT, "tests/steering/packet_fixtures.h")).read()
body = header[header.index("fixtures = {"):]
fixtures = []
for m in re.finditer(r'\{"(\w+)",\s*\{(.*?)\},\s*"([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)", '
                     r'(true|false), "([^"]*)"\}', body, re.S):
    fields = re.findall(r'\{"(\w+)", "([0-9a-f]*)", "[^"]*"\}', m.group(2))
    fixtures.append(dict(name=m.group(1), fields=dict(fields), hex="".join(h for _, h in fields),
                         outcome=m.group(3), form=m.group(4), type=m.group(5), version=m.group(6),
                         dcid=m.group(7), scid=m.group(8), route=m.group(10)))
check(len(fixtures) >= 30, f"found {len(fixtures)} fixtures in packet_fixtures.h")

tmp = tempfile.mkdtemp(prefix="quicsteer-cid-test-")
pcap = os.path.join(tmp, "fixtures.pcap")
with open(pcap, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, fx in enumerate(fixtures):
        frame = bytes.fromhex(fx["hex"])
        f.write(struct.pack("<IIII", 1700000000 + i, 0, len(frame), len(frame)))
        f.write(frame)


def classify(*args):
    rc, out, err = run("classify", *args)
    check(rc == 0 and err == "", f"classify {args}: rc {rc}, stderr {err!r}")
    lines = out.splitlines()
    check(lines[:1] == ["frame,verdict,form,type,version,dcid,scid,owner,rule,backend"], f"header line {lines[:1]}")
    return [line.split(",") for line in lines[1:]]


def columns(fx):
    quic = fx["outcome"] == "quic"
    return [fx["outcome"], fx["form"] if quic else "-", fx["type"] if quic else "-",
            fx["version"] if quic else "-", fx["dcid"] if quic else "", fx["scid"] if quic else ""]


# Without a profile: no QUIC-LB, so short-header DCIDs are simply 8 octets;
# long headers and everything below QUIC parse as with the fixture profile.
rows = classify("--port", "443", "--port", "4433", pcap)
check(len(rows) == len(fixtures), f"{len(rows)} rows for {len(fixtures)} frames")
for i, (fx, row) in enumerate(zip(fixtures, rows)):
    check(row[0] == str(i + 1) and row[7] == "-", f"no profile, {fx['name']}: frame/owner {row}")
    if fx["form"] != "short":
        check(row[1:7] == columns(fx), f"no profile, {fx['name']}: {row[1:7]} != {columns(fx)}")
by_name = {fx["name"]: (fx, row) for fx, row in zip(fixtures, rows)}
fx, row = by_name["short_quic_lb_plaintext"]
check(row[5] == fx["dcid"][:16], f"default short DCID length 8: {row}")
rows9 = classify("--port", "443", "--cid-len", "9", pcap)
check(rows9[fixtures.index(fx)][5] == fx["dcid"], "--cid-len 9")
fx, _ = by_name["v1_initial_ipv4_options_port_4433"]
check(rows9[fixtures.index(fx)][1] == "not_quic", "--port replaces the default 443")
check(classify(pcap)[fixtures.index(fx)][1] == "not_quic", "default port 443 only")


# A profile equal to fixture_steering_config(): every column must match,
# owners included. Fallback owners come from this script's own hashes and ring.
def key_hex(text):
    return '"' + text + '"'

profile = os.path.join(tmp, "fixture.yaml")
with open(profile, "w") as f:
    f.write(f"""
ports:
  - {{name: wire, device: "net_null0", rx_queues: 1, tx_queues: 0}}
lcores:
  - {{id: 1, rx: ["wire:0"]}}
  - {{id: 2, owner: true}}
  - {{id: 3, owner: true}}
  - {{id: 5, owner: true}}
  - {{id: 7, owner: true}}
action: {{type: sink}}
steering:
  quic_ports: [443, 4433]
  short_dcid_len: 8
  quic_lb:
    - {{config_id: 0, server_id_len: 2, nonce_len: 6, len_self_encode: true}}
    - {{config_id: 1, server_id_len: 4, nonce_len: 12, key: {key_hex("4a6f8d2e1c3b5a7990a1b2c3d4e5f607")}}}
    - {{config_id: 2, server_id_len: 3, nonce_len: 5, len_self_encode: true, key: {key_hex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")}}}
    - {{config_id: 3, server_id_len: 6, nonce_len: 4, key: {key_hex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")}}}
  servers:
    - {{server_id: "0102", owner: 3}}
    - {{server_id: "0a0b", owner: 7}}
    - {{server_id: "11223344", owner: 5}}
    - {{server_id: "abcdef", owner: 2}}
    - {{server_id: "010203040506", owner: 7}}
  fallback: {{key: "000102030405060708090a0b0c0d0e0f", vnodes: 128}}
  # The fixtures are independent frames, several on one 4-tuple: owners
  # frame by frame, as this script computes them.
  forwarding: {{enabled: false}}
""")

MASK = (1 << 64) - 1


def rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK


def siphash13(key, data):
    return siphash(key, data, 1, 3)


def siphash(key, data, c, d):
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd():
        v[0] = (v[0] + v[1]) & MASK; v[1] = rotl(v[1], 13); v[1] ^= v[0]; v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & MASK; v[3] = rotl(v[3], 16); v[3] ^= v[2]
        v[0] = (v[0] + v[3]) & MASK; v[3] = rotl(v[3], 21); v[3] ^= v[0]
        v[2] = (v[2] + v[1]) & MASK; v[1] = rotl(v[1], 17); v[1] ^= v[2]; v[2] = rotl(v[2], 32)

    tail = len(data) % 8
    words = [struct.unpack("<Q", data[i:i + 8])[0] for i in range(0, len(data) - tail, 8)]
    words.append(int.from_bytes(data[len(data) - tail:], "little") | (len(data) & 0xFF) << 56)
    for m in words:
        v[3] ^= m
        for _ in range(c):
            rnd()
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(d):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def dcid_hash(key, dcid):
    """CBC-MAC under AES-128 of the DCID's encoding: octets 0..14 then its
    length in block 0, the rest in zero-padded blocks; the AES key is
    SipHash-2-4 of two labels (NUL-terminated, as the C++ arrays are)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    aes_key = b"".join(struct.pack("<Q", siphash(key, label + b"\0", 2, 4)) for label in (
        b"quicsteer: the AES key of the DCID hash, octets 0-7",
        b"quicsteer: the AES key of the DCID hash, octets 8-15"))
    msg = dcid[:15].ljust(15, b"\0") + bytes([len(dcid)])
    rest = dcid[15:]
    if rest:
        msg += rest.ljust((len(rest) + 15) // 16 * 16, b"\0")
    enc = Cipher(algorithms.AES(aes_key), modes.CBC(bytes(16))).encryptor()
    ct = enc.update(msg) + enc.finalize()
    return struct.unpack("<Q", ct[-16:-8])[0]


FALLBACK_KEY = bytes(range(16))
OWNERS = [2, 3, 5, 7]
ring = sorted((siphash13(FALLBACK_KEY, b"ring" + struct.pack("<IH", lcore, vnode) + b"\0\0"), lcore)
              for lcore in OWNERS for vnode in range(128))


def ring_owner(h):
    for position, lcore in ring:
        if position >= h:
            return lcore
    return ring[0][1]


def tuple_owner(fx):
    fields = fx["fields"]
    ip = bytes.fromhex(fields.get("ipv4") or fields["ipv6"])
    if "ipv4" in fields:
        version, proto, addrs = 4, ip[9], ip[12:20]
    else:
        version, addrs = 6, ip[8:40]
        proto = 17  # the fixtures' IPv6 chains all end in UDP
    ports = bytes.fromhex(fields["udp"])[:4] if "udp" in fields else bytes(4)
    return ring_owner(siphash13(FALLBACK_KEY, bytes([version, proto]) + ports + addrs))


rows = classify("--profile", profile, pcap)
for fx, row in zip(fixtures, rows):
    check(row[1:7] == columns(fx), f"profile, {fx['name']}: {row[1:7]} != {columns(fx)}")
    route = fx["route"]
    if route.startswith("lcore:"):
        want = route[6:]
    elif route == "fallback_dcid":
        want = str(ring_owner(dcid_hash(FALLBACK_KEY, bytes.fromhex(fx["dcid"]))))
    elif route == "fallback_tuple":
        want = str(tuple_owner(fx))
    else:
        want = "-"
    check(row[7] == want, f"profile, {fx['name']}: owner {row[7]}, want {want} ({route})")
    want_rule = "quic_lb" if route.startswith("lcore:") else route if route.startswith("fallback") else "-"
    check(row[8] == want_rule, f"profile, {fx['name']}: rule {row[8]}, want {want_rule}")
rows = classify("--profile", profile, "--port", "443", pcap)
fx, _ = by_name["v1_initial_ipv4_options_port_4433"]
check(rows[fixtures.index(fx)][1] == "not_quic", "--port overrides the profile's ports")

# --- classify with the forwarding tables: servers that mint random CIDs -------
random_pcap = os.path.join(tmp, "random-cids.pcap")
truth_csv = os.path.join(tmp, "random-cids.csv")
subprocess.run([QUICGEN, "--out", random_pcap, "--truth", truth_csv, "--connections", "300", "--seed", "3",
                "--server-cids", "random", "--client-to-server-only", "--migrate", "0.1", "--nat-rebind", "0.2",
                "--vn", "0"], check=True, capture_output=True)
truth = [line.split(",") for line in open(truth_csv).read().splitlines()[1:]]
tables_profile = os.path.join(tmp, "tables.yaml")
with open(tables_profile, "w") as f:
    f.write("""
ports:
  - {name: wire, device: "net_null0", rx_queues: 1, tx_queues: 0}
lcores:
  - {id: 1, rx: ["wire:0"]}
  - {id: 2, owner: true}
  - {id: 3, owner: true}
  - {id: 4, owner: true}
action: {type: sink}
steering:
  short_dcid_len: 17
  fallback: {key: "000102030405060708090a0b0c0d0e0f"}
""")
no_tables_profile = os.path.join(tmp, "no-tables.yaml")
with open(no_tables_profile, "w") as f:
    f.write(open(tables_profile).read() + "  forwarding: {enabled: false}\n")


def owners_by_connection(rows):
    """connection -> (owner of its first frame, owners of its frames before any migration,
    owners of its frames after a NAT rebinding (same CIDs))."""
    first, before, after, seen_cids = {}, {}, {}, {}
    for t, row in zip(truth, rows):
        conn, post, dcid = t[2], t[10] == "1", t[7]
        if conn == "-1":
            continue
        first.setdefault(conn, row[7])
        if not post:
            before.setdefault(conn, set()).add(row[7])
            seen_cids.setdefault(conn, set()).add(dcid)
        elif dcid in seen_cids.get(conn, set()):
            after.setdefault(conn, set()).add(row[7])
    return first, before, after


rows = classify("--profile", tables_profile, random_pcap)
check(len(rows) == len(truth), f"{len(rows)} rows for {len(truth)} frames")
first, before, after = owners_by_connection(rows)
check(len(first) == 300, f"{len(first)} connections")
split = [c for c in first if before[c] != {first[c]} or after.get(c, {first[c]}) != {first[c]}]
check(not split, f"with the tables, connections {split[:5]} left the owner of their first Initial")
check(len(after) > 20, f"{len(after)} NAT-rebound connections followed")
rules = {}
for row in rows:
    rules[row[8]] = rules.get(row[8], 0) + 1
check(rules.get("learned_setup", 0) > 0 and rules.get("learned_cid", 0) > 0, f"rules used: {rules}")
check(rules.get("quic_lb", 0) == 0, f"no CID is QUIC-LB routable here: {rules}")
# After an active migration (new CID, new 4-tuple) nothing can follow: those
# frames, and only those, are hashed as unknown short-header CIDs.
active_after = sum(1 for t in truth if t[10] == "1" and t[2] != "-1" and t[3] == "c2s" and
                   t[7] not in {u[7] for u in truth if u[2] == t[2] and u[10] == "0"})
check(rules.get("fallback_unknown_cid", 0) == active_after,
      f"fallback_unknown_cid {rules.get('fallback_unknown_cid', 0)}, frames after an active migration {active_after}")
rows = classify("--profile", no_tables_profile, random_pcap)
first, before, _ = owners_by_connection(rows)
split = [c for c in first if before[c] != {first[c]}]
check(len(split) > len(first) // 2, f"without the tables {len(split)} of {len(first)} connections split (want most)")
# The same capture replayed with the 4-tuple hash (--fallback-hash, over the
# profile's dcid): without tables, every frame before a migration or
# rebinding (one 4-tuple) reaches one owner, and the rule says which hash.
rows = classify("--profile", no_tables_profile, "--fallback-hash", "tuple", random_pcap)
first, before, _ = owners_by_connection(rows)
split = [c for c in first if before[c] != {first[c]}]
check(not split, f"with the 4-tuple hash, connections {split[:5]} split on one 4-tuple")
check(any(r[8] == "fallback_tuple" for r in rows) and not any(r[8] == "fallback_dcid" for r in rows),
      "--fallback-hash tuple: rule fallback_tuple, never fallback_dcid")

# --- classify errors ----------------------------------------------------------
expect_error(["classify", os.path.join(tmp, "missing.pcap")], 1, "missing.pcap")
text = os.path.join(tmp, "notes.txt")
open(text, "w").write("not a capture\n")
# A capture with a short snaplen (tcpdump -s 64): each record keeps the
# frame's wire length, and classify judges that, not the captured octets.
# Frames whose headers fit read exactly as in the full capture (the payload
# cut by the snaplen is not malformed); frames cut inside the headers they
# need read truncated_capture; stderr says once that the capture was cut.
SNAP = 64
full_rows = classify("--port", "443", "--port", "4433", pcap)
cut = os.path.join(tmp, "snaplen.pcap")
with open(cut, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAP, 1))
    for i, fx in enumerate(fixtures):
        frame = bytes.fromhex(fx["hex"])
        f.write(struct.pack("<IIII", 1700000000 + i, 0, min(len(frame), SNAP), len(frame)))
        f.write(frame[:SNAP])
rc, out, err = run("classify", "--port", "443", "--port", "4433", cut)
check(rc == 0, f"classify of a snaplen-{SNAP} capture: rc {rc}, {err!r}")
cut_rows = [line.split(",") for line in out.splitlines()[1:]]
n_cut = sum(len(bytes.fromhex(fx["hex"])) > SNAP for fx in fixtures)
check(len(err.splitlines()) == 1 and f"{n_cut} of {len(fixtures)} frames were truncated by the capture (snaplen {SNAP})"
      in err, f"one line about the truncated capture: {err!r}")
judged_by_wire = 0
for fx, full, row in zip(fixtures, full_rows, cut_rows):
    if len(bytes.fromhex(fx["hex"])) <= SNAP or row[1] != "truncated_capture":
        check(row == full, f"snaplen {SNAP}, {fx['name']}: {row} != {full}")
        judged_by_wire += len(bytes.fromhex(fx["hex"])) > SNAP
    else:
        check(row[2:] == ["-", "-", "-", "", "", "-", "-", "-"], f"truncated_capture row {row}")
check(judged_by_wire >= 5, f"{judged_by_wire} cut frames judged by their wire length (want several)")
check(any(r[1] == "truncated_capture" for r in cut_rows), "a frame cut inside its headers reads truncated_capture")
check(not any("truncated_payload" in r[1] and "truncated_payload" not in f[1] for r, f in zip(cut_rows, full_rows)),
      "no payload cut by the snaplen reads truncated_payload")

expect_error(["classify", text], 1, "notes.txt")
raw = os.path.join(tmp, "raw.pcap")
with open(raw, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))  # LINKTYPE_RAW
expect_error(["classify", raw], 1, "not Ethernet")
expect_error(["classify", "--profile", text, pcap], 1, "notes.txt")
expect_error(["classify", "--profile", os.path.join(tmp, "nope.yaml"), pcap], 1, "nope.yaml")
expect_error(["classify", "--cid-len", "21", pcap], 2, "--cid-len")
expect_error(["classify", "--port", "0", pcap], 2, "--port")
expect_error(["classify", "--fallback-hash", "five_tuple", pcap], 2, "--fallback-hash")
expect_error(["classify"], 2, "no capture")
expect_error(["classify", pcap, pcap], 2, "more than one")

shutil.rmtree(tmp)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
