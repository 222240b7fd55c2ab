# The independent reference GPT of reference_gpt.py (its model, unchanged) trained with bf16 mixed
# precision as FSDP / Megatron do it: test_precision.cpp's oracle for --precision bf16-mixed. It is
# no new model and no parallelism.
#
# Usage: reference_gpt_mixed.py DUMP_DIR OUT_DIR
#   DUMP_DIR: what `gpttrain --precision bf16-mixed --dump-init DUMP_DIR` wrote (the parameters are
#             bf16 values, written as fp32).
#   OUT_DIR:  writes losses.json ({"losses": [loss of step 1, ..., loss of step N]}).
# Each step: the working model (a bf16 copy of the fp32 master model) runs forward under CPU bf16
# autocast and backward; its bf16 gradients, widened to fp32, are clipped by the global norm and
# drive torch.optim.AdamW on the fp32 master parameters, which are then rounded into the working
# copy. Exit 3 when torch cannot be imported.
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    from reference_gpt import Gpt, gpttrain_name, learning_rate
except ImportError as e:  # pragma: no cover
    print(f"reference_gpt_mixed.py: cannot import torch ({e})", file=sys.stderr)
    sys.exit(3)


def main(argv):
    if len(argv) != 3:
        print("usage: reference_gpt_mixed.py DUMP_DIR OUT_DIR", file=sys.stderr)
        return 2
    dump, out = argv[1], argv[2]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with open(os.path.join(dump, "manifest.json")) as f:
        cfg = json.load(f)
    if cfg["dropout"] != 0 or cfg["optimizer"] != "adamw":
        print("reference_gpt_mixed.py: needs --dropout 0 and --optimizer adamw", file=sys.stderr)
        return 2
    if cfg.get("precision") != "bf16-mixed":
        print("reference_gpt_mixed.py: the dump is not from --precision bf16-mixed", file=sys.stderr)
        return 2
    master = Gpt(cfg, "none", None)
    with open(os.path.join(dump, "params.bin"), "rb") as f:
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    by_name = {p["name"]: p for p in cfg["params"]}
    with torch.no_grad():
        for ref_name, p in master.named_parameters():
            entry = by_name[gpttrain_name(ref_name)]
            p.copy_(flat[entry["offset"]: entry["offset"] + p.numel()].view(entry["shape"]))
    working = copy.deepcopy(master).to(torch.bfloat16)
    pairs = list(zip(master.parameters(), working.parameters()))
    g, s, steps = cfg["global_batch"], cfg["seq_len"], cfg["steps"]
    with open(os.path.join(dump, "tokens.bin"), "rb") as f:
        tokens = torch.frombuffer(bytearray(f.read()), dtype=torch.int64).view(steps, g, s + 1)
    decay = [p for p in master.parameters() if p.dim() >= 2]
    no_decay = [p for p in master.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    for step in range(1, steps + 1):
        batch = tokens[step - 1]
        working.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = working(batch[:, :s], batch[:, 1:]).float()
        loss.backward()
        losses.append(loss.item())
        for p32, p16 in pairs:
            p32.grad = p16.grad.float()
        if cfg["clip_grad"] > 0:
            torch.nn.utils.clip_grad_norm_(master.parameters(), cfg["clip_grad"])
        for group in opt.param_groups:
            group["lr"] = learning_rate(cfg, step)
        opt.step()
        with torch.no_grad():
            for p32, p16 in pairs:
                p16.copy_(p32)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump({"losses": losses}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
