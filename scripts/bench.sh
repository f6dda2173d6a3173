#!/usr/bin/env bash
# scripts/bench.sh AREA [--json FILE]  — AREA is rings, steering, e2e, ringloop, scale, forwarding, pktgen, realquic, scaleout, capture, afxdp or health.
# Each area's driver lives in scripts/bench/AREA.sh; this only dispatches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
areas=$(cd "$here/bench" 2>/dev/null && ls *.sh 2>/dev/null | sed 's/\.sh$//' | tr '\n' ' ')
if [ $# -lt 1 ] || [ ! -f "$here/bench/$1.sh" ]; then
  echo "usage: scripts/bench.sh AREA [--json FILE]   (areas: ${areas:-none})" >&2
  exit 2
fi
area=$1; shift
exec bash "$here/bench/$area.sh" "$@"
