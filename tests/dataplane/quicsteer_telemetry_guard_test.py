#!/usr/bin/env python3
"""What a reload over telemetry may read and what telemetry answers (issue 29,
items 5 and 13), with the real binary on its own EAL --file-prefix.

usage: quicsteer_telemetry_guard_test.py BUILD_DIR SOURCE_DIR

quicsteer runs a profile from its own directory (net_pcap -> net_null, a
quicgen capture replayed once). The test talks to EAL's telemetry socket
itself, so that it can send any byte and see every byte of each answer:
  - /quicsteer/reload with a path outside that directory (absolute, "..", a
    symlink leading out) is refused, even for a valid profile, and counted in
    reloads_refused; a file beside the profile, named relative to it, is
    applied;
  - a refused PEM key and YAML files holding secrets in values and keys:
    the answer gives the location and never the content (quicsteer's own log
    keeps the full reason);
  - reload paths and a refused file with bytes >= 0x80 and control bytes:
    after each, every /quicsteer/* command answers valid JSON in printable
    ASCII, and the path is shown escaped (\\xNN), not altered.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

from qs_harness import check, eal, failures, pcap_profile, start, stop, telemetry_socket, wait_for, write

BUILD, SOURCE = sys.argv[1], sys.argv[2]
QUICSTEER = os.path.join(BUILD, "quicsteer")
QUICGEN = os.path.join(BUILD, "quicgen")
PREFIX = f"qs-tguard-{os.getpid()}"
SOCKET = telemetry_socket(PREFIX)
SECRET = "SECRETc2VjcmV0IGtleSBtYXRlcmlhbA"


def profile_text(pcap, json_path):
    """The capture replayed once; no statistics period."""
    return pcap_profile(eal(PREFIX), pcap, json_path, 0, forever=False)


def ask(command):
    """One command (bytes) on a fresh connection: (raw answer bytes, its JSON
    or None when it is not valid JSON)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(60)
        s.connect(SOCKET)
        json.loads(s.recv(16384))  # the greeting: version, pid, max_output_len
        s.send(command)
        raw = s.recv(65536)
    try:
        return raw, json.loads(raw)
    except ValueError:
        return raw, None


def reload(path):
    """/quicsteer/reload with `path` (bytes): the answer's text, or None."""
    raw, answer = ask(b"/quicsteer/reload," + path)
    check(answer is not None and isinstance(answer.get("/quicsteer/reload"), str),
          f"the reload of {path!r} answers valid JSON with a string: {raw[:300]!r}")
    return answer.get("/quicsteer/reload") if answer else None


def reloads_refused():
    """/quicsteer/steering's reloads_refused, or None."""
    raw, steering = ask(b"/quicsteer/steering")
    return (steering or {}).get("/quicsteer/steering", {}).get("reloads_refused")


def every_command_answers_json(after):
    raw, listing = ask(b"/")
    commands = [c for c in (listing or {}).get("/", []) if c.startswith("/quicsteer/") and c != "/quicsteer/reload"]
    check(len(commands) >= 10, f"{after}: / lists the /quicsteer/ commands: {commands}")
    bad = []
    for c in commands:
        raw, answer = ask(c.encode())
        if answer is None or c not in answer or any(b >= 0x80 or (b < 0x20) for b in raw):
            bad.append((c, raw[:200]))
    check(not bad, f"{after}: every /quicsteer/* command answers valid JSON in printable ASCII: {bad[:2]}")


with tempfile.TemporaryDirectory() as tmp:
    pcap = os.path.join(tmp, "run.pcap")
    json_path = os.path.join(tmp, "stats.json")
    profiles = os.path.join(tmp, "profiles")
    os.mkdir(profiles)
    live = write(os.path.join(profiles, "live.yaml"), profile_text(pcap, json_path))
    r = subprocess.run([QUICGEN, "--profile", live, "--connections", "20", "--seed", "5", "--out", pcap],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"quicgen wrote the capture: {r.stderr.strip()[-200:]}")

    proc, out = start([QUICSTEER, "--", "--profile", live], errors="backslashreplace")
    check(os.path.exists(SOCKET), f"EAL's telemetry socket is at {SOCKET}")
    every_command_answers_json("at start")

    # --- item 5: only files beside the running profile ---
    outside = write(os.path.join(tmp, "outside.yaml"), profile_text(pcap, json_path))  # valid, and identical
    os.symlink(outside, os.path.join(profiles, "leads-out.yaml"))
    real_profiles = os.path.realpath(profiles)
    refused_before = reloads_refused()
    outside_paths = [outside, "../outside.yaml", "leads-out.yaml", "/etc/passwd", "/etc/shadow", "../absent.yaml"]
    for asked in outside_paths:
        answer = reload(asked.encode())
        check(answer is not None and answer.startswith(f"refused: {asked}: not under {real_profiles}, the running "
                                                       "profile's directory")
              and answer.endswith("steering generation 1 stays live"),
              f"a reload of {asked} is refused as outside the profile's directory: {answer}")
    refused_after = reloads_refused()
    check(refused_before == 0 and refused_after == len(outside_paths),
          f"each refusal counts in reloads_refused: {refused_before} before, {refused_after} after "
          f"{len(outside_paths)} refusals")
    check("root:" not in out.text(), "nothing of /etc/passwd reached the log either")

    # A PEM key beside the profile: refused, located, never quoted back.
    pem = write(os.path.join(profiles, "quic-lb.pem"),
                f"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{SECRET}\n-----END PRIVATE KEY-----\n")
    answer = reload(b"quic-lb.pem")
    check(answer == f"refused: {os.path.realpath(pem)}:1:1: (top level): expected a map, got '[not shown]'; "
                    "steering generation 1 stays live", f"a PEM key is refused with its location only: {answer}")
    # The log names the location and what is wrong, with at most 64 octets of
    # the value (issue 38 item 7): not the whole key.
    logged = f"{os.path.realpath(pem)}:1:1: (top level): expected a map, got '-----BEGIN PRIVATE KEY----- MIIE"
    check(wait_for("the PEM refusal's log line", lambda: logged in out.text()) and SECRET not in out.text(), "quicsteer's own log keeps the reason, with the start of the value only")
    # YAML that holds secrets: a value, an unknown key, a key with ": ", a
    # syntax error, a profile with one wrong value.
    for i, text in enumerate([f"eal: {SECRET}\n", f"token_{SECRET}: 1\n", f'"k: {SECRET}": 1\n',
                              f'a: "\\q{SECRET}"\n',
                              profile_text(pcap, json_path).replace("nonce_len: 6", f'nonce_len: "{SECRET}"')]):
        name = f"secret{i}.yaml"
        write(os.path.join(profiles, name), text)
        answer = reload(name.encode())
        check(answer is not None and answer.startswith(f"refused: {real_profiles}/{name}:") and SECRET not in answer,
              f"{name} ({text.strip()[:60]!r}) is refused with its location, without its content: {answer}")
    raw, steering = ask(b"/quicsteer/steering")
    last = (steering or {}).get("/quicsteer/steering", {}).get("last_reload", "")
    check(last.startswith(f"refused: {real_profiles}/secret4.yaml:10:") and SECRET not in raw.decode("ascii", "replace"),
          f"/quicsteer/steering's last reload has no content either: {last}")

    # A file beside the profile, named relative to it: applied.
    write(os.path.join(profiles, "blue.yaml"), profile_text(pcap, json_path))
    answer = reload(b"blue.yaml")
    check(answer is not None and answer.startswith("applied: steering generation 2 is live"),
          f"blue.yaml beside the profile is applied: {answer}")
    raw, steering = ask(b"/quicsteer/steering")
    check((steering or {}).get("/quicsteer/steering", {}).get("profile") == os.path.realpath(
        os.path.join(profiles, "blue.yaml")), f"/quicsteer/steering names it, resolved: {raw[:300]!r}")
    every_command_answers_json("after the refusals")

    # --- item 13: bytes >= 0x80 and control bytes ---
    odd = b"caf\xc3\xa9\x01\x1b[2J\x7f\xff"
    shown = "caf\\xc3\\xa9\\x01\\x1b[2J\\x7f\\xff"
    # A path that does not exist.
    answer = reload(odd + b".yaml")
    check(answer == f"refused: {real_profiles}/{shown}.yaml: cannot open: No such file or directory; "
                    "steering generation 2 stays live",
          f"a missing path with such bytes is refused and shown escaped: {answer}")
    every_command_answers_json("after a reload of a missing odd path")
    # A valid profile with such a name, whose content the refusal quotes: the
    # stats file's name changed, with such bytes (a data-path setting).
    changed = profile_text(pcap, json_path).replace(f'json: "{json_path}"',
                                                    f'json: "{tmp}/stats-\\u00e9\\x01\\x1b\\x7f.json"')
    write(os.path.join(profiles.encode(), odd + b".yaml"), changed)
    answer = reload(odd + b".yaml")
    check(answer is not None and answer.startswith(f"refused: {real_profiles}/{shown}.yaml: stats.json: ")
          and "\\xc3\\xa9" in answer and answer.endswith("steering generation 2 stays live"),
          f"a refused file with such bytes is quoted escaped: {answer}")
    every_command_answers_json("after a refused file with odd content")
    # The same bytes in a file that fails to load: its location is shown, escaped.
    write(os.path.join(profiles.encode(), b"broken-" + odd + b".yaml"), b"caf\xc3\xa9\x01: [\n")
    answer = reload(b"broken-" + odd + b".yaml")
    check(answer is not None and answer.startswith(f"refused: {real_profiles}/broken-{shown}.yaml:"),
          f"a broken file with such a name is refused, located: {answer}")
    every_command_answers_json("after a broken file with an odd name")
    # After all of that the running profile still reloads.
    answer = reload(b"")
    check(answer is not None and answer.startswith("applied: steering generation 3 is live"),
          f"a reload without a path reloads the profile quicsteer started with: {answer}")

    stop(proc, out)
    check(proc.returncode == 0, f"quicsteer exits 0: {out.text()[-500:]}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
