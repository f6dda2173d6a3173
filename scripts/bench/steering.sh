#!/usr/bin/env bash
# scripts/bench/steering.sh [--json FILE] [--repetitions N] [google-benchmark flags]
#
# Steering cost per packet (bursts of 32): parse only; parse + QUIC-LB
# plaintext, single-pass AES and four-pass AES decode; parse + hash fallback;
# parse + forwarding-table lookups that hit and that miss; the owners' hash
# ring and the backends' Maglev table alone (a lookup each; building a
# 1000-backend table, per run rather than per packet);
# against an rte_jhash software-RSS reference over the same frames, measured
# in the same run (tests/bench/bench_steering.cpp says what each case does and
# why the reference is fair). Builds tests/bench/bench_steering in ./build
# (configuring it if missing), runs every case N times (default 9) with the
# repetitions interleaved at random, so drift hits all cases alike, and prints
# median ns/packet, min..max, and ours/jhash ratios against the targets
# (plaintext <= 2x, single pass <= 3x, four pass <= 6x, forwarding-table
# lookups hit and miss <= 3x) with the CPU model, and which pages backed each
# forwarding-table case's table (/proc/self/smaps: learned_hit_hugepages on
# 2 MB pages, skipped when none are free; the others on the heap's).
# --json FILE writes the same figures. Run it on an otherwise idle machine.
source "$(dirname "$0")/lib/common.sh"
json_out=""
reps=9
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json_out=${2:?--json needs a file}; shift 2 ;;
    --repetitions) reps=${2:?--repetitions needs a number}; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done

build_bench steering.sh tests/bench/bench_steering

raw=$(mktemp)
trap 'rm -f "$raw" "$raw.log"' EXIT
"$build/tests/bench/bench_steering" --benchmark_repetitions="$reps" \
  --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 \
  --benchmark_out="$raw" --benchmark_out_format=json ${extra[@]+"${extra[@]}"} >/dev/null 2>"$raw.log" ||
  { cat "$raw.log" >&2; exit 1; }

cpu=$(cpu_model)
python3 - "$raw" "$cpu" "$json_out" <<'PY'
import json, statistics, sys
raw, cpu, out = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {}
pages = {}  # the forwarding-table cases: what backed the table (kB page size, kB on THP)
per_table = {}  # cases without a burst counter (maglev_build): per run, not per packet
for b in json.load(open(raw))["benchmarks"]:
    if b.get("run_type") != "iteration" or b.get("error_occurred"):
        continue
    if "burst" not in b:
        per_table.setdefault(b["run_name"].removeprefix("BM_"), []).append((b["real_time"], b["time_unit"]))
        continue
    assert b["time_unit"] == "ns"
    name = b["run_name"].removeprefix("BM_")
    runs.setdefault(name, []).append(b["real_time"] / b["burst"])
    if "table_page_kb" in b:
        pages.setdefault(name, set()).add((b["table_page_kb"], b["table_thp_kb"]))
cases = {n: {"median_ns": statistics.median(v), "min_ns": min(v), "max_ns": max(v), "repetitions": len(v)}
         for n, v in runs.items()}
def memory(n):
    # Every repetition's table on the same kind of pages, or all of them named.
    kinds = sorted(pages[n])
    return "; ".join((f"{p:.0f} kB pages" if p else "pages unknown (no /proc/self/smaps entry)")
                     + (f" ({t:.0f} kB of them transparent huge pages)" if t else "")
                     for p, t in kinds)
table_memory = {n: memory(n) for n in pages}
for n in table_memory:
    cases[n]["table_memory"] = table_memory[n]
    cases[n]["table_page_kb"] = sorted(p for p, _ in pages[n])
if "learned_hit_hugepages" not in cases:
    table_memory["learned_hit_hugepages"] = "skipped: no free 2 MB hugepages"
ref = cases["jhash_reference"]["median_ns"]
targets = {"plaintext": 2.0, "single_pass": 3.0, "four_pass": 6.0, "four_pass_full": 6.0,
           "learned_hit": 3.0, "learned_hit_hugepages": 3.0, "learned_miss": 3.0}
ratios = {f"{n}_vs_jhash": cases[n]["median_ns"] / ref
          for n in ["parse", "plaintext", "single_pass", "four_pass", "four_pass_full", "fallback",
                    "learned_hit", "learned_hit_hugepages", "learned_miss", "single_pass_unbatched",
                    "fixture_mix"] if n in cases}
print(f"CPU model: {cpu}")
print(f"{'case':24} {'ns/pkt':>8} {'min..max':>15} {'vs jhash':>9}  target")
order = ["jhash_reference", "parse", "plaintext", "single_pass", "four_pass", "four_pass_full", "fallback",
         "learned_hit", "learned_hit_hugepages", "learned_miss", "single_pass_unbatched", "fixture_mix"]
if "learned_hit_hugepages" not in cases:
    print("learned_hit_hugepages: skipped, no free 2 MB hugepages (scripts/setup.sh reserves them as root)")
for n in sorted(cases, key=lambda n: order.index(n) if n in order else len(order)):
    c = cases[n]
    r = c["median_ns"] / ref
    t = targets.get(n)
    verdict = "" if t is None else f"<= {t:.0f}x {'met' if r <= t else 'NOT MET'}"
    print(f"{n:24} {c['median_ns']:8.2f} {c['min_ns']:7.2f}..{c['max_ns']:<7.2f} {r:8.2f}x  {verdict}")
for n, v in per_table.items():
    print(f"{n:24} {statistics.median(t for t, _ in v):8.2f} {v[0][1]} per run (not per packet)")
for n in pages:
    print(f"{n}: forwarding tables on {table_memory[n]}")
if out:
    json.dump({"cpu": cpu, "burst": 32, "unit": "ns per packet", "cases": cases, "ratios": ratios,
               "table_memory": table_memory,
               "targets": {f"{n}_vs_jhash": t for n, t in targets.items()},
               "per_run": {n: {"median": statistics.median(t for t, _ in v), "unit": v[0][1]}
                           for n, v in per_table.items()}},
              open(out, "w"), indent=2)
    print(f"wrote {out}")
PY
