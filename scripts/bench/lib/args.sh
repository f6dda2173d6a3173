# Sourced by the benchmark drivers that take --json FILE, --runs N and
# --seconds S (e2e.sh, forwarding.sh, ringloop.sh).
#
#   bench_parse_args CALLER USAGE "$@"
#
# Sets json, runs and seconds (the caller sets their defaults first) and
# checks them. A driver with options of its own defines
# bench_extra_arg OPTION VALUE, which sets what OPTION names and returns 0,
# or returns 1 for an option it does not know; every option takes a value.
bench_parse_args() {
  local caller=$1 usage=$2
  shift 2
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || { echo "usage: $usage" >&2; exit 2; }
    case $1 in
      --json) json=$2 ;;
      --runs) runs=$2 ;;
      --seconds) seconds=$2 ;;
      *) if ! declare -F bench_extra_arg >/dev/null || ! bench_extra_arg "$1" "$2"; then
           echo "usage: $usage" >&2
           exit 2
         fi ;;
    esac
    shift 2
  done
  bench_whole_number "$caller" --runs "$runs"
  [[ $seconds =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$caller: --seconds wants a number" >&2; exit 2; }
}
