"""The Python hooks (interpose/python/sitecustomize.py, _tracerun_training.py) must not change or
break the program they trace. ctest: e2e_python_hooks (tests/e2e/CMakeLists.txt). Not the memory
categories (python_memory_test.py).

Small programs under `tracerun -- /usr/bin/python3 -c ...`, each checked against the program
itself (what it prints, how often it calls its modules and optimizer) or against the same program
run without tracerun, reading the trace's spans with Python's own sqlite3:
- two hooks directories on PYTHONPATH (a second copy of the hooks and a symlink to it, then the
  user's own sitecustomize): the user's sitecustomize runs once, no RecursionError, and each
  forward is one module scope (the hooks are installed once);
- a forward that raises (RuntimeError, and KeyboardInterrupt, which torch 2.1+'s always-called
  post hooks miss), caught by the program, then two that do not: every module scope keeps its own
  name (not "boom.Net"), one "Net" scope per call;
- a sparse tensor in optimizer.state: no hook error, one "step" span per optimizer step, each
  enclosing an "optimizer" phase that encloses torch's own Optimizer.step#... record;
- evaluation under torch.no_grad() after the last step: no extra "step" span;
- torch.fx.symbolic_trace: the same graph as without tracerun, and no hook error;
- activation checkpointing (torch.utils.checkpoint): a block's forward re-run inside backward is
  named by its path in the model, as in the forward (not a new root named by its type), and every
  module scope's count equals the calls the program's own per-module hooks counted;
- torch.compile (where torch has it: torch 2.x, the GPU machine's; backend aot_eager, no C++
  compiler needed): the same outputs, graph breaks and graphs as without tracerun; and a compiled
  optimizer step with fullgraph=True: the same weights and graph breaks (the step hooks do
  nothing while Dynamo traces);
- a model called through model.forward (no module hook runs, as under model.compile()): the
  backward opens each step, one step span per optimizer step;
- optimizer in backward (a per-parameter optimizer stepped from its gradient hook): one step
  span per iteration, ending after its backward, and an optimizer span per update inside it;
- GradScaler skipping steps while fp16 gradients overflow (where torch has a CUDA device): one
  step span per iteration, and an optimizer span per step the scaler's own scale says ran.
Exit 0 when every check passes, 1 otherwise; every check is printed. With --require-compile it
exits 77 (a ctest skip) where torch has no torch.compile: tests/gpu registers it so, with the
GPU machine's interpreter, for the cases torch 1.13 cannot run (always_call, Dynamo).

    python_hooks_test.py --tracerun BIN --source-dir DIR --work DIR [--python PY]
                         [--require-compile]
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys

from e2e_checks import Checks

PYTHON = ["/usr/bin/python3"]  # Debian's, with torch (docs/capture.md); --python replaces it


def run(cmd, env=None):
    env = dict(os.environ if env is None else env, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    # Under ctest's 240 s (tests/gpu registers it too): a hung run fails alone, with what it
    # printed, and the other cases still run.
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=100)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return subprocess.CompletedProcess(cmd, -9, text(e.stdout),
                                           text(e.stderr) + "\n(killed after 100 s)")


def traced(a, name, program, env=None):
    db = os.path.join(a.work, name + ".db")
    r = run([a.tracerun, "-o", db, "--", PYTHON[0], "-c", program], env)
    with open(os.path.join(a.work, name + ".log"), "w") as log:
        log.write(r.stdout + r.stderr)
    return r, db


def failing(bad, text):
    """The end of `text` as a check's detail when the check fails; nothing when it passes."""
    return text[-400:] if bad else ""


def hook_error(r):
    """Whether the hooks said something went wrong: each of their lines starts "tracerun: " and
    says what failed ("module hook: ...", "training hook: ...", "hooks on torch... not
    installed", "... hooks not installed: ..."). Not torch's own warnings (torch 2.x warns when
    torch.compile meets global module hooks), nor "tracerun: trace written to .../python_hooks/"."""
    return any(l.startswith("tracerun: ") and
               (" hook: " in l or "hooks on " in l or "hooks not installed" in l)
               for l in r.stderr.splitlines())


def spans(db, category):
    """Names of the spans of a category, in start order."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return [row[0] for row in con.execute(
            "SELECT n.value FROM spans s JOIN strings n ON n.id = s.name JOIN categories c "
            "ON c.id = s.category WHERE c.name = ? ORDER BY s.start_ns", (category,))]
    finally:
        con.close()


TINY = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
for _ in range(3):
    m(torch.zeros(2, 4))
"""


def two_hook_dirs(c, a):
    site = os.path.join(a.work, "usersite")
    copy = os.path.join(a.work, "hooks_copy")
    link = os.path.join(a.work, "hooks_link")
    for d in (site, copy):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    if os.path.lexists(link):
        os.unlink(link)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write("print('user sitecustomize ran')\n")
    for name in ("sitecustomize.py", "_tracerun_training.py"):
        shutil.copy(os.path.join(a.source_dir, "interpose", "python", name), copy)
    os.symlink(copy, link)
    env = dict(os.environ, PYTHONPATH=":".join([copy, link, site]))
    r, db = traced(a, "two_hook_dirs", TINY, env)
    c.check(r.returncode == 0, "[two hook dirs] traced run exits 0",
            failing(r.returncode, r.stderr))
    c.check(r.stdout.count("user sitecustomize ran") == 1,
            "[two hook dirs] the user's sitecustomize runs once", repr(r.stdout[-200:]))
    bad = "RecursionError" in r.stderr or "Error in sitecustomize" in r.stderr
    c.check(not bad, "[two hook dirs] no error in sitecustomize", failing(bad, r.stderr))
    if r.returncode == 0:
        names = spans(db, "module")
        c.check(names.count("Sequential") == 3, "[two hook dirs] one module scope per forward",
                "%d Sequential scopes, 3 calls" % names.count("Sequential"))


# {error}: RuntimeError (an out-of-memory error), or KeyboardInterrupt (Ctrl-C, caught by the
# program): torch 2.1+'s always-called post hooks run for an Exception only.
RAISES = """
import torch
class Boom(torch.nn.Module):
    calls = 0
    def forward(self, x):
        Boom.calls += 1
        if Boom.calls == 1:
            raise {error}("out of memory (a stand-in)")
        return x.relu()
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 3)
        self.boom = Boom()
    def forward(self, x):
        return self.boom(self.l(x))
net = Net()
try:
    net(torch.zeros(2, 4))
except {error}:
    pass
for _ in range(2):
    net(torch.zeros(2, 4))
"""


def raised_forward(c, a):
    for error in ("RuntimeError", "KeyboardInterrupt"):
        tag = "[raised forward, %s]" % error
        r, db = traced(a, "raised_forward_" + error, RAISES.replace("{error}", error))
        c.check(r.returncode == 0, tag + " traced run exits 0", failing(r.returncode, r.stderr))
        if r.returncode != 0:
            continue
        names = spans(db, "module")
        c.check(set(names) <= {"Net", "l", "boom"}, tag + " every scope keeps its name",
                str(sorted(set(names))))
        c.check(names.count("Net") == 3, tag + " one Net scope per call",
                "%d Net scopes, 3 calls" % names.count("Net"))
        c.check(not hook_error(r), tag + " no hook error", failing(hook_error(r), r.stderr))


STEPS = """
import torch
m = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
for i in range(3):
    m(torch.ones(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    if i == 0:  # a tensor without strided storage among the optimizer's state
        opt.state[m.weight]["extra"] = torch.zeros(3).to_sparse()
with torch.no_grad():  # evaluation after the last step
    for _ in range(2):
        m(torch.ones(2, 4))
"""


# The model called through model.forward: no module hook runs, as with model.compile() or a
# compiled train step, where the hooks are traced instead of run; the backward still opens steps.
NO_FORWARD_HOOK = """
import torch
m = torch.nn.Linear(4, 3)
opt = torch.optim.AdamW(m.parameters(), lr=0.1)
for i in range(3):
    m.forward(torch.ones(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def steps(c, a):
    r, db = traced(a, "steps_no_forward_hook", NO_FORWARD_HOOK)
    c.check(r.returncode == 0 and not hook_error(r), "[steps] no forward hook: traced run exits 0",
            failing(r.returncode or hook_error(r), r.stderr))
    if r.returncode == 0:
        n = spans(db, "phase").count("step")
        c.check(n == 3, "[steps] no forward hook: the backward opens each step", "%d step spans" % n)
    r, db = traced(a, "steps", STEPS)
    c.check(r.returncode == 0, "[steps] traced run exits 0", failing(r.returncode, r.stderr))
    if r.returncode != 0:
        return
    c.check(not hook_error(r), "[steps] a sparse tensor in optimizer.state is no hook error",
            failing(hook_error(r), r.stderr))
    n = spans(db, "phase").count("step")
    c.check(n == 3, "[steps] one step span per optimizer step, none for evaluation",
            "%d step spans, 3 steps" % n)
    # torch's own record of each step (Optimizer.step#SGD.step, a record_function; torch 2.x runs
    # its global step hooks inside it) lies inside an "optimizer" phase inside a "step" phase.
    records = intervals(db, "Optimizer.step#%")
    outer = {name: [(s0, e0, d) for n0, s0, e0, d in intervals(db, name) if n0 == name]
             for name in ("step", "optimizer")}

    def inside(rec, name):
        return any(s0 <= rec[1] and rec[2] <= e0 and d < rec[3] for s0, e0, d in outer[name])

    nested = [r for r in records if inside(r, "optimizer") and inside(r, "step")]
    c.check(len(records) == 3 and len(nested) == 3,
            "[steps] torch's Optimizer.step record lies inside the optimizer and step phases",
            "%d records, %d nested: %s; %s" % (len(records), len(nested), records, outer))


FX = """
import torch, torch.fx
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)
    def forward(self, x):
        return self.l(x).relu() + x
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = Block()
    def forward(self, x):
        return self.b(self.a(x)).sum(dim=1)
g = torch.fx.symbolic_trace(Net())
for n in g.graph.nodes:
    print("node", n.op, n.target)
"""


# Optimizer in backward (torchtune's optimizer_in_bwd, PyTorch's tutorial recipe): one optimizer
# per parameter, stepped from the parameter's post-accumulate-grad hook (torch 2.1 and later; the
# AccumulateGrad node's post hook on older torch, the same moment).
OPTIMIZER_IN_BACKWARD = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opts = {p: torch.optim.SGD([p], lr=0.1) for p in m.parameters()}
keep = []
for p in m.parameters():
    def step(*_, p=p):
        opts[p].step()
        opts[p].zero_grad()
    if hasattr(p, "register_post_accumulate_grad_hook"):
        p.register_post_accumulate_grad_hook(step)
    else:
        acc = p.expand_as(p).grad_fn.next_functions[0][0]
        acc.register_hook(step)
        keep.append(acc)
for _ in range(3):
    m(torch.ones(2, 4)).sum().backward()
print("parameters", len(opts))
"""


def traced_clean(c, a, tag, name, program):
    """The program traced: checks it exits 0 without a hook error; the database, or None."""
    r, db = traced(a, name, program)
    c.check(r.returncode == 0 and not hook_error(r), "[%s] traced run exits 0" % tag,
            failing(r.returncode or hook_error(r), r.stderr))
    return (r, db) if r.returncode == 0 else (r, None)


def printed(r, key):
    """The integers the program printed after `key` on lines of their own."""
    return [int(x.split()[1]) for x in r.stdout.splitlines() if x.startswith(key + " ")]


def optimizer_in_backward(c, a):
    r, db = traced_clean(c, a, "opt_in_bwd", "optimizer_in_backward", OPTIMIZER_IN_BACKWARD)
    if db is None:
        return
    params = printed(r, "parameters")[0]
    phase = {name: [(s0, e0) for n0, s0, e0, _ in intervals(db, name) if n0 == name]
             for name in ("step", "backward", "optimizer")}
    steps, backwards, updates = phase["step"], phase["backward"], phase["optimizer"]
    c.check(len(steps) == 3 and len(backwards) == 3,
            "[opt_in_bwd] one step span per iteration, each around its backward",
            "%d steps, %d backwards" % (len(steps), len(backwards)))
    c.check(len(steps) == len(backwards) and
            all(s0 <= b0 and b1 <= e0 for (s0, e0), (b0, b1) in zip(steps, backwards)),
            "[opt_in_bwd] each step ends after its backward, not at its first update",
            "%s vs %s" % (steps, backwards))
    inside = [u for u in updates if any(b0 <= u[0] and u[1] <= b1 for b0, b1 in backwards)]
    c.check(len(updates) == 3 * params and len(inside) == len(updates),
            "[opt_in_bwd] an optimizer span per parameter update, inside the backward",
            "%d optimizer spans (%d inside), %d expected" % (len(updates), len(inside), 3 * params))


def intervals(db, name_like):
    """(name, start, end, depth) of the spans whose name is LIKE name_like, in start order."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return [tuple(row) for row in con.execute(
            "SELECT n.value, s.start_ns, s.start_ns + s.dur_ns, s.depth FROM spans s JOIN strings n"
            " ON n.id = s.name WHERE n.value LIKE ? ORDER BY s.start_ns", (name_like,))]
    finally:
        con.close()


def same_as_untraced(c, a, tag, program, prefixes, lines=None):
    """Runs `program` without and with tracerun: the lines it prints that start with `prefixes`
    (`lines` of them when given) must be the same, and the hooks must say nothing."""
    plain = run([PYTHON[0], "-c", program])
    r, _ = traced(a, tag, program)
    ok = plain.returncode == 0 and r.returncode == 0
    c.check(ok, "[%s] both runs exit 0" % tag, failing(not ok, plain.stderr + r.stderr))
    want = [l for l in plain.stdout.splitlines() if l.startswith(prefixes)]
    got = [l for l in r.stdout.splitlines() if l.startswith(prefixes)]
    enough = len(want) == lines if lines is not None else len(want) > 0
    c.check(enough and got == want, "[%s] the same as without tracerun" % tag,
            "untraced %s, traced %s" % (want, got) if got != want else "%d lines" % len(want))
    c.check(not hook_error(r), "[%s] no hook error" % tag, failing(hook_error(r), r.stderr))


def fx(c, a):
    same_as_untraced(c, a, "fx", FX, ("node ",))


CHECKPOINTED = """
import torch
from torch.utils.checkpoint import checkpoint
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 16)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.h = torch.nn.ModuleList([Block() for _ in range(3)])
        self.head = torch.nn.Linear(16, 1)
    def forward(self, x):
        for b in self.h:
            x = checkpoint(b, x, use_reentrant=False)
        return self.head(x)
net = Net()
calls = {}
for name, m in net.named_modules():
    def count(module, inputs, name=name or "Net"):
        calls[name] = calls.get(name, 0) + 1
    m.register_forward_pre_hook(count)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(8, 16)).sum().backward()
    opt.step()
for name in sorted(calls):
    print("calls", name, calls[name])
net.h[0](torch.randn(2, 16))  # outside backward, called at the top: a root again
"""


def checkpointed(c, a):
    r, db = traced(a, "checkpointed", CHECKPOINTED)
    c.check(r.returncode == 0, "[checkpoint] traced run exits 0", failing(r.returncode, r.stderr))
    if r.returncode != 0:
        return
    want = {}
    for line in r.stdout.splitlines():
        if line.startswith("calls "):
            _, name, n = line.split()
            want[name] = int(n)
    names = spans(db, "module")
    got = {n: names.count(n) for n in set(names)}
    # The last, direct call of a block outside backward: a root named by its type, as before.
    want.update({"Block": 1, "fc1": 1, "fc2": 1})
    c.check(want.get("h.0", 0) == 4, "[checkpoint] the program saw each block twice a step",
            str(want))
    c.check(got == want, "[checkpoint] each module scope once per call, named by its path",
            "trace %s, program %s" % (sorted(got.items()), sorted(want.items())))
    c.check(not hook_error(r), "[checkpoint] no hook error", failing(hook_error(r), r.stderr))


COMPILED = """
import torch
from torch._dynamo.utils import counters
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
    def forward(self, x):
        return self.b(self.a(x).relu())
torch.manual_seed(0)
net = torch.compile(Net(), backend="aot_eager")
x = torch.randn(4, 8)
for _ in range(2):
    y = net(x)
    y.sum().backward()
print("out", [round(v, 5) for v in y.flatten().tolist()[:8]])
print("graph_breaks", sum(counters["graph_break"].values()))
print("unique_graphs", counters["stats"]["unique_graphs"])
"""


def has_compile():
    r = run([PYTHON[0], "-c", "import torch, sys; sys.exit(0 if hasattr(torch, 'compile') else 3)"])
    return r.returncode == 0


# A compiled optimizer step (torch.compile's recipe): the step hooks do nothing while Dynamo traces,
# so no graph break is added, and fullgraph=True compiles as without tracerun.
COMPILED_STEP = """
import torch
from torch._dynamo.utils import counters
torch.manual_seed(0)
m = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
@torch.compile(backend="aot_eager", fullgraph=True)
def step():
    opt.step()
x = torch.randn(4, 8)
for _ in range(3):
    m(x).sum().backward()
    step()
    opt.zero_grad()
print("out", [round(v, 5) for v in m.weight.flatten().tolist()[:8]])
print("graph_breaks", sum(counters["graph_break"].values()))
"""


def compiled(c, a):
    same_as_untraced(c, a, "compile", COMPILED, ("out ", "graph_breaks ", "unique_graphs "), 3)
    same_as_untraced(c, a, "compiled_step", COMPILED_STEP, ("out ", "graph_breaks "), 2)
    # Each compiled step's end, marked while Dynamo traced, ends its step at the next forward.
    n = spans(os.path.join(a.work, "compiled_step.db"), "phase").count("step")
    c.check(n == 3, "[compiled_step] one step span per compiled optimizer step", "%d step spans" % n)


def has_cuda():
    r = run([PYTHON[0], "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"])
    return r.returncode == 0


# Mixed precision with a loss scale too high at first: GradScaler skips the optimizer's step while
# the fp16 gradients overflow, and lowers the scale. The program counts the steps it skipped by
# the scaler's own account (the scale went down).
GRAD_SCALER = """
import torch
torch.manual_seed(0)
m = torch.nn.Linear(64, 64).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):  # 2.3 and later
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 24)
else:
    scaler = torch.cuda.amp.GradScaler(init_scale=2.0 ** 24)
x = torch.randn(32, 64, device="cuda")
skipped = 0
for _ in range(12):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = m(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    before = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped += scaler.get_scale() < before
    opt.zero_grad()
print("skipped", skipped)
"""


def grad_scaler(c, a):
    r, db = traced_clean(c, a, "grad_scaler", "grad_scaler", GRAD_SCALER)
    if db is None:
        return
    skipped = printed(r, "skipped")
    c.check(skipped and 0 < skipped[0] < 12, "[grad_scaler] the scaler skipped some steps",
            "%s" % skipped)
    phases = spans(db, "phase")
    c.check(phases.count("step") == 12, "[grad_scaler] one step span per iteration, skipped or not",
            "%d step spans, 12 iterations" % phases.count("step"))
    if skipped:
        c.check(phases.count("optimizer") == 12 - skipped[0],
                "[grad_scaler] an optimizer span per step the scaler did not skip",
                "%d optimizer spans, %d skipped" % (phases.count("optimizer"), skipped[0]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tracerun", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--python", default=PYTHON[0])
    p.add_argument("--require-compile", action="store_true")
    a = p.parse_args()
    PYTHON[0] = a.python
    compile_cases = (compiled,) if has_compile() else ()
    if a.require_compile and not compile_cases:
        print("no torch.compile in %s: skipped" % a.python)
        return 77
    if not compile_cases:
        print("skip  [compile] %s's torch has no torch.compile" % a.python)
    cuda_cases = (grad_scaler,) if has_cuda() else ()
    if not cuda_cases:
        print("skip  [grad_scaler] %s's torch has no CUDA device" % a.python)
    os.makedirs(a.work, exist_ok=True)
    c = Checks()
    for case in (two_hook_dirs, raised_forward, steps, optimizer_in_backward, fx,
                 checkpointed) + compile_cases + \
            cuda_cases:
        case(c, a)
    print("%d failed" % c.failed)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
