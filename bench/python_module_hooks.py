#!/usr/bin/env python3
"""What tracerun's Python module hooks (interpose/python/sitecustomize.py, the `scopes` word) cost
per module call: the global forward pre- and post-hook called directly on every module of a small
nanoGPT, nested as in a forward, with libtracerun's entry points replaced by no-ops (a tiny C
library preloaded) or real (under tracerun). Prints the median microseconds per module call.

  gcc -O2 -shared -fPIC -o /tmp/libfake.so bench/python_module_hooks_fake.c
  LD_PRELOAD=/tmp/libfake.so PYTHONPATH=interpose/python TRACERUN_CAPTURE=ops,scopes \
      NANOGPT_DIR=.gpu-deps/nanoGPT python3 bench/python_module_hooks.py
  build/interpose/tracerun -q -o /tmp/h.db --capture scopes -- python3 bench/python_module_hooks.py
"""
import os
import sys, time
sys.path.insert(0, os.environ.get("NANOGPT_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".gpu-deps", "nanoGPT")))
import torch
import torch.nn.modules.module as mm
from model import GPT, GPTConfig
m = GPT(GPTConfig(n_layer=6, n_head=6, n_embd=48, block_size=16, vocab_size=128, dropout=0.0))
# The module-scope hooks by name (_tracerun_training.py registers its own pre-hook first).
pre = [h for h in mm._global_forward_pre_hooks.values() if h.__name__ == "pre_hook"][0]
post = [h for h in mm._global_forward_hooks.values() if h.__name__ == "post_hook"][0]
mods = list(m.modules())
x = (torch.zeros(2, 16, 48),)
y = torch.zeros(2, 16, 48)
def run():
    # nested like a forward: root open, then each child open/close
    pre(m, x)
    for mod in mods[1:]:
        pre(mod, x); post(mod, x, y)
    post(m, x, y)
for _ in range(50): run()
ts = []
for r in range(9):
    t = time.perf_counter()
    for _ in range(100): run()
    ts.append((time.perf_counter() - t) / 100 / len(mods))
ts.sort()
print("us per module call (pre+post): %.2f" % (ts[4] * 1e6))
