# Sourced by the bench drivers (scripts/bench/*.sh): builds what a benchmark
# needs in the plain build directory.
#   build_bench CALLER TARGET...
# $build (QS_BUILD_DIR or ./build) is configured if it is not yet, the
# targets are built, and a sanitizer build (which has no DPDK benchmarks) is a
# clear error naming CALLER.
build_bench() {
  local caller=$1
  shift
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" >/dev/null
  fi
  local t
  for t in "$@"; do
    if ! ninja -C "$build" -t query "$t" >/dev/null 2>&1; then
      echo "$caller: $build has no $(basename "$t") (is it a sanitizer build?)" >&2
      exit 1
    fi
  done
  ninja -C "$build" "$@" >/dev/null
}
