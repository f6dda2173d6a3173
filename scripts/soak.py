#!/usr/bin/env python3
"""quicsteer's soak test (issue 29): minutes of traffic while everything that
can happen to a running quicsteer happens at once, then the books must close.

quicsteer runs tests/soak/soak.yaml (a net_memif server, reflect, park with a
park timeout longer than any pause of the run) against a traffic peer on the
memif pair that replays the capture: pktgen-DPDK (the binary in $PKTGEN) with
scripts/pktgen/replay.lua, or without $PKTGEN dpdk-testpmd (net_pcap reading
the capture over and over, io forwarding onto the memif port; quicsteer's
memif port then has 2 RX queues, TestpmdPeer says why). The capture is
quicgen's (client to server) with a forwarding-table flood woven in: one
client (one 4-tuple, one SCID) that sent one Initial and then sends Handshake
and 1-RTT packets with a fresh DCID each, issue 29 item 1.

While the traffic runs:
  - every 100 ms the steering section is rewritten and quicsteer gets SIGHUP:
    two valid variants alternate (the servers' owners swapped), and every
    tenth is invalid (an owner that is not an owner lcore). The soak waits
    for each answer line before the next SIGHUP, so no two merge: each one
    must be answered "applied" (valid) or "refused: ...<the reason>" (invalid);
  - every 100 ms /metrics is scraped and the accounting checked (below);
  - the peer is stopped (SIGKILL) at 40 % of the run and started again;
  - every second a SCHED_FIFO busy loop takes owner lcore 2's CPU for 50 ms
    (the soak pins its thread, rte-worker-2, to that CPU; it runs SCHED_OTHER,
    so it gets no CPU meanwhile); the owner thread's run-queue wait (schedstat) shows it;
  - quicsteer's VmRSS is sampled every second.

The accounting at a scrape. At any instant every packet received is
delivered (processed: through the connection stage; under reflect that is
transmitted or held in the owner's TX stage), dropped for a counted reason,
or on its way:
    rx = processed + drops + in_flight,  0 <= in_flight <= B,
    B = sum of ring capacities + kMaxBurst per RX queue (its parking ticket)
        + 2 kMaxBurst per lcore (the burst it is steering or processing),
and in_flight is 0 once the traffic has stopped and the rings are empty.
A scrape is no instant: the snapshot reads the counters one after another,
the receiver's (lcore 1, listed first) before the owner-only lcore's. So a
scrape k shows rx_k = rx(t1) and processed_k + drops_k >= their values at
t1, and later values can only be larger. What holds at every scrape:
    (a) rx_k - processed_k - drops_k <= B        (nothing received is lost)
    (b) processed_k + drops_k <= rx_{k+1}        (nothing is delivered or
        dropped that was not received; the next scrape's rx was read later;
        a scrape that repeats the snapshot before, which quicsteer publishes
        once per stats period, is not a later reading and is skipped)
and at the end, traffic stopped, the exact equality rx = processed + drops,
in two consecutive scrapes and in the exit statistics.

Asserted: (a), (b) and the end equality; no software drop (park, and no
drop is expected from this traffic); the forwarding table never full and
holding no more entries than the regular connections could teach (the flood
teaches its few); every reload answered as above, with the Prometheus
reload counters agreeing; VmRSS flat after warm-up (slope under
--rss-slope-kib KiB/min: a leak check, not a timing bound); the owner
stalls held the owner (its run-queue wait rose by at least half the stall
time); telemetry still answers at the end; the mbuf leak check at exit.
Prints a summary and writes results/soak.json (or --json).

usage: soak.py --build DIR [--minutes N] [--json FILE]
Needs root (the memif pair, SCHED_FIFO); without root it exits 77 saying so.
The peer is pktgen with $PKTGEN set, else dpdk-testpmd (Debian's dpdk package).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "scripts", "pktgen"))
import memif_pair  # noqa: E402

SKIP = 77
K_MAX_BURST = 64           # dataplane/fastpath/burst.h
RELOAD_PERIOD_S = 0.1
SCRAPE_PERIOD_S = 0.1
STALL_MS = 50
OWNER_STALLED = 2          # lcore id of the owner-only lcore (tests/soak/soak.yaml)
INVALID_OWNER = 9          # no such lcore: the invalid reload variant
ANSWER_PATIENCE_S = 10     # a hang detector for one reload's answer
FLOOD_DCIDS = 20000        # fresh DCIDs the flooding client sends per pass of the capture
CONNECTIONS = 300          # quicgen's regular connections in the capture
TESTPMD_QUEUES = 2         # the testpmd peer's queues, RX and TX, on both its ports

failures = []
_lock = threading.Lock()


def check(cond, what):
    with _lock:
        if not cond:
            failures.append(what)
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    return cond


# ---------------------------------------------------------------- capture

def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic != 0xa1b2c3d4:
        raise SystemExit(f"{path}: not a little-endian microsecond pcap")
    frames, off = [], 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from("<IIII", data, off)
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(fr), len(fr)))
            f.write(fr)


def ip_checksum(header):
    s = sum(struct.unpack("!10H", header))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def udp_frame(payload, sport=40000, dport=443):
    # Documentation addresses: these frames live in a capture and a memif
    # pair, never on a network.
    src, dst = bytes([198, 51, 100, 7]), bytes([192, 0, 2, 1])
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000001" "020000000099") + b"\x08\x00"
    return eth + ip + udp


def fresh_dcid(rng):
    # Codepoint 0b011: no QUIC-LB config, so the forwarding rules route it
    # (short headers: short_dcid_len 8 octets).
    return bytes([0x60 | rng.randrange(32)]) + rng.randbytes(7)


def long_header(first, dcid, scid, body, token=True):
    hdr = bytes([first]) + struct.pack("!I", 1) + bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    if token:
        hdr += b"\x00"
    length = 1 + len(body)  # packet number (1 octet) + payload
    return hdr + struct.pack("!H", 0x4000 | length) + b"\x00" + body


def flood_frames(rng, n):
    """One client's Initial, then n Handshake and n 1-RTT packets with a
    fresh DCID each, from the same 4-tuple and SCID (issue 29 item 1)."""
    scid = bytes.fromhex("5c1d5c1d5c1d5c1d")
    initial = long_header(0xc0, fresh_dcid(rng), scid, bytes(1200 - 26 - 8 - 8))
    frames = [udp_frame(initial)]
    for _ in range(n):
        frames.append(udp_frame(long_header(0xe0, fresh_dcid(rng), scid, bytes(40), token=False)))
        frames.append(udp_frame(b"\x40" + fresh_dcid(rng) + bytes(40)))
    return frames


def make_capture(build, profile, out):
    regular_path = out + ".regular.pcap"
    subprocess.run([os.path.join(build, "quicgen"), "--profile", profile, "--client-to-server-only",
                    "--malformed", "0", "--connections", str(CONNECTIONS), "--out", regular_path],
                   check=True, stdout=subprocess.DEVNULL)
    regular = read_pcap(regular_path)
    flood = flood_frames(random.Random(29), FLOOD_DCIDS)
    # The flood's Initial first, then the rest woven in evenly.
    merged, step = [flood[0]], len(flood[1:]) / max(1, len(regular))
    rest, j = flood[:0:-1], 0.0  # reversed: pop() takes the next
    for fr in regular:
        merged.append(fr)
        j += step
        while rest and j >= 1:
            merged.append(rest.pop())
            j -= 1
    merged.extend(reversed(rest))
    write_pcap(out, merged)
    return len(regular), len(flood)


# ---------------------------------------------------------------- quicsteer

def is_reload_answer(line):
    """quicsteer's answer to a reload (applied or refused), not the line
    saying that one has started reading its file."""
    return line.startswith("quicsteer: reload (") and " reading " not in line.split(")", 1)[1][:9]


class Output:
    """quicsteer's stdout, read as it comes; counts reload answers."""

    def __init__(self, stream, log_path):
        self.lines = []
        self.cond = threading.Condition()
        self.log = open(log_path, "w")
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.log.write(line)
            self.log.flush()
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def text(self):
        with self.cond:
            return "".join(self.lines)

    def reload_answers(self):
        with self.cond:
            return [ln for ln in self.lines if is_reload_answer(ln)]

    def wait_answers(self, n, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                answers = [ln for ln in self.lines if is_reload_answer(ln)]
                if len(answers) >= n or time.monotonic() > deadline:
                    return answers
                self.cond.wait(max(0.0, deadline - time.monotonic()))


def steering_variant(base, kind):
    """The profile with the servers' owners for a variant: 'a' (0001 -> 1,
    0002 -> 2), 'b' (swapped), 'bad' (0002 -> an lcore that does not exist)."""
    owners = {"a": (1, 2), "b": (2, 1), "bad": (1, INVALID_OWNER)}[kind]
    text = base.replace('- {server_id: "0001", owner: 1}', f'- {{server_id: "0001", owner: {owners[0]}}}')
    text = text.replace('- {server_id: "0002", owner: 2}', f'- {{server_id: "0002", owner: {owners[1]}}}')
    return text


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def parse_metrics(body):
    """{name: [(labels dict, value)]}"""
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return out


def total(metrics, name, **match):
    return sum(v for labels, v in metrics.get(name, []) if all(labels.get(k) == x for k, x in match.items()))


def telemetry_query(prefix, command):
    """One command on DPDK's telemetry socket (v2); its JSON answer."""
    path = f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(10)
        s.connect(path)
        json.loads(s.recv(16384).decode())  # the greeting
        s.send(command.encode())
        return json.loads(s.recv(1 << 20).decode())


def find_thread(pid, name):
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    return int(tid)
        except FileNotFoundError:
            pass
    return None


def rss_kib(pid):
    """(VmRSS, RssAnon, RssShmem) in KiB."""
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    return tuple(int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M).group(1)) for k in ("VmRSS", "RssAnon", "RssShmem"))


# The owner stall: a SCHED_FIFO busy loop on the owner's CPU for STALL_MS
# once a second. Around each it reads the owner thread's schedstat and
# prints the CPU time the owner got meanwhile (and its run-queue wait, which
# the kernel only adds up once the thread runs again).
def descendants(pid):
    """The processes below pid, children first."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []
    return children + [d for c in children for d in descendants(c)]


STALLER = r"""
import os, sys, time
cpu, stall_s, stat = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def sched():
    with open(stat) as f:
        run, wait, _ = f.read().split()
    return int(run), int(wait)
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
print("ready", flush=True)
while True:
    time.sleep(1.0 - stall_s)
    run0, wait0 = sched()
    end = time.monotonic() + stall_s
    while time.monotonic() < end:
        pass
    run1, wait1 = sched()
    print("stall", run1 - run0, wait1 - wait0, flush=True)
"""


# ---------------------------------------------------------------- peers

class PktgenPeer:
    """pktgen-DPDK as the memif client, replaying the capture with replay.lua."""
    name = "pktgen"

    def __init__(self, pktgen, work, capture, sock, rate):
        self.pktgen, self.work, self.capture, self.sock, self.rate = pktgen, work, capture, sock, rate
        self.proc, self.log = None, None

    def start(self, generation, duration_s):
        self.log = os.path.join(self.work, f"peer{generation}.pktgen.log")
        cmd = (f"{self.pktgen} --lcores '{memif_pair.PKTGEN_LCORES}' --no-huge -m 2048 --no-pci "
               f"--file-prefix qs-soak-pktgen-{os.getpid()}-{generation} --vdev net_memif0,role=client,socket={self.sock},id=0 "
               f"-- -P -m '{memif_pair.PKTGEN_QUEUE_MAP}' -s 0:{self.capture} "
               f"-f {os.path.join(memif_pair.SCRIPTS, 'replay.lua')}")
        env = dict(os.environ, QS_QUIT="1", QS_RATE=str(self.rate), QS_DURATION=str(max(1, int(duration_s))))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(["script", "-qfec", cmd, "/dev/null"], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def kill(self):
        # pktgen runs under script(1), in a session of its own: kill it
        # first (script's child), then script.
        for child in descendants(self.proc.pid):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        memif_pair._stop(self.proc, signal.SIGKILL, 5)

    def finish(self, timeout):
        """Waits for replay.lua to end (it stops sending, waits until what
        quicsteer held has come back, prints its totals and quits pktgen)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return f"pktgen did not finish within {timeout:.0f} s (see {self.log})"
        text = memif_pair.read(self.log)
        errors = re.findall(r"^error: .*$", text, re.M)
        if errors:
            return "replay.lua: " + "; ".join(errors)
        try:
            sent, received = memif_pair.replay_totals(text)
        except memif_pair.RunError as e:
            return str(e)
        return (sent, received)


class TestpmdPeer:
    """dpdk-testpmd (Debian's dpdk package) as the memif client: net_pcap
    replays the capture on each of its 2 RX queues, over and over
    (infinite_rx), and io forwarding moves it onto the memif port's 2 TX
    queues; what quicsteer reflects comes back on the memif port's 2 RX queues
    (one per owner lcore's TX queue) and goes to net_pcap's TX, which drops
    it (no tx_pcap). testpmd's io forwarding pairs RX queue i with TX queue i
    of the other port and uses min(rxq, txq) queues, so both counts are 2 on
    both ports, and quicsteer's memif port has 2 RX queues in this path
    (TESTPMD_QUEUES). No rate: testpmd sends as fast as the memif ring takes
    it and drops what it does not take, in testpmd, where quicsteer's
    counters do not see it. Interactive, so that at the end it can stop
    sending and still read what quicsteer sends back."""
    name = "testpmd"

    def __init__(self, testpmd, work, capture, sock):
        self.testpmd, self.work, self.capture, self.sock = testpmd, work, capture, sock
        self.proc, self.log, self.prefix = None, None, None

    def start(self, generation, duration_s):
        self.log = os.path.join(self.work, f"peer{generation}.testpmd.log")
        self.prefix = f"qs-soak-testpmd-{os.getpid()}-{generation}"
        cap = self.capture
        # Line-buffered (stdbuf): finish() reads the totals 'stop' prints.
        cmd = ["stdbuf", "-oL", self.testpmd, "--lcores", "0@0,1@1", "--no-huge", "-m", "1536", "--no-pci",
               "--file-prefix", self.prefix, "--log-level", "*:notice",
               "--vdev", f"net_memif0,role=client,socket={self.sock},id=0",
               "--vdev", f"net_pcap0,rx_pcap={cap},rx_pcap={cap},infinite_rx=1",
               "--", "-i", f"--rxq={TESTPMD_QUEUES}", f"--txq={TESTPMD_QUEUES}", "--nb-cores=1",
               "--forward-mode=io", "--total-num-mbufs=262144"]
        self.out = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.command("start")

    def command(self, line):
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def kill(self):
        memif_pair._stop(self.proc, signal.SIGKILL, 5)
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)

    def finish(self, timeout):
        """Stops sending: io forwarding stops (printing its totals) and
        rxonly starts, so what quicsteer still holds or reflects is read. The
        memif port's totals of the io forwarding: (sent to quicsteer, dropped
        by testpmd on a full memif ring, received back)."""
        if self.proc.poll() is not None or not self.command("stop"):
            return f"testpmd had exited (see {self.log})"
        deadline = time.monotonic() + timeout
        pattern = re.compile(r"Forward statistics for port 0 +-+\s+RX-packets: (\d+) +RX-dropped: \d+ +"
                             r"RX-total: \d+\s+TX-packets: (\d+) +TX-dropped: (\d+)")
        while True:
            m = pattern.search(memif_pair.read(self.log))
            if m or time.monotonic() > deadline or self.proc.poll() is not None:
                break
            time.sleep(0.2)
        if not m:
            return f"testpmd did not stop its forwarding within {timeout:.0f} s (see {self.log})"
        if not (self.command("set fwd rxonly") and self.command("start")):
            return f"testpmd had exited (see {self.log})"
        return (int(m.group(2)), int(m.group(3)), int(m.group(1)))

    def quit(self):
        """After quicsteer drained: stop and quit."""
        if self.command("stop") and self.command("quit"):
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.kill()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)


# ---------------------------------------------------------------- the run

class Soak:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.stop_events = threading.Event()
        self.samples = []        # (t, rx, processed, drops, in_flight, bound)
        self.scrape_errors = 0
        self.ab_violations = []
        self.max_entries = 0
        self.sent = {"a": 0, "b": 0, "bad": 0}
        self.answers = {"applied": 0, "refused": 0}
        self.reload_failures = []
        self.reload_latency = []
        self.rss = []            # (t, VmRSS, RssAnon, RssShmem KiB)
        self.stalls = []         # (owner's CPU time, its run-queue wait) during each stall, ns
        self.last_metrics = None
        self.prev = None         # (processed + drops) of the previous scrape
        self.warm_from = 0.0
        self.drops_seen = False

    # -- threads
    def scraper(self):
        url = f"http://127.0.0.1:{self.port}/metrics"
        while not self.stop_events.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = r.read().decode()
            except OSError as e:
                self.scrape_errors += 1
                if self.scrape_errors <= 3:
                    print(f"scrape failed: {e}", flush=True)
                time.sleep(SCRAPE_PERIOD_S)
                continue
            self.account(parse_metrics(body), t0)
            time.sleep(max(0.0, SCRAPE_PERIOD_S - (time.monotonic() - t0)))

    def account(self, m, t):
        rx = total(m, "quicsteer_rx_packets_total")
        processed = total(m, "quicsteer_owner_processed_packets_total")
        drops = total(m, "quicsteer_drops_total")
        bound = (total(m, "quicsteer_ring_capacity") + K_MAX_BURST * len(m.get("quicsteer_rx_packets_total", []))
                 + 2 * K_MAX_BURST * len(m.get("quicsteer_lcore_busy_cycles_total", [])))
        in_flight = rx - processed - drops
        if drops and not self.drops_seen:
            self.drops_seen = True
            print(f"drops first seen at {t - self.t0:.1f} s: {drops:.0f}", flush=True)
        entries = total(m, "quicsteer_forwarding_entries", table="established")
        self.max_entries = max(self.max_entries, entries)
        if in_flight > bound:
            self.ab_violations.append(f"(a) at {t - self.t0:.1f} s: rx {rx:.0f} - processed {processed:.0f} - "
                                      f"drops {drops:.0f} = {in_flight:.0f} > bound {bound:.0f}")
        # (b) needs the next scrape to be a later reading; quicsteer serves
        # the snapshot its control loop published last (every stats period,
        # 1 s by default), so most scrapes repeat the one before. A repeat
        # (every figure unchanged) is skipped: within one snapshot processed
        # is read after rx, and may exceed it by what arrived in between.
        repeat = self.prev is not None and self.prev[0] == rx and self.prev[1] == processed + drops
        if self.prev is not None and not repeat and self.prev[1] > rx:
            self.ab_violations.append(f"(b) at {t - self.t0:.1f} s: processed + drops {self.prev[1]:.0f} of the "
                                      f"scrape before > rx {rx:.0f}")
        self.prev = (rx, processed + drops)
        self.samples.append((t - self.t0, rx, processed, drops, in_flight, bound))
        self.last_metrics = m

    def reloader(self):
        n = 0
        while not self.stop_events.is_set():
            t0 = time.monotonic()
            n += 1
            kind = "bad" if n % 10 == 0 else ("a" if n % 2 else "b")
            write_atomically(self.profile, steering_variant(self.base_profile, kind))
            before = len(self.out.reload_answers())
            self.qs.send_signal(signal.SIGHUP)
            self.sent[kind] += 1
            answers = self.out.wait_answers(before + 1, ANSWER_PATIENCE_S)
            self.reload_latency.append(time.monotonic() - t0)
            if len(answers) <= before:
                self.reload_failures.append(f"SIGHUP {n} ({kind}) unanswered after {ANSWER_PATIENCE_S} s")
                return
            if len(answers) > before + 1:
                self.reload_failures.append(f"SIGHUP {n} drew {len(answers) - before} answers")
            line = answers[before].strip()
            if " applied: " in line:
                self.answers["applied"] += 1
            elif " refused: " in line:
                self.answers["refused"] += 1
            if kind == "bad":
                # The reason: the owner named, and why it cannot be one.
                if not (" refused: " in line and str(INVALID_OWNER) in line.split(" refused: ", 1)[1]
                        and "owner" in line.split(" refused: ", 1)[1]):
                    self.reload_failures.append(f"invalid variant not refused with its reason: {line}")
            elif " applied: " not in line:
                self.reload_failures.append(f"valid variant {kind} not applied: {line}")
            time.sleep(max(0.0, RELOAD_PERIOD_S - (time.monotonic() - t0)))

    def rss_sampler(self):
        while not self.stop_events.is_set():
            try:
                self.rss.append((time.monotonic() - self.t0,) + rss_kib(self.qs.pid))
            except (FileNotFoundError, AttributeError):
                return
            self.stop_events.wait(1.0)

    # -- the whole run
    def run(self):
        a = self.args
        sock = f"qs-soak-{os.getpid()}.sock"
        prefix = f"qs-soak-{os.getpid()}"
        with open(os.path.join(SOURCE, "tests", "soak", "soak.yaml")) as f:
            base = f.read()
        base = base.replace("socket=quicsteer-soak.sock", f"socket={sock}")
        base = base.replace('"--file-prefix", "quicsteer-soak"', f'"--file-prefix", "{prefix}"')
        if not a.pktgen:
            # testpmd's memif port has as many TX queues as RX queues
            # (TestpmdPeer): quicsteer's port takes them all, on lcore 1.
            base = base.replace("    rx_queues: 1 ", f"    rx_queues: {TESTPMD_QUEUES} ")
            base = base.replace('{id: 1, rx: ["memif:0"], owner: true}', "{id: 1, rx: [%s], owner: true}"
                                % ", ".join(f'"memif:{q}"' for q in range(TESTPMD_QUEUES)))
        if (sock not in base or prefix not in base or steering_variant(base, "b") == base
                or (not a.pktgen and f'"memif:{TESTPMD_QUEUES - 1}"' not in base)):
            check(False, "tests/soak/soak.yaml no longer has the lines the soak adapts")
            return
        self.base_profile = base
        self.profile = os.path.join(self.work, "soak.yaml")
        write_atomically(self.profile, steering_variant(base, "a"))
        capture = os.path.join(self.work, "soak.pcap")
        n_regular, n_flood = make_capture(a.build, self.profile, capture)
        print(f"capture: {n_regular} quicgen frames ({CONNECTIONS} connections, client to server) + "
              f"{n_flood} flood frames (one client, {FLOOD_DCIDS} fresh DCIDs in long and in short headers)")

        if a.pktgen:
            peer = PktgenPeer(a.pktgen, self.work, capture, sock, a.rate)
        else:
            peer = TestpmdPeer(a.testpmd, self.work, capture, sock)
        stats_json = os.path.join(self.work, "stats.json")
        self.qs = subprocess.Popen([os.path.join(a.build, "quicsteer"), "--", "--profile", self.profile,
                                    "--stats-json", stats_json],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        self.out = Output(self.qs.stdout, os.path.join(self.work, "quicsteer.log"))
        staller = None
        result = {}
        try:
            self.t0 = time.monotonic()
            deadline = self.t0 + 60
            port = None
            while port is None and time.monotonic() < deadline and self.qs.poll() is None:
                m = re.search(r"^prometheus: http://\S+/metrics \(port (\d+)\)", self.out.text(), re.M)
                port = int(m.group(1)) if m else None
                time.sleep(0.1)
            if not check(port is not None, "quicsteer started, serving /metrics"):
                print(self.out.text()[-3000:])
                return
            self.port = port
            owner_tid = None
            while owner_tid is None and time.monotonic() < deadline:
                owner_tid = find_thread(self.qs.pid, f"rte-worker-{OWNER_STALLED}")
                time.sleep(0.1)
            if not check(owner_tid is not None, f"owner lcore {OWNER_STALLED} is thread {owner_tid}"):
                return
            # Pinned to one CPU, so that the stall on that CPU holds it.
            owner_cpu = max(os.sched_getaffinity(owner_tid))
            os.sched_setaffinity(owner_tid, {owner_cpu})

            run_s = a.minutes * 60
            restart_at = 0.4 * run_s
            self.warm_from = restart_at + min(15.0, 0.2 * run_s)
            peer.start(1, run_s + 60)  # killed at restart_at
            print(f"peer: {peer.name}, generation 1 (log {peer.log})", flush=True)
            threads = [threading.Thread(target=f, daemon=True) for f in (self.scraper, self.reloader, self.rss_sampler)]
            for t in threads:
                t.start()
            staller = subprocess.Popen([sys.executable, "-c", STALLER, str(owner_cpu), str(STALL_MS / 1000),
                                        f"/proc/{self.qs.pid}/task/{owner_tid}/schedstat"],
                                       stdout=subprocess.PIPE, text=True, start_new_session=True)
            check(staller.stdout.readline().strip() == "ready", "the staller runs SCHED_FIFO on the owner's CPU")
            stall_lines = []
            threading.Thread(target=lambda: [stall_lines.append(ln) for ln in staller.stdout], daemon=True).start()

            while time.monotonic() < self.t0 + restart_at and self.qs.poll() is None:
                time.sleep(0.2)
            peer.kill()
            print(f"peer: stopped (SIGKILL) at {time.monotonic() - self.t0:.1f} s; starting generation 2", flush=True)
            rx_before = total(self.last_metrics or {}, "quicsteer_rx_packets_total")
            peer.start(2, self.t0 + run_s - time.monotonic())
            end = self.t0 + run_s
            while time.monotonic() < end and self.qs.poll() is None:
                time.sleep(0.2)
            rx_after = total(self.last_metrics or {}, "quicsteer_rx_packets_total")
            check(rx_after > rx_before, f"traffic resumed after the peer's restart ({rx_after - rx_before:.0f} "
                                        f"packets received since)")
            # Traffic ends: stalls and reloads stop with it, then the books close.
            staller.kill()
            staller.wait()
            self.stalls = [tuple(int(x) for x in ln.split()[1:]) for ln in stall_lines if ln.startswith("stall ")]
            outcome = peer.finish(120)
            if isinstance(outcome, str):
                check(False, outcome)
            elif isinstance(peer, TestpmdPeer):
                result["testpmd_sent"], result["testpmd_dropped"], result["testpmd_received"] = outcome
            else:
                result["pktgen_sent"], result["pktgen_received"] = outcome
            self.stop_events.set()
            for t in threads:
                t.join(30)
            check(self.qs.poll() is None, "quicsteer ran throughout")
            drained = self.wait_drained()
            if isinstance(peer, TestpmdPeer):
                peer.quit()
            result.update(self.final_checks(drained, prefix, stats_json))
        finally:
            self.stop_events.set()
            if staller is not None and staller.poll() is None:
                staller.kill()
                staller.wait()
            if peer.proc is not None and peer.proc.poll() is None:
                peer.kill()
            if self.qs.poll() is None:
                self.qs.send_signal(signal.SIGINT)
                try:
                    self.qs.wait(60)
                except subprocess.TimeoutExpired:
                    self.qs.kill()
                    self.qs.wait()
        # quicsteer's DPDK runtime directory (the pids make every run's prefix new).
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        result.update(self.after_exit(stats_json))
        return result

    def wait_drained(self):
        """The end equality in two consecutive scrapes, within 30 s."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        same, deadline, last = 0, time.monotonic() + 30, None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    m = parse_metrics(r.read().decode())
            except OSError:
                time.sleep(SCRAPE_PERIOD_S)
                continue
            rx = total(m, "quicsteer_rx_packets_total")
            done = total(m, "quicsteer_owner_processed_packets_total") + total(m, "quicsteer_drops_total")
            last = (rx, done, m)
            same = same + 1 if rx == done else 0
            if same >= 2:
                break
            time.sleep(SCRAPE_PERIOD_S)
        if last is None:
            check(False, "no scrape answered after the traffic")
            return None
        self.last_metrics = last[2]
        check(same >= 2, f"traffic stopped: rx {last[0]:.0f} = processed + drops {last[1]:.0f} (two scrapes)")
        return last

    def final_checks(self, drained, prefix, stats_json):
        m = self.last_metrics
        r = {}
        n = len(self.samples)
        r["scrapes"] = n
        r["scrape_errors"] = self.scrape_errors
        r["max_in_flight"] = max((s[4] for s in self.samples), default=0)
        r["min_in_flight"] = min((s[4] for s in self.samples), default=0)
        r["in_flight_bound"] = self.samples[-1][5] if self.samples else 0
        expected_scrapes = self.args.minutes * 60 / SCRAPE_PERIOD_S
        check(n >= expected_scrapes / 4, f"{n} scrapes (one per {SCRAPE_PERIOD_S * 1000:.0f} ms asked; "
                                        f"{self.scrape_errors} failed)")
        check(self.scrape_errors == 0, "every scrape answered")
        check(not self.ab_violations, f"at every scrape (a) rx - processed - drops <= {r['in_flight_bound']:.0f} and "
                                      f"(b) processed + drops <= the next scrape's rx; in flight "
                                      f"{r['min_in_flight']:.0f}..{r['max_in_flight']:.0f}"
              + ("" if not self.ab_violations else ": " + "; ".join(self.ab_violations[:3])
                 + f" ({len(self.ab_violations)} in all)"))
        drops = {labels["reason"]: 0 for labels, _ in m.get("quicsteer_drops_total", [])}
        for labels, v in m.get("quicsteer_drops_total", []):
            drops[labels["reason"]] += v
        r["drops"] = {k: int(v) for k, v in drops.items() if v}
        check(sum(drops.values()) == 0, f"no software drop (park): {r['drops'] or 'none'}")
        r["rx"] = int(total(m, "quicsteer_rx_packets_total"))
        r["processed"] = int(total(m, "quicsteer_owner_processed_packets_total"))
        r["tx"] = int(total(m, "quicsteer_owner_tx_packets_total"))
        r["parks"] = int(total(m, "quicsteer_parks_total"))
        r["tx_holds"] = int(total(m, "quicsteer_tx_holds_total"))
        check(r["rx"] > 0 and r["tx"] == r["processed"], f"received {r['rx']}, processed {r['processed']}, "
                                                          f"transmitted {r['tx']} (reflect: all of it)")
        r["forwarding_entries_max"] = int(self.max_entries)
        r["table_full"] = int(total(m, "quicsteer_forwarding_table_full_total"))
        r["learned"] = int(total(m, "quicsteer_forwarding_learned_total"))
        # The regular connections teach at most a few entries each (their
        # DCIDs are QUIC-LB's, so mostly none); the flood's 2 x FLOOD_DCIDS
        # fresh DCIDs, unbounded, would teach one each.
        check(self.max_entries <= 4 * CONNECTIONS and r["table_full"] == 0,
              f"forwarding flood: established table at most {r['forwarding_entries_max']} entries "
              f"(bound {4 * CONNECTIONS}; the flood sent {2 * FLOOD_DCIDS} fresh DCIDs a pass), "
              f"{r['learned']} learned, never full")
        sent = sum(self.sent.values())
        r["reloads"] = {"sighup": sent, "valid": self.sent["a"] + self.sent["b"], "invalid": self.sent["bad"],
                        "applied": self.answers["applied"], "refused": self.answers["refused"],
                        "latency_ms_max": round(1000 * max(self.reload_latency, default=0), 1),
                        "latency_ms_mean": round(1000 * sum(self.reload_latency) / max(1, len(self.reload_latency)), 1)}
        prom_applied = total(m, "quicsteer_steering_reloads_total", result="applied")
        prom_refused = total(m, "quicsteer_steering_reloads_total", result="refused")
        check(sent >= self.args.minutes * 60 / 1.0 and not self.reload_failures
              and self.answers["applied"] == self.sent["a"] + self.sent["b"]
              and self.answers["refused"] == self.sent["bad"]
              and (prom_applied, prom_refused) == (self.answers["applied"], self.answers["refused"]),
              f"{sent} SIGHUPs, each answered once: {self.answers['applied']} applied (of "
              f"{self.sent['a'] + self.sent['b']} valid), {self.answers['refused']} refused with the reason "
              f"(of {self.sent['bad']} invalid); Prometheus {prom_applied:.0f} applied, {prom_refused:.0f} refused"
              + ("" if not self.reload_failures else ": " + "; ".join(self.reload_failures[:3])))
        # VmRSS after warm-up, which starts again when the peer restarts
        # (quicsteer maps the new peer's memif regions): a least-squares slope.
        warm = [(t, k) for t, k, _, _ in self.rss if t >= self.warm_from]
        slope = 0.0
        if len(warm) >= 3:
            mt = sum(t for t, _ in warm) / len(warm)
            mk = sum(k for _, k in warm) / len(warm)
            den = sum((t - mt) ** 2 for t, _ in warm)
            slope = 60 * sum((t - mt) * (k - mk) for t, k in warm) / den if den else 0.0
        r["rss_kib"] = {"first": self.rss[0][1:] if self.rss else None,
                        "warm": warm[0][1] if warm else None, "last": self.rss[-1][1:] if self.rss else None,
                        "fields": ["VmRSS", "RssAnon", "RssShmem"]}
        r["rss_slope_kib_per_min"] = round(slope, 1)
        check(len(warm) >= 3 and slope <= self.args.rss_slope_kib,
              f"VmRSS from {self.warm_from:.0f} s (warm): {warm[0][1] if warm else '-'} -> "
              f"{warm[-1][1] if warm else '-'} KiB, slope {slope:.1f} KiB/min (bound {self.args.rss_slope_kib}; "
              f"{len(warm)} samples)")
        # Held: during a stall the owner got (almost) no CPU. "Almost": the
        # staller reads schedstat a moment before it spins and after.
        ran = sorted(run for run, _ in self.stalls)
        held = sum(1 for run in ran if run < 0.1 * STALL_MS * 1e6)
        r["owner_stalls"] = len(self.stalls)
        r["owner_stalls_held"] = held
        r["owner_cpu_ms_in_stall_median"] = round(ran[len(ran) // 2] / 1e6, 2) if ran else None
        check(len(self.stalls) >= self.args.minutes * 60 / 2 and held >= 0.9 * len(self.stalls),
              f"{len(self.stalls)} stalls of {STALL_MS} ms; in {held} of them owner lcore {OWNER_STALLED} ran under "
              f"{0.1 * STALL_MS:.0f} ms (median {r['owner_cpu_ms_in_stall_median']} ms); "
              f"{r['parks']} parks, {r['tx_holds']} TX holds")
        try:
            answer = telemetry_query(prefix, "/quicsteer/steering")
            gen = answer["/quicsteer/steering"]["generation"] if "generation" in answer.get(
                "/quicsteer/steering", {}) else answer
            ok = "/quicsteer/steering" in answer
            r["telemetry_steering_generation"] = gen
        except (OSError, ValueError, KeyError) as e:
            ok, gen = False, str(e)
        check(ok, f"telemetry answers at the end (/quicsteer/steering: generation {gen})")
        return r

    def after_exit(self, stats_json):
        r = {}
        check(self.qs.returncode == 0, f"quicsteer exited {self.qs.returncode} on SIGINT")
        try:
            with open(stats_json) as f:
                stats = json.load(f)
        except (OSError, ValueError) as e:
            check(False, f"quicsteer's statistics at exit: {e}")
            return r
        t = stats["total"]
        r["exit"] = {"rx": t["rx"], "drops": t["drops_sum"], "mbufs": stats["mbufs"]}
        processed = t["processed"]
        check(t["rx"] == processed + t["drops_sum"],
              f"at exit: rx {t['rx']} = processed {processed} + drops {t['drops_sum']}")
        check(stats["mbufs"]["ok"], f"mbuf leak check at exit: {stats['mbufs']}")
        return r


def summary_lines(r, args, peer_name, elapsed):
    rl = r.get("reloads", {})
    rss = r.get("rss_kib") or {}
    return [
        f"soak: {args.minutes:g} min, peer {peer_name} (restarted once), {elapsed:.0f} s in all",
        f"  traffic: rx {r.get('rx', 0)}, processed {r.get('processed', 0)}, tx {r.get('tx', 0)}, "
        f"drops {r.get('drops') or 0}, parks {r.get('parks', 0)}, TX holds {r.get('tx_holds', 0)}",
        f"  scrapes: {r.get('scrapes', 0)} ({r.get('scrape_errors', 0)} failed); in flight "
        f"{r.get('min_in_flight', 0):.0f}..{r.get('max_in_flight', 0):.0f} of bound {r.get('in_flight_bound', 0):.0f}",
        f"  reloads: {rl.get('sighup', 0)} SIGHUPs, {rl.get('applied', 0)} applied, {rl.get('refused', 0)} refused "
        f"with reason; answer in {rl.get('latency_ms_mean', 0)} ms mean, {rl.get('latency_ms_max', 0)} ms max",
        f"  owner stalls: {r.get('owner_stalls', 0)} x {STALL_MS} ms, the owner held (under {0.1 * STALL_MS:.0f} ms of CPU) "
        f"in {r.get('owner_stalls_held', 0)} (median {r.get('owner_cpu_ms_in_stall_median')} ms)",
        f"  flood: established entries at most {r.get('forwarding_entries_max', 0)}, learned {r.get('learned', 0)}, "
        f"table full {r.get('table_full', 0)}",
        f"  VmRSS: {rss.get('first', ['-'])[0]} KiB at start, {rss.get('warm')} warm, {rss.get('last', ['-'])[0]} at "
        f"the end; slope after warm-up {r.get('rss_slope_kib_per_min', 0)} KiB/min (bound {args.rss_slope_kib})",
        f"  exit: {r.get('exit', {})}",
    ] + ([f"  peer after its restart: testpmd sent {r['testpmd_sent']} to quicsteer (dropped {r['testpmd_dropped']} "
          f"more on a full memif ring), {r['testpmd_received']} came back while it forwarded"]
         if "testpmd_sent" in r else [])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(SOURCE, "build"))
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--json", default=os.path.join(SOURCE, "results", "soak.json"))
    p.add_argument("--rate", type=float, default=20, help="pktgen's rate, %% of memif's link speed (20)")
    p.add_argument("--rss-slope-kib", type=float, default=1024,
                   help="largest VmRSS slope after warm-up, KiB/min (1024: a leak check)")
    args = p.parse_args()
    if args.minutes < 0.5:
        p.error("--minutes: at least 0.5")
    if os.geteuid() != 0:
        print("SKIP: the soak needs root (quicsteer and its peer on net_memif, the SCHED_FIFO owner stall)")
        return SKIP
    args.pktgen = os.environ.get("PKTGEN", "")
    args.testpmd = None
    if args.pktgen:
        if not os.access(args.pktgen, os.X_OK):
            print(f"FAIL: PKTGEN={args.pktgen} is not an executable file")
            return 1
        if subprocess.call(["sh", "-c", "command -v script >/dev/null"]) != 0:
            print("FAIL: script(1) is needed to run pktgen (bsdutils)")
            return 1
    else:
        args.testpmd = shutil.which("dpdk-testpmd")
        if not args.testpmd:
            print("FAIL: neither $PKTGEN nor dpdk-testpmd (Debian's dpdk package, scripts/setup.sh) "
                  "to play the soak's memif peer")
            return 1
    for exe in ("quicsteer", "quicgen"):
        if not os.access(os.path.join(args.build, exe), os.X_OK):
            print(f"FAIL: {os.path.join(args.build, exe)} is not built")
            return 1
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="qs-soak-") as work:
        soak = Soak(args, work)
        try:
            result = soak.run() or {}
        except Exception as e:  # the summary still names what failed
            check(False, f"the soak stopped: {type(e).__name__}: {e}")
            result = {}
        if failures:
            for name in ["quicsteer.log"] + sorted(f for f in os.listdir(work) if f.startswith("peer")):
                path = os.path.join(work, name)
                if os.path.exists(path):
                    print(f"--- the last of {name}:\n" + memif_pair.read(path)[-3000:])
    peer_name = "pktgen" if args.pktgen else "testpmd"
    lines = summary_lines(result, args, peer_name, time.monotonic() - start)
    lines.append(f"  result: {'PASS' if not failures else 'FAIL (' + str(len(failures)) + ' checks)'}")
    print("\n".join(lines))
    result.update({"minutes": args.minutes, "peer": peer_name, "passed": not failures, "failures": failures,
                   "summary": lines})
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"  written to {args.json}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
