"""karpathy/nanoGPT's model.py, unmodified, trained on the CPU for a few steps: the nanoGPT side of
bench/op_census.py's count of ATen ops per training step. Not a benchmark by itself (no timing).

Each step is the one nanoGPT's train.py runs (without gradient accumulation): the forward (under
bf16 autocast with --bf16), backward, gradient clipping at 1.0 unless --clip 0 (train.py's default
grad_clip; tests/gpu/nanogpt_prog.py, which bench/gpu_gpttrain_speed.py times, does not clip), the
AdamW that configure_optimizers builds (weight decay 0.1, lr 6e-4, betas 0.9/0.95; on the CPU not
fused, so torch's per-tensor loop; --foreach switches its param groups to torch's multi-tensor
path, fewer ops, closer to what CUDA runs), zero_grad(set_to_none=True). Each phase sits in a
record_function scope ("step" around "forward", "backward", "optimizer") that the census reads.
"""
import argparse
import contextlib
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nanogpt-dir", default=os.environ.get("NANOGPT_DIR"))
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--embd", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--bf16", action="store_true", help="forward under CPU bf16 autocast")
    p.add_argument("--clip", type=float, default=1.0, help="gradient clip (0: none)")
    p.add_argument("--foreach", action="store_true", help="torch's multi-tensor AdamW")
    a = p.parse_args()
    if not a.nanogpt_dir or not os.path.isfile(os.path.join(a.nanogpt_dir, "model.py")):
        sys.exit(f"nanogpt_cpu_step: model.py not found (--nanogpt-dir {a.nanogpt_dir})")
    sys.path.insert(0, a.nanogpt_dir)

    import torch
    from torch.autograd.profiler import record_function
    from model import GPT, GPTConfig  # nanoGPT's model.py, unmodified

    torch.manual_seed(1337)
    torch.set_num_threads(1)
    cfg = GPTConfig(block_size=a.block, vocab_size=a.vocab, n_layer=a.layers, n_head=a.heads,
                    n_embd=a.embd, dropout=0.0, bias=True)
    model = GPT(cfg)
    opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
    if a.foreach:
        for group in opt.param_groups:
            group["foreach"] = True
    g = torch.Generator().manual_seed(0)
    x = torch.randint(a.vocab, (a.batch, a.block), generator=g)
    y = torch.randint(a.vocab, (a.batch, a.block), generator=g)
    autocast = (torch.autocast(device_type="cpu", dtype=torch.bfloat16) if a.bf16
                else contextlib.nullcontext())
    for step in range(1, a.steps + 1):
        with record_function("step"):
            with record_function("forward"), autocast:
                _, loss = model(x, y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                if a.clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
                opt.step()
                opt.zero_grad(set_to_none=True)
        print(f"step {step}/{a.steps} | loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
