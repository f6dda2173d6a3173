#!/usr/bin/env python3
"""Counts one meson test run from its testlog.json, for scripts/test.sh.

    testlog_summary.py NAME TESTLOG SKIPPED_FILE

Prints "PASSED FAILED SKIPPED" on one line. Appends one line per skipped test
to SKIPPED_FILE: "NAME/TEST<TAB>SUITES<TAB>REASON". SUITES are joined by '+',
or '-' when meson did not name them (bash's read merges two tabs). REASON is
the test's last line that starts with "SKIP" (every test that exits 77 prints
one), else its last line of output, else empty.

meson's own summary lines ("Ok:", "Fail:", ...) give counts but no names; the
testlog has each test's result and output.
"""
import json
import sys

PASSED = {"OK", "EXPECTEDFAIL"}
FAILED = {"FAIL", "ERROR", "INTERRUPT", "TIMEOUT", "UNEXPECTEDPASS"}


def split_name(pretty):
    """'quicsteer:afxdp+realquic / afxdp_imissed' -> ('afxdp_imissed', 'afxdp+realquic')."""
    head, sep, test = pretty.partition(" / ")
    if not sep:
        return pretty, ""
    return test, head.partition(":")[2]


def skip_reason(entry):
    lines = [ln.strip() for key in ("stdout", "stderr") for ln in (entry.get(key) or "").splitlines()]
    lines = [ln for ln in lines if ln]
    said = [ln for ln in lines if ln.upper().startswith("SKIP")]
    reason = said[-1] if said else (lines[-1] if lines else "")
    if reason.upper().startswith("SKIP"):
        reason = reason[4:].lstrip(":").strip()
    return " ".join(reason.split())[:300]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    name, testlog, skipped_file = sys.argv[1:]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    with open(testlog, encoding="utf-8", errors="replace") as log, \
            open(skipped_file, "a", encoding="utf-8") as skipped:
        for line in log:
            if not line.strip():
                continue
            entry = json.loads(line)
            result = entry["result"]
            if result in PASSED:
                counts["passed"] += 1
            elif result == "SKIP":
                counts["skipped"] += 1
                test, suites = split_name(entry["name"])
                skipped.write(f"{name}/{test}\t{suites or '-'}\t{skip_reason(entry)}\n")
            elif result in FAILED:
                counts["failed"] += 1
            else:
                # A result this script does not know is not a pass.
                print(f"{name}: {entry['name']}: unknown result {result}", file=sys.stderr)
                counts["failed"] += 1
    print(counts["passed"], counts["failed"], counts["skipped"])


if __name__ == "__main__":
    main()
