#!/usr/bin/env bash
# Builds and runs every quicsteer test: the plain build (unit, integration and
# cli suites), the 'unit' suite under AddressSanitizer+UBSan, and the 'tsan'
# suite under ThreadSanitizer. Ends with the line "N passed, N failed" and
# exits non-zero on any failure.
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
logdir=results/test-logs
mkdir -p "$logdir"

# configure DIR [meson options...]
configure() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$logdir/$(basename "$dir")-setup.log" 2>&1 || {
      cat "$logdir/$(basename "$dir")-setup.log"; return 1; }
  fi
}

# run_suites NAME DIR TIMEOUT_MULTIPLIER [--suite S ...]
run_suites() {
  local name=$1 dir=$2 mult=$3; shift 3
  local log="$logdir/$name.log"
  echo "== $name: building"
  if ! ninja -C "$dir" -j "$jobs" >"$log.build" 2>&1; then
    tail -n 60 "$log.build"
    echo "== $name: BUILD FAILED"
    failed=$((failed + 1))
    return
  fi
  echo "== $name: testing"
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$jobs" \
    --timeout-multiplier "$mult" "$@" 2>&1 | tee "$log" | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout|Unexpected Pass|Skipped):' || true
  local ok fail timeout upass
  ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
  fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
  timeout=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
  upass=$(sed -n 's/^Unexpected Pass: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
  if [ -z "$ok" ]; then
    echo "== $name: meson test did not finish (see $log)"
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + ok))
  failed=$((failed + ${fail:-0} + ${timeout:-0} + ${upass:-0}))
  echo "== $name: $ok passed, $(( ${fail:-0} + ${timeout:-0} + ${upass:-0} )) failed"
}

if configure build; then
  run_suites plain build 1
else
  failed=$((failed + 1))
fi

for s in $sanitizers; do
  case $s in
    asan)
      if configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized; then
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
          run_suites asan build-asan 4 --suite unit
      else failed=$((failed + 1)); fi ;;
    tsan)
      if configure build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized; then
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
          run_suites tsan build-tsan 6 --suite tsan
      else failed=$((failed + 1)); fi ;;
    none) ;;
    *) echo "unknown sanitizer '$s' in QS_SANITIZERS" >&2; failed=$((failed + 1)) ;;
  esac
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
