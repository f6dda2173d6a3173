#!/usr/bin/env bash
# Builds and runs every quicsteer test: the plain build (unit, integration and
# cli suites); every suite again under AddressSanitizer+UBSan (the EAL data
# path, its in-process integration tests and the binaries included); and the
# 'tsan' suite (the rings, and the integration tests that run several lcores
# at once) under ThreadSanitizer.
#
# Ends with the skipped tests by name, one line each, "skipped: BUILD/TEST
# (reason)" (the reason is the line the test printed when it exited 77), then
# the line "N passed, N failed, N skipped". The same names, with their suites
# and reasons tab-separated, are in results/test-logs/skipped.txt (.ci/run
# fails when a suite that the CI machines can run is among them). Exits
# non-zero on any failure; a skip alone is not one, so that a user without
# root (realquic, scaleout, pktgen and afxdp need it) still gets exit 0.
#
# DPDK's own libraries are not instrumented; what the sanitizers must be told
# about them is in tests/sanitizers/ (each entry explained there).
#
#   scripts/test.sh                 everything
#   QS_SANITIZERS=none scripts/test.sh     plain build only (quick local loop)
#   QS_SANITIZERS="asan" / "tsan"          choose the sanitizer builds
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1

sanitizers=${QS_SANITIZERS-asan tsan}
jobs=$(nproc)
passed=0
failed=0
skipped=0
logdir=results/test-logs
mkdir -p "$logdir"
skipfile=$logdir/skipped.txt
: >"$skipfile"
supp=$PWD/tests/sanitizers

# configure DIR [meson options...]
configure() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$logdir/$(basename "$dir")-setup.log" 2>&1 || {
      cat "$logdir/$(basename "$dir")-setup.log"; return 1; }
  fi
}

# run_suites NAME DIR TIMEOUT_MULTIPLIER [--suite S ...]
# The plain tree is built whole (benchmarks and tools included, so that none
# of them stops compiling unseen); a sanitizer tree only with what its tests
# run (scripts/test_targets.py).
run_suites() {
  local name=$1 dir=$2 mult=$3; shift 3
  local log="$logdir/$name.log"
  local targets=() suites=() arg
  for arg in "$@"; do [ "$arg" != --suite ] && suites+=("$arg"); done
  echo "== $name: building"
  if [ "$name" != plain ] && ! targets=($(python3 scripts/test_targets.py "$dir" "${suites[@]}" 2>"$log.build")); then
    cat "$log.build"
    echo "== $name: BUILD FAILED (the tests' targets)"
    failed=$((failed + 1))
    return
  fi
  if ! ninja -C "$dir" -j "$jobs" "${targets[@]}" >"$log.build" 2>&1; then
    tail -n 60 "$log.build"
    echo "== $name: BUILD FAILED"
    failed=$((failed + 1))
    return
  fi
  echo "== $name: testing"
  local testlog=$dir/meson-logs/testlog.json
  rm -f "$testlog" "$log.why"
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$jobs" \
    --timeout-multiplier "$mult" "$@" 2>&1 | tee "$log" | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout|Unexpected Pass|Skipped):' || true
  # meson prints its summary ("Ok: N" ...) only when the run finished; the
  # counts and the skipped tests' names come from the testlog.
  local counts
  # What each failed test said of why (testlog_summary.py, on its stderr) to
  # stdout: a CI record keeps the console, not results/test-logs.
  if ! grep -q '^Ok: *[0-9]' "$log" ||
    ! counts=$(python3 scripts/testlog_summary.py "$name" "$testlog" "$skipfile" 2>"$log.why"); then
    cat "$log.why" 2>/dev/null
    echo "== $name: meson test did not finish (see $log)"
    failed=$((failed + 1))
    return
  fi
  cat "$log.why"
  local ok fail skip
  read -r ok fail skip <<<"$counts"
  passed=$((passed + ok))
  failed=$((failed + fail))
  skipped=$((skipped + skip))
  echo "== $name: $ok passed, $fail failed, $skip skipped"
}

if configure build; then
  run_suites plain build 1
else
  failed=$((failed + 1))
fi

for s in $sanitizers; do
  case $s in
    asan)
      # Every suite: unit, integration (EAL in-process on ring ports) and cli
      # (quicsteer, quicsteer-cid, quicgen as a user runs them).
      # -O1 with line tables only (-g1), asserts on: ASan's own advice, and
      # reports still carry file:line stacks. UBSan's checks make an -O2 -g
      # build of every target the suite's long pole (15 of its 29 minutes on
      # 2 CPUs); this one takes 7.
      if configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 -Ddebug=false \
           -Db_ndebug=false -Dc_args=-g1 -Dcpp_args=-g1; then
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:suppressions=$supp/asan.supp \
        LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0 \
          run_suites asan build-asan 4
      else failed=$((failed + 1)); fi ;;
    tsan)
      if configure build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized; then
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0 \
          run_suites tsan build-tsan 6 --suite tsan
      else failed=$((failed + 1)); fi ;;
    none) ;;
    *) echo "unknown sanitizer '$s' in QS_SANITIZERS" >&2; failed=$((failed + 1)) ;;
  esac
done

while IFS=$'\t' read -r test suites reason; do
  echo "skipped: $test${reason:+ ($reason)}"
done <"$skipfile"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
