#!/usr/bin/env bash
# The GPU check (issue 25 point 7): one command a developer runs on a machine with a CUDA GPU and a
# pip/conda/venv PyTorch with CUDA, inside a 10-minute limit (it aims to finish in under 9):
#
#   bash scripts/gpu-check.sh
#
# Through the device tool: run(command="bash scripts/gpu-check.sh", carry=[".gpu-deps"],
# timeout_s=600). .gpu-deps (git-ignored: scripts/gpu-deps.sh's headers, and nanoGPT in
# .gpu-deps/nanoGPT) travels only when carry names it; without it the build cannot start.
#
# 1. Builds tracerun against the interpreter's PyTorch into build-gpu (scripts/build.sh with
#    TRACERUN_TORCH; Debian's SQLite/CLI11/json/gloo headers unpacked in .gpu-deps/; viewer and dot
#    off; Catch2 unit tests off unless GPU_CHECK_CATCH2=1: CI runs them, and they triple the build).
# 2. Runs `ctest -L gpu` (the eleven scripts of tests/gpu/CMakeLists.txt: census, capture words,
#    NCCL rank, gpttrain losses, cpu offload and flash, Gloo ranks, CUDA memory, memory categories,
#    launch records, and the Python hooks under this torch: always_call, torch.compile).
#    Then bench/flash_attention_bench --device cuda (flash against standard attention, fp32 and
#    bf16, s = 64 to 1024; seconds; its tables go into gpu-check.log).
# 3. Runs bench/gpu_gpttrain_speed.py (gpttrain against nanoGPT at nanoGPT's shape, issue 32; about
#    90 s, then five short traced runs and the GPU time per step by kernel family of each), then
#    bench/gpu_overhead.py with what time is left (at most ~3 minutes; skipped under 150 s, where
#    one round would measure the machine, not the capture).
# 4. Keeps everything in build-gpu/gpu-check/ and, when $OUT is set (the device tool's return
#    channel, which brings back at most 8 files), puts there gpu-check.log, ctest.log, the two
#    benches' JSON, crashes.txt and results.tar.gz (every log, result.json and info, and traces
#    smallest first while it stays under 15 MiB): once right after the tests, again at the end.
#    Prints a short summary. Exits non-zero when the build or a test failed.
#
# Environment: TRACERUN_TORCH (default python3), NANOGPT_DIR (default .gpu-deps/nanoGPT),
# JOBS (default 16), GPU_CHECK_DEADLINE_S (default 530: when the bench must be done),
# GPU_CHECK_SKIP_BENCH=1, GPU_CHECK_SKIP_FLASH=1, GPU_CHECK_CATCH2=1,
# GPU_CHECK_TESTS=REGEX (only the gpu tests it matches),
# GPU_CHECK_BENCH_S (the bench's budget, default 180), GPU_CHECK_BENCH_ARGS (e.g. --attribute),
# GPU_CHECK_SPEED_S (the gpttrain speed bench's budget, default 90), GPU_CHECK_SKIP_SPEED=1,
# GPU_CHECK_CTEST_J (gpu tests at a time, default 5: they share the GPU and time nothing; at 5 the
# label took 114 s on an H200 with 16 cores, 2026-11-27).
set -uo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
DEADLINE=${GPU_CHECK_DEADLINE_S:-530}
BUILD_DIR=build-gpu
PY=${TRACERUN_TORCH:-python3}
PYABS=$(command -v "$PY" 2>/dev/null || true)
RESULTS=$BUILD_DIR/gpu-check
RETURN_DIR=${OUT:-}
# Where the build puts the launcher: interpose/CMakeLists.txt's add_executable(tracerun), no
# RUNTIME_OUTPUT_DIRECTORY, so the binary sits in the build folder of interpose/.
TRACERUN_BIN=$BUILD_DIR/interpose/tracerun
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
LOG="$RESULTS/gpu-check.log"
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
elapsed() { echo $((SECONDS - START)); }

# --- a GPU and a torch with CUDA, or one line and exit 1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  say "gpu-check: no NVIDIA GPU here (nvidia-smi absent or failing)"; exit 1
fi
if [ -z "$PYABS" ] || ! "$PYABS" -c 'import sys, torch; sys.exit(0 if torch.version.cuda and torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  say "gpu-check: $PY cannot import a torch with CUDA and a visible device (set TRACERUN_TORCH)"; exit 1
fi
export PATH="$(dirname "$PYABS"):$PATH"   # cmake, ctest and ninja of a venv
export TRACERUN_PYTHON="$PYABS"           # the interpreter the gpu tests re-execute with
# A crash in a traced process prints its native backtrace (symbolized below into crashes.txt).
export TRACERUN_CRASH_BACKTRACE=${TRACERUN_CRASH_BACKTRACE:-1}
if [ ! -d .gpu-deps/usr/include ]; then
  say "gpu-check: .gpu-deps/usr/include is missing (make it with scripts/gpu-deps.sh; through the device tool, name .gpu-deps in carry)"
  exit 1
fi
if [ -z "${NANOGPT_DIR:-}" ] && [ -f .gpu-deps/nanoGPT/model.py ]; then export NANOGPT_DIR=$PWD/.gpu-deps/nanoGPT; fi
[ -n "${NANOGPT_DIR:-}" ] ||
  say "gpu-check: no nanoGPT (.gpu-deps/nanoGPT/model.py or NANOGPT_DIR): its tests fail, the benches leave it out"

# collect_tests: each gpu test's logs, result.json, census.json and traces under 16 MiB into
# $RESULTS/tests/NAME; crashes.txt from the backtraces TRACERUN_CRASH_BACKTRACE printed (bounded:
# addr2line on pip's libtorch_cuda.so is slow).
collect_tests() {
  local d name
  for d in $BUILD_DIR/tests/gpu/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d"); mkdir -p "$RESULTS/tests/$name"
    find "$d" -maxdepth 1 -type f \( -name '*.log' -o -name '*.txt' -o -name '*.json' -o -name '*.jsonl' -o -name '*.db' \) \
      -size -16M -exec cp {} "$RESULTS/tests/$name/" \;
  done
  if grep -qs "got signal" $BUILD_DIR/tests/gpu/*/*.log; then
    timeout 40 bash scripts/symbolize.sh $BUILD_DIR/tests/gpu/*/*.log >"$RESULTS/crashes.txt" 2>&1
  fi
}

# deliver: what the device tool can bring back, into $RETURN_DIR (at most 8 files of 16 MiB): the
# main logs and JSON files as they are, the rest in results.tar.gz under 15 MiB (traces smallest
# first, halving their share until it fits).
deliver() {
  [ -n "$RETURN_DIR" ] || return 0
  mkdir -p "$RETURN_DIR"
  local f list=$BUILD_DIR/gpu-check.files db_budget=$((48 << 20))
  for f in gpu-check.log ctest.log speed/gpu_gpttrain_speed.json bench/gpu_overhead.json crashes.txt; do
    [ -f "$RESULTS/$f" ] && cp "$RESULTS/$f" "$RETURN_DIR/"
  done
  while :; do
    {
      (cd "$RESULTS" && find . -type f ! -name '*.db' | sort)
      (cd "$RESULTS" && find . -type f -name '*.db' -printf '%s %p\n' | sort -n |
        awk -v b=$db_budget '{ s += $1; if (s <= b) print $2 }')
    } >"$list"
    tar -czf "$RETURN_DIR/results.tar.gz" -C "$RESULTS" -T "$list"
    if [ "$(stat -c %s "$RETURN_DIR/results.tar.gz")" -le $((15 << 20)) ] || [ $db_budget -eq 0 ]; then
      break
    fi
    db_budget=$((db_budget / 2)); [ $db_budget -lt $((1 << 20)) ] && db_budget=0
  done
  rm -f "$list"
}
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PYABS" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "?")'
  echo "git $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "nanoGPT: ${NANOGPT_DIR:-missing}"
} 2>&1 | tee -a "$LOG"

# --- 1. build
CMAKE_ARGS="-DTRACERUN_WANT_VIEWER=OFF -DTRACERUN_WANT_DOT=OFF"
# What the gpu tests and benches run (tracerun_demo: the launcher, libtracerun and its Python hooks,
# libtracerun_nccl, gpttrain, two samples; the flash attention bench), not the other benchmark
# programs; everything with Catch2.
TARGETS="tracerun_demo flash_attention_bench"
[ "${GPU_CHECK_CATCH2:-0}" = 1 ] && TARGETS=
[ "${GPU_CHECK_CATCH2:-0}" = 1 ] || CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON"
say "== build ($BUILD_DIR, ${TARGETS:-all targets}, JOBS=${JOBS:-16}) at $(elapsed) s"
TRACERUN_KEEP_GOING=1 TRACERUN_TORCH="$PY" TRACERUN_DEPS_PREFIX=.gpu-deps BUILD_DIR=$BUILD_DIR \
  TRACERUN_CMAKE_ARGS="$CMAKE_ARGS" TRACERUN_TARGETS="$TARGETS" JOBS=${JOBS:-16} \
  bash scripts/build.sh >"$RESULTS/build.log" 2>&1
BUILD_RC=$?
say "build: exit $BUILD_RC after $(elapsed) s (log: build.log)"
if [ $BUILD_RC -ne 0 ]; then
  # Keep going with what was built (TRACERUN_KEEP_GOING): the tests of a missing target fail on
  # their own, the others still give their answers in this one GPU session.
  grep -E "error|FAILED" "$RESULTS/build.log" | head -n 30 | tee -a "$LOG"
  if [ ! -x "$TRACERUN_BIN" ]; then
    say "gpu-check: FAILED (build: no tracerun binary at $TRACERUN_BIN)"; deliver; exit 1
  fi
  say "gpu-check: the build FAILED for some targets; running the tests anyway"
fi
grep -E "^-- (tracerun configuration|  )" "$RESULTS/build.log" | head -30 >>"$LOG" || true

# --- 2. the gpu label (each test has its own TIMEOUT; the whole label is cut at the deadline)
CTEST_LIMIT=$((DEADLINE - $(elapsed) - 60))
[ $CTEST_LIMIT -gt 360 ] && CTEST_LIMIT=360
say "== ctest -L gpu at $(elapsed) s (limit ${CTEST_LIMIT} s)"
timeout --signal=TERM --kill-after=10 $CTEST_LIMIT \
  ctest --test-dir $BUILD_DIR -L gpu -j ${GPU_CHECK_CTEST_J:-5} ${GPU_CHECK_TESTS:+-R "$GPU_CHECK_TESTS"} --output-on-failure \
  >"$RESULTS/ctest.log" 2>&1
CTEST_RC=$?
say "ctest: exit $CTEST_RC after $(elapsed) s (log: ctest.log)"
collect_tests
deliver  # the tests' evidence is back even if a bench below outlives the command's limit

# --- 2b. flash against standard attention on CUDA (issue 32's GPU table; seconds): nanoGPT's
#         attention shape (batch 16, 6 heads of 64), fp32 and bf16, s = 64 to 1024; into the log
FLASH_BIN=$BUILD_DIR/bench/flash_attention_bench
if [ "${GPU_CHECK_SKIP_FLASH:-0}" = 1 ]; then
  say "== flash bench skipped (asked)"
elif [ ! -x "$FLASH_BIN" ]; then
  say "== flash bench: $FLASH_BIN was not built"
else
  mkdir -p "$RESULTS/flash"
  for dtype in fp32 bf16; do
    if [ $(( DEADLINE - $(elapsed) )) -lt 60 ]; then
      say "== flash bench ($dtype) skipped: under 60 s to the deadline"
      continue
    fi
    say "== flash_attention_bench --device cuda --dtype $dtype at $(elapsed) s"
    timeout 30 "$FLASH_BIN" --device cuda --dtype $dtype --batch 16 --heads 6 --head-dim 64 \
      >"$RESULTS/flash/$dtype.log" 2>&1
    say "flash bench ($dtype): exit $? after $(elapsed) s"
    sed 's/^/  /' "$RESULTS/flash/$dtype.log" | tee -a "$LOG"
  done
fi

# bench_stage LABEL DIR SCRIPT BUDGET GRACE SKIP [ARGS...]: runs bench/SCRIPT with --build,
# --budget-s BUDGET and --json DIR/NAME.json plus ARGS, its output in $RESULTS/DIR/NAME.log, killed
# after BUDGET + GRACE seconds; one line instead when SKIP is 1 or BUDGET is under 60 s. Sets
# STAGE_RC (its exit status, or "skipped").
bench_stage() {
  local label=$1 dir=$2 script=$3 budget=$4 grace=$5 skip=$6
  shift 6
  local name
  name=$(basename "$script" .py)
  STAGE_RC=skipped
  if [ "$skip" = 1 ]; then say "== $label skipped (asked)"; return; fi
  if [ "$budget" -lt 60 ]; then say "== $label skipped: too little time before the deadline"; return; fi
  say "== bench/$script at $(elapsed) s (budget ${budget} s)"
  mkdir -p "$RESULTS/$dir"
  PYTHONUNBUFFERED=1 timeout --signal=TERM --kill-after=10 $((budget + grace)) \
    "$PYABS" "bench/$script" --build $BUILD_DIR --budget-s "$budget" \
    --json "$RESULTS/$dir/$name.json" "$@" >"$RESULTS/$dir/$name.log" 2>&1
  STAGE_RC=$?
  say "$label: exit $STAGE_RC after $(elapsed) s (log: $dir/$name.log)"
}

# --- 3a. gpttrain against nanoGPT at nanoGPT's shape (issue 32's tokens/s target), traced once;
#         it runs only when the overhead bench keeps at least a minute after it
SPEED_BUDGET=${GPU_CHECK_SPEED_S:-90}
[ $((DEADLINE - $(elapsed) - SPEED_BUDGET - 60)) -lt 60 ] && SPEED_BUDGET=0
# Its traced runs after the timed rounds get up to 200 s, but the stage ends by DEADLINE + 40.
SPEED_GRACE=$((DEADLINE + 40 - $(elapsed) - SPEED_BUDGET))
[ $SPEED_GRACE -gt 200 ] && SPEED_GRACE=200
[ $SPEED_GRACE -lt 30 ] && SPEED_GRACE=30
bench_stage "gpttrain speed" speed gpu_gpttrain_speed.py "$SPEED_BUDGET" "$SPEED_GRACE" \
  "${GPU_CHECK_SKIP_SPEED:-0}" --trace-dir "$RESULTS/speed"
SPEED_RC=$STAGE_RC

# --- 3b. the overhead bench, with what time is left
BENCH_BUDGET=$((DEADLINE - $(elapsed) - 15))
[ $BENCH_BUDGET -gt ${GPU_CHECK_BENCH_S:-180} ] && BENCH_BUDGET=${GPU_CHECK_BENCH_S:-180}
# One round of six configurations is ~50 s and measures the machine, not the capture
# (docs/performance.md): under two rounds' time, leave the device time for a run of its own.
if [ $BENCH_BUDGET -lt 150 ] && [ "${GPU_CHECK_SKIP_BENCH:-0}" != 1 ]; then
  say "== bench skipped: ${BENCH_BUDGET} s left, two rounds need 150 (alone: GPU_CHECK_TESTS=none GPU_CHECK_SKIP_SPEED=1 GPU_CHECK_BENCH_S=400 GPU_CHECK_DEADLINE_S=540)"
  BENCH_RC=skipped
else
  # shellcheck disable=SC2086  # GPU_CHECK_BENCH_ARGS is a list of words
  bench_stage bench bench gpu_overhead.py "$BENCH_BUDGET" 30 "${GPU_CHECK_SKIP_BENCH:-0}" \
    --keep "$RESULTS/bench" ${GPU_CHECK_BENCH_ARGS:-}
  BENCH_RC=$STAGE_RC
fi

# --- 4. the benches' output joins the tests' (collected after ctest)

# --- summary
{
  echo "== summary ($(elapsed) s)"
  grep -E "tests passed|tests failed|Passed|Failed|Not Run|Skipped|\*\*\*" "$RESULTS/ctest.log" | sed 's/^/  /' | head -20
  for r in $BUILD_DIR/tests/gpu/*/result.json; do
    [ -f "$r" ] || continue
    "$PYABS" - "$r" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [c for c in r["checks"] if not c["ok"]]
print(f"  {r['test']}: {'passed' if r['passed'] else 'FAILED'} ({len(r['checks']) - len(bad)}/{len(r['checks'])})")
for c in bad[:4]:
    print(f"    FAIL {c['check']}: {c['detail'].splitlines()[0][:150] if c['detail'] else ''}")
EOF
  done
  if [ -f "$RESULTS/speed/gpu_gpttrain_speed.log" ]; then
    sed -n '/^| run/,$p' "$RESULTS/speed/gpu_gpttrain_speed.log" | sed 's/^/  /' | head -40
    sed -n '/^GPU time per step by kernel family/,$p' "$RESULTS/speed/gpu_gpttrain_speed.log" \
      | sed 's/^/  /' | head -20
  fi
  if [ -f "$RESULTS/bench/gpu_overhead.log" ]; then
    sed -n '/^== table/,$p' "$RESULTS/bench/gpu_overhead.log" | sed 's/^/  /' | head -30
  fi
  [ -s "$RESULTS/crashes.txt" ] && { echo "  crashes (symbolized, crashes.txt):"; head -12 "$RESULTS/crashes.txt" | sed 's/^/    /'; }
  grep -rhs "could not be translated" $BUILD_DIR/tests/gpu | sort | uniq -c | head -5 | sed 's/^/  /'
  echo "  results in $RESULTS${RETURN_DIR:+ (and in \$OUT: the logs, JSON files and results.tar.gz)}"
} 2>&1 | tee -a "$LOG"
RC=0
if [ $CTEST_RC -ne 0 ]; then say "gpu-check: FAILED (ctest exit $CTEST_RC)"; RC=1
elif [ $BUILD_RC -ne 0 ]; then say "gpu-check: FAILED (build exit $BUILD_RC)"; RC=1
else say "gpu-check: ok (speed: $SPEED_RC, bench: $BENCH_RC)"; fi
deliver
exit $RC
