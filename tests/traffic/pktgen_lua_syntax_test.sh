#!/usr/bin/env bash
# Every pktgen Lua script compiles (luac5.3 -p) and handles its settings
# against a stub pktgen. The scripts against the real pktgen are run by
# tests/pktgen (when a pktgen binary is given).
set -euo pipefail
dir=${1:?usage: pktgen_lua_syntax_test.sh SCRIPTS_DIR}
luac=$(command -v luac5.3 || true)
if [ -z "$luac" ]; then
  echo "FAIL: luac5.3 not found (apt-get install lua5.3)" >&2
  exit 1
fi
shopt -s nullglob
scripts=("$dir"/*.lua)
expected=(replay.lua find_lossfree_rate.lua latency.lua)
for name in "${expected[@]}"; do
  [ -f "$dir/$name" ] || { echo "FAIL: $dir/$name missing" >&2; exit 1; }
done
status=0
for script in "${scripts[@]}"; do
  if "$luac" -p "$script"; then
    echo "ok: $(basename "$script")"
  else
    echo "FAIL: $script" >&2
    status=1
  fi
done
# Each script finds qs_common.lua next to itself from any working directory,
# refuses a bad setting before it touches the port, and with QS_QUIT=1 quits
# pktgen after that error too (a scripted run must never leave pktgen
# polling). The stub pktgen has only screen() and quit().
lua=$(command -v lua5.3 || true)
abs_dir=$(cd "$dir" && pwd)
stub='pktgen = {screen = function() end, quit = function() print("stub: pktgen.quit") end}'
for name in "${expected[@]}"; do
  out=$(cd / && "$lua" -e "qs_settings = {QS_PORT = '99', QS_QUIT = '1'}; $stub" "$abs_dir/$name" 2>&1 || true)
  # Searched as here-strings, not `printf | grep -q`: under pipefail that
  # fails when grep exits on its match while printf still writes.
  if grep -q 'error: .*QS_PORT=99: expected a number in \[0, 63\]' <<<"$out" &&
     grep -q 'stub: pktgen.quit' <<<"$out"; then
    echo "ok: $name validates its settings and quits after the error"
  else
    echo "FAIL: $name did not refuse QS_PORT=99 and quit: $out" >&2
    status=1
  fi
  out=$(cd / && "$lua" -e "qs_settings = {QS_PORT = '0x10'}; $stub" "$abs_dir/$name" 2>&1 || true)
  if grep -q 'QS_PORT=0x10: expected a number' <<<"$out" && ! grep -q 'stub: pktgen.quit' <<<"$out"; then
    echo "ok: $name refuses a hexadecimal setting and, without QS_QUIT, stays"
  else
    echo "FAIL: $name with QS_PORT=0x10: $out" >&2
    status=1
  fi
done
exit $status
