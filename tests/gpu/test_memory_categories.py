"""GPU test (g): memory categories of unmodified programs against torch.profiler's memory profiler
(issue 33, point 3), and FSDP's per-rank parameters (point 2). Not the CPU checks
(tests/e2e/python_memory_test.py, ctest e2e_python_memory).

nanoGPT (6 layers, 384 wide, batch 16 x 256, AdamW from its configure_optimizers, fused on CUDA),
1 warm-up + 2 steps on cuda:0, run twice: under torch.profiler(profile_memory, record_shapes,
with_stack) -- its memory profiler's categories at the peak of cuda:0 (MemoryProfileTimeline,
PyTorch 2.1 and later) -- and under `tracerun` (default words, no profiler). Pass:
- both runs exit 0;
- ours at the cuda:0 peak: parameter = sum numel x size over model.parameters() (within 0.1%),
  optimizer state within 5% of the profiler's (and 2x parameters within 1%), gradient within 5%
  of the profiler's and <= parameters, input = the batch (idx and targets, 2 x 16 x 256 x 8 B)
  and within 5% of the profiler's, other < 10% of the peak;
- the profiler's parameter, input, activation and unknown bytes are recorded in result.json (the
  issue's H100 run had its parameter at 50.1 MB for 43.4 MB of parameters, and 77% unknown).
FSDP (torch >= 2.1, CPU, Gloo, 2 ranks under `tracerun --nproc-per-node 2`): a 4-layer MLP wrapped
per layer, FULL_SHARD, SGD with momentum, 3 steps. Pass: each rank's parameter bytes at its peak
are Psi/2 (its shards) plus 0, 1 or 2 whole layers (the one computing, the one prefetched; the
layers are one size), the momentum is Psi/2 (the shards'), other < 10%.
FSDP2 (torch >= 2.6's fully_shard, the same MLP and launch, a unit per layer and the root, AdamW;
skipped, with its reason, where the untraced run fails: FSDP2 on the CPU is recent): parameters,
gradients and states are DTensors. Pass: each rank's optimizer state at its peak = its local
states (1%), its parameters at least its shards and at most shards + Psi, the trace's
`model_states` param_bytes = its local shards (not the DTensors' whole numel), other < 10%.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402

MODEL = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=50304, dropout=0.0,
             bias=True)
BATCH = 16


def nanogpt_child(a):
    import torch

    sys.path.insert(0, a.nanogpt)
    from model import GPT, GPTConfig

    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    model = GPT(GPTConfig(**MODEL)).to(dev)
    opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda")
    x = torch.randint(MODEL["vocab_size"], (BATCH, MODEL["block_size"]), device=dev)
    y = torch.randint(MODEL["vocab_size"], (BATCH, MODEL["block_size"]), device=dev)

    def step():
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    result = {"parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
              "input_bytes": 2 * x.numel() * x.element_size()}
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                     profile_memory=True, with_stack=True) as prof:
            for _ in range(2):
                step()
        times, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cuda:0")
        k = max(range(len(sizes)), key=lambda i: sum(sizes[i]))
        result["profiler_peak_bytes"] = sum(sizes[k])
        result["profiler"] = {(c.name.lower() if c is not None else "unknown"): sizes[k][i + 1]
                              for c, i in _CATEGORY_TO_INDEX.items()}
    else:
        for _ in range(2):
            step()
    torch.cuda.synchronize()
    with open(a.out, "w") as f:
        json.dump(result, f)


def fsdp_child(a):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    layers = [torch.nn.Linear(512, 512) for _ in range(4)]
    psi = sum(p.numel() * p.element_size() for m in layers for p in m.parameters())
    largest = max(sum(p.numel() * p.element_size() for p in m.parameters()) for m in layers)
    # device_id cpu: FSDP1 computes on the CPU only when told so; without it, and with no GPU
    # visible, torch 2.11 refuses ("FSDP needs a non-CPU accelerator device").
    cpu = torch.device("cpu")
    wrapped = [FullyShardedDataParallel(m, sharding_strategy=ShardingStrategy.FULL_SHARD,
                                        device_id=cpu) for m in layers]
    model = FullyShardedDataParallel(torch.nn.Sequential(*wrapped),
                                     sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=cpu)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 512)
    for _ in range(3):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                if torch.is_tensor(v))
    with open("%s.%d" % (a.out, dist.get_rank()), "w") as f:
        json.dump({"psi": psi, "largest_layer": largest, "world": dist.get_world_size(),
                   "optimizer_state_bytes": state}, f)
    dist.destroy_process_group()


def fsdp2_child(a):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard  # public from torch 2.6

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)
    layers = [torch.nn.Linear(512, 512) for _ in range(4)]
    psi = sum(p.numel() * p.element_size() for m in layers for p in m.parameters())
    model = torch.nn.Sequential(*layers)
    for m in layers:
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    x = torch.randn(32, 512)
    for _ in range(3):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    def local_bytes(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    shards = sum(local_bytes(p) for p in model.parameters())
    state = sum(local_bytes(v) for s in opt.state.values() for v in s.values()
                if torch.is_tensor(v))
    with open("%s.%d" % (a.out, dist.get_rank()), "w") as f:
        json.dump({"psi": psi, "shard_bytes": shards, "world": dist.get_world_size(),
                   "optimizer_state_bytes": state}, f)
    dist.destroy_process_group()


def cuda0(report):
    for pr in report.get("memory", {}).get("per_rank", []):
        for d in [pr] + list(pr.get("devices", [])):
            if d.get("device") == "cuda:0" and d.get("rank") == 0:
                return d
    return None


def report_of(tracerun, db):
    out = subprocess.run([tracerun, "report", db, "--json"], capture_output=True, text=True,
                         timeout=300)
    return json.loads(out.stdout) if out.returncode == 0 else None


def close(a, b, rel):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(b), 1)


def check_nanogpt(c, a, work):
    prog = [sys.executable, os.path.abspath(__file__), "--child", "--nanogpt",
            g.nanogpt_dir(a.source_dir)]
    prof_out, traced_out = os.path.join(work, "profiler.json"), os.path.join(work, "traced.json")
    rc, _, secs = g.run(prog + ["--profile", "--out", prof_out], os.path.join(work, "profiler.log"))
    c.check(rc == 0, "nanoGPT under torch.profiler's memory profiler exits 0", f"{secs:.1f} s")
    db = os.path.join(work, "nanogpt.db")
    rc2, text, secs = g.run(g.traced(a.tracerun, db, None, prog + ["--out", traced_out]),
                            os.path.join(work, "tracerun.log"))
    c.check(rc2 == 0 and not g.bad_exit_text(text), "nanoGPT under tracerun exits 0",
            f"{secs:.1f} s")
    if rc != 0 or rc2 != 0:
        return
    prof, truth, report = json.load(open(prof_out)), json.load(open(traced_out)), report_of(
        a.tracerun, db)
    dev = cuda0(report) if report else None
    c.check(dev is not None, "report --json has cuda:0")
    if dev is None:
        return
    ours, theirs, psi = dev["by_category"], prof["profiler"], truth["parameter_bytes"]
    c.info.update({"ours": ours, "ours_peak_bytes": dev["peak_bytes"], "profiler": theirs,
                   "profiler_peak_bytes": prof["profiler_peak_bytes"], "parameter_bytes": psi,
                   "input_bytes": truth["input_bytes"]})
    c.check(close(ours["parameter"], psi, 0.001), "parameter = sum numel x size (0.1%)",
            f"{ours['parameter']} vs {psi}; profiler {theirs.get('parameter')}")
    c.check(close(ours["optimizer_state"], theirs.get("optimizer_state"), 0.05),
            "optimizer state = the profiler's (5%)",
            f"{ours['optimizer_state']} vs {theirs.get('optimizer_state')}")
    c.check(close(ours["optimizer_state"], 2 * psi, 0.01), "optimizer state = 2x parameters (1%)",
            f"{ours['optimizer_state']} vs {2 * psi}")
    c.check(close(ours["gradient"], theirs.get("gradient"), 0.05) and ours["gradient"] <= psi,
            "gradient = the profiler's (5%) and <= parameters",
            f"{ours['gradient']} vs {theirs.get('gradient')} (parameters {psi})")
    c.check(ours["input"] == truth["input_bytes"]
            and close(ours["input"], theirs.get("input"), 0.05),
            "input = the batch and the profiler's (5%)",
            f"{ours['input']} vs {truth['input_bytes']}; profiler {theirs.get('input')}")
    c.check(ours["other"] < 0.10 * dev["peak_bytes"], "other < 10% of the cuda:0 peak",
            f"{ours['other']} of {dev['peak_bytes']}")


def torch_version():
    import torch

    return tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]), torch.__version__


def fsdp_job(a, work, name, capture=None):
    """This script's FSDP child `--NAME` on 2 ranks under the launcher, on the CPU (with a GPU
    visible, FSDP's compute device is the current CUDA device and it refuses CPU parameters:
    "move the module to cuda:0", so it is hidden). Returns (exit code, seconds, trace, truth
    file prefix)."""
    out = os.path.join(work, f"{name}.json")
    db = os.path.join(work, f"{name}_{capture}.db" if capture else f"{name}.db")
    prog = [sys.executable, os.path.abspath(__file__), "--child", f"--{name}", "--out", out]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    rc, _, secs = g.run(g.traced(a.tracerun, db, capture, prog, ["--nproc-per-node", "2"]),
                        db[:-len(".db")] + ".log", env=env)
    return rc, secs, db, out


def memory_rows(c, a, db, key):
    """The report's memory rows by rank (also in result.json under `key`), or None."""
    report = report_of(a.tracerun, db)
    if report is None:
        return None
    rows = {r["rank"]: r for r in report["memory"]["per_rank"]}
    c.info[key] = rows
    return rows


def fsdp_report(c, a, work, name, what):
    """Traces fsdp_job's `name` run, checks it exits 0; (the report's memory rows or None, the
    trace, the truth files' prefix)."""
    rc, secs, db, out = fsdp_job(a, work, name)
    c.check(rc == 0, f"{what}, 2 ranks (Gloo, CPU) under tracerun exits 0",
            f"exit {rc}, {secs:.1f} s")
    rows = memory_rows(c, a, db, name + "_report") if rc == 0 else None
    return rows, db, out


def check_fsdp(c, a, work):
    version, text = torch_version()
    if version < (2, 1):
        c.info["fsdp"] = f"skipped: torch {text} (FSDP on CPU needs 2.1 or later)"
        return
    rows, _, out = fsdp_report(c, a, work, "fsdp", "FSDP FULL_SHARD")
    if rows is None:
        return
    for rank in (0, 1):
        t = json.load(open("%s.%d" % (out, rank)))
        row = rows.get(rank)
        shard = t["psi"] // t["world"]
        got = row["by_category"] if row else {}
        # The four layers are one size (512 x 512 + 512, even: no padding), so what is gathered
        # at the peak is a whole number of them: the one computing and the one prefetched.
        gathered = got.get("parameter", -1) - shard
        c.check(row is not None and gathered in [k * t["largest_layer"] for k in (0, 1, 2)],
                f"rank {rank}: parameter at the peak = Psi/N + 0, 1 or 2 whole layers gathered",
                f"{got.get('parameter')} vs Psi/N {shard}, layer {t['largest_layer']}")
        c.check(row is not None and close(got["optimizer_state"], t["optimizer_state_bytes"], 0.01)
                and close(got["optimizer_state"], shard, 0.02),
                f"rank {rank}: momentum = its shards' (Psi/N)",
                f"{got.get('optimizer_state')} vs {t['optimizer_state_bytes']}, Psi/N {shard}")
        c.check(row is not None and got["other"] < 0.10 * row["peak_bytes"],
                f"rank {rank}: other < 10% of the peak",
                f"{got.get('other')} of {row['peak_bytes'] if row else None}")


def check_fsdp2(c, a, work):
    import sqlite3

    version, text = torch_version()
    if version < (2, 6):
        c.info["fsdp2"] = f"skipped: torch {text} (fully_shard is public from 2.6)"
        return
    # First with `ops` only (the launcher gives the ranks their rendezvous; no memory hooks):
    # where this torch cannot run FSDP2 on the CPU, say so and skip.
    rc, _, _, _ = fsdp_job(a, work, "fsdp2", "ops")
    if rc != 0:
        c.info["fsdp2"] = f"skipped: FSDP2 on the CPU failed without memory capture (exit {rc}; " \
                          "see fsdp2_ops.log)"
        return
    rows, db, out = fsdp_report(c, a, work, "fsdp2", "FSDP2 fully_shard")
    if rows is None:
        return
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    for rank in (0, 1):
        t = json.load(open("%s.%d" % (out, rank)))
        row = rows.get(rank)
        got = row["by_category"] if row else {}
        shard = t["shard_bytes"]
        c.check(row is not None and close(got["optimizer_state"], t["optimizer_state_bytes"], 0.01),
                f"rank {rank}: FSDP2 optimizer state at the peak = its local states (DTensors')",
                f"{got.get('optimizer_state')} vs {t['optimizer_state_bytes']}")
        c.check(row is not None and shard <= got["parameter"] <= shard + t["psi"],
                f"rank {rank}: FSDP2 parameters at the peak = its shards + what was gathered",
                f"{got.get('parameter')} vs shards {shard}, Psi {t['psi']}")
        recorded = con.execute(
            "SELECT a.value FROM spans s JOIN strings n ON n.id = s.name JOIN tracks tr "
            "ON tr.id = s.track JOIN args a ON a.span = s.id JOIN strings k ON k.id = a.key "
            "WHERE n.value = 'model_states' AND k.value = 'param_bytes' AND tr.rank = ?",
            (rank,)).fetchall()
        c.check(recorded == [(shard,)],
                f"rank {rank}: the closed form's parameters are its local shards",
                f"{recorded} vs {shard}")
        c.check(row is not None and got["other"] < 0.10 * row["peak_bytes"],
                f"rank {rank}: FSDP2 other < 10% of the peak",
                f"{got.get('other')} of {row['peak_bytes'] if row else None}")


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--out")
    p.add_argument("--nanogpt")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--fsdp", action="store_true")
    p.add_argument("--fsdp2", action="store_true")
    a = p.parse_args()
    if a.child and a.fsdp:
        return fsdp_child(a)
    if a.child and a.fsdp2:
        return fsdp2_child(a)
    g.require_cuda()
    if a.child:
        return nanogpt_child(a)
    work = g.prepare_work(a.work)
    c = g.Checks("gpu_memory_categories", work)
    check_nanogpt(c, a, work)
    check_fsdp(c, a, work)
    check_fsdp2(c, a, work)
    c.finish()


if __name__ == "__main__":
    main()
