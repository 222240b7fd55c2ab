#!/usr/bin/env python3
"""What memory categories and steps for unmodified Python programs cost (issue 33, point 4): a
small nanoGPT training step (karpathy's model.py from $NANOGPT_DIR or .gpu-deps/nanoGPT; else
torchvision's ResNet-18) timed per step inside the program, run
  plain          untraced;
  default        under `tracerun` with the training hooks off (TRACERUN_TRAINING_HOOKS=0: the
                 default capture as it was before them);
  categories     under `tracerun` (the default: memory categories, step and phase spans);
  torch.profiler profile(record_shapes, profile_memory, with_stack), what its memory profiler
                 needs (CPU activity only).
Rounds interleave the configurations; each cell is the median over all rounds' timed steps of
the wall time and of the process's CPU time (all threads, tracerun's writer included; steadier
than wall time on a shared machine). Prints a table with ratios against `default` measured in the
same run. Not a test.

  OMP_NUM_THREADS=1 /usr/bin/python3 bench/python_memory_categories.py [--rounds 3] [--steps 10]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def child(a):
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    nanogpt = os.environ.get("NANOGPT_DIR") or os.path.join(ROOT, ".gpu-deps", "nanoGPT")
    if os.path.isfile(os.path.join(nanogpt, "model.py")):
        sys.path.insert(0, nanogpt)
        from model import GPT, GPTConfig

        model = GPT(GPTConfig(block_size=64, vocab_size=512, n_layer=4, n_head=4, n_embd=128,
                              dropout=0.0, bias=True))
        opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
        x = torch.randint(512, (8, 64))
        y = torch.randint(512, (8, 64))
        loss_of = lambda: model(x, y)[1]
        name = "nanoGPT 4x128, batch 8x64, AdamW"
    else:
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = torch.randn(8, 3, 32, 32), torch.randint(10, (8,))
        loss_of = lambda: torch.nn.functional.cross_entropy(model(x), y)
        name = "ResNet-18, batch 8x3x32x32, SGD momentum"

    def step():
        opt.zero_grad(set_to_none=True)
        loss_of().backward()
        opt.step()

    prof = None
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                       with_stack=True)
        prof.__enter__()
    for _ in range(a.warmup):
        step()
    ms, cpu = [], []
    for _ in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    if prof is not None:
        prof.__exit__(None, None, None)
    with open(a.out, "w") as f:
        json.dump({"ms": ms, "cpu": cpu, "model": name}, f)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tracerun", default=os.path.join(ROOT, "build", "interpose", "tracerun"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--child", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--out")
    a = p.parse_args()
    if a.child:
        return child(a)
    me = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(a.steps),
          "--warmup", str(a.warmup)]
    tmp = tempfile.mkdtemp(prefix="tracerun_memcat_")
    db = os.path.join(tmp, "run.db")
    configs = [
        ("plain", lambda out: me + ["--out", out], {}),
        ("default", lambda out: [a.tracerun, "-q", "-o", db, "--"] + me + ["--out", out],
         {"TRACERUN_TRAINING_HOOKS": "0"}),
        ("categories", lambda out: [a.tracerun, "-q", "-o", db, "--"] + me + ["--out", out], {}),
        ("torch.profiler", lambda out: me + ["--profile", "--out", out], {}),
    ]
    ms = {name: [] for name, _, _ in configs}
    cpu = {name: [] for name, _, _ in configs}
    model = ""
    for r in range(a.rounds):
        for name, cmd, env in configs:
            out = os.path.join(tmp, "%s.json" % name.replace(".", "_"))
            subprocess.run(cmd(out), check=True, env=dict(os.environ, **env),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            result = json.load(open(out))
            ms[name] += result["ms"]
            cpu[name] += result["cpu"]
            model = result["model"]
    base, base_cpu = statistics.median(ms["default"]), statistics.median(cpu["default"])
    print("%s: %d rounds x %d steps, medians per step" % (model, a.rounds, a.steps))
    print("%-16s %10s %10s %12s %10s" % ("configuration", "wall ms", "/ default", "CPU ms",
                                          "/ default"))
    for name, _, _ in configs:
        m, c = statistics.median(ms[name]), statistics.median(cpu[name])
        print("%-16s %10.2f %10.3f %12.2f %10.3f" % (name, m, m / base, c, c / base_cpu))


if __name__ == "__main__":
    main()
