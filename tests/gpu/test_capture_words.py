"""GPU test (b): the trace is complete for each default capture word on CUDA.

nanogpt_prog.py (nanoGPT on cuda:0, a one-rank NCCL process group that all-reduces the loss each
step, so `comm` has something to record) runs a few steps under `tracerun --capture W` for W in
ops, scopes, memory, comm, the defaults (no --capture), the defaults + cuda and scopes + cuda-sync.
For each run:
- tracerun exits 0 (it exits with the program's code) and the program wrote its done-file;
- no "terminate called", "killed by signal", "Aborted" or "incomplete" in the output;
- the trace's meta says complete, no stat with severity 2 or naming an incomplete shard, and
  `tracerun info` exits 0 without "incomplete" / "not described";
- what the word records is there, counted against the program: ops -> op and backward spans;
  scopes -> exactly warmup + steps `step` user spans; memory -> CUDA memory events (device_type 1);
  comm -> collective spans; cuda -> kernel spans; cuda-sync -> synchronization records (the
  program synchronizes each step), and none with `cuda` alone (torch.profiler's default); and
  spans > 0 for every run with a span word;
- no invented device: every `cuda:N` in a track name has N < torch.cuda.device_count().
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402

RUNS = [
    ("ops", "ops"),
    ("scopes", "scopes"),
    ("memory", "memory"),
    ("comm", "comm"),
    ("defaults", None),
    ("defaults_cuda", g.DEFAULT_WORDS + ",cuda"),
    ("cuda_sync", "scopes,cuda-sync"),
]


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    a = p.parse_args()
    torch = g.require_cuda()
    work = g.prepare_work(a.work)
    nano = g.nanogpt_dir(a.source_dir)
    ndev = torch.cuda.device_count()
    c = g.Checks("gpu_capture_words", work)
    for label, capture in RUNS:
        words = set((capture or g.DEFAULT_WORDS).split(","))
        if "cuda-sync" in words:
            words.add("cuda")  # cuda-sync brings cuda with it
        done = os.path.join(work, f"{label}.done")
        db = os.path.join(work, f"{label}.db")
        prog = [sys.executable, os.path.join(g.HERE, "nanogpt_prog.py"), "--nanogpt-dir", nano,
                "--warmup", str(a.warmup), "--steps", str(a.steps), "--dist", "nccl",
                "--done", done]
        rc, text, secs = g.run(g.traced(a.tracerun, db, capture, prog), os.path.join(work, f"{label}.log"))
        bad = g.bad_exit_text(text)
        c.check(rc == 0 and not bad, f"[{label}] tracerun exits 0, clean output",
                f"exit {rc}, {secs:.1f} s" + (f", output says {bad!r}" if bad else ""))
        c.check(os.path.exists(done), f"[{label}] the program ran to its end")
        if not os.path.exists(db):
            c.check(False, f"[{label}] trace written", db)
            continue
        t = g.Trace(db)
        meta = t.meta()
        c.check(meta.get("complete") == "1", f"[{label}] meta complete", meta.get("complete", "absent"))
        c.check(set(meta.get("capture", "").split(",")) == words, f"[{label}] meta capture is the words",
                meta.get("capture", ""))
        errs = t.errors()
        c.check(not errs, f"[{label}] no error stats", "; ".join(errs[:5]))
        problems = g.tracerun_info_problems(a.tracerun, db, os.path.join(work, f"{label}.info.txt"))
        c.check(not problems, f"[{label}] tracerun info clean", "; ".join(problems))
        spans = t.span_count()
        if words & {"ops", "scopes", "comm", "cuda"}:
            c.check(spans > 0, f"[{label}] spans > 0", f"{spans}")
        if "ops" in words:
            n_op, n_bw = t.span_count(g.CAT_OP), t.span_count(g.CAT_BACKWARD)
            c.check(n_op > 0 and n_bw > 0, f"[{label}] op and backward spans", f"{n_op} ops, {n_bw} backward")
        if "scopes" in words:
            n = len(t.named_spans("step", g.CAT_USER))
            c.check(n == a.warmup + a.steps, f"[{label}] one `step` scope per step",
                    f"{n} vs {a.warmup + a.steps}")
        if "memory" in words:
            n = t.q("SELECT count(*) FROM memory WHERE device_type = 1")[0][0]
            c.check(n > 0, f"[{label}] CUDA memory events", f"{n}")
        if "comm" in words:
            n = t.span_count(g.CAT_COMM)
            c.check(n >= a.warmup + a.steps, f"[{label}] collective spans (>= one all_reduce per step)",
                    f"{n}")
        if "cuda" in words:
            n = t.span_count(g.CAT_KERNEL)
            c.check(n > 0, f"[{label}] kernel spans", f"{n}")
            syncs = t.stat("cupti_syncs") or 0
            if "cuda-sync" in words:
                c.check(syncs > 0, f"[{label}] synchronization records", f"{syncs}")
            else:
                c.check(syncs == 0, f"[{label}] no synchronization records without cuda-sync", f"{syncs}")
        invented = sorted({name for name in t.track_names()
                           for d in re.findall(r"cuda:(\d+)", name) if int(d) >= ndev})
        c.check(not invented, f"[{label}] no invented device (device_count {ndev})", "; ".join(invented[:4]))
    c.finish()


if __name__ == "__main__":
    main()
