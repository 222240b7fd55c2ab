#!/usr/bin/env python3
"""GPU time per training step by kernel family, from tracerun traces (issue 32's "where do the
milliseconds go": gpttrain against nanoGPT at the same shape).

For each trace: the device activities (kernels, copies, sets) that start between the start of
step SKIP and the start of the trace's last step, summed by family and divided by the number of
whole steps in that window. Both programs the speed bench traces end every step on a host-device
synchronisation (gpttrain's step, tests/gpu/nanogpt_prog.py's torch.cuda.synchronize()), so an
activity launched by a step starts after that step began and before the next one begins. A step is
a span named "step" on rank 0 (gpttrain's phase scope, nanogpt_prog.py's record_function; the
latter's timed steps nest in its "census" scope).

It also prints each trace's step wall time (traced: longer than untraced) and GPU busy per step:
busy near wall means the GPU is the bottleneck and the families say where; busy well under wall
means the host's launches are.

Not a profiler of its own: the durations are the trace's (CUPTI's activity records). Families are
regular expressions on kernel names, first match wins (FAMILIES below); "other" is what none
matched, listed with --other.

usage: gpu_kernel_families.py [--skip 1] [--other] [--json PATH] LABEL=TRACE.db [LABEL=TRACE.db ...]
"""
import argparse
import json
import os
import re
import sqlite3
import sys

# The span categories of docs/trace-format.md, as the GPU tests name them (one owner).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "gpu"))
from gpu_common import CAT_KERNEL, CAT_MEMCPY, CAT_PHASE, CAT_USER  # noqa: E402

# (family, pattern), first match wins; attention before GEMM (CUTLASS's fmha kernels), softmax and
# loss before elementwise and reduction (their kernels are not TensorIterator's).
FAMILIES = [
    ("attention", r"fmha|flash_fwd|flash_bwd|[Aa]ttention|sdpa|Fmha"),
    ("gemm", r"gemm|Gemm|GEMM|xmma|cutlass|cublas|splitKreduce|sm\d\d_|Kernel2"),
    ("softmax+loss", r"[Ss]oft[Mm]ax|nll_loss|[Cc]ross[Ee]ntropy|log_softmax"),
    ("layer norm", r"layer_norm|LayerNorm|GammaBeta|[Rr]ms[Nn]orm"),
    ("optimizer (multi-tensor)", r"multi_tensor_apply|[Ff]oreach|fused_adam|FusedAdam"),
    ("embedding", r"[Ee]mbedding|indexSelect|index_select|radix_sort|RadixSort|segment|"
                  r"compute_grad_weight|sum_and_scatter"),
    ("reduction", r"reduce_kernel|[Rr]educe"),
    ("elementwise", r"elementwise|unrolled|CatArray|[Gg]elu|copy|Copy|fill|Fill|where|Where|"
                    r"gather|scatter|index"),
    ("memcpy/memset", r"^\[?[Mm]em(cpy|set)"),
]
_COMPILED = [(name, re.compile(p)) for name, p in FAMILIES]


def family(name):
    for fam, rx in _COMPILED:
        if rx.search(name):
            return fam
    return "other"


def step_window(db, skip):
    """(start of step `skip`, start of the last step, whole steps between) on rank 0, or None."""
    starts = [r[0] for r in db.execute(
        "SELECT s.start_ns FROM spans s JOIN strings n ON n.id = s.name JOIN tracks t "
        "ON t.id = s.track WHERE n.value = 'step' AND t.rank = 0 AND s.category IN (?, ?) "
        "ORDER BY s.start_ns", (CAT_USER, CAT_PHASE))]
    if len(starts) < skip + 2:
        return None
    return starts[skip], starts[-1], len(starts) - 1 - skip


def families_per_step(path, skip=1):
    """{"steps", "wall_ms", "busy_ms", "families": {family: ms per step},
    "names": {name: ms per step}} for one trace."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    window = step_window(db, skip)
    if window is None:
        raise ValueError(f"{path}: fewer than {skip + 2} 'step' spans on rank 0")
    t0, t1, steps = window
    by_name = {}
    for name, dur in db.execute(
            "SELECT n.value, s.dur_ns FROM spans s JOIN strings n ON n.id = s.name JOIN tracks t "
            "ON t.id = s.track WHERE t.rank = 0 AND s.category IN (?, ?) AND s.start_ns >= ? "
            "AND s.start_ns < ?", (CAT_KERNEL, CAT_MEMCPY, t0, t1)):
        by_name[name] = by_name.get(name, 0) + dur
    fams = {}
    for name, ns in by_name.items():
        f = family(name)
        fams[f] = fams.get(f, 0) + ns
    per = 1e6 * steps
    return {"steps": steps, "wall_ms": (t1 - t0) / per, "busy_ms": sum(by_name.values()) / per,
            "families": {f: ns / per for f, ns in fams.items()},
            "names": {n: ns / per for n, ns in by_name.items()}}


def table(results):
    """Markdown: one row per family, one column per trace (ms per step), busy and wall last."""
    labels = list(results)
    fams = [f for f, _ in FAMILIES] + ["other"]
    fams = [f for f in fams if any(results[lb]["families"].get(f) for lb in labels)]
    out = ["| family | " + " | ".join(f"{lb} ms/step" for lb in labels) + " |",
           "| --- |" + " --- |" * len(labels)]
    for f in fams:
        out.append(f"| {f} | " + " | ".join(f"{results[lb]['families'].get(f, 0):.3f}"
                                            for lb in labels) + " |")
    out.append("| **GPU busy** | " + " | ".join(f"**{results[lb]['busy_ms']:.3f}**"
                                               for lb in labels) + " |")
    out.append("| step wall (traced) | " + " | ".join(f"{results[lb]['wall_ms']:.3f}"
                                                      for lb in labels) + " |")
    out.append("| steps in the window | " + " | ".join(str(results[lb]["steps"])
                                                       for lb in labels) + " |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", metavar="LABEL=TRACE.db")
    p.add_argument("--skip", type=int, default=1, help="leading steps left out (warm-up)")
    p.add_argument("--other", action="store_true", help="list the kernels no family matched")
    p.add_argument("--json")
    a = p.parse_args()
    results = {}
    for arg in a.traces:
        label, sep, path = arg.partition("=")
        if not sep:
            label, path = arg, arg
        try:
            results[label] = families_per_step(path, a.skip)
        except (ValueError, sqlite3.Error) as e:
            print(f"gpu_kernel_families: {e}", file=sys.stderr)
            return 1
    print(table(results))
    if a.other:
        for label, r in results.items():
            rows = sorted(((ms, n) for n, ms in r["names"].items() if family(n) == "other"),
                          reverse=True)
            for ms, n in rows[:12]:
                print(f"  {label}: other {ms:.3f} ms/step  {n[:150]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
