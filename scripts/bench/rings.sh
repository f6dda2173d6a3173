#!/usr/bin/env bash
# scripts/bench/rings.sh [--json FILE] [--repetitions N] [google-benchmark flags]
#
# Ring hand-off benchmark: qs::SpscRing vs rte_ring SP/SC and qs::MpscRing vs
# rte_ring MP/SC, producer and consumer pinned to one core and to two cores,
# bursts 1/8/32. Builds tests/bench/bench_rings in ./build (configuring it if
# missing), runs it, prints the table (median of 5 repetitions, min..max) with
# the CPU model; --json FILE also writes every figure and the ours/rte_ring
# ratios. Run it on an otherwise idle machine: other work on the same cores
# distorts the numbers.
source "$(dirname "$0")/lib/common.sh"

build_bench rings.sh tests/bench/bench_rings
echo "CPU model: $(cpu_model)"
exec "$build/tests/bench/bench_rings" "$@"
