#!/usr/bin/env python3
"""Prints the ninja targets that the tests of the given suites need, one per
line, as paths relative to BUILD_DIR: each test's own executable and what it
declares in `depends`.

usage: test_targets.py BUILD_DIR [SUITE ...]     (no SUITE: every test)

scripts/test.sh builds a sanitizer tree with only these, not the benchmarks
and tools no test of that tree runs: on 2 CPUs the whole ThreadSanitizer
tree took 4 of the suite's 30 minutes for 17 tests.
"""
import json
import os
import subprocess
import sys


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", build, what], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build, suites = sys.argv[1], set(sys.argv[2:])
    files = {t["id"]: t["filename"] for t in introspect(build, "--targets")}
    root = os.path.realpath(build)
    wanted = set()
    tests = introspect(build, "--tests")
    chosen = [t for t in tests if not suites or any(s.split(":")[-1] in suites for s in t["suite"])]
    if suites and not chosen:
        print(f"test_targets.py: no test of the suites {sorted(suites)} in {build}", file=sys.stderr)
        return 1
    for test in chosen:
        for dep in test["depends"]:
            if dep not in files:
                print(f"test_targets.py: test {test['name']} depends on {dep}, which no target is", file=sys.stderr)
                return 1
            wanted.update(files[dep])
        exe = os.path.realpath(test["cmd"][0])
        if exe.startswith(root + os.sep):
            wanted.add(exe)
    for path in sorted(wanted):
        print(os.path.relpath(os.path.realpath(path), root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
