"""What the python tests of quicsteer as a running binary share: the check
list, waiting on a condition while quicsteer runs, its stdout read as it
comes, and the demo-like profile on net_pcap -> net_null."""
import sys
import threading
import time

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


def pcap_profile(eal, pcap, json_path, period_ms, extra=""):
    """Two lcores that receive and own, a capture replayed forever on two RX
    queues (net_pcap's infinite_rx keeps a copy of every frame per queue in
    mbufs), net_null as the TX sink, two QUIC-LB servers."""
    return f"""eal: {eal}
ports:
  - {{name: wire, device: "net_pcap0,rx_pcap={pcap},rx_pcap={pcap},infinite_rx=1", rx_queues: 2, tx_queues: 0}}
  - {{name: sink, device: "net_null0,no-rx=1", rx_queues: 0, tx_queues: 2}}
mempool: {{mbufs: 16383, cache: 64}}
lcores:
  - {{id: 1, rx: ["wire:0"], owner: true}}
  - {{id: 2, rx: ["wire:1"], owner: true}}
steering:
  quic_lb: [{{config_id: 0, server_id_len: 2, nonce_len: 6, key: "3c72551026fbace916b856e563795118"}}]
  servers: [{{server_id: "0001", owner: 1}}, {{server_id: "0002", owner: 2}}]
action: {{type: forward, tx_port: sink}}
polling: {{idle_sleep_us: 50}}
stats: {{period_ms: {period_ms}, json: "{json_path}"}}
{extra}"""
