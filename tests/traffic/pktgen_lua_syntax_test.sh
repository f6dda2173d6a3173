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
exit $status
