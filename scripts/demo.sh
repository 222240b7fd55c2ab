#!/usr/bin/env bash
# The main job: builds tracerun, traces an unmodified libtorch program, an unmodified PyTorch
# script and a gpttrain run, then reads the traces back (info) and exports one for Perfetto.
# Everything it writes lands in out/ (override with OUT_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-out}
bash scripts/build.sh
mkdir -p "$OUT_DIR"
TRACERUN="$ROOT/$BUILD_DIR/interpose/tracerun"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

step() { printf '\n== %s\n' "$*"; }

step "1. an unmodified C++ libtorch program, traced"
"$TRACERUN" -o "$OUT_DIR/plain_mlp.db" -- "$BUILD_DIR/samples/plain_libtorch_mlp"

step "2. an ordinary PyTorch script run by Debian's python3, traced"
"$TRACERUN" -o "$OUT_DIR/python_mlp.db" -- /usr/bin/python3 samples/python/train_mlp.py

step "3. gpttrain (GPT, one process) learning from README.md, traced"
"$TRACERUN" -o "$OUT_DIR/gpttrain.db" -- "$BUILD_DIR/trainer/gpttrain" \
  --layers 2 --hidden 64 --heads 4 --seq-len 32 --global-batch 8 --micro-batch-size 2 \
  --steps 10 --data README.md --log-json "$OUT_DIR/gpttrain_log.jsonl"

step "4. what the gpttrain trace holds"
"$TRACERUN" info "$OUT_DIR/gpttrain.db"

step "5. export for Perfetto / chrome://tracing"
"$TRACERUN" export "$OUT_DIR/gpttrain.db" --chrome "$OUT_DIR/gpttrain.json"

step "6. the same trace from the plain sqlite3 shell: top ops by self time"
sqlite3 -header -column "$OUT_DIR/gpttrain.db" \
  "SELECT name, count, total_ns/1000 AS total_us, self_ns/1000 AS self_us
     FROM aggregate_names WHERE category = 'op' ORDER BY self_ns DESC LIMIT 10"

printf '\ndemo done: traces, log and export are in %s/\n' "$OUT_DIR"
