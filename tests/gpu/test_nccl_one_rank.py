"""GPU test (c): one NCCL rank's host calls and device work are recorded.

The child (this script with --child) builds a one-rank NCCL group through torch.distributed
(FileStore) and, inside a record_function("collectives") scope, makes N rounds of: all_reduce SUM,
all_reduce AVG (with one rank NCCL launches a reduction kernel for AVG; for SUM in place and for
broadcast it launches nothing), broadcast, all_gather (a list of one tensor) and all_to_all_single,
on 4 MiB float32 tensors on cuda:0. It checks the values itself (exit 3 when wrong).

Traced with `tracerun --capture ops,scopes,comm,cuda` (scopes: the record_function), and run once under torch.profiler. Pass:
- host: inside the scope, exactly 2N `c10d::allreduce_`, N `c10d::broadcast_`, N `c10d::allgather_`
  op spans and 2N `nccl:AllReduce`, N `nccl:Broadcast`, N `nccl:AllGather` collective spans (the
  NCCL calls libtracerun_nccl interposes), the counts the program made; the all_to_all_single
  calls as NCCL 2.28's N `nccl:AlltoAll`, or (older PyTorch or NCCL) N groups of a
  `nccl:Send` and a `nccl:Recv`, and in both cases the report's one `all_to_all` row of N calls;
- device: the kernels, copies and memsets the scope's ops launched (see test_census.py) equal
  torch.profiler's census of the same scope, name by name; the NCCL kernels among them (names
  starting ncclDevKernel / ncclKernel) are as many as torch.profiler saw, and the trace's
  cupti_nccl_kernels stat counts at least those;
- the trace is complete (meta, no error stats), tracerun exits 0.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402


def child(rounds, profile_path):
    import contextlib
    import torch
    import torch.distributed as dist
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    store = dist.FileStore(os.path.join(tempfile.mkdtemp(prefix="nccl1_"), "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    n = (4 << 20) // 4
    x = torch.arange(n, device=dev, dtype=torch.float32)
    outs = [torch.empty_like(x)]
    a2a = torch.empty_like(x)
    # One warm-up round outside the scope (NCCL's lazy communicator set-up).
    dist.all_reduce(x.clone())
    torch.cuda.synchronize()
    cm = contextlib.nullcontext()
    if profile_path:
        from torch.profiler import ProfilerActivity, profile
        cm = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with cm as prof:
        torch.cuda.synchronize()
        with torch.autograd.profiler.record_function("collectives"):
            for _ in range(rounds):
                t = x.clone()
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                dist.broadcast(t, src=0)
                dist.all_gather(outs, t)
                dist.all_to_all_single(a2a, t)
            torch.cuda.synchronize()
    ok = torch.equal(outs[0], x) and torch.equal(t, x) and torch.equal(a2a, x)
    if profile_path:
        prof.export_chrome_trace(profile_path)
    dist.destroy_process_group()
    if not ok:
        print("nccl child: wrong values")
        sys.exit(3)
    print("nccl child: values right")


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile")
    a = p.parse_args()
    torch = g.require_cuda()
    if a.child:
        return child(a.rounds, a.profile)
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        print("no CUDA GPU: skipped (torch has no NCCL)")
        sys.exit(g.SKIP)
    work = g.prepare_work(a.work)
    c = g.Checks("gpu_nccl_one_rank", work)
    prog = [sys.executable, os.path.abspath(__file__), "--child", "--rounds", str(a.rounds)]
    chrome = os.path.join(work, "torch_profiler.json")
    rc, _, secs = g.run(prog + ["--profile", chrome], os.path.join(work, "torch_profiler.log"))
    if not c.check(rc == 0, "torch.profiler run exits 0 with right values", f"exit {rc}, {secs:.1f} s"):
        c.finish()
    tp, _, _ = g.kineto_census(chrome, "collectives")

    db = os.path.join(work, "nccl.db")
    rc, text, secs = g.run(g.traced(a.tracerun, db, "ops,scopes,comm,cuda", prog), os.path.join(work, "tracerun.log"))
    bad = g.bad_exit_text(text)
    c.check(rc == 0 and not bad, "tracerun --capture ops,scopes,comm,cuda exits 0 with right values",
            f"exit {rc}, {secs:.1f} s" + (f", output says {bad!r}" if bad else ""))
    if not os.path.exists(db):
        c.check(False, "trace written", db)
        c.finish()
    t = g.Trace(db)
    c.check(t.meta().get("complete") == "1" and not t.errors(), "trace complete, no error stats",
            "; ".join(t.errors()[:4]))
    # The scope is a user span (`scopes`): record_function's enter/exit ops are not dispatched
    # through RecordFunction in torch 2.11 (the first GPU run found none of them with `ops` only).
    scopes = t.named_spans("collectives", g.CAT_USER)
    if not c.check(len(scopes) == 1, "one `collectives` user span in the trace", f"found {len(scopes)}"):
        c.finish()
    _, t0, t1 = scopes[0]
    n = a.rounds
    ops = t.name_counts_in_window(t0, t1, [g.CAT_OP])
    comm = t.name_counts_in_window(t0, t1, [g.CAT_COMM])
    for name, want in (("c10d::allreduce_", 2 * n), ("c10d::broadcast_", n), ("c10d::allgather_", n)):
        c.check(ops.get(name, 0) == want, f"host op {name}", f"{ops.get(name, 0)} vs {want} calls")
    for name, want in (("nccl:AllReduce", 2 * n), ("nccl:Broadcast", n), ("nccl:AllGather", n)):
        c.check(comm.get(name, 0) == want, f"NCCL host call {name}", f"{comm.get(name, 0)} vs {want} calls")
    native, sends = comm.get("nccl:AlltoAll", 0), comm.get("nccl:Send", 0)
    c.info["all_to_all_calls"] = {"nccl:AlltoAll": native, "nccl:Send": sends,
                                  "nccl:Recv": comm.get("nccl:Recv", 0)}
    c.check(native == n or (native == 0 and sends == n and comm.get("nccl:Recv", 0) == n),
            "all_to_all_single as NCCL calls", f"AlltoAll {native}, Send {sends} vs {n}")
    proc = subprocess.run([a.tracerun, "report", db, "--json"], capture_output=True, text=True,
                          timeout=120)
    try:
        rows = [r for r in json.loads(proc.stdout)["comm"]["collectives"] if r["op"] == "all_to_all"]
    except (ValueError, KeyError) as e:
        rows = [f"report --json exit {proc.returncode}: {e}"]
    c.check(len(rows) == 1 and isinstance(rows[0], dict) and rows[0]["calls"] == n,
            "the report's one all_to_all row",
            json.dumps(rows)[:300])
    tr, unflowed = t.device_census(t0, t1)
    with open(os.path.join(work, "census.json"), "w") as f:
        json.dump({"torch_profiler": tp, "tracerun": tr, "comm": comm, "ops": ops}, f, indent=1, sort_keys=True)
    diffs, ndiff = g.census_diff(tp, tr)
    c.check(tp and ndiff == 0, "device census equal to torch.profiler's",
            f"{sum(tp.values())} vs {sum(tr.values())} device events" + "".join("\n     " + d for d in diffs))
    is_nccl = lambda k: k.startswith(("ncclDevKernel", "ncclKernel", "void ncclDevKernel", "void ncclKernel"))
    nccl_tp = sum(v for k, v in tp.items() if is_nccl(k))
    nccl_tr = sum(v for k, v in tr.items() if is_nccl(k))
    stat = t.stat("cupti_nccl_kernels") or 0
    c.info.update({"nccl_kernels_torch_profiler": nccl_tp, "nccl_kernels_tracerun": nccl_tr,
                   "cupti_nccl_kernels": stat, "device_spans_without_op_flow": unflowed})
    c.check(nccl_tr == nccl_tp and stat >= nccl_tr, "NCCL kernels recorded",
            f"tracerun {nccl_tr} (stat {stat}) vs torch.profiler {nccl_tp}"
            + (" (one rank: NCCL launched no ncclDevKernel)" if nccl_tp == 0 else ""))
    c.finish()


if __name__ == "__main__":
    main()
