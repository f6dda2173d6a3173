#!/usr/bin/env python3
"""scripts/testlog_summary.py on a made-up testlog: the counts, the skip
list's lines, and what it says of each failed test (its FAILED lines, else
its last lines), which is all a CI record keeps of a failure.

usage: testlog_summary_test.py SOURCE_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
tool = os.path.join(root, "scripts", "testlog_summary.py")
entries = [
    {"name": "quicsteer:unit / a", "result": "OK", "stdout": "fine\n"},
    {"name": "quicsteer:scaleout / b", "result": "FAIL",
     "stdout": "scaleout: lb-crash: 20 downloads\n  lb-crash: 19/20 downloads complete\n"
               "  lb-crash: FAILED: 1 of 20 downloads broke\nscaleout: FAILED\n"},
    {"name": "quicsteer:unit / c", "result": "TIMEOUT", "stdout": "".join(f"step {k}\n" for k in range(60))},
    {"name": "quicsteer:realquic / d", "result": "SKIP", "stdout": "SKIP: no ipip here\n"},
    {"name": "quicsteer:unit / e", "result": "NEWRESULT", "stdout": ""},
]
failures = []
with tempfile.TemporaryDirectory() as tmp:
    log = os.path.join(tmp, "testlog.json")
    with open(log, "w") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")
    skipped = os.path.join(tmp, "skipped.txt")
    run = subprocess.run([sys.executable, tool, "plain", log, skipped], capture_output=True, text=True)
    if run.stdout.split() != ["1", "3", "1"]:
        failures.append(f"counts {run.stdout!r}, want '1 3 1' (unknown results are failures)")
    if open(skipped).read() != "plain/d\trealquic\tno ipip here\n":
        failures.append(f"skip list {open(skipped).read()!r}")
    err = run.stderr.splitlines()
    want_b = ["== plain: quicsteer:scaleout / b: FAIL; why, from its output:",
              "   |   lb-crash: FAILED: 1 of 20 downloads broke", "   | scaleout: FAILED"]
    if err[:3] != want_b:
        failures.append(f"a failed test's FAILED lines, got {err[:3]}")
    c = [ln for ln in err if ln.startswith("   | step")]
    if c != [f"   | step {k}" for k in range(20, 60)]:
        failures.append(f"a failure that says nothing: its last 40 lines, got {len(c)} ({c[:1]}..)")
    if "lb-crash: 20 downloads" in run.stderr or "fine" in run.stderr:
        failures.append("lines that do not say why, or a passing test's, were printed")
    if not any("unknown result NEWRESULT" in ln for ln in err):
        failures.append("an unknown result is not named")
for f in failures:
    print("FAILED:", f)
print(f"testlog_summary: {'FAILED' if failures else 'passed'}")
sys.exit(1 if failures else 0)
