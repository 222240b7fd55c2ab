"""Counts the ATen ops of one training step, by phase, in gpttrain and in nanoGPT's model.py, from
tracerun traces of short CPU runs (issue 32: a GPU step at nanoGPT's size is launch-bound, and
every ATen op that computes is at least one kernel launch). It does not time anything, and it
counts what runs on the CPU: where a code path differs by device (gpttrain's is_cuda() branches,
torch's fused AdamW on CUDA) the counts are the CPU path's.

  python3 bench/op_census.py --build build --nanogpt-dir DIR [--out DIR] [--names CONFIG]
  python3 bench/op_census.py --db trace.db [--names]        (census of an existing trace)

Per step (the median over the traced steps after the first), per phase (the "forward",
"backward", "grad_sync" and "optimizer" scopes inside "step"; "other" is the rest of the step),
three counts:
  all     every dispatcher op (category op, autograd's evaluate_function wrappers left out),
          nested ones included (aten::zeros and the aten::zero_ inside it are two);
  outer   ops not nested in another op (what the program and autograd's nodes call);
  kernels ops that compute (not in VIEW_OPS: views, metadata, allocations, composites) and nest
          no op that computes, plus the GEMMs (GEMM_OPS) always: about one kernel launch each
          on CUDA (an estimate: CUDA's kernels for one op can differ from the CPU's, e.g.
          addmm's bias copy).
--names CONFIG prints the per-step kernel-op counts by name for that configuration (and for
nanoGPT's of the same precision) side by side.
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import sys

# Ops that launch no kernel of their own: views, metadata, allocations, no-op conversions, and
# composites whose work is done by the ops they nest (aten::zeros = empty + zero_).
VIEW_OPS = {
    "aten::view", "aten::_unsafe_view", "aten::as_strided", "aten::t", "aten::transpose",
    "aten::permute", "aten::expand", "aten::expand_as", "aten::narrow", "aten::slice",
    "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::reshape", "aten::_reshape_alias",
    "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::detach",
    "aten::detach_", "detach", "detach_", "aten::alias", "aten::empty", "aten::empty_like",
    "aten::empty_strided", "aten::resize_", "aten::contiguous", "aten::to", "aten::set_",
    "aten::result_type", "aten::lift_fresh", "aten::view_as", "aten::numpy_T", "aten::flatten",
    "aten::_to_copy", "aten::type_as", "aten::matmul", "aten::linear", "aten::dropout",
    "aten::feature_dropout", "aten::retain_grad", "aten::requires_grad_", "aten::is_nonzero",
    "aten::_has_compatible_shallow_copy_type", "aten::_version", "aten::output_nr",
    "aten::is_leaf", "aten::data", "aten::size", "aten::stride", "aten::record_stream",
    "aten::resolve_conj", "aten::resolve_neg", "aten::conj", "aten::_conj", "aten::zeros",
    "aten::zeros_like", "aten::ones", "aten::ones_like", "aten::full", "aten::full_like",
    "aten::new_zeros", "aten::new_empty", "aten::new_empty_strided", "aten::clone",
    "aten::cross_entropy_loss", "aten::log_softmax", "aten::softmax", "aten::layer_norm",
    "aten::embedding", "aten::scaled_dot_product_attention", "aten::as_strided_",
    "aten::unsqueeze_", "aten::squeeze_", "aten::t_", "aten::transpose_",
}
# Ops that run a kernel of their own besides any they nest (a GEMM after copying a bias in).
GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmm_",
            "aten::addbmm", "aten::addmv", "aten::mv", "aten::dot"}
PHASES = ("forward", "backward", "grad_sync", "optimizer")
COLUMNS = PHASES + ("other",)
WRAPPER = "autograd::engine::evaluate_function"
SHAPE = dict(layers=6, hidden=384, heads=6, seq=64, vocab=512, batch=2)


def census(db):
    """{step index: {phase: {"all"|"outer"|"kernels": count}}} and per-step kernel names."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    names = dict(con.execute("SELECT id, value FROM strings"))
    rows = con.execute("SELECT track, start_ns, dur_ns, depth, category, name FROM spans "
                       "ORDER BY track, start_ns, depth").fetchall()
    con.close()
    # Scope intervals (any track): steps and phases, the outermost of each name.
    steps, phases = [], []
    for track, start, dur, depth, cat, name in rows:
        n = names[name]
        if cat == 0:
            continue
        if n == "step":
            steps.append((start, start + dur))
        elif n in PHASES:
            phases.append((start, start + dur, n))
    steps.sort()
    phases.sort()

    def locate(t):
        for i, (s0, s1) in enumerate(steps):
            if s0 <= t < s1:
                phase = "other"
                for p0, p1, n in phases:
                    if p0 <= t < p1 and s0 <= p0:
                        phase = n
                        break
                return i, phase
        return None, None

    counts = {}
    kernel_names = {}
    stack = {}  # track -> list of [start, end, is_op, has_op_child, name]
    ops = []  # (start, name, outer, is_leaf-holder)
    for track, start, dur, depth, cat, name in rows:
        st = stack.setdefault(track, [])
        del st[depth:]  # what remains: the enclosing spans, depth 0 .. depth - 1
        n = names[name]
        is_op = cat == 0 and not n.startswith(WRAPPER)
        rec = [start, start + dur, is_op, False, n]
        if is_op:
            outer = not any(a[2] for a in st)
            if n not in VIEW_OPS:
                for a in st:
                    a[3] = True  # every enclosing op has an op that computes inside
            # The CPU's baddbmm / bmm run one addmm_ per matrix: on CUDA one batched GEMM.
            nested_gemm = n in GEMM_OPS and any(a[2] and a[4] in GEMM_OPS for a in st)
            ops.append((start, n, outer, rec, nested_gemm))
        st.append(rec)
    for start, n, outer, rec, nested_gemm in ops:
        step, phase = locate(start)
        if step is None:
            continue
        c = counts.setdefault(step, {p: {"all": 0, "outer": 0, "kernels": 0} for p in COLUMNS})
        c[phase]["all"] += 1
        c[phase]["outer"] += int(outer)
        if n not in VIEW_OPS and not nested_gemm and (not rec[3] or n in GEMM_OPS):
            c[phase]["kernels"] += 1
            k = kernel_names.setdefault(step, {})
            k[(phase, n)] = k.get((phase, n), 0) + 1
    return counts, kernel_names


def per_step(counts):
    """Median over steps after the first (or the only step)."""
    keys = sorted(counts)[1:] or sorted(counts)
    out = {}
    for p in COLUMNS:
        out[p] = {k: statistics.median(counts[s][p][k] for s in keys)
                  for k in ("all", "outer", "kernels")}
    out["step"] = {k: sum(out[p][k] for p in COLUMNS) for k in ("all", "outer", "kernels")}
    return out


def configs(gpttrain, nanogpt_dir, steps):
    s = SHAPE
    g = [gpttrain, "--layers", str(s["layers"]), "--hidden",
         str(s["hidden"]), "--heads", str(s["heads"]), "--seq-len", str(s["seq"]), "--vocab",
         str(s["vocab"]), "--micro-batch-size", str(s["batch"]), "--global-batch",
         str(s["batch"]), "--steps", str(steps), "--dropout", "0", "--threads", "1", "--quiet"]
    n = ["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "nanogpt_cpu_step.py"),
         "--nanogpt-dir", nanogpt_dir, "--layers", str(s["layers"]), "--embd", str(s["hidden"]),
         "--heads", str(s["heads"]), "--block", str(s["seq"]), "--vocab", str(s["vocab"]),
         "--batch", str(s["batch"]), "--steps", str(steps)]
    return [
        ("nanogpt-fp32", n),
        ("nanogpt-fp32-noclip", n + ["--clip", "0"]),
        ("nanogpt-fp32-foreach", n + ["--foreach"]),
        ("gpttrain-fp32-standard", g + ["--attention", "standard"]),
        ("gpttrain-fp32-flash", g + ["--attention", "flash"]),
        ("nanogpt-bf16", n + ["--bf16"]),
        ("gpttrain-bf16-autocast-standard", g + ["--attention", "standard", "--precision",
                                                 "bf16-autocast"]),
        ("gpttrain-bf16-mixed-standard", g + ["--attention", "standard", "--precision",
                                              "bf16-mixed"]),
        ("gpttrain-bf16-mixed-flash", g + ["--attention", "flash", "--precision", "bf16-mixed"]),
    ]


def table(results):
    head = "| run | " + " | ".join(COLUMNS) + " | step |"
    lines = [head, "|" + " --- |" * (len(COLUMNS) + 2)]
    for label, r in results:
        cells = []
        for p in COLUMNS + ("step",):
            c = r[p]
            cells.append(f"{c['kernels']:g} / {c['outer']:g} / {c['all']:g}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def names_table(a_label, a_names, b_label, b_names):
    def med(kn):
        keys = sorted(kn)[1:] or sorted(kn)
        allk = set().union(*(kn[s].keys() for s in keys))
        return {k: statistics.median(kn[s].get(k, 0) for s in keys) for k in allk}
    a, b = med(a_names), med(b_names)
    print(f"| phase | op | {a_label} | {b_label} |\n| --- | --- | --- | --- |")
    for k in sorted(set(a) | set(b), key=lambda k: (COLUMNS.index(k[0]), -a.get(k, 0), k[1])):
        print(f"| {k[0]} | {k[1]} | {a.get(k, 0):g} | {b.get(k, 0):g} |")


def usage_error(message):
    print(f"op_census: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--gpttrain", help="this gpttrain binary instead of BUILD/trainer/gpttrain")
    p.add_argument("--nanogpt-dir", default=os.environ.get("NANOGPT_DIR"))
    p.add_argument("--out", default="/tmp/op_census")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--only", help="run only configurations whose label contains this")
    p.add_argument("--names", nargs="?", const="", help="print kernel ops by name for this "
                   "configuration (with --db: for that trace)")
    p.add_argument("--db", help="census of this trace only")
    a = p.parse_args()
    if a.db:
        if not os.path.isfile(a.db):
            usage_error(f"no trace file {a.db}")
        counts, kn = census(a.db)
        if not counts:
            sys.exit(f"op_census: no 'step' scope in {a.db}")
        print(table([(os.path.basename(a.db), per_step(counts))]))
        if a.names is not None:
            names_table(a.db, kn, "-", {0: {}})
        return
    if not a.nanogpt_dir or not os.path.isfile(os.path.join(a.nanogpt_dir, "model.py")):
        usage_error("--nanogpt-dir (or NANOGPT_DIR) must name a folder with nanoGPT's model.py")
    os.makedirs(a.out, exist_ok=True)
    tracerun = os.path.join(a.build, "interpose", "tracerun")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results, kernel_names = [], {}
    gpttrain = a.gpttrain or os.path.join(a.build, "trainer", "gpttrain")
    for label, cmd in configs(gpttrain, a.nanogpt_dir, a.steps):
        if a.only and a.only not in label:
            continue
        db = os.path.join(a.out, label + ".db")
        if os.path.exists(db):
            os.remove(db)
        subprocess.run([tracerun, "-q", "-o", db, "--capture", "ops,scopes", "--"] + cmd,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        counts, kn = census(db)
        if not counts:
            sys.exit(f"op_census: no 'step' scope in {db}")
        results.append((label, per_step(counts)))
        kernel_names[label] = kn
    print("kernels / outer / all ATen ops per step (median of steps 2..N)")
    print(table(results))
    if a.names:
        ref = "nanogpt-bf16" if "bf16" in a.names else "nanogpt-fp32"
        if a.names not in kernel_names:
            usage_error(f"--names {a.names}: not a configuration that ran")
        names_table(a.names, kernel_names[a.names], ref, kernel_names.get(ref, {0: {}}))


if __name__ == "__main__":
    main()
