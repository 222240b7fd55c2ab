# A torch.distributed program as torchrun runs it (init_process_group("env://"), Gloo): two
# "step" scopes, each an all-reduce of (rank + 1); prints the sum the ranks agree on. Used by
# launcher_outer_test.cpp under the real torchrun; not a sample to copy from.
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
t = torch.ones(4)
for _ in range(2):
    with torch.autograd.profiler.record_function("step"):
        t = torch.ones(4) * (rank + 1)
        dist.all_reduce(t)
sys.stdout.write(f"rank {rank} sum {t[0].item()}\n")  # one write: the ranks share the terminal
sys.stdout.flush()
dist.destroy_process_group()
