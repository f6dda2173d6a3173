# Sourced by the benchmark drivers whose EAL processes run one at a time
# (e2e.sh, forwarding.sh, ringloop.sh): EAL memory by quicsteer's own rule
# (choose_memory in dataplane/runtime/main.cpp): hugepages when as many MB of
# them are free as the runs ask for with -m, ordinary pages (--no-huge)
# otherwise.
#
#   bench_memory CALLER MB auto|hugepages|no-huge
#
# sets memory ("hugepages" or "no-huge"), memory_text (a line for the output)
# and eal_memory (the EAL argument). On hugepages that is --huge-unlink: the
# runs have no shared configuration (--no-shconf), so no other process maps
# the pages; their files go at once and the pages come back when the process
# ends, free for the next run. The choice is made once, so every run of one
# benchmark uses the same memory. "hugepages" without enough free is an error.
#
# pktgen.sh keeps --no-huge: it runs two EAL processes at once (the
# generator and quicsteer on one memif link), and each one's -m would have to
# be free at the same time, more than the 1 GB of pages scripts/setup.sh
# reserves.
bench_memory() {
  local caller=$1 mb=$2 want=$3 asked=$3
  local free_pages page_kb free_mb
  free_pages=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
  page_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
  free_mb=$(( ${free_pages:-0} * ${page_kb:-0} / 1024 ))
  if ! awk '$3 == "hugetlbfs" {found = 1} END {exit !found}' /proc/mounts; then free_mb=0; fi
  case $want in
    auto) if [ "$free_mb" -ge "$mb" ]; then want=hugepages; else want=no-huge; fi ;;
    hugepages)
      [ "$free_mb" -ge "$mb" ] ||
        { echo "$caller: hugepages wanted, $free_mb MB free on a mounted hugetlbfs, $mb MB needed (scripts/setup.sh reserves them as root)" >&2; exit 1; } ;;
    no-huge) ;;
    *) echo "$caller: memory wants auto, hugepages or no-huge" >&2; exit 2 ;;
  esac
  memory=$want
  if [ "$memory" = hugepages ]; then
    eal_memory=(--huge-unlink)
    memory_text="hugepages ($free_mb MB free, -m $mb reserves its amount at start)"
  else
    eal_memory=(--no-huge)
    if [ "$asked" = no-huge ]; then
      memory_text="ordinary pages (--no-huge, as asked)"
    else
      memory_text="ordinary pages (--no-huge): $free_mb MB of hugepages free, $mb MB wanted"
    fi
  fi
}
