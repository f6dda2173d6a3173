#!/usr/bin/env bash
# scripts/run.sh [PROFILE] [-- extra quicsteer args]
# scripts/run.sh real [cid|four_tuple]   real QUIC in network namespaces (scripts/run_real.sh)
# scripts/run.sh scaleout                 two instances behind ECMP, BGP and BFD (scripts/run_scaleout.sh)
# Installs what is missing, builds if needed, makes the traffic capture the
# profile replays (results/*.pcap, from build/quicgen) and runs quicsteer on
# the profile, configs/demo.yaml by default. EAL arguments come from the
# profile; quicsteer runs it on hugepages when enough are free (setup.sh
# reserves them as root) and a virtual-device profile with --no-huge
# otherwise, and says which on its first line ("memory: ...").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = real ]; then shift; exec bash scripts/run_real.sh "$@"; fi
if [ "${1:-}" = scaleout ]; then shift; exec bash scripts/run_scaleout.sh "$@"; fi

profile=configs/demo.yaml
if [ $# -gt 0 ] && [ "$1" != "--" ]; then profile=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
[ -f "$profile" ] || { echo "run.sh: no such profile: $profile" >&2; exit 2; }

bash scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  meson setup build >/dev/null
fi
ninja -C build quicsteer quicgen >/dev/null

# Every capture under results/ that the profile replays is generated from the
# profile itself (its QUIC port and QUIC-LB config), again whenever the profile
# or quicgen is newer than the capture.
mkdir -p results
for pcap in $(grep -o 'rx_pcap=results/[^,"]*' "$profile" | cut -d= -f2 | sort -u); do
  if [ ! -s "$pcap" ] || [ "$profile" -nt "$pcap" ] || [ build/quicgen -nt "$pcap" ]; then
    echo "run.sh: generating $pcap with build/quicgen"
    # net_pcap holds every frame of the capture in mbufs (per RX queue), so
    # the demo capture stays a few thousand frames.
    build/quicgen --profile "$profile" --out "$pcap" --connections 400 --seed 1
  fi
done

exec build/quicsteer -- --profile "$profile" "$@"
