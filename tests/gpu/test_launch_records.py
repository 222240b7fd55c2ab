"""GPU test (h): every kernel, copy and set has its launch API record; HTA's launch delay on nanoGPT.

nanogpt_prog.py (model.py unmodified: 6 layers, 384 wide, batch 16 x 256, AdamW on cuda:0), 2
warm-up + 5 steps, under `tracerun --capture ops,scopes,cuda`. The capture keeps CUPTI's records
of the launch-type runtime/driver APIs (cudaLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync...)
as spans on "cuda api thread T" tracks with their `correlation` argument (docs/capture.md).

Checked against the trace's own rows by SQL (a brute-force join, not the analysis' code):
- every span of category kernel or memcpy on a "cuda:D stream S" track has a launch span (category
  other, on a "cuda api thread T" track of the same rank) with the same correlation id, and that
  call starts before the activity does;
- stat cupti_launch_records equals the launch spans; cupti_launch_apis_only = 1 (only the launch
  APIs were enabled);
- `tracerun report --json`: the device's launch_source is "cupti", its launch count equals the
  activities, its p50 launch delay equals the brute-force p50 (activity start - call end, clipped
  at 0, nearest rank) and is under 1 ms (E's report before this capture said 453 ms on the NCCL
  trace: the launching op's start stood in for the call).
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as g  # noqa: E402

CAT_KERNEL, CAT_MEMCPY, CAT_OTHER = 6, 7, 8


def correlations(t, track_like, categories):
    """{(rank, correlation): [(start, end)]} of spans of those categories on tracks named so."""
    marks = ",".join("?" * len(categories))
    rows = t.q(
        "SELECT t.rank, a.value, s.start_ns, s.start_ns + s.dur_ns FROM spans s "
        "JOIN tracks t ON t.id = s.track JOIN args a ON a.span = s.id "
        "JOIN strings k ON k.id = a.key AND k.value = 'correlation' "
        f"WHERE t.name LIKE ? AND s.category IN ({marks})", track_like, *categories)
    out = {}
    for rank, corr, start, end in rows:
        out.setdefault((rank, corr), []).append((start, end))
    return out


def main():
    p = g.base_parser(__doc__)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    g.require_cuda()
    work = g.prepare_work(a.work)
    nano = g.nanogpt_dir(a.source_dir)
    c = g.Checks("gpu_launch_records", work)
    db = os.path.join(work, "launch.db")
    prog = [sys.executable, os.path.join(g.HERE, "nanogpt_prog.py"), "--nanogpt-dir", nano,
            "--warmup", str(a.warmup), "--steps", str(a.steps)]
    rc, text, secs = g.run(g.traced(a.tracerun, db, "ops,scopes,cuda", prog),
                           os.path.join(work, "tracerun.log"))
    bad = g.bad_exit_text(text)
    c.check(rc == 0 and not bad, "tracerun --capture ops,scopes,cuda exits 0, clean output",
            f"exit {rc}, {secs:.1f} s" + (f", output says {bad!r}" if bad else ""))
    if not os.path.exists(db):
        c.check(False, "trace written", db)
        c.finish()
    t = g.Trace(db)
    c.check(t.meta().get("complete") == "1" and not t.errors(), "trace complete, no error stats",
            "; ".join(t.errors()[:4]))

    device = correlations(t, "cuda:% stream %", [CAT_KERNEL, CAT_MEMCPY])
    calls = correlations(t, "cuda api thread %", [CAT_OTHER])
    n_device = sum(len(v) for v in device.values())
    n_calls = sum(len(v) for v in calls.values())
    c.info.update(device_activities=n_device, launch_calls=n_calls)
    c.info["launch_names"] = dict(t.q(
        "SELECT st.value, count(*) FROM spans s JOIN tracks t ON t.id = s.track "
        "JOIN strings st ON st.id = s.name WHERE t.name LIKE 'cuda api thread %' GROUP BY st.value"))
    missing, late, delays = [], 0, []
    for key, acts in device.items():
        launch = calls.get(key)
        if not launch:
            missing.append(key)
            continue
        for start, _ in acts:
            before = [cl for cl in launch if cl[0] <= start]
            if not before:
                late += 1
                continue
            call = max(before)
            delays.append(max(0, start - call[1]))
    c.check(n_device > 0 and not missing,
            "every kernel, copy and set has its launch record (same rank and correlation id)",
            f"{n_device} activities, {len(missing)} correlation ids without a call "
            f"(first: {missing[:5]})")
    c.check(late == 0, "each launch call starts before its activity", f"{late} do not")
    c.check(g.Trace(db).stat("cupti_launch_records") == n_calls,
            "stat cupti_launch_records = the launch spans", f"{n_calls} spans")
    c.check(t.stat("cupti_launch_apis_only") == 1, "only the launch-type APIs enabled",
            f"cupti_launch_apis_only = {t.stat('cupti_launch_apis_only')}")

    proc = subprocess.run([a.tracerun, "report", db, "--json"], capture_output=True, text=True,
                          timeout=120)
    try:
        devices = json.loads(proc.stdout)["gpu"]["devices"]
    except Exception as e:  # noqa: BLE001
        c.check(False, "tracerun report --json has a gpu section", f"exit {proc.returncode}: {e}")
        c.finish()
    d = next((x for x in devices if x["rank"] == 0 and x["device"] == "cuda:0"), None)
    if not c.check(d is not None, "the report has rank 0's cuda:0", json.dumps(devices)[:200]):
        c.finish()
    delays.sort()
    p50 = delays[max(1, math.ceil(0.5 * len(delays))) - 1] if delays else None
    c.info.update(report_launch=d["launch"], brute_force_p50_ns=p50)
    c.check(d["launch_source"] == "cupti", "launch_source is cupti", d["launch_source"])
    c.check(d["launch"]["launched"] == len(delays) == n_device,
            "every activity timed by its call", f"report {d['launch']['launched']}, "
            f"brute force {len(delays)}, activities {n_device}")
    c.check(d["launch"]["p50_ns"] == p50, "report's p50 launch delay = the brute-force p50",
            f"report {d['launch']['p50_ns']} ns, brute force {p50} ns")
    c.check(p50 is not None and p50 < 1_000_000, "launch delay p50 < 1 ms on nanoGPT",
            f"p50 {p50} ns, p95 {d['launch']['p95_ns']} ns, max {d['launch']['max_ns']} ns")
    c.finish()


if __name__ == "__main__":
    main()
