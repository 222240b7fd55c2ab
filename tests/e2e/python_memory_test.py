"""Memory categories and steps of unmodified PyTorch programs, against the models themselves
(issue 33, point 2). ctest: e2e_python_memory (tests/e2e/CMakeLists.txt). Not the GPU comparison
with torch.profiler (tests/gpu/test_memory_categories.py).

Traces python_memory_train.py (an ordinary training script: no tracerun code) under
`tracerun -- /usr/bin/python3 ...`, 3 steps each, and reads `tracerun report --json`. The truth is
what the program computes from its own model and optimizer (python_memory_train.py writes it):
- parameter bytes at the peak == sum of numel x element size over model.parameters();
- optimizer state at the peak == the state tensors' bytes the optimizer holds at the end, and that
  is the closed form: 2x the parameters for AdamW (plus its 4-byte step counters), 1x for SGD with
  momentum, 0 for plain SGD;
- gradient bytes at the peak <= the parameters' (DistributedDataParallel without bucket views:
  <= 2x, the .grad tensors plus the reducer's bucket copy; with views, once, plus the reducer's
  8 bytes per parameter tensor of used-parameter maps);
- the activation category's own peak == the bytes of the distinct storages autograd saved for
  backward in the first step's forward (torch.autograd.graph.saved_tensors_hooks, parameters and
  the batch left out), within 5% (Python runs);
- input at the peak == the batch the script feeds its root module, in closed form from the sizes
  this test passes it: ResNet-18 BATCH x 3 x 32 x 32 x 4 bytes (its targets go to the functional
  cross_entropy, no module: not tagged), nanoGPT BATCH x 64 x 8 twice (idx and targets are both
  forward arguments of the GPT module), also where the batch is given by keyword (model(x=x), as
  Hugging Face models are called); the C++ twin tags no input: 0;
- "other" < 10% of the peak, and in the Python runs exactly the model's buffers (sum of numel x
  element size over model.buffers(): BatchNorm's running statistics, nanoGPT's causal mask), which
  the hooks tag other (autograd's saved tensors above leave them out too); the report counts 3
  steps (one "step" phase span per optimizer step).
Runs: ResNet-18 with AdamW, SGD with momentum and plain SGD, and with AdamW and its batch given by
keyword; nanoGPT (AdamW through its own configure_optimizers; once more given idx and targets by
keyword) when model.py is found ($NANOGPT_DIR, or <source>/.gpu-deps/nanoGPT: never
committed, so a CI clone skips that run and says so); 2-rank DDP (Gloo) with and without bucket
views; 2-rank FSDP FULL_SHARD (one unit per BasicBlock and the root; torch 1.13 through
fsdp_cpu_standin.py), where parameter bytes at the peak = the rank's shard of every unit (Psi/N)
plus the units FSDP had gathered at that moment by the script's own log (exactly), optimizer state
and gradients are the shard's, and the losses are the single-process SGD-momentum run's; and the
same for nanoGPT (AdamW, a unit per Block and the root) when its model.py is found. And the C++
twin, samples/resnet18_cpp (--resnet18-cpp BIN; SGD with momentum, one tracerun::tagTraining call
per step): the same checks against the parameter count it prints.
Exit 0 when every check passes, 1 otherwise; every check is printed.

    python_memory_test.py --tracerun BIN --work DIR [--source-dir DIR] [--resnet18-cpp BIN]
                          [--only NAME]
"""
import argparse
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys

from e2e_checks import Checks

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "python_memory_train.py")
PYTHON = "/usr/bin/python3"  # Debian's, with torch and torchvision (docs/capture.md)
STEPS = 3
BATCH = 4  # python_memory_train.py --batch


def run_traced(a, name, args, ranks):
    db = os.path.join(a.work, name + ".db")
    truth = os.path.join(a.work, name + ".truth")
    cmd = [a.tracerun]
    if ranks > 1:
        cmd += ["--nproc-per-node", str(ranks)]
    cmd += ["-o", db, "--", PYTHON, PROGRAM, "--truth", truth, "--steps", str(STEPS), "--batch",
            str(BATCH)] + args
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with open(os.path.join(a.work, name + ".log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            timeout=600).returncode
    if rc != 0:
        return rc, None, None
    report = json.loads(subprocess.run([a.tracerun, "report", db, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
    info = json.loads(subprocess.run([a.tracerun, "info", db, "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    report["origin_ns"] = int(info["meta"]["origin_ns"])  # the trace's times are relative to it
    truths = [json.load(open("%s.%d" % (truth, r))) for r in range(ranks)]
    return 0, report, truths


def run_cpp(a, name):
    """samples/resnet18_cpp, 3 steps of batch 4; truth: the parameter count it prints (fp32)."""
    db = os.path.join(a.work, name + ".db")
    out = subprocess.run([a.tracerun, "-o", db, "--", a.resnet18_cpp, "4", str(STEPS)],
                         capture_output=True, text=True, timeout=600)
    with open(os.path.join(a.work, name + ".log"), "w") as log:
        log.write(out.stdout + out.stderr)
    if out.returncode != 0:
        return out.returncode, None, None
    count = int(out.stdout.split("resnet18_cpp: ")[1].split()[0])
    report = subprocess.run([a.tracerun, "report", db, "--json"], capture_output=True, text=True,
                            check=True).stdout
    truth = {"rank": 0, "parameter_bytes": 4 * count, "optimizer_state_bytes": 4 * count,
             "gradient_bytes": 4 * count, "parameter_tensors": 62}
    return 0, json.loads(report), [truth]


def check_run(c, a, name, args, optimizer, ranks=1, grad_factor=1.0):
    if name.endswith("_cpp"):
        rc, report, truths = run_cpp(a, name)
    else:
        rc, report, truths = run_traced(a, name, args, ranks)
    c.check(rc == 0, "[%s] traced run exits 0" % name, "see %s.log" % name)
    if rc != 0:
        return
    c.check(report["steps"] == STEPS, "[%s] one step per optimizer step" % name,
            "%s steps, %d expected" % (report["steps"], STEPS))
    rows = {r["rank"]: r for r in report["memory"]["per_rank"]}
    origin_ns = report.get("origin_ns", 0)
    fsdp = "fsdp" in args
    fsdp2 = "fsdp2" in args
    for t in truths:
        # FSDP: the rank's parameters are its shard of every unit (what its optimizer holds,
        # Psi/N with padding), and its gradients and optimizer state are the shard's.
        rank, psi = t["rank"], t["optimizer_parameter_bytes" if fsdp or fsdp2 else "parameter_bytes"]
        row = rows.get(rank)
        c.check(row is not None, "[%s] rank %d has a memory row" % (name, rank))
        if row is None:
            continue
        got = row["by_category"]
        peak = row["peak_bytes"]
        tag = "[%s rank %d]" % (name, rank)
        if fsdp:
            check_fsdp_parameters(c, tag, row, t, origin_ns)
            if name.startswith("resnet18"):  # nanoGPT's single run steps configure_optimizers'
                check_fsdp_losses(c, a, tag, t)
        elif fsdp2:
            check_fsdp2(c, a, name, tag, row, t)
        else:
            c.check(got["parameter"] == psi,
                    tag + " parameter bytes at the peak = sum numel x size",
                    "%d vs %d" % (got["parameter"], psi))
        state = t["optimizer_state_bytes"]
        closed = {"adamw": 2 * psi, "sgdm": psi, "sgd": 0}[optimizer]
        # AdamW's per-parameter step counters (torch 1.13: a float32 tensor each) come on top.
        extra = 16 * t["parameter_tensors"] if optimizer == "adamw" else 0
        if not name.endswith("_cpp"):  # the C++ run's truth is the closed form itself
            c.check(closed <= state <= closed + extra,
                    tag + " the optimizer's own state is the closed form (%s)" % optimizer,
                    "%d vs %d" % (state, closed))
        c.check(got["optimizer_state"] == state, tag + " optimizer state at the peak = its state",
                "%d vs %d (closed form %d)" % (got["optimizer_state"], state, closed))
        # DDP's reducer is built under the gradient tag: with find_unused_parameters its
        # used-parameter maps (two int32 per parameter tensor) come with the buckets.
        maps = 8 * t["parameter_tensors"] if "ddp-views" in args else 0
        c.check(got["gradient"] <= grad_factor * psi + maps,
                tag + " gradient bytes at the peak <= %gx the parameters'" % grad_factor,
                "%d vs %d (+ %d of reducer maps)" % (got["gradient"], psi, maps))
        c.check(got["gradient"] >= min(psi, t["gradient_bytes"]),
                tag + " the gradients are live at the peak", "%d" % got["gradient"])
        if "saved_for_backward_bytes" in t:
            act, want = row["category_peaks"]["activation"], t["saved_for_backward_bytes"]
            c.check(abs(act - want) <= 0.05 * want,
                    tag + " activation peak = autograd's saved tensors of a forward (5%)",
                    "%d vs %d (%+.2f%%)" % (act, want, 100.0 * (act - want) / max(want, 1)))
        # PyTorch's INPUT: the root module's forward arguments that need no grad (closed form).
        model = "cpp" if name.endswith("_cpp") else name.split("_")[0]
        want_input = {"resnet18": BATCH * 3 * 32 * 32 * 4, "nanogpt": 2 * BATCH * 64 * 8,
                      "cpp": 0}[model]
        c.check(got["input"] == want_input, tag + " input at the peak = the batch (closed form)",
                "%d vs %d" % (got["input"], want_input))
        if "input_bytes" in t and model == "resnet18":
            c.check(t["input_bytes"] == want_input, tag + " the script's batch is the closed form",
                    "%d vs %d" % (t["input_bytes"], want_input))
        if "buffer_bytes" in t:
            # The module buffers (BatchNorm's running statistics, nanoGPT's causal mask on torch
            # 1.13) are tagged other by the hooks; nothing else is other in these programs.
            c.check(got["other"] == t["buffer_bytes"],
                    tag + " other at the peak = the model's buffers (sum numel x size)",
                    "%d vs %d" % (got["other"], t["buffer_bytes"]))
        c.check(got["other"] < 0.10 * peak, tag + " other < 10% of the peak",
                "%d of %d (%.1f%%)" % (got["other"], peak, 100.0 * got["other"] / max(peak, 1)))


def fsdp_gathered_at(log, units, t, slack):
    """From the program's own log of FSDP's gathers and frees (python_memory_train.py
    record_fsdp_gathers): the units surely gathered at CLOCK_MONOTONIC time t, and those whose
    gather or free call was running within `slack` of t (either way)."""
    sure, either = [], []
    for unit in range(len(units)):
        state, near = False, False
        for u, kind, start, end in sorted((e for e in log if e[0] == unit), key=lambda e: e[2]):
            if end < t - slack:
                state = kind == "gather"
            elif start <= t + slack:
                near = True
        if near:
            either.append(unit)
        elif state:
            sure.append(unit)
    return sure, either


def check_fsdp_parameters(c, tag, row, t, origin_ns):
    """FSDP FULL_SHARD: at the peak a rank holds its shard of every unit, Psi/N, plus the units
    gathered at that moment, which the program logged itself (when FSDP's FlatParamHandle
    allocated and freed each unit's gathered storage, on the trace's clock): the parameter bytes
    must be exactly the shard plus those units' flat parameters (each the rank's shard x the
    world); a unit whose gather or free ran within 1 ms of the peak may count either way."""
    shard, units, psi = t["optimizer_parameter_bytes"], t["fsdp_unit_bytes"], t["parameter_bytes"]
    world = t["world"]
    c.check(shard * world >= psi and shard * world - psi < len(units) * world * 4,
            tag + " the optimizer holds Psi/N: the shards x the world = Psi, up to padding",
            "%d x %d vs %d" % (shard, world, psi))
    sure, either = fsdp_gathered_at(t["fsdp_gathers"], units, origin_ns + row["peak_ts_ns"],
                                    1000000)
    gathered = row["by_category"]["parameter"] - shard - sum(units[i] for i in sure)
    found = None
    for k in range(len(either) + 1):
        for subset in itertools.combinations(either, k):
            if sum(units[i] for i in subset) == gathered:
                found = sorted(sure + list(subset))
                break
        if found is not None:
            break
    c.check(found is not None and len(found) >= 1,
            tag + " parameter at the peak = Psi/N + the units FSDP had gathered then, exactly",
            "%d = %d + units %s (gathered then: %s, at the edge: %s)"
            % (row["by_category"]["parameter"], shard, found, sure, either))


def check_fsdp2(c, a, name, tag, row, t):
    """FSDP2 (fully_shard; fsdp2_cpu_standin.py on torch 1.13): parameters, gradients and
    optimizer states are DTensors, wrappers with no storage of their own around the rank's shard.
    The shards are parameters at the peak, with whatever FSDP2 had gathered then (at most the
    whole model); the closed form counts the shards, not the DTensors' whole numel."""
    shard, whole = t["optimizer_parameter_bytes"], t["parameter_bytes"]
    got = row["by_category"]["parameter"]
    # The stand-in keeps every unit gathered from its forward to the end of backward, where the
    # peak is: the shards and (nearly: 67,057,084 B once, 32 KiB short, else all of it) the whole
    # model. Untagged shards would leave at most the model.
    c.check(whole < got <= shard + whole,
            tag + " parameter at the peak = the shards + what was gathered (at most the model)",
            "%d vs shards %d + model %d" % (got, shard, whole))
    c.check(2 * shard < 1.01 * whole, tag + " the shards are half the model (2 ranks)",
            "%d vs %d" % (shard, whole))
    # The model_states phase the hooks record at the first step (the Memory tab's closed form).
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(a.work, name + ".db"), uri=True)
    recorded = db.execute(
        "SELECT a.value FROM spans s JOIN strings n ON n.id = s.name JOIN tracks t "
        "ON t.id = s.track JOIN args a ON a.span = s.id JOIN strings k ON k.id = a.key "
        "WHERE n.value = 'model_states' AND k.value = 'param_bytes' AND t.rank = ?",
        (t["rank"],)).fetchall()
    c.check(recorded == [(shard,)],
            tag + " the closed form's parameters are the rank's shards, not the DTensors' numel",
            "%s vs %d" % (recorded, shard))
    check_fsdp_losses(c, a, tag, t, "resnet18_adamw")


def check_fsdp_losses(c, a, tag, t, reference_run="resnet18_sgdm"):
    """FSDP only reshapes where the bytes live: each rank trains on the same batch, so its losses
    are the single-process run's (resnet18_sgdm, same seed and batch), up to summation order."""
    reference = os.path.join(a.work, reference_run + ".truth.0")
    if not os.path.isfile(reference):
        print("skip  %s losses: %s did not run (--only)" % (tag, reference_run))
        return
    want = json.load(open(reference))["loss"]
    c.check(abs(t["loss"] - want) <= 1e-5 * abs(want),
            tag + " the last loss = the single-process run's (1e-5 relative)",
            "%.9g vs %.9g" % (t["loss"], want))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tracerun", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)))
    p.add_argument("--resnet18-cpp", default="", help="samples/resnet18_cpp (its run is skipped "
                   "without it)")
    p.add_argument("--only", default="", help="run only the runs whose name contains this")
    a = p.parse_args()
    if os.path.isdir(a.work):
        shutil.rmtree(a.work)
    os.makedirs(a.work)
    probe = subprocess.run([PYTHON, "-c", "import torch, torchvision"], capture_output=True)
    if probe.returncode != 0:
        print("%s cannot import torch and torchvision: install python3-torch and "
              "python3-torchvision (apt)" % PYTHON)
        return 1
    nanogpt = os.environ.get("NANOGPT_DIR") or os.path.join(a.source_dir, ".gpu-deps", "nanoGPT")
    runs = [
        ("resnet18_adamw", ["--model", "resnet18", "--optimizer", "adamw"], "adamw", 1, 1.0),
        ("resnet18_sgdm", ["--model", "resnet18", "--optimizer", "sgdm"], "sgdm", 1, 1.0),
        ("resnet18_sgd", ["--model", "resnet18", "--optimizer", "sgd"], "sgd", 1, 1.0),
        # The batch given by keyword (model(x=...)): a global forward pre-hook sees no kwargs.
        ("resnet18_keywords", ["--model", "resnet18", "--optimizer", "adamw", "--call",
                               "keywords"], "adamw", 1, 1.0),
        ("nanogpt_adamw", ["--model", "nanogpt", "--optimizer", "adamw", "--nanogpt-dir",
                           nanogpt], "adamw", 1, 1.0),
        ("nanogpt_keywords", ["--model", "nanogpt", "--optimizer", "adamw", "--nanogpt-dir",
                              nanogpt, "--call", "keywords"], "adamw", 1, 1.0),
        # Without bucket views DDP keeps a flat copy of every gradient in its buckets.
        ("resnet18_ddp", ["--model", "resnet18", "--optimizer", "sgdm", "--dist", "ddp"], "sgdm",
         2, 2.0),
        ("resnet18_ddp_views", ["--model", "resnet18", "--optimizer", "sgdm", "--dist",
                                "ddp-views"], "sgdm", 2, 1.0),
        # FSDP FULL_SHARD, one unit per BasicBlock and the root (torch 1.13: fsdp_cpu_standin).
        ("resnet18_fsdp", ["--model", "resnet18", "--optimizer", "sgdm", "--dist", "fsdp"], "sgdm",
         2, 1.0),
        ("nanogpt_fsdp", ["--model", "nanogpt", "--optimizer", "adamw", "--dist", "fsdp",
                          "--nanogpt-dir", nanogpt], "adamw", 2, 1.0),
        # FSDP2's fully_shard, one unit per BasicBlock and the root: DTensor parameters,
        # gradients and states (torch 1.13: fsdp2_cpu_standin).
        ("resnet18_fsdp2", ["--model", "resnet18", "--optimizer", "adamw", "--dist", "fsdp2"],
         "adamw", 2, 1.0),
        ("resnet18_cpp", [], "sgdm", 1, 1.0),
    ]
    c = Checks()
    for name, args, optimizer, ranks, grad_factor in runs:
        if a.only and a.only not in name:
            continue
        if "nanogpt" in name and not os.path.isfile(os.path.join(nanogpt, "model.py")):
            print("skip  [%s] nanoGPT's model.py not in %s (set NANOGPT_DIR)" % (name, nanogpt))
            continue
        if name.endswith("_cpp") and not a.resnet18_cpp:
            print("skip  [%s] no --resnet18-cpp (samples/ not built)" % name)
            continue
        check_run(c, a, name, args, optimizer, ranks, grad_factor)
    print("%d check(s) failed" % c.failed if c.failed else "all checks passed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
