# Sourced first by every benchmark driver (scripts/bench/*.sh):
#   source "$(dirname "$0")/lib/common.sh"
# Sets bash's strict mode, root (the source tree) and build (QS_BUILD_DIR:
# another plain build directory; ./build by default), and brings in
# build_bench (lib/build.sh). cpu_model prints the CPU's model name, which
# every result names with its figures.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[1]:-$0}")/../.." && pwd)
build=${QS_BUILD_DIR:-$root/build}
source "$root/scripts/bench/lib/build.sh"

cpu_model() { grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'; }

# bench_whole_number CALLER OPTION VALUE: exits 2 unless VALUE is a whole
# number >= 1.
bench_whole_number() {
  [[ $3 =~ ^[1-9][0-9]*$ ]] || { echo "$1: $2 wants a whole number >= 1" >&2; exit 2; }
}

# bench_need_root CALLER: the drivers that make network namespaces.
bench_need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "$1: needs root (network namespaces)" >&2; exit 1; }
}
