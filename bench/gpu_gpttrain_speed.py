#!/usr/bin/env python3
"""gpttrain against nanoGPT at nanoGPT's shape on one CUDA GPU: tokens/s (issue 32's speed target).

Issue 32: on an H100 with PyTorch 2.11, gpttrain at nanoGPT's shape (6 layers, 384 wide, 6 heads,
256 tokens, micro-batch 16, one process) ran 16.6 ms/step in fp32 and 21.0 in bf16-mixed against
nanoGPT's 10.4 ms; the target is at least nanoGPT's tokens/s, fp32 and bf16-mixed. This bench runs,
each in its own process, the configurations of a round in a random order, rounds repeated within a
time budget:

- nanoGPT's model.py, unmodified (tests/gpu/nanogpt_prog.py): fp32 with TF32 (train.py's settings)
  and bf16 autocast (train.py's default dtype);
- gpttrain at the same shape (vocab 50304, dropout 0, AdamW): `--attention standard|flash` x
  `--precision fp32 --tf32 | bf16-autocast --tf32 | bf16-mixed --tf32`.

It prints median ms/step (each run's steps after the warm-up; gpttrain's own per-step "ms" of
--log-json, nanoGPT's per-step times: both end each step on a host-device synchronisation), tokens/s
and each gpttrain row's tokens/s as a fraction of nanoGPT's of the same precision. With --trace-dir
it also traces short runs with `tracerun --capture ops,scopes,cuda` (gpttrain standard and flash in
fp32, flash in bf16-mixed; nanoGPT in fp32 and bf16) and prints the attention kernels gpttrain ran
(which SDPA kernel: flash, memory-efficient or cuDNN), the kernels per step, and the GPU time per
step by kernel family side by side (bench/gpu_kernel_families.py: where gpttrain's extra
milliseconds go, and whether the GPU or the host's launches bound each step). Without a CUDA GPU it
prints one line and exits 0.

usage: gpu_gpttrain_speed.py --build DIR [--nanogpt-dir DIR] [--budget-s 120] [--steps 30]
                             [--warmup 5] [--json PATH] [--trace-dir DIR] [--only REGEX]
"""
import argparse
import json
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "gpu"))
import gpu_common as g  # noqa: E402  (the trace queries the GPU tests use)
import gpu_kernel_families as families  # noqa: E402  (bench/, beside this file)
SHAPE = ["--layers", "6", "--hidden", "384", "--heads", "6", "--seq-len", "256", "--vocab", "50304",
         "--global-batch", "16", "--micro-batch-size", "16", "--dropout", "0"]
TOKENS_PER_STEP = 16 * 256
PRECISIONS = {  # name -> (gpttrain flags, nanogpt_prog flags)
    "fp32+tf32": (["--precision", "fp32", "--tf32"], ["--tf32"]),
    "bf16-autocast": (["--precision", "bf16-autocast", "--tf32"], ["--tf32", "--bf16"]),
    "bf16-mixed": (["--precision", "bf16-mixed", "--tf32"], None),  # nanoGPT has no such mode
}
# SDPA's kernels by name (PyTorch 2.x): flash, memory-efficient (CUTLASS fmha), cuDNN.
ATTENTION_KERNELS = re.compile(r"flash_fwd|flash_bwd|fmha|cutlass.*[Aa]ttention|cudnn.*sdpa|"
                               r"sdpa|MemEff|attention", re.IGNORECASE)


def cuda_ok():
    try:
        import torch
        return bool(torch.version.cuda) and torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - any import failure means: no CUDA torch here
        return False


def run_gpttrain(gpttrain, attention, flags, steps, warmup, work):
    log = os.path.join(work, f"gpttrain_{attention}_{flags[1]}_{random.getrandbits(32):x}.jsonl")
    cmd = [gpttrain, "--device", "cuda", "--backend", "nccl", "--attention", attention,
           "--steps", str(steps + warmup), "--log-json", log, "--quiet"] + SHAPE + flags
    try:  # a 6-step run takes ~15 s; a hung one must not eat the GPU session's one command
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=TRACED_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, None, 0, "", f"traced run still running after {TRACED_RUN_TIMEOUT_S} s: killed"
    if r.returncode != 0:
        return None, r.stdout[-600:]
    with open(log) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [row["ms"] for row in rows if "ms" in row][warmup:], ""


def run_nanogpt(nanogpt_dir, flags, steps, warmup, work):
    times = os.path.join(work, f"nanogpt_{random.getrandbits(32):x}.json")
    # Clipped at 1.0 as train.py clips (grad_clip) and as gpttrain clips by default (--clip-grad):
    # until 2026-11-27 nanoGPT ran unclipped here, while gpttrain paid for the global norm and its
    # host read (the op census, docs/performance.md, found it).
    cmd = [sys.executable, os.path.join(SOURCE, "tests", "gpu", "nanogpt_prog.py"),
           "--nanogpt-dir", nanogpt_dir, "--warmup", str(warmup), "--steps", str(steps),
           "--clip", "1.0", "--times-json", times] + flags
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    if r.returncode != 0:
        return None, r.stdout[-600:]
    with open(times) as f:
        return json.load(f)["ms"], ""


TRACED_STEPS = 6  # per traced run; the first TRACED_SKIP are warm-up, the last ends the window
TRACED_SKIP = 2
TRACED_RUN_TIMEOUT_S = 90  # one traced run (about 15 s on an H100/H200)


def traced_runs(gpttrain, nanogpt_dir):
    """The traced runs of --trace-dir: label -> the program's command line."""
    runs = {}
    for attention, prec in (("standard", "fp32+tf32"), ("flash", "fp32+tf32"),
                            ("flash", "bf16-mixed")):
        runs[f"gpttrain {attention} {prec}"] = (
            [gpttrain, "--device", "cuda", "--backend", "nccl", "--attention", attention,
             "--steps", str(TRACED_STEPS)] + SHAPE + PRECISIONS[prec][0])
    if nanogpt_dir:
        for prec in ("fp32+tf32", "bf16-autocast"):
            runs[f"nanoGPT {prec}"] = (
                [sys.executable, os.path.join(SOURCE, "tests", "gpu", "nanogpt_prog.py"),
                 "--nanogpt-dir", nanogpt_dir, "--warmup", str(TRACED_SKIP),
                 "--steps", str(TRACED_STEPS - TRACED_SKIP), "--clip", "1.0"] + PRECISIONS[prec][1])
    return runs


def traced_census(tracerun, label, prog, trace_dir):
    """Traces one run with ops,scopes,cuda; returns (trace path, {attention kernel: count per
    step}, kernels per step, gpttrain's own line naming the SDPA choice, error or "")."""
    db = os.path.join(trace_dir, re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_") + ".db")
    cmd = [tracerun, "-o", db, "--capture", "ops,scopes,cuda", "--"] + prog
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    said = [line for line in r.stdout.splitlines() if "attention flash" in line]
    if r.returncode != 0 or not os.path.exists(db):
        return None, None, 0, "", f"traced run failed (exit {r.returncode}): {r.stdout[-400:]}"
    counts = g.Trace(db).kernel_counts()
    kernels = sum(counts.values())
    attention_rows = {name: n / TRACED_STEPS for name, n in counts.items()
                      if ATTENTION_KERNELS.search(name)}
    return db, attention_rows, kernels / TRACED_STEPS, said[0] if said else "", ""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build-gpu")
    p.add_argument("--nanogpt-dir", default=os.environ.get("NANOGPT_DIR")
                   or os.path.join(SOURCE, ".gpu-deps", "nanoGPT"))
    p.add_argument("--budget-s", type=float, default=120)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json")
    p.add_argument("--trace-dir")
    p.add_argument("--only", help="run only the configurations whose label matches this regex")
    a = p.parse_args()
    if not cuda_ok():
        print("gpu_gpttrain_speed: no CUDA GPU here (torch without CUDA or no device): skipped")
        return 0
    gpttrain = os.path.join(a.build, "trainer", "gpttrain")
    tracerun = os.path.join(a.build, "interpose", "tracerun")
    if not os.path.exists(gpttrain):
        print(f"gpu_gpttrain_speed: {gpttrain} not built")
        return 1
    have_nanogpt = os.path.isfile(os.path.join(a.nanogpt_dir, "model.py"))
    configs = []  # (label, precision, kind, runner)
    for prec, (gflags, nflags) in PRECISIONS.items():
        if have_nanogpt and nflags is not None:
            configs.append((f"nanoGPT {prec}", prec, "nanoGPT",
                            lambda w, f=nflags: run_nanogpt(a.nanogpt_dir, f, a.steps, a.warmup, w)))
        for attention in ("standard", "flash"):
            configs.append((f"gpttrain {attention} {prec}", prec, attention,
                            lambda w, at=attention, f=gflags:
                            run_gpttrain(gpttrain, at, f, a.steps, a.warmup, w)))
    if a.only:
        configs = [c for c in configs if re.search(a.only, c[0])]
    ms = {label: [] for label, *_ in configs}
    errors = {}
    start = time.monotonic()
    rounds = 0
    with tempfile.TemporaryDirectory(prefix="gpttrain_speed_") as work:
        while True:
            order = list(configs)
            random.shuffle(order)
            round_start = time.monotonic()
            for label, _, _, runner in order:
                times, err = runner(work)
                if times is None:
                    errors[label] = err
                else:
                    ms[label].extend(times)
            rounds += 1
            took = time.monotonic() - round_start
            print(f"round {rounds}: {took:.0f} s", flush=True)
            if time.monotonic() - start + took > a.budget_s:
                break
    rows = []
    for label, prec, kind, _ in configs:
        if not ms[label]:
            continue
        med = statistics.median(ms[label])
        rows.append({"run": label, "precision": prec, "kind": kind, "ms": med,
                     "tokens_per_s": TOKENS_PER_STEP / (med / 1e3), "steps": len(ms[label])})
    base = {r["precision"]: r["tokens_per_s"] for r in rows if r["kind"] == "nanoGPT"}
    base.setdefault("bf16-mixed", base.get("bf16-autocast"))
    print(f"\n{rounds} round(s), {a.steps} timed steps per run after {a.warmup} warm-up")
    print("| run | ms/step | tokens/s | of nanoGPT's tokens/s (same precision) |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        ref = base.get(r["precision"])
        r["of_nanogpt"] = r["tokens_per_s"] / ref if ref and r["kind"] != "nanoGPT" else None
        frac = f"{r['of_nanogpt']:.2f}x" if r["of_nanogpt"] else ""
        print(f"| {r['run']} | {r['ms']:.2f} | {r['tokens_per_s']:,.0f} | {frac} |")
    for label, err in errors.items():
        print(f"{label}: FAILED: {err}")
    census, by_family = {}, {}

    def write_json():  # after the timed rounds, and again after the traced runs
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"rows": rows, "errors": errors, "census": census, "rounds": rounds,
                           "families": by_family}, f, indent=1)

    write_json()  # the timed rounds are kept even if the traced phase is cut off
    if a.trace_dir and os.path.exists(tracerun):
        os.makedirs(a.trace_dir, exist_ok=True)
        runs = traced_runs(gpttrain, a.nanogpt_dir if have_nanogpt else None)
        for label, prog in runs.items():
            db, kernels, per_step, said, err = traced_census(tracerun, label, prog, a.trace_dir)
            census[label] = {"attention_kernels_per_step": kernels, "kernels_per_step": per_step,
                             "gpttrain_says": said, "error": err}
            if err:
                errors[f"traced {label}"] = err
                print(f"\n{label}: {err}")
                continue
            print(f"\n{label}: {per_step:.0f} kernels per step ({TRACED_STEPS} traced steps, "
                  f"initialisation included); {said}")
            for name, n in sorted((kernels or {}).items(), key=lambda kv: -kv[1])[:8]:
                print(f"  {n:6.1f}/step  {name[:160]}")
            try:
                by_family[label] = families.families_per_step(db, TRACED_SKIP)
            except (ValueError, sqlite3.Error) as e:
                errors[f"families {label}"] = str(e)
        if by_family:
            print(f"\nGPU time per step by kernel family (steps {TRACED_SKIP + 1}.."
                  f"{TRACED_STEPS - 1} of each traced run; bench/gpu_kernel_families.py):")
            print(families.table(by_family))
    write_json()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
