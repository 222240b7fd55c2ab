"""karpathy/nanoGPT's model.py, unmodified, trained on CUDA: the program the GPU tests and
bench/gpu_overhead.py trace. Not a test by itself.

Default configuration (issue 25): 6 layers, 384 wide, 6 heads, block 256, batch 16, vocab 50304,
dropout 0, torch.optim.AdamW (lr 6e-4, weight decay 0.1), one fixed random batch on cuda:0.
--warmup steps, then --steps timed steps inside one `record_function("census")` scope; each step
ends with torch.cuda.synchronize(), and so does the scope (before it opens and before it closes),
so every kernel the timed steps launch is launched inside the scope.

  --torch-profile PATH  run under torch.profiler (CPU + CUDA) and export its Chrome trace to PATH
  --profile-full        with --torch-profile: also record_shapes and profile_memory (the bench)
  --no-export           with --torch-profile: do not export (the bench times steps only)
  --dist nccl|gloo      one-rank process group (FileStore): all_reduce the loss every step
  --tf32                TF32 matmuls and convolutions, as nanoGPT's train.py sets them (the bench;
                        without it an H100 runs this model GPU-bound at ~23 ms/step, where host
                        costs hide behind the GPU; with it ~10 ms/step, as issue 25 measured)
  --bf16                the forward under bf16 autocast, as nanoGPT's train.py runs it where the
                        GPU has bf16 (its default dtype 'bfloat16'; no GradScaler then)
  --times-json PATH     per-step ms and the CLOCK_MONOTONIC ns of the timed window
  --done PATH           written last: the program ran to its end
"""
import argparse
import contextlib
import json
import os
import sys
import tempfile
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nanogpt-dir", default=os.environ.get("NANOGPT_DIR"))
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--embd", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--torch-profile")
    p.add_argument("--profile-full", action="store_true")
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--dist", choices=["none", "nccl", "gloo"], default="none")
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--clip", type=float, default=0.0,
                   help="clip the gradient norm before each step, as train.py does (grad_clip, "
                        "1.0 there); 0: no clip")
    p.add_argument("--times-json")
    p.add_argument("--done")
    a = p.parse_args()
    if not a.nanogpt_dir or not os.path.isfile(os.path.join(a.nanogpt_dir, "model.py")):
        sys.exit(f"nanogpt_prog: model.py not found (--nanogpt-dir {a.nanogpt_dir})")
    sys.path.insert(0, a.nanogpt_dir)

    import torch
    from model import GPT, GPTConfig  # nanoGPT's model.py, unmodified

    torch.manual_seed(1337)
    if a.tf32:  # nanoGPT's train.py
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    pg = None
    if a.dist != "none":
        import torch.distributed as dist
        store_dir = tempfile.mkdtemp(prefix="nanogpt_store_")
        store = dist.FileStore(os.path.join(store_dir, "store"), 1)
        dist.init_process_group(a.dist, store=store, rank=0, world_size=1)
        pg = dist

    cfg = GPTConfig(block_size=a.block, vocab_size=a.vocab, n_layer=a.layers, n_head=a.heads,
                    n_embd=a.embd, dropout=0.0, bias=True)
    model = GPT(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95))
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randint(a.vocab, (a.batch, a.block), generator=g).to(dev)
    y = torch.randint(a.vocab, (a.batch, a.block), generator=g).to(dev)

    autocast = (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if a.bf16
                else contextlib.nullcontext())

    def step():
        with torch.autograd.profiler.record_function("step"):
            with autocast:
                _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            if pg is not None:
                l = loss.detach().clone()
                pg.all_reduce(l)
        torch.cuda.synchronize()
        return loss

    prof_cm = contextlib.nullcontext()
    if a.torch_profile:
        from torch.profiler import ProfilerActivity, profile
        prof_cm = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                          record_shapes=a.profile_full, profile_memory=a.profile_full)
    ms, losses = [], []
    with prof_cm as prof:
        for _ in range(a.warmup):
            step()
        torch.cuda.synchronize()
        t_start = time.monotonic_ns()
        with torch.autograd.profiler.record_function("census"):
            torch.cuda.synchronize()
            for _ in range(a.steps):
                t0 = time.perf_counter()
                loss = step()
                ms.append((time.perf_counter() - t0) * 1e3)
                losses.append(float(loss.item()))
            torch.cuda.synchronize()
        t_end = time.monotonic_ns()
    if a.torch_profile and not a.no_export:
        prof.export_chrome_trace(a.torch_profile)
    if pg is not None:
        pg.destroy_process_group()
    if a.times_json:
        with open(a.times_json, "w") as f:
            json.dump({"ms": ms, "losses": losses, "window_monotonic_ns": [t_start, t_end],
                       "warmup": a.warmup, "steps": a.steps,
                       "max_memory_allocated": torch.cuda.max_memory_allocated(dev)}, f)
    print(f"nanogpt_prog: {a.steps} steps, median {sorted(ms)[len(ms) // 2]:.2f} ms/step, "
          f"last loss {losses[-1]:.4f}", flush=True)
    if a.done:
        with open(a.done, "w") as f:
            f.write("done\n")


if __name__ == "__main__":
    main()
