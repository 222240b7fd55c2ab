# An ordinary PyTorch training script with no tracerun code in it: the program that
# python_memory_test.py traces (`tracerun -- python3 python_memory_train.py ...`) to check memory
# categories and steps on unmodified programs (issue 33). Not a test by itself: it only trains and
# writes, per rank, what the model says about itself (the truth the test compares against).
#
#   --model resnet18|nanogpt  torchvision's ResNet-18 (10 classes, 32x32 images), or karpathy's
#                             nanoGPT GPT from --nanogpt-dir/model.py (its configure_optimizers)
#   --optimizer adamw|sgdm|sgd   AdamW, SGD with momentum 0.9, plain SGD
#   --dist none|ddp|ddp-views|fsdp   2 ranks under tracerun's launcher (Gloo, env://); ddp-views:
#                             DistributedDataParallel(gradient_as_bucket_view=True,
#                             find_unused_parameters=True); fsdp: FullyShardedDataParallel
#                             (FULL_SHARD), one unit per ResNet BasicBlock (or nanoGPT Block)
#                             and the root, on the CPU (torch 1.13 through fsdp_cpu_standin.py)
#   --dist fsdp2              FSDP2's way (fully_shard: a unit per BasicBlock or Block and the
#                             root; DTensor parameters, gradients and optimizer states), through
#                             fsdp2_cpu_standin.py on torch 1.13
#   --call keywords           the model is given its batch by keyword (model(x=...), as Hugging
#                             Face models are called model(**batch)), not by position
#   --truth PATH              JSON per rank: PATH.<rank>: parameter and buffer bytes, steps, ...
import argparse
import functools
import json
import os
import sys
import time

import torch


def build_model(a):
    if a.model == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
        x = torch.randn(a.batch, 3, 32, 32)
        y = torch.randint(10, (a.batch,))
        if a.call == "keywords":
            return model, (lambda m: torch.nn.functional.cross_entropy(m(x=x), y)), x
        return model, (lambda m: torch.nn.functional.cross_entropy(m(x), y)), x
    sys.path.insert(0, a.nanogpt_dir)
    from model import GPT, GPTConfig

    cfg = GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128, dropout=0.0,
                    bias=True)
    model = GPT(cfg)
    x = torch.randint(cfg.vocab_size, (a.batch, cfg.block_size))
    y = torch.randint(cfg.vocab_size, (a.batch, cfg.block_size))
    if a.call == "keywords":
        return model, (lambda m: m(idx=x, targets=y)[1]), x
    return model, (lambda m: m(x, y)[1]), x


def record_fsdp_gathers(model):
    """FSDP's own account of what is gathered when: wraps FlatParamHandle.unshard and reshard and
    logs, per call that allocated or freed a unit's gathered storage, [unit, "gather" or "free",
    CLOCK_MONOTONIC ns at the call's start, at its end] (the trace's clock). A unit is the index
    of its flat parameter in model.parameters()."""
    try:
        from torch.distributed.fsdp._flat_param import FlatParamHandle  # torch 2.1 and later
    except ImportError:
        from torch.distributed.fsdp.flat_param import FlatParamHandle
    units = {id(q): i for i, q in enumerate(model.parameters())}
    log = []

    def gathered(handle):
        padded = handle._get_padded_unsharded_flat_param()
        storage = padded.untyped_storage() if hasattr(padded, "untyped_storage") else \
            padded.storage()
        return storage.size() > 0

    def logged(method, kind):
        def call(self, *args, **kwargs):
            before, start = gathered(self), time.monotonic_ns()
            result = method(self, *args, **kwargs)
            end, after = time.monotonic_ns(), gathered(self)
            if before != after:
                log.append([units.get(id(self.flat_param), -1), kind, start, end])
            return result

        return call

    FlatParamHandle.unshard = logged(FlatParamHandle.unshard, "gather")
    FlatParamHandle.reshard = logged(FlatParamHandle.reshard, "free")
    return log


def build_optimizer(a, model, raw):
    if a.optimizer == "adamw" and a.model == "nanogpt" and a.dist == "none":
        return raw.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
    if a.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3)
    momentum = 0.9 if a.optimizer == "sgdm" else 0.0
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["resnet18", "nanogpt"], default="resnet18")
    p.add_argument("--optimizer", choices=["adamw", "sgdm", "sgd"], default="adamw")
    p.add_argument("--dist", choices=["none", "ddp", "ddp-views", "fsdp", "fsdp2"], default="none")
    p.add_argument("--nanogpt-dir", default="")
    p.add_argument("--call", choices=["positional", "keywords"], default="positional")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--truth", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank, world = 0, 1
    if a.dist != "none":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    raw, loss_of, batch = build_model(a)
    psi = sum(q.numel() * q.element_size() for q in raw.parameters())
    model = raw
    if a.dist in ("ddp", "ddp-views"):
        from torch.nn.parallel import DistributedDataParallel

        # ddp-views: no bucket rebuild after the first step (find_unused_parameters), so the
        # buckets, and the gradients viewing them, are allocated once.
        views = a.dist == "ddp-views"
        model = DistributedDataParallel(raw, gradient_as_bucket_view=views,
                                        find_unused_parameters=views)
    elif a.dist == "fsdp":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fsdp_cpu_standin

        fsdp_cpu_standin.install()
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        if a.model == "resnet18":
            import torchvision

            unit = torchvision.models.resnet.BasicBlock
        else:
            unit = type(raw.transformer.h[0])
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={unit})
        # 2.1 and later compute on the CPU when told so; 1.13 through the stand-in.
        cpu = {} if fsdp_cpu_standin.needed() else {"device_id": torch.device("cpu")}
        model = FullyShardedDataParallel(raw, sharding_strategy=ShardingStrategy.FULL_SHARD,
                                         auto_wrap_policy=policy, **cpu)
        gathers = record_fsdp_gathers(model)
    elif a.dist == "fsdp2":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fsdp2_cpu_standin

        units = [m for m in raw.modules() if type(m).__name__ in ("BasicBlock", "Block")]
        for m in units:
            fsdp2_cpu_standin.fully_shard(m)
        fsdp2_cpu_standin.fully_shard(raw)
    opt = build_optimizer(a, model, raw)

    def nbytes(t):  # a DTensor's (ShardTensor's) numel is the whole parameter's: its shard's
        t = getattr(t, "_local_tensor", t)
        return t.numel() * t.element_size()

    # What this rank's optimizer holds: FSDP's flat shard, FSDP2's shards, or the parameters.
    local = sum(nbytes(q) for g in opt.param_groups for q in g["params"])
    # Autograd's own account of the activations: the distinct storages saved for backward in the
    # first step's forward (pack hooks that return the tensor itself change nothing), less the
    # parameters', the module buffers' (BatchNorm saves its running statistics; tracerun counts
    # buffers as other) and the batch's.
    saved = {}
    own = ({q.data_ptr() for q in model.parameters()} | {b.data_ptr() for b in raw.buffers()} |
           {batch.data_ptr()})

    def pack(t):
        base = t.data_ptr() - t.storage_offset() * t.element_size()
        if t.data_ptr() not in own and base not in own:
            saved[base] = max(saved.get(base, 0), t.storage().nbytes())
        return t

    for i in range(a.steps):
        opt.zero_grad()
        if i == 0 and a.dist not in ("fsdp", "fsdp2"):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = loss_of(model)
        else:
            loss = loss_of(model)
        loss.backward()
        opt.step()
    state = sum(nbytes(v) for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    grads = sum(nbytes(q.grad) for g in opt.param_groups for q in g["params"] if q.grad is not None)
    with open("%s.%d" % (a.truth, rank), "w") as f:
        truth = {"rank": rank, "world": world, "parameter_bytes": psi,
                 "optimizer_parameter_bytes": local, "optimizer_state_bytes": state,
                 "gradient_bytes": grads,
                 "input_bytes": batch.numel() * batch.element_size(), "steps": a.steps,
                 "parameter_tensors": sum(1 for _ in raw.parameters()),
                 "buffer_bytes": sum(b.numel() * b.element_size() for b in raw.buffers()),
                 "loss": float(loss)}
        if a.dist == "fsdp":
            # Each unit's flat parameter, as FSDP gathers it: the rank's shard x the world size
            # (FSDP pads every flat parameter to a multiple of the world size).
            truth["fsdp_unit_bytes"] = [q.numel() * q.element_size() * world
                                        for q in model.parameters()]
            truth["fsdp_gathers"] = gathers
        elif a.dist == "fsdp2":
            truth["fsdp2_units"] = len(units) + 1
        else:
            # The unsharded weights FSDP saves for backward are parameters, not activations: this
            # account of autograd's saved tensors leaves the FSDP run out.
            truth["saved_for_backward_bytes"] = sum(saved.values())
        json.dump(truth, f)
    if a.dist != "none":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
