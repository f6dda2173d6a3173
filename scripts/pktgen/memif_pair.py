"""One pktgen-DPDK run against one device under test on a net_memif pair.

pktgen is the memif server (it creates the socket) and runs one of the Lua
scripts in this folder with QS_QUIT=1; once the script has started, the
device under test (quicsteer, or testpmd for a baseline) is started as the
memif client; when pktgen quits, the device under test is stopped. Used by
tests/pktgen and scripts/bench/pktgen.sh. pktgen needs a terminal, so it runs
under script(1).
"""
import os
import re
import signal
import subprocess
import time

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
# pktgen's lcores on a 2-CPU machine: its main lcore (CLI and timers, mostly
# asleep) and its RX+TX lcore share CPU 0; its second RX lcore has CPU 1. Each
# of quicsteer's TX queues is an RX queue that one pktgen lcore polls.
PKTGEN_LCORES = "0@0,1@0,2@1"
PKTGEN_QUEUE_MAP = "[1-2:1].0"  # lcores 1 and 2 receive (2 RX queues), lcore 1 transmits (1 TX queue)


class RunError(Exception):
    pass


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def _stop(proc, sig, grace):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run(pktgen, workdir, name, script, capture, socket, settings, start_dut, stop_dut, timeout=600):
    """Runs pktgen with scripts/pktgen/SCRIPT and QS_* settings against the
    device under test. start_dut(log_path) returns its Popen (started in a
    session of its own); stop_dut(proc) ends it. Returns (pktgen's log text,
    the DUT's log path). Raises RunError, naming the log, on any failure."""
    pg_log = os.path.join(workdir, name + ".pktgen.log")
    dut_log = os.path.join(workdir, name + ".dut.log")
    cmd = (f"{pktgen} --lcores '{PKTGEN_LCORES}' --no-huge -m 2048 --no-pci "
           f"--file-prefix qs-pktgen-{os.getpid()} --vdev net_memif0,role=server,socket={socket},id=0 "
           f"-- -P -m '{PKTGEN_QUEUE_MAP}' -s 0:{capture} -f {os.path.join(SCRIPTS, script)}")
    env = dict(os.environ, QS_QUIT="1", **{k: str(v) for k, v in settings.items()})
    with open(pg_log, "wb") as out:
        pg = subprocess.Popen(["script", "-qfec", cmd, "/dev/null"], stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, env=env, start_new_session=True)
    dut = None
    try:
        give_up = time.monotonic() + 90
        while "Executing" not in read(pg_log):
            if pg.poll() is not None:
                raise RunError(f"pktgen exited ({pg.returncode}) before its script started; see {pg_log}:\n"
                               + read(pg_log)[-2000:])
            if time.monotonic() > give_up:
                raise RunError(f"pktgen did not start its script within 90 s; see {pg_log}")
            time.sleep(0.2)
        dut = start_dut(dut_log)
        give_up = time.monotonic() + timeout
        while pg.poll() is None:
            if dut.poll() is not None:
                raise RunError(f"{name}: the device under test exited ({dut.returncode}) while pktgen ran:\n"
                               + read(dut_log)[-2000:])
            if time.monotonic() > give_up:
                raise RunError(f"{name}: pktgen did not finish within {timeout} s; see {pg_log}")
            time.sleep(0.2)
    finally:
        if dut is not None:
            stop_dut(dut)
        _stop(pg, signal.SIGKILL, 5)
    log = read(pg_log)
    errors = re.findall(r"^error: .*$", log, re.M)
    if errors:
        raise RunError(f"{name}: {script} failed: " + "; ".join(errors))
    return log, dut_log


def quicsteer(quicsteer_bin, profile, stats_json):
    """start_dut/stop_dut for quicsteer with PROFILE, writing STATS_JSON."""
    def start(log):
        return subprocess.Popen([quicsteer_bin, "--", "--profile", profile, "--stats-json", stats_json],
                                stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def stop(proc):
        _stop(proc, signal.SIGINT, 30)
        if proc.returncode != 0:
            raise RunError(f"quicsteer exited {proc.returncode}")
    return start, stop


def replay_totals(log):
    """(sent, received) from replay.lua's last line."""
    m = re.search(r"replay: sent (\d+), received (\d+), lost (-?\d+)", log)
    if not m:
        raise RunError("replay.lua printed no totals:\n" + log[-2000:])
    return int(m.group(1)), int(m.group(2))


def lossfree_result(log):
    """([(rate %, sent, received, pps)], loss-free rate % or None) from find_lossfree_rate.lua."""
    trials = [(float(r), int(s), int(v), float(p)) for r, s, v, p in re.findall(
        r"trial: rate +([\d.]+)%  sent +(\d+)  received +(\d+)  loss [\d.]+  pps ([\d.]+)", log)]
    m = re.search(r"loss-free rate: ([\d.]+)% of link", log)
    if not trials or not re.search(r"loss-free rate: ", log):
        raise RunError("find_lossfree_rate.lua printed no trials or no result:\n" + log[-2000:])
    return trials, float(m.group(1)) if m else None
