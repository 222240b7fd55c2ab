"""GPU test (d): gpttrain --device cuda --backend nccl, traced, gives the untraced losses.

gpttrain (the project's trainer, one process: a one-rank NCCL group) trains a small GPT on cuda:0
for a few steps with --log-json, three times: untraced, traced with the default words + cuda,
untraced again. Pass:
- all three exit 0 and log every step;
- the traced losses equal the first untraced run's, step by step, within
  max(1e-6, 4 x the largest difference between the two untraced runs) absolute (bit-equal is
  expected; the second untraced run only shows whether the GPU kernels themselves are
  run-to-run deterministic, and the tolerance and both differences are printed);
- the trace is complete (meta, no error stats, `tracerun info` clean) and holds op spans and
  kernel spans (issue 25: the defaults on CUDA once kept 0 spans).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402

MODEL = g.GPTTRAIN_MODEL
losses = g.gpttrain_losses


def main():
    a, work, c, env = g.gpttrain_setup(__doc__, "gpu_gpttrain_losses")
    runs = {}
    for label, traced in (("untraced", False), ("traced", True), ("untraced2", False)):
        log = os.path.join(work, f"{label}.jsonl")
        cmd = [a.gpttrain] + MODEL + ["--steps", str(a.steps), "--log-json", log]
        db = os.path.join(work, "gpttrain.db")
        if traced:
            cmd = g.traced(a.tracerun, db, g.DEFAULT_WORDS + ",cuda", cmd)
        rc, text, secs = g.run(cmd, os.path.join(work, f"{label}.log"), env=env)
        bad = g.bad_exit_text(text) if traced else None
        runs[label] = losses(log)
        c.check(rc == 0 and not bad and len(runs[label]) == a.steps,
                f"[{label}] exits 0 and logs {a.steps} steps",
                f"exit {rc}, {len(runs[label])} steps, {secs:.1f} s" + (f", output says {bad!r}" if bad else ""))
    base, tr, base2 = runs["untraced"], runs["traced"], runs["untraced2"]
    steps = sorted(base)
    noise = max((abs(base[s] - base2.get(s, float("inf"))) for s in steps), default=float("inf"))
    diff = max((abs(base[s] - tr.get(s, float("inf"))) for s in steps), default=float("inf"))
    tol = max(1e-6, 4 * noise)
    c.info.update({"untraced": base, "traced": tr, "untraced2": base2, "max_diff": diff,
                   "untraced_noise": noise, "tolerance": tol})
    c.check(steps and diff <= tol, "traced losses equal the untraced ones",
            f"max |traced - untraced| {diff:.3g} (tolerance {tol:.3g}; untraced vs untraced {noise:.3g}; "
            f"bit-equal: {all(base[s] == tr.get(s) for s in steps)})")
    db = os.path.join(work, "gpttrain.db")
    if os.path.exists(db):
        t = g.Trace(db)
        c.check(t.meta().get("complete") == "1" and not t.errors(), "trace complete, no error stats",
                "; ".join(t.errors()[:4]))
        problems = g.tracerun_info_problems(a.tracerun, db, os.path.join(work, "info.txt"))
        c.check(not problems, "tracerun info clean", "; ".join(problems))
        n_op, n_k = t.span_count(g.CAT_OP), t.span_count(g.CAT_KERNEL)
        c.check(n_op > 0 and n_k > 0, "op and kernel spans recorded", f"{n_op} ops, {n_k} kernels")
    else:
        c.check(False, "trace written", db)
    c.finish()


if __name__ == "__main__":
    main()
