#!/usr/bin/env bash
# The soak test (issue 29): quicsteer on a net_memif pair under traffic for N
# minutes (default 10) while steering is reloaded and Prometheus scraped
# every 100 ms, the traffic peer is restarted, owner lcore 2 is stalled for
# 50 ms every second and one client floods the forwarding table; then the
# books must close. scripts/soak.py says what is checked and how.
#
#   sudo scripts/soak.sh [--minutes N] [--build DIR] [--json FILE]
#
# The peer is pktgen-DPDK when $PKTGEN names its binary (scripts/pktgen/README.md),
# else dpdk-testpmd replaying the capture from net_pcap. Needs root; builds quicsteer and quicgen in DIR (default
# build) first. Prints a summary and writes results/soak.json. A short run is
# the meson test 'soak' (suite 'soak'); CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" quicsteer quicgen >/dev/null
exec python3 scripts/soak.py --build "$build" "${args[@]}"
