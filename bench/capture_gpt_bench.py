#!/usr/bin/python3
"""Cost of tracing a realistic small training step: gpttrain's small GPT traced vs untraced.

Runs `gpttrain` (one process, one intra-op thread) plain and with libtracerun.so preloaded and
configured through the environment (what `tracerun -- gpttrain` does, minus the merge after the
run; the environment also sets the writer's drain interval for the writer-idle row) with several
capture settings, the runs of all settings interleaved in a fresh random order each round, and
compares the median step time (gpttrain's own per-step "ms" from --log-json, the first --warmup steps
of each run dropped) with the untraced median of the same rounds. Also prints the CPU time of the
whole run (program + tracerun's writer thread, from wait4) per step. Not a test: prints a table.

--model small (the default: 2 layers, hidden 128; ops of a few microseconds, the capture's worst
case) or target (6 layers, hidden 384, sequence 256: the MFU target size of docs/performance.md,
GEMM-dominated).

usage: capture_gpt_bench.py [--model small|target] [--rounds 5] [--steps 30] [--warmup 5]
                            [--build build]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

MODELS = {
    "small": ["--layers", "2", "--hidden", "128", "--heads", "4", "--seq-len", "128"],
    "target": ["--layers", "6", "--hidden", "384", "--heads", "6", "--seq-len", "256"],
}
COMMON = ["--global-batch", "8", "--micro-batch-size", "8", "--threads", "1", "--quiet"]
# name -> (TRACERUN_CAPTURE, TRACERUN_SHAPES[, TRACERUN_DRAIN_MS]); None: untraced
CONFIGS = {
    "untraced": None,
    # libempty_callback.so (bench/empty_callback_preload.cpp): one empty RecordFunction callback
    # for tracerun's scopes, what any RecordFunction-based tracer pays before doing anything.
    "empty callback (tracerun's scopes)": ("empty",),
    "empty callback, needing inputs": ("empty", "inputs"),
    # The same callback reading tracerun's clock at both ends: the least a tracer that times every
    # op (and, needing inputs, records shapes) pays.
    "clock-only callback, needing inputs": ("empty", "inputs", "clock"),
    "traced: ops,scopes,memory,comm + shapes (default)": ("ops,scopes,memory,comm", "1"),
    "traced: ops,scopes + shapes (no memory)": ("ops,scopes", "1"),
    "traced: ops,scopes, no shapes": ("ops,scopes", "0"),
    "traced: default + tensors": ("ops,scopes,memory,comm,tensors", "1"),
    # The writer drains only at exit (TRACERUN_DRAIN_MS: 10 min; 30 steps fit the 16 MiB ring):
    # the traced thread's own cost, without the writer competing for a CPU.
    "traced: default, writer idle while timed": ("ops,scopes,memory,comm", "1", "600000"),
    # The raw shard writer (TRACERUN_WRITER=raw): records appended to t.db.raw while training, the
    # SQLite shard built when the process stops (its CPU is in this row's CPU/step, not in ms/step).
    "traced: default, raw writer": ("ops,scopes,memory,comm", "1", None, "raw"),
}


def run(build, model, capture, steps, warmup, tmp):
    log = os.path.join(tmp, "steps.json")
    cmd = [os.path.join(build, "trainer", "gpttrain"), *model, "--steps", str(steps),
           "--log-json", log]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if capture is not None and capture[0] == "empty":
        env.update(LD_PRELOAD=os.path.abspath(os.path.join(build, "bench", "libempty_callback.so")),
                   EMPTY_CALLBACK_INPUTS="1" if "inputs" in capture else "0",
                   EMPTY_CALLBACK_CLOCK="1" if "clock" in capture else "0")
    elif capture is not None:
        shard = os.path.join(tmp, "t.db")
        for stale in (shard, shard + "-wal", shard + "-shm", shard + ".raw"):
            if os.path.exists(stale):
                os.unlink(stale)
        env.update(LD_PRELOAD=os.path.abspath(os.path.join(build, "interpose", "libtracerun.so")),
                   TRACERUN_OUTPUT=shard, TRACERUN_CAPTURE=capture[0], TRACERUN_SHAPES=capture[1])
        if len(capture) > 2 and capture[2] is not None:
            env["TRACERUN_DRAIN_MS"] = capture[2]
        env["TRACERUN_WRITER"] = capture[3] if len(capture) > 3 else "sqlite"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(cmd)}")
    with open(log) as f:
        ms = [json.loads(line)["ms"] for line in f if line.strip()]
    cpu_ms = (usage.ru_utime + usage.ru_stime) * 1e3
    return statistics.median(ms[warmup:]), cpu_ms / steps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--build", default="build")
    p.add_argument("--model", choices=sorted(MODELS), default="small")
    p.add_argument("--warmup", type=int, default=5, help="first steps of each run not counted")
    a = p.parse_args()
    if a.steps <= a.warmup:
        sys.exit("--steps must be larger than --warmup")
    model = MODELS[a.model] + COMMON
    rng = random.Random(12345)
    step = {k: [] for k in CONFIGS}
    cpu = {k: [] for k in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            names = list(CONFIGS)
            rng.shuffle(names)
            for name in names:
                s, c = run(a.build, model, CONFIGS[name], a.steps, a.warmup, tmp)
                step[name].append(s)
                cpu[name].append(c)
    base = statistics.median(step["untraced"])
    base_cpu = statistics.median(cpu["untraced"])
    print(f"gpttrain {' '.join(model)}: {a.steps} steps per run (first {a.warmup} dropped), "
          f"median of {a.rounds} interleaved rounds; load average {os.getloadavg()[0]:.2f}")
    print(f"{'configuration':52} {'ms/step':>8} {'ratio':>6} {'cpu ms/step':>12} {'ratio':>6}")
    for name in CONFIGS:
        s, c = statistics.median(step[name]), statistics.median(cpu[name])
        print(f"{name:52} {s:8.1f} {s / base:6.3f} {c:12.1f} {c / base_cpu:6.3f}")


if __name__ == "__main__":
    main()
