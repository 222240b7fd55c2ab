#!/usr/bin/env bash
# The main job: builds tracerun, traces an unmodified libtorch program, an unmodified PyTorch
# script and an 8-rank gpttrain run (TP x PP x DP), then reads the traces back: info, the report
# (bubbles, memory, ops, communication) and an export for Perfetto, draws the pictures (tracedot:
# model diagrams, call graphs, the autograd and pipeline graphs) and screenshots the viewer.
# Everything it writes lands in out/ (override with OUT_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-out}
# Only what the demo runs: tracerun_demo (top-level CMakeLists.txt), not the tests and benchmarks.
bash scripts/build.sh tracerun_demo
mkdir -p "$OUT_DIR"
TRACERUN="$ROOT/$BUILD_DIR/interpose/tracerun"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

step() { printf '\n== %s\n' "$*"; }

step "1. an unmodified C++ libtorch program, traced"
"$TRACERUN" -o "$OUT_DIR/plain_mlp.db" -- "$BUILD_DIR/samples/plain_libtorch_mlp"

step "2. an ordinary PyTorch script run by Debian's python3, traced"
"$TRACERUN" -o "$OUT_DIR/python_mlp.db" -- /usr/bin/python3 samples/python/train_mlp.py

step "3. gpttrain: TP=2 x PP=2 x DP=2 (8 ranks, 1F1B, ZeRO-1) learning from README.md, traced"
"$TRACERUN" --nproc-per-node 8 -o "$OUT_DIR/gpttrain.db" -- "$BUILD_DIR/trainer/gpttrain" \
  --tp 2 --pp 2 --zero 1 --schedule 1f1b --layers 4 --hidden 64 --heads 4 --seq-len 32 \
  --global-batch 16 --micro-batch-size 2 --steps 6 --data README.md \
  --log-json "$OUT_DIR/gpttrain_log.jsonl"

step "4. what the gpttrain trace holds"
"$TRACERUN" info "$OUT_DIR/gpttrain.db" | head -40

step "5. the report: pipeline bubbles, memory by category, top ops, communication"
"$TRACERUN" report "$OUT_DIR/gpttrain.db"
"$TRACERUN" report "$OUT_DIR/gpttrain.db" --json > "$OUT_DIR/gpttrain_report.json"

step "6. export for Perfetto / chrome://tracing"
"$TRACERUN" export "$OUT_DIR/gpttrain.db" --chrome "$OUT_DIR/gpttrain.json"

step "7. the same trace from the plain sqlite3 shell: top ops by self time on rank 0"
sqlite3 -header -column "$OUT_DIR/gpttrain.db" \
  "SELECT name, count, total_ns/1000 AS total_us, self_ns/1000 AS self_us
     FROM aggregate_names WHERE category = 'op' AND rank = 0 ORDER BY self_ns DESC LIMIT 10"

TRACEDOT="$ROOT/$BUILD_DIR/dot/tracedot"
TRACEVIEW="$ROOT/$BUILD_DIR/viewer/traceview"

step "8. ResNet-18, traced for one training step: torchvision's (unmodified Python) and a C++ one"
"$TRACERUN" -o "$OUT_DIR/resnet18_py.db" -- /usr/bin/python3 samples/python/resnet18_step.py
"$TRACERUN" -o "$OUT_DIR/resnet18_cpp.db" -- "$BUILD_DIR/samples/resnet18_cpp"

step "9. pictures: model diagrams, call graphs, the autograd graph and the pipeline graph"
if [ -x "$TRACEDOT" ]; then
  # Model diagrams with the real dataflow need tensor identities (the tensors word): ResNet-18's
  # step and a 4-rank gpttrain (TP 2 x PP 2, one step) traced again with it, a few seconds.
  "$TRACERUN" --status off --capture ops,scopes,tensors -o "$OUT_DIR/resnet18_flow.db" -- \
    /usr/bin/python3 samples/python/resnet18_step.py > /dev/null
  "$TRACEDOT" model "$OUT_DIR/resnet18_flow.db" -o "$OUT_DIR/resnet18_model.svg"
  "$TRACERUN" --status off --nproc-per-node 4 --capture ops,scopes,tensors \
    -o "$OUT_DIR/gpttrain_flow.db" -- "$BUILD_DIR/trainer/gpttrain" --tp 2 --pp 2 \
    --schedule 1f1b --layers 4 --hidden 64 --heads 4 --seq-len 32 --global-batch 4 \
    --micro-batch-size 2 --steps 1 --data README.md > /dev/null
  "$TRACEDOT" callgraph "$OUT_DIR/resnet18_py.db" -o "$OUT_DIR/resnet18_callgraph.svg"
  "$TRACEDOT" model "$OUT_DIR/resnet18_cpp.db" -o "$OUT_DIR/resnet18_cpp_model.svg"
  "$TRACEDOT" callgraph "$OUT_DIR/resnet18_cpp.db" -o "$OUT_DIR/resnet18_cpp_callgraph.svg"
  "$TRACEDOT" model "$OUT_DIR/gpttrain_flow.db" -o "$OUT_DIR/gpttrain_model.svg"
  "$TRACEDOT" pipeline "$OUT_DIR/gpttrain.db" -o "$OUT_DIR/gpttrain_pipeline.svg"
  "$TRACEDOT" callgraph "$OUT_DIR/gpttrain.db" --rank 0 -o "$OUT_DIR/gpttrain_callgraph.svg"
  "$TRACEDOT" autograd "$OUT_DIR/python_mlp.db" -o "$OUT_DIR/python_mlp_autograd.svg"
  "$TRACEDOT" callgraph "$OUT_DIR/gpttrain.db" --rank 0 --depth 3 -T txt -o "$OUT_DIR/gpttrain_callgraph.txt"
  head -30 "$OUT_DIR/gpttrain_callgraph.txt"
else
  echo "tracedot was not built (Graphviz missing?): no pictures"
fi

step "10. the viewer: a screenshot of each tab on the gpttrain trace (off-screen, under Xvfb)"
if [ -x "$TRACEVIEW" ]; then
  # Every tab traceview has (timeline, pipeline, memory, collectives, callgraph, model, stats,
  # compare), as its --help lists them; the compare tab sets this run beside the 2-rank run below.
  "$TRACERUN" --nproc-per-node 2 --status off -o "$OUT_DIR/gpttrain_dp2.db" -- \
    "$BUILD_DIR/trainer/gpttrain" --layers 2 --hidden 64 --heads 4 --seq-len 32 --global-batch 8 \
    --micro-batch-size 2 --steps 6 --data README.md > /dev/null
  views=$("$TRACEVIEW" --help | sed -n 's/.*--view TEXT:{\([a-z,]*\)}.*/\1/p' | tr , ' ')
  for view in $views; do
    extra=()
    [ "$view" = compare ] && extra=(--compare "$OUT_DIR/gpttrain_dp2.db")
    # The model tab draws the dataflow where the trace has tensor identities (step 9's run).
    trace="$OUT_DIR/gpttrain.db"
    [ "$view" = model ] && [ -f "$OUT_DIR/gpttrain_flow.db" ] && trace="$OUT_DIR/gpttrain_flow.db"
    xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$trace" --view "$view" \
      "${extra[@]}" --screenshot "$OUT_DIR/gpttrain_$view.png" --size 1600x900
    echo "  $OUT_DIR/gpttrain_$view.png"
  done
  # An unmodified Python program's memory by category (issue 33): ResNet-18, 3 steps, SGD momentum.
  "$TRACERUN" --status off -o "$OUT_DIR/resnet18_steps.db" -- \
    /usr/bin/python3 samples/python/resnet18_step.py 8 3 > /dev/null
  xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$OUT_DIR/resnet18_steps.db" --view memory \
    --screenshot "$OUT_DIR/resnet18_py_memory.png" --size 1600x900
  echo "  $OUT_DIR/resnet18_py_memory.png"
  # Flash attention's missing s^2 term (README "Flash attention in the Memory tab"): standard and
  # flash at s 128 and 256 (8 heads, dropout 0, one process, 3 steps); the memory tab draws the
  # activation closed form of the attention kind each run used and the other kind's line.
  for s in 128 256; do
    for attention in standard flash; do
      name="attention_${attention}_s$s"
      "$TRACERUN" --status off -o "$OUT_DIR/$name.db" -- "$BUILD_DIR/trainer/gpttrain" \
        --layers 2 --hidden 64 --heads 8 --seq-len "$s" --vocab 64 --micro-batch-size 2 \
        --global-batch 2 --dropout 0 --attention "$attention" --steps 3 --quiet > /dev/null
      xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$OUT_DIR/$name.db" --view memory \
        --screenshot "$OUT_DIR/${name}_memory.png" --size 1600x900
      echo "  $OUT_DIR/${name}_memory.png"
    done
  done
  # The GPU stream tracks and the GPU tab (README, docs/images/nanogpt_h100_*.png) on the H100
  # nanoGPT trace: a 5 MB file kept outside the repository (GPU_TRACE=PATH to point at it), so a
  # fresh clone skips these two screenshots and says so.
  gpu_trace="${GPU_TRACE:-$ROOT/../shared/gpu-traces/nanogpt_h100_ops_cuda.db}"
  if [ -f "$gpu_trace" ]; then
    # span 72584: a gemm kernel; the window shows it and the aten::mm that launched it.
    xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$gpu_trace" --select 72584 \
      --range 4932300000:4933500000 --screenshot "$OUT_DIR/nanogpt_h100_timeline.png" --size 1600x900
    xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$gpu_trace" --view gpu \
      --screenshot "$OUT_DIR/nanogpt_h100_gpu.png" --size 1600x900
    echo "  $OUT_DIR/nanogpt_h100_timeline.png $OUT_DIR/nanogpt_h100_gpu.png"
  else
    echo "  no GPU trace at $gpu_trace (set GPU_TRACE): the two GPU screenshots are skipped"
  fi
  # nanoGPT's memory by category on a GPU (README, docs/images/nanogpt_h200_memory.png): the trace
  # gpu_memory_categories (tests/gpu/) leaves in build-gpu/tests/gpu/gpu_memory_categories/nanogpt.db
  # on the GPU machine, kept outside the repository (NANOGPT_MEMORY_TRACE=PATH to point at it).
  if [ -n "${NANOGPT_MEMORY_TRACE:-}" ] && [ -f "$NANOGPT_MEMORY_TRACE" ]; then
    # the window of the three training steps (the 4.7 s before them build the model)
    xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$NANOGPT_MEMORY_TRACE" --view memory \
      --range 4650ms:5040ms --screenshot "$OUT_DIR/nanogpt_h200_memory.png" --size 1600x900
    echo "  $OUT_DIR/nanogpt_h200_memory.png"
  else
    echo "  no NANOGPT_MEMORY_TRACE: the nanoGPT memory screenshot is skipped"
  fi
  # nanoGPT on this CPU with AdamW's closed-form line (README, docs/images/nanogpt_cpu_memory.png):
  # karpathy's model.py, unmodified, is not in the repository (.gpu-deps/nanoGPT or NANOGPT_DIR).
  nanogpt_dir="${NANOGPT_DIR:-$ROOT/.gpu-deps/nanoGPT}"
  if [ -f "$nanogpt_dir/model.py" ] && /usr/bin/python3 -c "import torch" 2> /dev/null; then
    OMP_NUM_THREADS=1 "$TRACERUN" --status off -q -o "$OUT_DIR/nanogpt_cpu.db" -- /usr/bin/python3 \
      "$ROOT/tests/e2e/python_memory_train.py" --model nanogpt --nanogpt-dir "$nanogpt_dir" \
      --steps 3 --batch 8 --truth "$OUT_DIR/nanogpt_cpu.truth" > /dev/null
    xvfb-run -a -s "-screen 0 1600x1000x24" "$TRACEVIEW" "$OUT_DIR/nanogpt_cpu.db" --view memory \
      --screenshot "$OUT_DIR/nanogpt_cpu_memory.png" --size 1600x900
    echo "  $OUT_DIR/nanogpt_cpu_memory.png"
  else
    echo "  no nanoGPT model.py in $nanogpt_dir (set NANOGPT_DIR): its CPU memory screenshot is skipped"
  fi
else
  echo "traceview was not built (ImGui or GLFW missing?): no screenshots"
fi

printf '\ndemo done: traces, logs, report, export, pictures and screenshot are in %s/\n' "$OUT_DIR"
