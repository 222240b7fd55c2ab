#!/usr/bin/python3
"""Runs two MLP training steps inside record_function("test_window") with libtorch's own (legacy)
profiler on, and writes what the profiler saw after the window opened as JSON: one object per push
event {name, scope, seq}. Run under `tracerun`; launcher_test.cpp compares the two recordings.
Debian's torch has no Kineto, so this is the legacy profiler's raw record list (no Python-side
filtering or renaming)."""
import json
import sys

import torch
from torch.autograd import (ProfilerConfig, ProfilerState, _disable_profiler_legacy,
                            _enable_profiler_legacy)


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    config = ProfilerConfig(ProfilerState.CPU, False, False, False, False, False,
                            torch._C._profiler._ExperimentalConfig())
    _enable_profiler_legacy(config)
    with torch.autograd.profiler.record_function("test_window"):
        for _ in range(2):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    records = _disable_profiler_legacy()
    events = []
    for thread_records in records:
        inside = False
        for r in thread_records:
            if r.kind() != "push":
                continue
            if not inside:
                inside = r.name() == "test_window"
                continue
            events.append({"name": r.name(), "scope": r.scope(), "seq": r.sequence_nr()})
    with open(out, "w") as f:
        json.dump(events, f)


if __name__ == "__main__":
    main()
