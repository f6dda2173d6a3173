#!/usr/bin/env bash
# Installs the Debian 12 packages that quicsteer's build, tests, demo and
# benchmarks need. Idempotent and quiet when everything is present; when not
# root it prints the exact apt-get command instead.
set -euo pipefail

packages=(
  g++ meson ninja-build pkg-config python3
  libdpdk-dev dpdk dpdk-dev        # DPDK 22.11 headers, libs and PMDs; dpdk-dev has dpdk-testpmd and dpdk-telemetry.py
  libyaml-cpp-dev libpcap-dev libssl-dev
  libmicrohttpd-dev                # the Prometheus endpoint's HTTP server
  googletest libgtest-dev libbenchmark-dev
  clang libclang-rt-14-dev         # libFuzzer and clang's sanitizer runtimes
  lua5.3                           # luac -p over the pktgen scripts
  tshark                           # checks quicgen's captures decode as QUIC
  gnuplot-nox                      # the e2e benchmark's plot
  libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev libnghttp3-dev   # quicsteer-server
  ngtcp2-client ngtcp2-server tcpdump iproute2 ethtool   # the realquic suite: gtlsclient, gtlsserver, captures, namespaces
  python3-prometheus-client        # the live test parses the Prometheus endpoint with its text parser
  python3-cryptography             # quicsteer-cid's test recomputes the DCID hash (AES) on its own
  frr curl                         # the scaleout suite: BGP and BFD (zebra, bgpd, bfdd), the health watcher's HTTP
  nftables iputils-ping            # the scaleout suite: a data port the kernel cannot see (netdev ingress), ping over the TAP
  systemd                          # systemd-analyze verify checks quicsteer@.service (quicsteer_install)
)

# As root, and never fatal: 1 GB of 2 MB hugepages (unless that many are
# reserved already: the demo's 512 MB and room for a capture or a test beside
# it), which quicsteer, its tests and benchmarks use when they are free
# (otherwise they run with --no-huge), and bpffs at /sys/fs/bpf for
# libxdp (net_af_xdp). Inside `ip netns exec` /sys is a fresh sysfs without
# bpffs: libxdp then says "No bpffs found" and loads its program without the
# dispatcher, which works.
# Called after the install: dpdk-hugepages.py comes with the dpdk package, so
# on a fresh machine it is there only once the packages are.
reserve_memory() {
  [ "$(id -u)" -eq 0 ] || return 0
  # --reserve and --mount, not --setup: that would first clear the pages and
  # unmount hugetlbfs under any DPDK process running meanwhile.
  if [ "$(awk '/^HugePages_Total:/ {print $2}' /proc/meminfo)" -lt 512 ] && command -v dpdk-hugepages.py >/dev/null; then
    mkdir -p /dev/hugepages  # dpdk-hugepages.py mounts hugetlbfs there
    { dpdk-hugepages.py --reserve 1G && { grep -q '^[^ ]* /dev/hugepages hugetlbfs' /proc/mounts ||
        dpdk-hugepages.py --mount; }; } >/dev/null 2>&1 ||
      echo "setup: could not reserve hugepages; quicsteer runs with --no-huge" >&2
  fi
  mountpoint -q /sys/fs/bpf 2>/dev/null || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && { reserve_memory; exit 0; }

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "quicsteer needs these Debian packages: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
reserve_memory
