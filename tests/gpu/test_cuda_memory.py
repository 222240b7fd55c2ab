"""GPU test (f): the report's CUDA memory peak equals torch.cuda's.

The child allocates known tensors on cuda:0 (64 MiB, 32 MiB, 48 MiB; frees the 32; 96 MiB; a
matmul's temporaries; frees all; 16 MiB), then writes torch.cuda.max_memory_allocated() and
max_memory_reserved() to a file. Traced with the default capture words (no --capture; `memory`
among them). Pass:
- tracerun exits 0 (the exit abort of issue 25 point 2), the trace is complete, no error stats;
- `tracerun report --json`: the cuda:0 entry of memory.per_rank (the rank's primary device or one
  of its `devices`) has peak_bytes within 2% of max_memory_allocated();
- the counter track `cuda:0 reserved bytes` reaches max_memory_reserved() (its largest sample
  within 2% of it).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402

MiB = 1 << 20


def child(out):
    import torch
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    f32 = lambda mib: torch.empty(mib * MiB // 4, device=dev, dtype=torch.float32)
    a, b, c = f32(64), f32(32), f32(48)
    del b
    d = f32(96)
    m = torch.randn(2048, 2048, device=dev)
    e = (m @ m).sum()
    torch.cuda.synchronize()
    del a, c, d, m, e
    f = f32(16)
    torch.cuda.synchronize()
    with open(out, "w") as fp:
        json.dump({"max_memory_allocated": torch.cuda.max_memory_allocated(dev),
                   "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
                   "memory_allocated_at_end": torch.cuda.memory_allocated(dev)}, fp)
    del f


def find_device(report, name):
    for pr in report.get("memory", {}).get("per_rank", []):
        for d in [pr] + list(pr.get("devices", [])):
            if d.get("device") == name and d.get("rank") == 0:
                return d
    return None


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--out")
    a = p.parse_args()
    g.require_cuda()
    if a.child:
        return child(a.out)
    work = g.prepare_work(a.work)
    c = g.Checks("gpu_cuda_memory", work)
    truth_path = os.path.join(work, "torch_cuda.json")
    db = os.path.join(work, "memory.db")
    prog = [sys.executable, os.path.abspath(__file__), "--child", "--out", truth_path]
    rc, text, secs = g.run(g.traced(a.tracerun, db, None, prog), os.path.join(work, "tracerun.log"))
    bad = g.bad_exit_text(text)
    c.check(rc == 0 and not bad, "tracerun (default words) exits 0, clean output",
            f"exit {rc}, {secs:.1f} s" + (f", output says {bad!r}" if bad else ""))
    if not (os.path.exists(truth_path) and os.path.exists(db)):
        c.check(False, "the program's numbers and the trace written")
        c.finish()
    truth = json.load(open(truth_path))
    t = g.Trace(db)
    c.check(t.meta().get("complete") == "1" and not t.errors(), "trace complete, no error stats",
            "; ".join(t.errors()[:4]))
    proc = subprocess.run([a.tracerun, "report", db, "--json"], capture_output=True, text=True, timeout=120)
    rc = proc.returncode
    try:
        report = json.loads(proc.stdout)
    except Exception as e:
        c.check(False, "tracerun report --json parses", f"exit {rc}: {e}")
        c.finish()
    with open(os.path.join(work, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    dev = find_device(report, "cuda:0")
    want = truth["max_memory_allocated"]
    peak = dev.get("peak_bytes") if dev else None
    c.info.update({"torch": truth, "report_cuda0_peak_bytes": peak,
                   "cuda_alloc_peak_bytes_stat": t.stat("cuda_alloc_peak_bytes"),
                   "cuda_reserved_peak_bytes_stat": t.stat("cuda_reserved_peak_bytes")})
    c.check(peak is not None and abs(peak - want) <= 0.02 * want,
            "report's cuda:0 peak = torch.cuda.max_memory_allocated() within 2%",
            f"{peak} vs {want} ({(peak - want) / want * 100:+.2f}%)" if peak else "no cuda:0 in report memory")
    want_r = truth["max_memory_reserved"]
    got_r = t.counter_max("cuda:0 reserved bytes")
    c.check(got_r is not None and abs(got_r - want_r) <= 0.02 * want_r,
            "counter `cuda:0 reserved bytes` reaches torch.cuda.max_memory_reserved() (2%)",
            f"{got_r} vs {want_r}" + (f" ({(got_r - want_r) / want_r * 100:+.2f}%)" if got_r else
                                      f"; tracks: {[n for n in t.track_names() if 'reserved' in n]}"))
    c.finish()


if __name__ == "__main__":
    main()
