# Sourced by the benchmark drivers that measure dpdk-testpmd (e2e.sh,
# ringloop.sh): testpmd runs interactively, fed through a FIFO once its
# prompt is up, so that the measured window starts after initialisation; its
# rate is what "show port stats all" reports between the two calls `seconds`
# apart (testpmd times them with the TSC).
#
#   run_testpmd CALLER OUT WORK SECONDS START_COMMAND TESTPMD_ARGS...
#
# CALLER names the driver in errors; OUT receives testpmd's output; WORK is
# the driver's scratch directory (the FIFO goes there); START_COMMAND is what
# starts forwarding ("start", "start tx_first 8"). The caller's EXIT trap
# should kill $tp_pid, which is set while testpmd runs.
tp_pid=
run_testpmd() {
  local caller=$1 out=$2 work=$3 seconds=$4 start=$5
  shift 5
  local fifo=$work/testpmd.in
  rm -f "$fifo"
  mkfifo "$fifo"
  dpdk-testpmd "$@" < "$fifo" > "$out" 2>&1 &
  tp_pid=$!
  exec 3> "$fifo"
  local waited=0
  until grep -q 'testpmd> ' "$out" 2>/dev/null; do
    sleep 0.1
    waited=$((waited + 1))
    if [ $waited -gt 600 ] || ! kill -0 "$tp_pid" 2>/dev/null; then
      echo "$caller: testpmd did not come up; its output:" >&2
      cat "$out" >&2
      exit 1
    fi
  done
  echo "$start" >&3
  sleep 1
  echo "show port stats all" >&3
  sleep "$seconds"
  echo "show port stats all" >&3
  echo stop >&3
  echo quit >&3
  exec 3>&-
  wait "$tp_pid"
  tp_pid=
}
