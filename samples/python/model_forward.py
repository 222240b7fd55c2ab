# One forward pass of a model on the CPU, for `tracedot model`'s dataflow diagram: torchvision's
# ResNet-18 or ResNet-50, or a small model of our own with a branch and a shared module
# (model_branch_shared below). Nothing of tracerun here; trace it with the tensors word:
#   tracerun --capture ops,scopes,tensors -o m.db -- /usr/bin/python3 samples/python/model_forward.py resnet18
#   tracedot model m.db -o m.svg
# tests/dot/model_fx_edges.py builds the same models (build_model) for torch.fx's view of them.
import sys

import torch
import torchvision
from torch import nn


class BranchShared(nn.Module):
    """Two branches joined by cat, and `act` and `proj` each called more than once."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()  # shared: after the stem, the left branch and the projection
        self.left = nn.Conv2d(8, 8, 3, padding=1)
        self.right = nn.Sequential(nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.proj = nn.Linear(16, 16)  # shared weights: applied twice
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.act(self.stem(x))
        a = self.act(self.left(x))
        b = self.right(x)
        y = self.pool(torch.cat([a, b], dim=1)).flatten(1)
        y = y + self.proj(self.act(self.proj(y)))  # a residual around the shared projection
        return self.head(y)


def build_model(name):
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=10)
    if name == "resnet50":
        return torchvision.models.resnet50(num_classes=10)
    if name == "branch":
        return BranchShared()
    raise SystemExit("model_forward.py: unknown model '%s' (resnet18, resnet50, branch)" % name)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    name = sys.argv[1] if len(sys.argv) > 1 else "resnet18"
    model = build_model(name)
    x = torch.randn(2, 3, 32, 32)
    y = model(x)
    print("%s: output %s, sum %.4f" % (name, tuple(y.shape), y.sum().item()))


if __name__ == "__main__":
    main()
