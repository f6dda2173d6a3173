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
