#!/usr/bin/env python3
"""The layering rule: rings/ depends on nothing, steering/ on rings/ at most
(no DPDK, no dataplane/), dataplane/ on both. Reads every #include of the
rings/ and steering/ sources and fails naming each one that reaches above its
layer. Usage: layering_test.py SOURCE_ROOT"""
import os
import re
import sys

ROOT = sys.argv[1]
# Project headers each folder may include, and third-party headers it may not.
ALLOWED = {"rings": ("rings/",), "steering": ("rings/", "steering/")}
FORBIDDEN_SYSTEM = re.compile(r"^(rte_|dpdk/|generic/rte_)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

bad = []
for folder, allowed in ALLOWED.items():
    for name in sorted(os.listdir(os.path.join(ROOT, folder))):
        if not name.endswith((".h", ".cpp")):
            continue
        path = os.path.join(folder, name)
        with open(os.path.join(ROOT, path)) as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, target = m.groups()
                if kind == '"' and not target.startswith(allowed):
                    bad.append(f"{path}:{number}: includes \"{target}\" ({folder}/ may include only {', '.join(allowed)})")
                if kind == "<" and FORBIDDEN_SYSTEM.match(target):
                    bad.append(f"{path}:{number}: includes <{target}> (DPDK) ({folder}/ does not depend on DPDK)")
for b in bad:
    print(b)
print(f"{len(bad)} include(s) above their layer")
sys.exit(1 if bad else 0)
