#!/usr/bin/env bash
# viewer_bench: traceview on a large trace under Xvfb — first complete frame, CPU frame time over a
# scripted zoom sweep (whole run → 1 us/px), primitives per frame, resident memory — beside
# `tracerun info` on the same file measured in the same run (the baseline). Prints a table;
# asserts nothing; never run by CI. Results and the command: docs/performance.md.
#
#   bench/viewer_bench.sh BUILD_DIR [TRACE] [--steps N] [--repeat R]
#
# Without TRACE it writes an 8-rank trace of 10M events with merge_bench (--keep) in $TMPDIR.
set -euo pipefail
build=${1:?usage: viewer_bench.sh BUILD_DIR [TRACE] [--steps N] [--repeat R]}
shift
trace=""
if [[ $# -gt 0 && $1 != --* ]]; then trace=$1; shift; fi
steps=40
repeat=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "viewer_bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [[ -z $trace ]]; then
  dir=${TMPDIR:-/tmp}/viewer_bench
  mkdir -p "$dir"
  trace=$dir/merge_bench_merged.db
  if [[ ! -f $trace ]]; then
    "$build/bench/merge_bench" --ranks 8 --events 1250000 --repeat 1 --dir "$dir" --keep >&2
    rm -f "$dir"/merge_bench_copy.db "$dir"/merge_bench_rank*.db
  fi
fi
size=$(stat -c %s "$trace")
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

info_s=(); info_kb=(); first=(); p99=(); p50=(); prims=(); verts=(); rss=(); peak=(); settle=()
readb=()
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((i = 0; i < repeat; ++i)); do  # alternated: load changes hit both alike
  out=$( { /usr/bin/time -f "%e %M" "$build/interpose/tracerun" info "$trace" >/dev/null; } 2>&1 | tail -1)
  info_s+=("$(echo "$out" | cut -d' ' -f1)"); info_kb+=("$(echo "$out" | cut -d' ' -f2)")
  # traceview in the background, its /proc/PID/io polled until it exits: rchar is every byte it
  # read (SQLite's preads, page cache or not), to compare with the file's size.
  xvfb-run -a -s "-screen 0 1920x1080x24" "$build/viewer/traceview" "$trace" \
    --bench-sweep "$steps" --size 1600x900 >"$tmp/out" &
  xpid=$!
  vpid=""
  for ((w = 0; w < 100; ++w)); do
    vpid=$(pgrep -n -f "^$build/viewer/traceview $trace --bench-sweep" || true)
    [[ -n $vpid ]] && break
    sleep 0.05
  done
  rchar=0
  while [[ -n $vpid ]] && io=$(cat "/proc/$vpid/io" 2>/dev/null); do
    rchar=$(echo "$io" | awk '$1 == "rchar:" {print $2}')
    sleep 0.05
  done
  wait "$xpid"
  b=$(cat "$tmp/out")
  readb+=("$rchar")
  get() { echo "$b" | awk -v k="$1" '$1 == k {print $2}'; }
  first+=("$(get first_complete_frame_ms)"); p99+=("$(get cpu_frame_ms_p99)")
  p50+=("$(get cpu_frame_ms_p50)"); prims+=("$(get primitives_max)"); verts+=("$(get vertices_max)")
  rss+=("$(get rss_kb)"); peak+=("$(get rss_peak_kb)"); settle+=("$(get settle_ms_max)")
  echo "run $((i + 1)): info ${info_s[-1]} s; first frame ${first[-1]} ms, p99 ${p99[-1]} ms, peak RSS ${peak[-1]} kB, read ${readb[-1]} B" >&2
done
m() { printf '%s\n' "$@" | median; }
I=$(m "${info_s[@]}"); F=$(m "${first[@]}"); P=$(m "${peak[@]}")
load=$(cut -d' ' -f1 /proc/loadavg)
echo "viewer_bench: $trace ($((size / 1048576)) MiB), $steps zoom steps, median of $repeat, load $load"
echo "| what | median | target | vs tracerun info |"
echo "| --- | --- | --- | --- |"
echo "| tracerun info (baseline): wall / max RSS | ${I} s / $(m "${info_kb[@]}") kB | | 1 |"
awk -v f="$F" -v i="$I" 'BEGIN {printf "| first complete frame | %.0f ms | <= 1000 ms | %.2fx |\n", f, f / 1000 / i}'
echo "| CPU frame p50 / p99 over the sweep | $(m "${p50[@]}") / $(m "${p99[@]}") ms | p99 <= 8 ms | |"
echo "| slowest step to settle (data thread) | $(m "${settle[@]}") ms | | |"
echo "| primitives per frame (max) / vertices (max) | $(m "${prims[@]}") / $(m "${verts[@]}") | <= 50,000 | |"
awk -v p="$P" -v s="$size" -v i="$(m "${info_kb[@]}")" 'BEGIN {printf "| peak resident memory | %.0f MiB (%.1f%% of the file) | <= 25%% of the file | %.1fx |\n", p / 1024, 100 * p * 1024 / s, p / i}'
awk -v r="$(m "${readb[@]}")" -v s="$size" 'BEGIN {printf "| bytes read by the viewer (rchar, whole sweep) | %.0f MiB (%.1f%% of the file) | what is on screen | |\n", r / 1048576, 100 * r / s}'
