# The independent truth for tracedot's autograd graph (autograd_test.cpp): trains a small model
# (or builds a long chain) under tracerun and writes torch's own walk of loss.grad_fn.next_functions
# for each step. Not a sample: its output is only meaningful to the test.
#
#   autograd_truth.py OUT.json [--steps N] [--chain LENGTH] [--no-backward]
#
# OUT.json: {"steps": [{"nodes": [{"name", "var", "shape"}], "edges": [[src, k, dst, input_nr]]}]}
# Nodes are numbered breadth-first from the root (loss.grad_fn), visiting next_functions in order;
# edges are listed as they are met (source in that order, then k). The test numbers the traced
# graph the same way and expects the same lists.
import collections
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {torch.float32: "f32", torch.float64: "f64"}


def shape_text(t):
    return DTYPES.get(t.dtype, str(t.dtype)) + "[" + ",".join(str(d) for d in t.shape) + "]"


def walk(root):
    index = {root: 0}
    order = [root]
    edges = []
    queue = collections.deque([root])
    while queue:  # breadth-first, no recursion: a 20,000-node chain is fine
        fn = queue.popleft()
        for k, (nxt, input_nr) in enumerate(fn.next_functions):
            if nxt is None:
                continue
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
                queue.append(nxt)
            edges.append([index[fn], k, index[nxt], input_nr])
    nodes = []
    for fn in order:
        var = getattr(fn, "variable", None)
        nodes.append({"name": fn.name(),
                      "var": var.data_ptr() if var is not None else 0,
                      "shape": shape_text(var) if var is not None else ""})
    return {"nodes": nodes, "edges": edges}


class Net(nn.Module):
    """Linear layers, a residual (a node with two consumers), a parameter used twice
    (an AccumulateGrad with two incoming edges) and an input that needs no gradient."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        self.scale = nn.Parameter(torch.ones(16))

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = h + self.fc2(h) * self.scale
        h = torch.tanh(h * self.scale)
        return self.head(h)


def main():
    args = sys.argv[1:]
    out = args[0]
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 2
    chain = int(args[args.index("--chain") + 1]) if "--chain" in args else 0
    backward = "--no-backward" not in args
    torch.manual_seed(0)
    torch.set_num_threads(1)
    truth = []
    if chain:
        p = nn.Parameter(torch.ones(4))
        with torch.autograd.profiler.record_function("step"):
            h = p
            for _ in range(chain - 2):  # + MulBackward0 x (chain-2), SumBackward0, AccumulateGrad
                h = h * 1.0001
            loss = h.sum()
            truth.append(walk(loss.grad_fn))
            if backward:
                loss.backward()
    else:
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(steps):
            with torch.autograd.profiler.record_function("step"):
                x = torch.randn(5, 8)
                y = torch.randn(5, 4)
                loss = F.mse_loss(model(x), y)
                truth.append(walk(loss.grad_fn))
                if backward:
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
    with open(out, "w") as f:
        json.dump({"steps": truth}, f)


if __name__ == "__main__":
    main()
