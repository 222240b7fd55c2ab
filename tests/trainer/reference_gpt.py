# An independent reference GPT in plain torch.nn, written from the architecture docs/trainer.md
# describes (not from the C++): the oracle of test_oracle.cpp. It is no trainer and no parallelism.
#
# Usage: reference_gpt.py DUMP_DIR OUT_DIR [--gelu exact|tanh] [--attn-scale head|hidden]
#   DUMP_DIR: what `gpttrain --dump-init DUMP_DIR` wrote (manifest.json, params.bin, tokens.bin).
#   OUT_DIR:  writes grads.bin (step 1's gradients, fp32, in the manifest's order and shapes) and
#             losses.json ({"losses": [loss of step 1, ..., loss of step N]}).
#   --gelu tanh, --attn-scale hidden: deliberate deviations (the test shows the oracle can fail).
# Fine-tuning (the manifest's lora_rank / prompt_tuning, docs/trainer.md): LoRA adds
# (alpha / r) (x A^T) B^T to each adapted linear, written here from the paper (Hu et al. 2021);
# prompt tuning prepends P embeddings after the position embeddings and drops their positions
# before the final LayerNorm. Only the manifest's "trainable" parameters train (frozen ones get
# zeros in grads.bin).
# Exit 3 when torch cannot be imported (the test then skips, saying so).
import array
import json
import math
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"reference_gpt.py: cannot import torch ({e})", file=sys.stderr)
    sys.exit(3)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln1(x)), then h + mlp(ln2(h))."""

    def __init__(self, hidden, heads, gelu, scale_dim, lora=None):
        super().__init__()
        self.heads = heads
        self.lora_scale = 0.0
        self.lora = nn.ParameterDict()  # "<linear>_a": [r, in], "<linear>_b": [out, r]
        if lora is not None:
            rank, alpha, targets = lora
            self.lora_scale = alpha / rank
            shapes = {"qkv": (hidden, 3 * hidden), "proj": (hidden, hidden),
                      "fc1": (hidden, 4 * hidden), "fc2": (4 * hidden, hidden)}
            for t in targets:
                fan_in, fan_out = shapes[t]
                self.lora[t + "_a"] = nn.Parameter(torch.zeros(rank, fan_in))
                self.lora[t + "_b"] = nn.Parameter(torch.zeros(fan_out, rank))
        self.scale_dim = scale_dim  # None: the head dimension
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden)  # outputs laid out [heads][q, k, v][head_dim]
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)
        self.gelu = gelu

    def linear(self, name, x):
        y = getattr(self, name)(x)
        if name + "_a" in self.lora:
            y = y + self.lora_scale * (x @ self.lora[name + "_a"].t()) @ self.lora[name + "_b"].t()
        return y

    def attention(self, x):  # x: [batch, seq, hidden]
        b, s, h = x.shape
        d = h // self.heads
        qkv = self.linear("qkv", x).view(b, s, self.heads, 3, d)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))  # [b, heads, s, d]
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.scale_dim or d)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # [b, heads, s, d]
        return self.linear("proj", out.transpose(1, 2).reshape(b, s, h))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.linear("fc2", F.gelu(self.linear("fc1", self.ln2(x)), approximate=self.gelu))


class Gpt(nn.Module):
    """Token + learned position embeddings, blocks, final LayerNorm, output tied to the tokens'."""

    def __init__(self, cfg, gelu, scale_dim):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.wpe = nn.Parameter(torch.zeros(cfg["seq_len"], cfg["hidden"]))
        lora = None
        if cfg.get("lora_rank", 0) > 0:
            lora = (cfg["lora_rank"], cfg["lora_alpha"], cfg["lora_targets"])
        self.blocks = nn.ModuleList(
            Block(cfg["hidden"], cfg["heads"], gelu, scale_dim, lora) for _ in range(cfg["layers"]))
        self.ln_f = nn.LayerNorm(cfg["hidden"], eps=1e-5)
        self.prompt_tokens = cfg.get("prompt_tuning", 0)
        if self.prompt_tokens > 0:
            self.prompt = nn.Parameter(torch.zeros(self.prompt_tokens, cfg["hidden"]))

    def forward(self, tokens, targets):  # [batch, seq] each -> mean cross-entropy
        x = self.wte(tokens) + self.wpe[: tokens.shape[1]]
        if self.prompt_tokens > 0:  # no position of its own; the loss is over the real tokens
            x = torch.cat([self.prompt.expand(x.shape[0], -1, -1), x], dim=1)
        for block in self.blocks:
            x = block(x)
        x = x[:, self.prompt_tokens:]
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def gpttrain_name(ref_name):
    """The reference's parameter name -> gpttrain's (docs/trainer.md's module paths)."""
    parts = ref_name.split(".")
    if ref_name == "wte.weight":
        return "embedding.word.weight"
    if ref_name == "wpe":
        return "embedding.position"
    if ref_name == "prompt":
        return "prompt.embedding"
    if len(parts) == 4 and parts[2] == "lora":  # blocks.<i>.lora.<linear>_<a|b>
        linear, which = parts[3].rsplit("_", 1)
        where = {"qkv": "attn.qkv", "proj": "attn.proj", "fc1": "mlp.fc1", "fc2": "mlp.fc2"}
        return f"layers.{parts[1]}.{where[linear]}.lora_{which}"
    if parts[0] == "ln_f":
        return "final_ln." + parts[1]
    layer, module, kind = parts[1], parts[2], parts[3]
    where = {"ln1": "ln1", "ln2": "ln2", "qkv": "attn.qkv", "proj": "attn.proj",
             "fc1": "mlp.fc1", "fc2": "mlp.fc2"}[module]
    return f"layers.{layer}.{where}.{kind}"


def learning_rate(cfg, step):
    """Linear warm-up to lr, then cosine down to min_lr at decay_steps (1-based step)."""
    lr, min_lr, warmup = cfg["lr"], cfg["min_lr"], cfg["warmup"]
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    span = max(1, cfg["decay_steps"] - warmup)
    progress = min(max((step - warmup) / span, 0.0), 1.0)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def main(argv):
    if len(argv) < 3:
        print("usage: reference_gpt.py DUMP_DIR OUT_DIR [--gelu exact|tanh] "
              "[--attn-scale head|hidden]", file=sys.stderr)
        return 2
    dump, out = argv[1], argv[2]
    options = dict(zip(argv[3::2], argv[4::2]))
    gelu = {"exact": "none", "tanh": "tanh"}[options.get("--gelu", "exact")]
    scale_by_hidden = options.get("--attn-scale", "head") == "hidden"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with open(os.path.join(dump, "manifest.json")) as f:
        cfg = json.load(f)
    if cfg["dropout"] != 0 or cfg["optimizer"] != "adamw":
        print("reference_gpt.py: needs --dropout 0 and --optimizer adamw", file=sys.stderr)
        return 2
    model = Gpt(cfg, gelu, cfg["hidden"] if scale_by_hidden else None)
    with open(os.path.join(dump, "params.bin"), "rb") as f:
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    by_name = {p["name"]: p for p in cfg["params"]}
    names = dict(model.named_parameters())
    if sorted(gpttrain_name(n) for n in names) != sorted(by_name):
        print("reference_gpt.py: parameter names differ: "
              f"{sorted(set(gpttrain_name(n) for n in names) ^ set(by_name))}", file=sys.stderr)
        return 1
    with torch.no_grad():
        for ref_name, p in names.items():
            entry = by_name[gpttrain_name(ref_name)]
            n = p.numel()
            p.copy_(flat[entry["offset"]: entry["offset"] + n].view(entry["shape"]))
    g, s, steps = cfg["global_batch"], cfg["seq_len"], cfg["steps"]
    with open(os.path.join(dump, "tokens.bin"), "rb") as f:
        tokens = torch.frombuffer(bytearray(f.read()), dtype=torch.int64).view(steps, g, s + 1)
    # Fine-tuning: only the manifest's trainable parameters train.
    trainable = set(cfg.get("trainable", by_name))
    for ref_name, p in names.items():
        p.requires_grad_(gpttrain_name(ref_name) in trainable)
    params = [p for p in model.parameters() if p.requires_grad]
    # AdamW with weight decay on matrices only (not biases or norms), global-norm clipping.
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    os.makedirs(out, exist_ok=True)
    for step in range(1, steps + 1):
        batch = tokens[step - 1]
        opt.zero_grad()
        loss = model(batch[:, :s], batch[:, 1:])
        loss.backward()
        losses.append(loss.item())
        if step == 1:
            with open(os.path.join(out, "grads.bin"), "wb") as f:
                for entry in cfg["params"]:
                    ref = [n for n in names if gpttrain_name(n) == entry["name"]][0]
                    grad = names[ref].grad
                    if grad is None:  # frozen
                        grad = torch.zeros_like(names[ref])
                    f.write(array.array("f", grad.flatten().tolist()).tobytes())
        if cfg["clip_grad"] > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg["clip_grad"])
        for group in opt.param_groups:
            group["lr"] = learning_rate(cfg, step)
        opt.step()
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump({"losses": losses}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
