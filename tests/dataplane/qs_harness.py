"""What the python tests of quicsteer as a running binary share: the check
list, waiting on a condition while quicsteer runs, its stdout read as it
comes, starting and stopping it, its telemetry and Prometheus endpoints, and
the demo-like profile on net_pcap -> net_null."""
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

# A hang detector, not a performance bound: how long a wait may take.
PATIENCE_S = 120
failures = []
# The quicsteer under test, once started (watch()): a wait gives up at once
# when it has exited.
_watched = None


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def watch(proc):
    """Makes proc the process wait_for() watches; returns it."""
    global _watched
    _watched = proc
    return proc


def wait_for(what, predicate):
    """predicate()'s first true value within PATIENCE_S, or None (a failed check)."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if _watched is not None and _watched.poll() is not None:
            check(False, f"quicsteer exited ({_watched.returncode}) while waiting for {what}")
            sys.exit(1)
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    check(False, f"waited {PATIENCE_S} s for {what}")
    return None


class Output:
    """quicsteer's stdout, read as it comes."""

    def __init__(self, stream):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            with self.lock:
                self.lines.append(line)

    def text(self):
        with self.lock:
            return "".join(self.lines)


def start(command, **popen):
    """Starts quicsteer (command: its argv), watched, its stdout and stderr
    read as they come; waits for it to run. (process, Output)."""
    proc = watch(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen))
    out = Output(proc.stdout)
    wait_for("quicsteer to start", lambda: "running until SIGINT/SIGTERM" in out.text())
    return proc, out


def stop(proc, out):
    """SIGINT, then the exit (killed if it does not come within PATIENCE_S)
    and the rest of its output; the seconds from SIGINT to the exit."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    took = time.monotonic() - sent
    out.thread.join(timeout=10)
    return took


def eal(prefix):
    """The EAL arguments of a test's quicsteer: lcores 0-2 on the first two
    CPUs, ordinary memory, its own --file-prefix (so its own telemetry
    socket, which --no-shconf keeps)."""
    return ('["--lcores", "(0-2)@(0,1)", "--no-huge", "-m", "512", "--no-shconf", "--no-pci", '
            f'"--file-prefix", "{prefix}", "--log-level", "*:warning"]')


def telemetry_socket(prefix):
    return f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2"


# Debian's telemetry client (dpdk-dev), None where it is not installed.
TELEMETRY = shutil.which("dpdk-telemetry.py")


def require_telemetry():
    check(TELEMETRY is not None, "dpdk-telemetry.py is installed (Debian's dpdk-dev)")
    if TELEMETRY is None:
        sys.exit(1)


def telemetry(prefix, *commands, quiet=True):
    """dpdk-telemetry.py -f prefix with the commands on stdin, in order: one
    answer per command (a command's answer is keyed by its name, without
    its ",parameters"), or None when it could not answer them all (a failed
    check unless `quiet`: the caller waits for an answer)."""
    r = subprocess.run([sys.executable, TELEMETRY, "-f", prefix], input="\n".join(commands) + "\n",
                       capture_output=True, text=True, timeout=60)
    answers = [json.loads(line) for line in r.stdout.splitlines() if line.strip().startswith("{")]
    if len(answers) != len(commands):
        if not quiet:
            check(False, f"dpdk-telemetry.py answered {len(answers)} of {len(commands)} commands: "
                         f"{r.stdout[-300:]} {r.stderr[-300:]}")
        return None
    return [a[c.split(",")[0]] for a, c in zip(answers, commands)]


def prometheus_port(out):
    """The Prometheus endpoint's port from quicsteer's start-up output
    (prometheus_listen "127.0.0.1:0"), or 0 (a failed check)."""
    m = re.search(r"prometheus: http://127\.0\.0\.1:0/metrics \(port (\d+)\)", out.text())
    check(m is not None, "the start-up output gives the Prometheus port")
    return int(m.group(1)) if m else 0


def scrape(port):
    """GET /metrics, parsed by prometheus_client: ({family name: family},
    Content-Type, body). Debian's python3-prometheus-client: only the tests
    that scrape need it (meson runs them with /usr/bin/python3)."""
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        check(response.status == 200, "GET /metrics: 200")
        ctype = response.headers.get("Content-Type", "")
        body = response.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(body)}
    return families, ctype, body


class Manager:
    """The service manager's end of NOTIFY_SOCKET (a path, or @name for the
    abstract namespace): every datagram, in order."""

    def __init__(self, name):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + name[1:] if name.startswith("@") else name)
        self.sock.settimeout(0.2)
        self.name = name
        self.messages = []
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self):
        while not self.done:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            with self.lock:
                self.messages.append(data.decode())

    def seen(self):
        with self.lock:
            return list(self.messages)

    def wait_for(self, assignment, after=0, timeout=120):
        """Index of the first message from `after` on that carries `assignment`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = self.seen()
            for i in range(after, len(m)):
                if assignment in m[i].split("\n"):
                    return i
            time.sleep(0.05)
        return None

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


def write(path, data):
    """Writes data (str or bytes) to path; returns path."""
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


QUIC_LB_0 = '{config_id: 0, server_id_len: 2, nonce_len: 6, key: "3c72551026fbace916b856e563795118"}'
TWO_SERVERS = """  servers: [{server_id: "0001", owner: 1}, {server_id: "0002", owner: 2}]
action: {type: forward, tx_port: sink}"""


def pcap_profile(eal, pcap, json_path, period_ms, extra="", forever=True,
                 steering=f"steering:\n  quic_lb: [{QUIC_LB_0}]\n{TWO_SERVERS}"):
    """Two lcores that receive and own, a capture replayed on two RX queues,
    forever (net_pcap's infinite_rx keeps a copy of every frame per queue in
    mbufs) or once, net_null as the TX sink; `steering`, from the steering
    section to the action, by default two QUIC-LB servers."""
    return f"""eal: {eal}
ports:
  - {{name: wire, device: "net_pcap0,rx_pcap={pcap},rx_pcap={pcap}{",infinite_rx=1" if forever else ""}", rx_queues: 2, tx_queues: 0}}
  - {{name: sink, device: "net_null0,no-rx=1", rx_queues: 0, tx_queues: 2}}
mempool: {{mbufs: 16383, cache: 64}}
lcores:
  - {{id: 1, rx: ["wire:0"], owner: true}}
  - {{id: 2, rx: ["wire:1"], owner: true}}
{steering}
polling: {{idle_sleep_us: 50}}
stats: {{period_ms: {period_ms}, json: "{json_path}"}}
{extra}"""
