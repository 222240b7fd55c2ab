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
#                             find_unused_parameters=True); fsdp (torch 2.x):
#                             FullyShardedDataParallel(FULL_SHARD) around the whole model
#   --truth PATH              JSON per rank: PATH.<rank>: parameter and buffer bytes, steps, ...
import argparse
import json
import sys

import torch


def build_model(a):
    if a.model == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
        x = torch.randn(a.batch, 3, 32, 32)
        y = torch.randint(10, (a.batch,))
        return model, (lambda m: torch.nn.functional.cross_entropy(m(x), y)), x
    sys.path.insert(0, a.nanogpt_dir)
    from model import GPT, GPTConfig

    cfg = GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128, dropout=0.0,
                    bias=True)
    model = GPT(cfg)
    x = torch.randint(cfg.vocab_size, (a.batch, cfg.block_size))
    y = torch.randint(cfg.vocab_size, (a.batch, cfg.block_size))
    return model, (lambda m: m(x, y)[1]), x


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
    p.add_argument("--dist", choices=["none", "ddp", "ddp-views", "fsdp"], default="none")
    p.add_argument("--nanogpt-dir", default="")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--truth", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank = 0
    if a.dist != "none":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank = dist.get_rank()
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
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy

        model = FullyShardedDataParallel(raw, sharding_strategy=ShardingStrategy.FULL_SHARD)
    opt = build_optimizer(a, model, raw)
    # What this rank's optimizer holds: FSDP's flat shard, or the model's own parameters.
    local = sum(q.numel() * q.element_size() for g in opt.param_groups for q in g["params"])
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
        if i == 0:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = loss_of(model)
        else:
            loss = loss_of(model)
        loss.backward()
        opt.step()
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                if torch.is_tensor(v))
    grads = sum(q.grad.numel() * q.grad.element_size() for g in opt.param_groups
                for q in g["params"] if q.grad is not None)
    with open("%s.%d" % (a.truth, rank), "w") as f:
        json.dump({"rank": rank, "parameter_bytes": psi, "optimizer_parameter_bytes": local,
                   "optimizer_state_bytes": state, "gradient_bytes": grads,
                   "input_bytes": batch.numel() * batch.element_size(), "steps": a.steps,
                   "saved_for_backward_bytes": sum(saved.values()),
                   "parameter_tensors": sum(1 for _ in raw.parameters()),
                   "buffer_bytes": sum(b.numel() * b.element_size() for b in raw.buffers()),
                   "loss": float(loss)}, f)
    if a.dist != "none":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
