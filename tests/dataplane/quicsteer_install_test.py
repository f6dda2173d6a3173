#!/usr/bin/env python3
"""`meson install` as an operator runs it, into a scratch directory.

usage: quicsteer_install_test.py BUILD_DIR SOURCE_DIR

Installs with --destdir and checks what lands where: the operator's binaries
(quicsteer, quicsteer-cid; not the test tools), every shipped profile under
SYSCONFDIR/quicsteer/examples/, and quicsteer@.service pointing at the
installed binary and SYSCONFDIR/quicsteer/%i.yaml. Then `systemd-analyze
verify` checks an instance of the unit, with the installed tree as its root:
any complaint (an unknown key, a bad value, a missing binary) fails.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from qs_harness import check, failures

BUILD, SOURCE = sys.argv[1], sys.argv[2]
def installed(root):
    """Every installed file, as its path on the target system."""
    out = set()
    for d, _, files in os.walk(root):
        for f in files:
            out.add("/" + os.path.relpath(os.path.join(d, f), root))
    return out


with tempfile.TemporaryDirectory() as root:
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", root, "--quiet"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"meson install --destdir: {r.stderr.strip()[-300:]}")
    files = installed(root)
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)

    binaries = [f for f in files if os.path.basename(os.path.dirname(f)) == "bin"]
    check(sorted(os.path.basename(f) for f in binaries) == ["quicsteer", "quicsteer-cid"],
          f"the operator's binaries and no test tool: {sorted(binaries)}")
    bindir = os.path.dirname(binaries[0]) if binaries else ""

    shipped = sorted(f for f in os.listdir(os.path.join(SOURCE, "configs")) if f.endswith(".yaml"))
    examples = sorted(f for f in files if "/quicsteer/examples/" in f)
    check(sorted(os.path.basename(f) for f in examples) == shipped,
          f"every shipped profile is installed as an example: {examples}")
    sysconfdir = examples[0].split("/quicsteer/examples/")[0] if examples else ""

    units = by_name.get("quicsteer@.service", [])
    check(len(units) == 1 and units[0].endswith("/lib/systemd/system/quicsteer@.service"),
          f"the unit is installed where systemd looks: {units}")
    check(any(f.endswith("/doc/quicsteer/README.md") for f in files), "the README is installed")
    if len(units) == 1 and bindir and sysconfdir:
        unit = open(root + units[0]).read()
        check("@" + "BINDIR@" not in unit and "@" + "SYSCONFDIR@" not in unit, "every placeholder was filled in")
        check(f"ExecStart={bindir}/quicsteer -- --profile {sysconfdir}/quicsteer/%i.yaml\n" in unit,
              f"ExecStart runs the installed quicsteer on SYSCONFDIR/quicsteer/%i.yaml ({bindir}, {sysconfdir})")
        for line in ["Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "KillSignal=SIGTERM", "KillMode=mixed",
                     "StandardOutput=journal", "StandardError=journal"]:
            check(line + "\n" in unit, f"the unit says {line}")
        check(any(line.startswith("WatchdogSec=") and line != "WatchdogSec=0" for line in unit.splitlines()),
              "the unit runs a watchdog")

        # An instance, as systemctl would load it. Its installed paths point
        # into the scratch tree (--root would need a whole system there:
        # sysinit.target, /bin/kill), so that verify finds the installed binary.
        analyze = shutil.which("systemd-analyze")
        check(analyze is not None, "systemd-analyze is installed (Debian's systemd package; scripts/setup.sh)")
        if analyze:
            os.makedirs(root + sysconfdir + "/quicsteer", exist_ok=True)
            shutil.copy(os.path.join(SOURCE, "configs", "demo.yaml"), root + sysconfdir + "/quicsteer/demo.yaml")
            with tempfile.TemporaryDirectory() as units_dir:
                instance = os.path.join(units_dir, "quicsteer@demo.service")
                with open(instance, "w") as f:
                    f.write(unit.replace(f"={bindir}/", f"={root}{bindir}/").replace(f" {sysconfdir}/", f" {root}{sysconfdir}/")
                            .replace(f"={sysconfdir}/", f"={root}{sysconfdir}/"))
                r = subprocess.run([analyze, "verify", "--man=no", instance], capture_output=True, text=True,
                                   timeout=120)
            complaints = (r.stdout + r.stderr).strip()
            check(r.returncode == 0 and complaints == "",
                  f"systemd-analyze verify quicsteer@demo.service: no complaint ({r.returncode}: {complaints[-400:]})")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
