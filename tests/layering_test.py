#!/usr/bin/env python3
"""The layering rules, read from every #include of every source under the
folders below (recursively). Fails naming each include that reaches above
its layer, and each source file of dataplane/ outside its four roles.

  rings/               depends on nothing
  steering/            on rings/ at most; no DPDK
  dataplane/config/    the profile: on steering/ and rings/; no DPDK
  dataplane/fastpath/  the per-packet path: on config/, never on control/
                       or runtime/ (what operators see and how it is
                       assembled stay off the path a packet takes)
  dataplane/control/   telemetry, metrics, statistics: reads the fast path,
                       never the runtime that assembles it
  dataplane/runtime/   assembly: everything of dataplane/
  tools/               the profile library only, not the data path; no DPDK

Usage: layering_test.py SOURCE_ROOT"""
import os
import re
import sys

ROOT = sys.argv[1]
BASE = ("rings/", "steering/")
CONFIG = BASE + ("dataplane/config/",)
FASTPATH = CONFIG + ("dataplane/fastpath/",)
# folder: (project headers it may include, whether it may include DPDK)
RULES = {
    "rings": (("rings/",), False),
    "steering": (BASE, False),
    "dataplane/config": (CONFIG, False),
    "dataplane/fastpath": (FASTPATH, True),
    "dataplane/control": (FASTPATH + ("dataplane/control/",), True),
    "dataplane/runtime": (("dataplane/",) + BASE, True),
    "tools": (CONFIG + ("tools/",), False),
}
DPDK = re.compile(r"^(rte_|dpdk/|generic/rte_)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE = (".h", ".hpp", ".cpp", ".cc")


def sources(folder):
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        for name in sorted(names):
            if name.endswith(SOURCE):
                yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def rule_for(path):
    """The most specific folder of RULES that holds path."""
    best = None
    for folder in RULES:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


bad = []
checked = 0
for top in ("rings", "steering", "dataplane", "tools"):
    for path in sources(top):
        folder = rule_for(path)
        if folder is None:
            bad.append(f"{path}: outside dataplane/'s roles (config/, fastpath/, control/, runtime/)")
            continue
        allowed, dpdk = RULES[folder]
        checked += 1
        with open(os.path.join(ROOT, path)) as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, target = m.groups()
                if kind == '"' and not target.startswith(allowed):
                    bad.append(f"{path}:{number}: includes \"{target}\" ({folder}/ may include only {', '.join(allowed)})")
                if kind == "<" and not dpdk and DPDK.match(target):
                    bad.append(f"{path}:{number}: includes <{target}> (DPDK) ({folder}/ does not depend on DPDK)")
for b in bad:
    print(b)
print(f"{checked} files checked, {len(bad)} include(s) or file(s) outside their layer")
sys.exit(1 if bad else 0)
