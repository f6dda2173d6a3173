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

Each failed test's output, as far as it says why, goes to stderr: its lines
that say FAILED (or fail a check otherwise: "Error", "error:", "Assertion"),
at most 40 (2000 characters each), else its last 40 lines. test.sh shows the console only meson's
one line per test, and a CI record keeps only the console: without this, a
failure seen once in CI and not again by hand leaves nothing to go on.
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


WHY = ("FAILED", "Error", "error:", "Assertion", "assert", "Traceback", "did not", "timed out")


def why_failed(entry, limit=40):
    """The lines of a failed test's output that say why (WHY), else its last
    lines; at most `limit`."""
    lines = [ln.rstrip() for key in ("stdout", "stderr") for ln in (entry.get(key) or "").splitlines()]
    lines = [ln for ln in lines if ln.strip()]
    said = [ln for ln in lines if any(w in ln for w in WHY)]
    return (said or lines)[-limit:]


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
                print(f"== {name}: {entry['name']}: {result}; why, from its output:", file=sys.stderr)
                for line in why_failed(entry):
                    # long enough for a check's whole account of why (the
                    # scale-out checks name a batch's route changes in one line)
                    print(f"   | {line[:2000]}", file=sys.stderr)
            else:
                # A result this script does not know is not a pass.
                print(f"{name}: {entry['name']}: unknown result {result}", file=sys.stderr)
                counts["failed"] += 1
    print(counts["passed"], counts["failed"], counts["skipped"])


if __name__ == "__main__":
    main()
