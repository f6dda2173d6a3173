#!/usr/bin/env bash
# Builds the steering libFuzzer target with clang++ and runs it.
#
#   tests/fuzz/run_steering_fuzz.sh SOURCE_ROOT WORK_DIR [RUNS | -max_total_time=S ...]
#
# The test suite runs it with a fixed number of iterations (-runs=N); by hand,
# pass any libFuzzer options, e.g. -max_total_time=600 -jobs=2. The seed
# corpus is the steering fixture frames (tests/steering/packet_fixtures.h),
# written to WORK_DIR/seeds; new inputs go to WORK_DIR/corpus, crashes to
# WORK_DIR/crash-*. The binary is rebuilt only when a source is newer.
set -euo pipefail
root=$(cd "$1" && pwd)
work=$2
shift 2
mkdir -p "$work/seeds" "$work/corpus"
bin="$work/steering_fuzz"

sources=("$root/tests/fuzz/steering_fuzz.cpp" "$root"/steering/*.cpp)
rebuild=0
[ -x "$bin" ] || rebuild=1
for f in "${sources[@]}" "$root"/steering/*.h "$root"/tests/steering/packet_fixtures.h; do
  [ -n "$f" ] && [ "$f" -nt "$bin" ] && rebuild=1
done
if [ $rebuild = 1 ]; then
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root" $(printf '%s\n' "${sources[@]}" | grep -v '^$') -lcrypto -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi

# One seed file per fixture frame.
python3 - "$root/tests/steering/packet_fixtures.h" "$work/seeds" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = text[text.index("fixtures = {"):]
for i, block in enumerate(re.findall(r'\{"\w+",\s*\{(.*?)\},\s*"', text, re.S)):
    frame = "".join(re.findall(r'\{"\w+", "([0-9a-f]*)", "[^"]*"\}', block))
    open(f"{sys.argv[2]}/fixture-{i:02d}", "wb").write(bytes.fromhex(frame))
PY

args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-runs=200000)
[[ ${args[0]} =~ ^[0-9]+$ ]] && args[0]="-runs=${args[0]}"
cd "$work"
exec "$bin" -max_len=2048 -seed=1 "${args[@]}" corpus seeds
