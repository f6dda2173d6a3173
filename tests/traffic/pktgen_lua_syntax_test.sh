#!/usr/bin/env bash
# Every pktgen Lua script compiles (luac5.3 -p: syntax only; pktgen itself is
# not packaged for Debian, so its API calls cannot be exercised here).
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
# Each script finds qs_common.lua next to itself from any working directory
# and refuses a bad setting before touching pktgen (the stub has no functions).
lua=$(command -v lua5.3 || true)
abs_dir=$(cd "$dir" && pwd)
for name in "${expected[@]}"; do
  out=$(cd / && "$lua" -e 'qs_settings = {QS_PORT = "99"}; pktgen = {}' "$abs_dir/$name" 2>&1 || true)
  if printf '%s' "$out" | grep -q 'QS_PORT=99: expected a number in \[0, 63\]'; then
    echo "ok: $name validates its settings"
  else
    echo "FAIL: $name did not refuse QS_PORT=99: $out" >&2
    status=1
  fi
done
exit $status
