"""GPU test (a): nanoGPT's kernel census inside one record_function scope equals torch.profiler's.

nanogpt_prog.py (model.py unmodified: 6 layers, 384 wide, 6 heads, block 256, batch 16, vocab
50304, AdamW on cuda:0) runs twice: under torch.profiler (CPU + CUDA; Chrome trace exported) and
under `tracerun --capture ops,scopes,cuda` (scopes: the `census` record_function is a user scope).

What is counted, on each side, and why the two are the same set:
- torch.profiler: every kernel / memcpy / memset whose launching CUDA runtime or driver call
  (matched by CUPTI's `correlation`) starts inside the host span of the `census` annotation.
- tracerun: every kernel / copy / memset span at the end of an op_kernel flow whose source op (the
  op on the host thread, main or autograd, that launched it) starts inside the `census` user span.
The program synchronises before the scope opens, after each step and before it closes, and no op
straddles the scope's edges, so "launched inside the scope" and "launched by an op that started
inside the scope" name the same launches. Names must be equal strings (tracerun's demangled name
against Kineto's); copies are compared as "[memcpy HtoD]" etc., memsets as "[memset]".
Pass: both censuses non-empty, every name and count equal. The first mismatches are printed.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch = g.require_cuda()
    work = g.prepare_work(a.work)
    nano = g.nanogpt_dir(a.source_dir)
    c = g.Checks("gpu_census", work)
    prog = [sys.executable, os.path.join(g.HERE, "nanogpt_prog.py"), "--nanogpt-dir", nano,
            "--warmup", str(a.warmup), "--steps", str(a.steps)]

    # torch.profiler's census
    chrome = os.path.join(work, "torch_profiler.json")
    rc, text, secs = g.run(prog + ["--torch-profile", chrome, "--times-json",
                                   os.path.join(work, "profiled_times.json")],
                           os.path.join(work, "torch_profiler.log"))
    if not c.check(rc == 0, "torch.profiler run exits 0", f"exit {rc}, {secs:.1f} s"):
        c.finish()
    tp, window_us, tp_unlinked = g.kineto_census(chrome, "census")
    c.info["torch_profiler_unlinked_device_events"] = tp_unlinked

    # tracerun's census
    db = os.path.join(work, "census.db")
    rc, text, secs = g.run(g.traced(a.tracerun, db, "ops,scopes,cuda", prog + [
        "--times-json", os.path.join(work, "traced_times.json")]), os.path.join(work, "tracerun.log"))
    c.check(rc == 0 and not g.bad_exit_text(text), "tracerun --capture ops,scopes,cuda exits 0",
            f"exit {rc}, {secs:.1f} s, {g.bad_exit_text(text) or 'clean output'}")
    if not os.path.exists(db):
        c.check(False, "trace written", db)
        c.finish()
    t = g.Trace(db)
    scopes = t.named_spans("census", g.CAT_USER)
    if not c.check(len(scopes) == 1, "one `census` user span in the trace", f"found {len(scopes)}"):
        c.finish()
    _, t0, t1 = scopes[0]
    tr, unflowed = t.device_census(t0, t1)
    c.info.update({"tracerun_device_spans_without_op_flow": unflowed,
                   "cupti_records_without_op": t.stat("cupti_records_without_op"),
                   "steps": a.steps})
    with open(os.path.join(work, "census.json"), "w") as f:
        json.dump({"steps": a.steps, "torch_profiler": tp, "tracerun": tr}, f, indent=1, sort_keys=True)

    kernels_tp = sum(n for k, n in tp.items() if not k.startswith("["))
    kernels_tr = sum(n for k, n in tr.items() if not k.startswith("["))
    c.info.update({"kernels_per_step_torch_profiler": kernels_tp / a.steps,
                   "kernels_per_step_tracerun": kernels_tr / a.steps,
                   "names_torch_profiler": len(tp), "names_tracerun": len(tr)})
    c.check(kernels_tp > 0, "torch.profiler counted kernels in the scope", f"{kernels_tp}")
    c.check(kernels_tr > 0, "tracerun counted kernels in the scope", f"{kernels_tr}")
    mangled = [k for k in tr if k.startswith("_Z")]
    c.check(not mangled, "tracerun's kernel names are demangled", f"{len(mangled)} start with _Z"
            + (f", e.g. {mangled[0][:100]}" if mangled else ""))
    diffs, ndiff = g.census_diff(tp, tr)
    same = sum(1 for k in set(tp) | set(tr) if tp.get(k, 0) == tr.get(k, 0))
    c.check(ndiff == 0, "census equal (every name and count)",
            f"{same} of {len(set(tp) | set(tr))} names equal; {kernels_tp} vs {kernels_tr} kernels"
            + ("".join("\n     " + d for d in diffs)))
    c.finish()


if __name__ == "__main__":
    main()
