"""A torch.distributed program with two process groups that make identical calls at the same time
(tensor parallel style {0,1} and {2,3}, strided {0,2} and {1,3}, or interleaved {0,3} and {1,2}:
the places of the strided layout with other members): per step a world barrier, an all-reduce,
an all-gather, a scatter and a gather in the rank's own group, and a DDP model in that group.
Prints, per rank, what torch itself says of its group (the truth python_groups_test.py checks the
trace against). Run under `tracerun --nproc-per-node 4`; not a sample to copy from.

    python_groups_prog.py contiguous|strided|interleaved
"""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
if sys.argv[1] == "strided":
    layout = [[0, 2], [1, 3]]
elif sys.argv[1] == "interleaved":
    layout = [[0, 3], [1, 2]]
else:
    layout = [[0, 1], [2, 3]]
groups = [dist.new_group(members) for members in layout]  # every rank creates every group
mine = next(g for g, members in zip(groups, layout) if rank in members)
members = next(m for m in layout if rank in m)

torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(64, 64), process_group=mine)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
t = torch.ones(65536)
for step in range(4):
    with torch.autograd.profiler.record_function("iteration"):
        dist.barrier()
        dist.all_reduce(t, group=mine)
        out = [torch.empty(1024) for _ in members]
        dist.all_gather(out, torch.full((1024,), float(rank)), group=mine)
        # Gloo's scatter span names the root's first tensor to send, and none on the other ranks.
        piece = torch.empty(256)
        dist.scatter(piece, [torch.full((256,), float(m)) for m in members]
                     if rank == members[0] else None, src=members[0], group=mine)
        dist.gather(piece, [torch.empty(256) for _ in members] if rank == members[0] else None,
                    dst=members[0], group=mine)
        opt.zero_grad()
        model(torch.randn(8, 64)).sum().backward()
        opt.step()
gathered = [int(o[0].item()) for o in out]
# torch's names of the groups: _world.pg_names on 2.x, _pg_names on 1.13.
c10d = dist.distributed_c10d
names = c10d._world.pg_names if hasattr(c10d, "_world") else c10d._pg_names
sys.stdout.write("truth rank=%d group_rank=%d group_size=%d members=%s gathered=%s world=%d "
                 "name=%s world_name=%s\n" % (
                     rank, dist.get_rank(mine), dist.get_world_size(mine),
                     ",".join(map(str, members)), ",".join(map(str, gathered)),
                     dist.get_world_size(), names[mine], names[c10d._get_default_group()]))
sys.stdout.flush()
dist.destroy_process_group()
