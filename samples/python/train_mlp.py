#!/usr/bin/python3
"""An ordinary PyTorch training script (nothing tracerun-specific): a small MLP regressing random
targets with Adam. Trace it with: tracerun -o run.db -- /usr/bin/python3 samples/python/train_mlp.py
The record_function scopes are plain PyTorch; tracerun shows them as user scopes."""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(args.batch, 8)
    y = torch.randn(args.batch, 1)
    for step in range(args.steps):
        with torch.autograd.profiler.record_function("train_step"):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
