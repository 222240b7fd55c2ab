"""GPU test (e): two ranks on one GPU with Gloo and CUDA tensors, under tracerun's launcher.

`tracerun --nproc-per-node 2 --capture ops,scopes,memory,comm,cuda -- python3 THIS --child` starts
two ranks (RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher); each puts its tensors on cuda:0,
builds a Gloo group (env://) and makes R rounds of all_reduce (rank r holds r + 1: the sum is 3),
broadcast from rank 1 and all_gather, then writes what it received to rank<r>.json. Pass:
- tracerun exits 0, clean output;
- both ranks wrote their file, and the values are the closed forms (all_reduce 3 everywhere;
  broadcast: rank 1's tensor; all_gather: [1, 2]);
- the merged trace: meta complete, world_size 2, two rows in ranks, no error stats, `tracerun info`
  clean; each rank has collective spans (>= the 3R collectives it made) and kernel spans.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402

N = 1 << 16


def child(out_dir, rounds):
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    got = {}
    for _ in range(rounds):
        t = torch.full((N,), float(rank + 1), device=dev)
        dist.all_reduce(t)
        b = torch.full((N,), 10.0 * (rank + 1), device=dev)
        dist.broadcast(b, src=1)
        parts = [torch.empty(N, device=dev) for _ in range(world)]
        dist.all_gather(parts, torch.full((N,), float(rank + 1), device=dev))
        torch.cuda.synchronize()
        got = {"all_reduce": sorted(set(t.tolist())), "broadcast": sorted(set(b.tolist())),
               "all_gather": [sorted(set(p.tolist())) for p in parts], "device": str(t.device)}
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(got, f)


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out-dir")
    a = p.parse_args()
    torch = g.require_cuda()
    if a.child:
        return child(a.out_dir, a.rounds)
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        print("no CUDA GPU: skipped (torch has no Gloo)")
        sys.exit(g.SKIP)
    work = g.prepare_work(a.work)
    c = g.Checks("gpu_gloo_two_ranks", work)
    db = os.path.join(work, "gloo2.db")
    prog = [sys.executable, os.path.abspath(__file__), "--child", "--rounds", str(a.rounds),
            "--out-dir", work]
    rc, text, secs = g.run(g.traced(a.tracerun, db, g.DEFAULT_WORDS + ",cuda", prog,
                                    extra=["--nproc-per-node", "2"]), os.path.join(work, "tracerun.log"))
    bad = g.bad_exit_text(text)
    c.check(rc == 0 and not bad, "tracerun --nproc-per-node 2 exits 0, clean output",
            f"exit {rc}, {secs:.1f} s" + (f", output says {bad!r}" if bad else ""))
    want = {"all_reduce": [3.0], "broadcast": [20.0], "all_gather": [[1.0], [2.0]], "device": "cuda:0"}
    for r in (0, 1):
        path = os.path.join(work, f"rank{r}.json")
        got = json.load(open(path)) if os.path.exists(path) else None
        c.check(got == want, f"rank {r}'s values", json.dumps(got))
    if not os.path.exists(db):
        c.check(False, "merged trace written", db)
        c.finish()
    t = g.Trace(db)
    meta = t.meta()
    ranks = [r[0] for r in t.q("SELECT rank FROM ranks ORDER BY rank")]
    c.check(meta.get("complete") == "1" and meta.get("world_size") == "2" and ranks == [0, 1],
            "merged trace of 2 ranks", f"complete {meta.get('complete')}, world_size {meta.get('world_size')}, ranks {ranks}")
    c.check(not t.errors(), "no error stats", "; ".join(t.errors()[:4]))
    problems = g.tracerun_info_problems(a.tracerun, db, os.path.join(work, "info.txt"))
    c.check(not problems, "tracerun info clean", "; ".join(problems))
    for r in (0, 1):
        n_comm, n_k = t.span_count(g.CAT_COMM, rank=r), t.span_count(g.CAT_KERNEL, rank=r)
        c.check(n_comm >= 3 * a.rounds and n_k > 0, f"rank {r}: collective and kernel spans",
                f"{n_comm} collectives (>= {3 * a.rounds}), {n_k} kernels")
    c.finish()


if __name__ == "__main__":
    main()
