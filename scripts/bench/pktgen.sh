#!/usr/bin/env bash
# scripts/bench/pktgen.sh [--json FILE] [--runs N] [--seconds S]
#
# quicsteer under pktgen-DPDK against dpdk-testpmd, in one run, on the same
# net_memif pair, capture and lcores: pktgen replays a quicgen capture at
# 100 % of memif's nominal rate (replay.lua) into
#   quicsteer  configs/memif-pktgen.yaml: 2 lcores, reflect, park
#   testpmd    macswap with TX retry (set fwd macswap retry): the baseline
# N interleaved runs of S seconds each (default 3 and 5), then pktgen's
# loss-free rate search (find_lossfree_rate.lua) for each. Needs the pktgen
# binary in $PKTGEN (../shared/tools/pktgen/build.sh, or scripts/pktgen/README.md).
# Writes results/pktgen.json (or --json FILE): per target sent, received,
# lost, software drops and Mpps received, and
# ratios.pktgen_quicsteer_vs_testpmd_macswap (received Mpps).
source "$(dirname "$0")/lib/common.sh"
cd "$root"
[ -n "${PKTGEN:-}" ] && [ -x "$PKTGEN" ] ||
  { echo "pktgen.sh: set PKTGEN to a pktgen-DPDK 23.06 binary (scripts/pktgen/README.md says how to build it)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "pktgen.sh: dpdk-testpmd is missing (scripts/setup.sh installs dpdk-dev)" >&2; exit 1; }
build_bench pktgen.sh quicsteer quicgen
exec python3 "$root/scripts/bench/pktgen_bench.py" --build "$build" --source "$root" "$@"
