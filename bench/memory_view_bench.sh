#!/usr/bin/env bash
# memory_view_bench: traceview's memory view on a trace of ~2.5M memory events — the first complete
# frame of `--view memory` (every rank's per-category series built, reduced and drawn) — beside
# `tracerun info` on the same file measured in the same run (the baseline), alternated, medians.
# Prints a table; asserts nothing; never run by CI. Results and the command: docs/performance.md.
#
#   bench/memory_view_bench.sh BUILD_DIR [TRACE] [--repeat R]
#
# Without TRACE it writes a 4-rank trace with merge_bench (--events 1562500: ~40% memory events,
# 2.5M in all) in $TMPDIR.
set -euo pipefail
build=${1:?usage: memory_view_bench.sh BUILD_DIR [TRACE] [--repeat R]}
shift
trace=""
if [[ $# -gt 0 && $1 != --* ]]; then trace=$1; shift; fi
repeat=5
while [[ $# -gt 0 ]]; do
  case $1 in
    --repeat) repeat=$2; shift 2 ;;
    *) echo "memory_view_bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [[ -z $trace ]]; then
  dir=${TMPDIR:-/tmp}/memory_view_bench
  mkdir -p "$dir"
  trace=$dir/merge_bench_merged.db
  if [[ ! -f $trace ]]; then
    "$build/bench/merge_bench" --ranks 4 --events 1562500 --repeat 1 --dir "$dir" --keep >&2
    rm -f "$dir"/merge_bench_copy.db "$dir"/merge_bench_rank*.db
  fi
fi
events=$("$build/interpose/tracerun" info "$trace" | awk '/memory/ {for (i = 1; i <= NF; ++i) if ($i ~ /^memory/) print $(i - 1)}' | head -1)
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
info_s=(); first=()
shot=$(mktemp --suffix .png)
for ((i = 0; i < repeat; ++i)); do  # alternated: load changes hit both alike
  s=$( { /usr/bin/time -f "%e" "$build/interpose/tracerun" info "$trace" >/dev/null; } 2>&1 | tail -1)
  info_s+=("$s")
  out=$(xvfb-run -a -s "-screen 0 1920x1080x24" "$build/viewer/traceview" "$trace" \
          --view memory --screenshot "$shot" --size 1600x900 --log-actions)
  first+=("$(echo "$out" | awk '/^first complete frame/ {print $4}')")
  echo "run $((i + 1)): info ${info_s[-1]} s; memory view first complete frame ${first[-1]} ms" >&2
done
rm -f "$shot"
m() { printf '%s\n' "$@" | median; }
I=$(m "${info_s[@]}"); F=$(m "${first[@]}")
echo "memory_view_bench: $trace ($((($(stat -c %s "$trace")) / 1048576)) MiB, memory events: ${events:-?}), median of $repeat, load $(cut -d' ' -f1 /proc/loadavg)"
echo "| what | median | target | vs tracerun info |"
echo "| --- | --- | --- | --- |"
echo "| tracerun info (baseline) | ${I} s | | 1 |"
awk -v f="$F" -v i="$I" 'BEGIN {printf "| memory view: first complete frame | %.0f ms | <= 1000 ms | %.2fx |\n", f, f / 1000 / i}'
