#!/usr/bin/env bash
# report_bench: `tracerun report` on a large trace beside `tracerun info` on the same file (the
# baseline: open, counts, PRAGMA quick_check), alternated in one run so load changes hit both alike;
# wall time, CPU time and max RSS (/usr/bin/time) per run, medians, and the report against 3x info.
# With --before BIN it also times another tracerun (an older build) and checks that both print the
# same report, byte for byte. Prints a table; asserts nothing; never run by CI. Results and the
# command: docs/performance.md ("Report on a 10M-event trace").
#
#   bench/report_bench.sh BUILD_DIR TRACE [--repeat R] [--before TRACERUN_BIN]
#
# The trace of docs/performance.md: `tracerun --nproc-per-node 4 -o big.db -- gpttrain --tp 2 --sp
# --pp 2 --global-batch 8 --layers 2 --steps 230 --threads 1 --quiet` (about a minute; put it in
# $TMPDIR, not in the repository).
set -euo pipefail
build=${1:?usage: report_bench.sh BUILD_DIR TRACE [--repeat R] [--before TRACERUN_BIN]}
trace=${2:?usage: report_bench.sh BUILD_DIR TRACE [--repeat R] [--before TRACERUN_BIN]}
shift 2
repeat=3
before=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    *) echo "report_bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
tracerun=$build/interpose/tracerun
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One timed run: "wall cpu rss_mb" (cpu = user + sys).
timed() {
  /usr/bin/time -f "%e %U %S %M" -o "$out/time" "$@" >"$out/stdout"
  tail -1 "$out/time" | awk '{printf "%.2f %.2f %.0f\n", $1, $2 + $3, $4 / 1024}'
}
declare -A wall cpu rss
whats=(info report)
[[ -n $before ]] && whats+=(before)
for ((i = 0; i < repeat; ++i)); do
  for what in "${whats[@]}"; do
    case $what in
      info) read -r w c r < <(timed "$tracerun" info "$trace") ;;
      report)
        read -r w c r < <(timed "$tracerun" report "$trace")
        cp "$out/stdout" "$out/report.txt" ;;
      before)
        read -r w c r < <(timed "$before" report "$trace")
        cp "$out/stdout" "$out/before.txt" ;;
    esac
    wall[$what]+="$w "; cpu[$what]+="$c "; rss[$what]+="$r "
    echo "run $((i + 1)) $what: ${w} s wall, ${c} s CPU, ${r} MB" >&2
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
maxof() { tr ' ' '\n' | grep . | sort -g | tail -1; }
echo "report_bench: $trace ($(($(stat -c %s "$trace") / 1048576)) MiB), $repeat runs each, load $(cut -d' ' -f1 /proc/loadavg) at the end"
echo "| what | wall runs (s) | wall median (s) | CPU median (s) | max RSS (MB) | wall vs info |"
echo "| --- | --- | --- | --- | --- | --- |"
I=$(echo "${wall[info]}" | median)
for what in "${whats[@]}"; do
  W=$(echo "${wall[$what]}" | median)
  C=$(echo "${cpu[$what]}" | median)
  R=$(echo "${rss[$what]}" | maxof)
  label=$what
  [[ $what == info ]] && label="tracerun info (baseline)"
  [[ $what == report ]] && label="tracerun report"
  [[ $what == before ]] && label="tracerun report ($before)"
  runs=$(echo "${wall[$what]}" | sed 's/ $//; s/ /, /g')
  awk -v l="$label" -v runs="$runs" -v w="$W" -v c="$C" -v r="$R" -v i="$I" \
    'BEGIN {printf "| %s | %s | %.2f | %.2f | %d | %.2fx |\n", l, runs, w, c, r, w / i}'
done
if [[ -n $before ]]; then
  if cmp -s "$out/report.txt" "$out/before.txt"; then
    echo "reports identical: yes ($(wc -c <"$out/report.txt") bytes)"
  else
    echo "reports identical: NO"
  fi
fi
