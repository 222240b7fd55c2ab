#!/usr/bin/env python3
"""What tracing costs on a GPU: nanoGPT on CUDA, plain vs torch.profiler vs tracerun (issue 25 point 5).

karpathy/nanoGPT's model.py, unmodified (tests/gpu/nanogpt_prog.py: 6 layers, 384 wide, 6 heads,
batch 16 x 256 tokens, vocab 50304, AdamW, cuda:0; TF32 matmuls as nanoGPT's train.py sets them,
--no-tf32 for plain fp32), each configuration in its own process, one
after another, the configurations of a round in a fresh random order (the first round in table
order), rounds repeated while the time budget allows. A step is timed from its start to the
torch.cuda.synchronize() that ends it; the first --warmup steps of each run are dropped; a
configuration's number is the median of all its timed steps.

  plain              no tracer
  torch.profiler     CPU + CUDA activities, record_shapes, profile_memory (the trace is not exported)
  tracerun ops       `tracerun --capture ops` (what the launcher does, merge after the run untimed)
  tracerun ops,cuda  ... ops + CUPTI
  tracerun default   the default words: ops,scopes,memory,comm
  tracerun default+cuda
  --attribute adds ops,cuda-sync (ops,cuda with CUPTI's synchronization records, which `cuda`
  leaves out as torch.profiler does) and ops,cuda with one CUDA part off at a time
  (TRACERUN_CUPTI_OFF=clock|correlation): what synchronization records, the timestamp callback
  and the per-op correlation ids each cost

Prints a table: ms/step, added ms and added % against plain, and each tracerun row's added time as
a fraction of torch.profiler's; then ops and kernels per step (counted in the traces, inside the
timed steps) and the cost per op (ops' added time / ops per step) and per kernel ((ops,cuda - ops)
added time / kernels per step). Targets (issue 25): ops,cuda at most half of torch.profiler's added
time; default+cuda at most torch.profiler's. Not a test: nothing fails on a slow number.

Without a CUDA GPU it prints one line and exits 0.

usage: gpu_overhead.py [--build build-gpu] [--json out.json] [--budget-s 170] [--rounds N]
                       [--steps 30] [--warmup 5] [--no-tf32] [--attribute] [--keep DIR]

Why TF32 by default: the first H100 run (2026-11-26) without it ran GPU-bound at 23 ms/step, where
the host's costs hide behind the GPU (torch.profiler added 0.44 ms); issue 25's 10.3 ms/step and
+4.1 ms for torch.profiler are the host-bound regime a tracer's cost shows in.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import gpu_common as g  # noqa: E402

CONFIGS = [
    ("plain", None),
    ("torch.profiler", "profiler"),
    ("tracerun ops", "ops"),
    ("tracerun ops,cuda", "ops,cuda"),
    ("tracerun default", g.DEFAULT_WORDS),
    ("tracerun default+cuda", g.DEFAULT_WORDS + ",cuda"),
]
# --attribute: ops,cuda with synchronization records added (cuda-sync), and with one CUDA part off
# at a time (TRACERUN_CUPTI_OFF, interpose/cuda/cupti_translate.h), so the CUDA side's cost can be
# split between synchronization records, the trace's timestamp callback and the per-op external
# correlation ids.
ATTRIBUTION = [
    ("tracerun ops,cuda +sync", "ops,cuda-sync", None),
    ("tracerun ops,cuda -clock", "ops,cuda", "clock"),
    ("tracerun ops,cuda -correlation", "ops,cuda", "correlation"),
]


def one_run(a, tracerun, nano, name, how, tmp, parts_off=None):
    times = os.path.join(tmp, "times.json")
    db = os.path.join(tmp, name.replace(" ", "_").replace(",", "_").replace("+", "_") + ".db")
    for stale in (times, db):
        if os.path.exists(stale):
            os.unlink(stale)
    if os.path.isdir(db + ".shards"):
        shutil.rmtree(db + ".shards")
    prog = [sys.executable, os.path.join(ROOT, "tests", "gpu", "nanogpt_prog.py"), "--nanogpt-dir", nano,
            "--warmup", str(a.warmup), "--steps", str(a.steps), "--times-json", times]
    if a.tf32:
        prog.append("--tf32")
    if how == "profiler":
        prog += ["--torch-profile", os.path.join(tmp, "unused.json"), "--profile-full", "--no-export"]
        cmd = prog
    elif how is None:
        cmd = prog
    else:
        cmd = g.traced(tracerun, db, how, prog, extra=["-q"] if a.quiet_launcher else [])
    env = None
    if parts_off:
        env = dict(os.environ, TRACERUN_CUPTI_OFF=parts_off)
    rc, text, secs = g.run(cmd, os.path.join(tmp, "run.log"), env=env, timeout=240)
    if rc != 0 or not os.path.exists(times):
        print(f"gpu_overhead: {name} failed (exit {rc}); the end of its output:\n{text[-1500:]}", flush=True)
        return None, None, secs
    with open(times) as f:
        t = json.load(f)
    counts = None
    if how not in (None, "profiler") and os.path.exists(db):
        tr = g.Trace(db)
        origin = int(tr.meta()["origin_ns"])
        w0, w1 = (x - origin for x in t["window_monotonic_ns"])
        n = lambda cats: tr.q(
            f"SELECT count(*) FROM spans WHERE category IN ({','.join(map(str, cats))}) "
            "AND start_ns BETWEEN ? AND ?", w0, w1)[0][0]
        counts = {"ops_per_step": n([g.CAT_OP, g.CAT_BACKWARD]) / a.steps,
                  "kernels_per_step": n([g.CAT_KERNEL]) / a.steps,
                  "copies_per_step": n([g.CAT_MEMCPY]) / a.steps}
        # The plain ops,cuda run's trace (not an attribution run's, with a CUDA part off).
        if a.keep and how == "ops,cuda" and parts_off is None and os.path.getsize(db) < 16 << 20:
            shutil.copy(db, os.path.join(a.keep, "nanogpt_ops_cuda.db"))
    return t["ms"], counts, secs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build-gpu")
    p.add_argument("--json")
    p.add_argument("--budget-s", type=float, default=170)
    p.add_argument("--rounds", type=int, default=5, help="at most this many rounds")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--no-tf32", dest="tf32", action="store_false",
                   help="fp32 matmuls without TF32 (GPU-bound: host costs hide behind the GPU)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--attribute", action="store_true",
                   help="also ops,cuda-sync, and ops,cuda with one CUDA part off at a time (clock, "
                   "correlation)")
    p.add_argument("--keep", help="copy the ops,cuda trace (if under 16 MiB) here")
    p.add_argument("--quiet-launcher", action="store_true", default=True)
    a = p.parse_args()
    try:
        import torch
        ok = bool(torch.version.cuda) and torch.cuda.is_available()
    except Exception:
        ok = False
    if not ok:
        print("gpu_overhead: no CUDA GPU: skipped (needs a torch with CUDA and a visible device)")
        return 0
    tracerun = os.path.join(a.build, "interpose", "tracerun")
    if not os.access(tracerun, os.X_OK):
        sys.exit(f"gpu_overhead: {tracerun} not built")
    nano = g.nanogpt_dir(ROOT)
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gpu_overhead_")
    start = time.monotonic()
    configs = [(name, how, None) for name, how in CONFIGS] + (ATTRIBUTION if a.attribute else [])
    ms = {c[0]: [] for c in configs}
    run_medians = {c[0]: [] for c in configs}
    counts, failed = {}, set()
    rounds, last_round = 0, 0.0
    order = list(configs)
    while rounds < a.rounds:
        if rounds > 0 and time.monotonic() - start + last_round * 1.1 > a.budget_s:
            break
        r0 = time.monotonic()
        for name, how, parts_off in order:
            steps, c, secs = one_run(a, tracerun, nano, name, how, tmp, parts_off)
            if steps is None:
                failed.add(name)
                continue
            ms[name] += steps
            run_medians[name].append(statistics.median(steps))
            if c:
                counts[name] = c
            print(f"round {rounds + 1} {name:24s} {statistics.median(steps):8.2f} ms/step ({secs:.1f} s)", flush=True)
        last_round = time.monotonic() - r0
        rounds += 1
        order = random.sample(configs, len(configs))
    shutil.rmtree(tmp, ignore_errors=True)

    nan = float("nan")
    med = {name: statistics.median(v) if v else nan for name, v in ms.items()}
    plain, prof = med["plain"], med["torch.profiler"]
    added = {name: med[name] - plain for name in med}
    rows = []
    for name, _, _ in configs:
        ratio = added[name] / added["torch.profiler"] if name.startswith("tracerun") and added["torch.profiler"] > 0 else None
        rows.append({"run": name, "ms_per_step": med[name], "added_ms": added[name],
                     "added_pct": 100 * added[name] / plain, "of_profiler_added": ratio,
                     "run_medians": run_medians[name], "failed": name in failed})
    ops_ps = (counts.get("tracerun ops") or {}).get("ops_per_step")
    k_ps = (counts.get("tracerun ops,cuda") or {}).get("kernels_per_step")
    per_op_us = 1e3 * added["tracerun ops"] / ops_ps if ops_ps and ms["tracerun ops"] else None
    per_kernel_us = (1e3 * (added["tracerun ops,cuda"] - added["tracerun ops"]) / k_ps
                     if k_ps and ms["tracerun ops"] and ms["tracerun ops,cuda"] else None)
    targets = {
        "ops,cuda added <= 0.5 x torch.profiler added": added["tracerun ops,cuda"] <= 0.5 * added["torch.profiler"],
        "default+cuda added <= torch.profiler added": added["tracerun default+cuda"] <= added["torch.profiler"],
    }

    print(f"\n== table: nanoGPT on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"median ms/step of {a.steps} steps x {rounds} rounds")
    print(f"{'run':24s} {'ms/step':>8s} {'added':>8s} {'added %':>8s} {'of profiler':>11s}")
    for r in rows:
        ratio = f"{r['of_profiler_added']:.2f}x" if r["of_profiler_added"] is not None else ""
        add = f"{r['added_ms']:+.2f}" if r["run"] != "plain" else ""
        pct = f"{r['added_pct']:+.1f}%" if r["run"] != "plain" else ""
        print(f"{r['run']:24s} {r['ms_per_step']:8.2f} {add:>8s} {pct:>8s} {ratio:>11s}")
    print(f"ops per step {ops_ps if ops_ps is not None else '?'}, kernels per step {k_ps if k_ps is not None else '?'}; "
          f"cost per op {per_op_us:.2f} us, per kernel {per_kernel_us:.2f} us" if per_op_us is not None and per_kernel_us is not None
          else f"ops per step {ops_ps}, kernels per step {k_ps}")
    for what, ok in targets.items():
        print(f"target {'met ' if ok else 'MISSED'}: {what}")
    if failed:
        print(f"runs that failed (see above): {', '.join(sorted(failed))}")

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "steps": a.steps, "warmup": a.warmup, "rounds": rounds, "tf32": a.tf32,
                       "seconds": time.monotonic() - start, "rows": rows, "counts": counts,
                       "cost_per_op_us": per_op_us, "cost_per_kernel_us": per_kernel_us,
                       "targets": targets, "failed": sorted(failed)}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
