"""Pieces of the Python training hooks (interpose/python/_tracerun_training.py) called directly,
with stand-ins for libtracerun's entry points: tensors without storage of their own
(_plain_tensors, the FSDP2 gather hook, the closed form's sums), a CUDA tag's live bytes, and the
step a compiled optimizer step ends. ctest: e2e_python_hook_units. Not a
traced run (python_memory_test.py's resnet18_fsdp2 is).

Checks, on Debian's torch 1.13:
- a plain tensor and a Parameter are themselves; a DTensor-like wrapper (fsdp2_cpu_standin's
  ShardTensor) is its _local_tensor; a traceable wrapper subclass (__tensor_flatten__ and
  __tensor_unflatten__) is the tensors its flatten names; a subclass with storage of its own that
  defines __tensor_flatten__ is itself; a non-tensor _local_tensor is passed over;
- the tag call receives each storage's base address once per tensor, with its category;
- FSDP2's FSDPParamGroup.wait_for_unshard (a stand-in class in a module of FSDP2's name): after a
  wait with an all-gather pending, every FSDPParam's _unsharded_param is tagged parameter; a wait
  with none pending tags nothing; the hook is installed once;
- model_states over wrapper parameters counts their local shards;
- a tag call's CUDA live bytes, read from the allocator's nested statistics, equal what
  torch.cuda.memory_stats gives for the same statistics (a stand-in dict: no GPU here);
- a compiled optimizer step's mark (what _call leaves while Dynamo traces, here set by calling
  _call under a stand-in tracing flag): the next forward ends the open step and opens the next,
  one step span each, numbered 1, 2; without the mark a forward inside a step opens nothing;
- torch 2.x's Optimizer (a stand-in with its _patch_step_function and profile_hook_step): the
  step hooks run outside torch's record_function, once for a subclass calling its parent's step,
  each class is wrapped once, a step Dynamo traces leaves only the end's mark, an optimizer
  stepped inside another's step (ZeroRedundancyOptimizer's local one) is tagged without spans,
  and torch.compile's peel of the profiling wrapper (2.0 to 2.2) leaves ours on;
- updates on another thread inside the training thread's backward (the autograd engine's, CUDA's
  optimizer in backward) end the step when that backward returns; a plain step beside another
  thread's backward ends at once; two threads' updates at once each get their optimizer span;
- GradScaler.step (a stand-in that skips the optimizer's step where gradients overflowed): a
  skipped step ends its step span (with no optimizer span), a step that ran ends it once, and the
  hook is installed once per class that defines step;
- process group names (_tracerun_groups.py): torch's counter names are their number, others
  FNV-1a 64 (the published vector for "a"); the address read is the pointer after the object's
  header (a one-slot object's slot); on stand-ins of 2.x's and 1.13's distributed_c10d, a group
  made before the hooks and each one made after (by the helper, split_group's re-export) is named
  once, each creation function is wrapped once, a destroyed group is forgotten, and across
  re-inits that reuse addresses (torch's counter restarting) libtracerun's names are torch's.
Exit 0 when every check passes, 1 otherwise.

    python_hook_units_test.py --source-dir DIR
"""
import argparse
import ctypes
import functools
import os
import sys
import threading
import types

import torch

from e2e_checks import Checks


class FlatPair(torch.Tensor):
    """A traceable wrapper subclass (torchao's style): two inner tensors, no storage."""

    @staticmethod
    def __new__(cls, data, scale):
        r = torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=torch.float32)
        r._data, r._scale = data, scale
        return r

    def __tensor_flatten__(self):
        return ["_data", "_scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, size, stride):
        return FlatPair(inner["_data"], inner["_scale"])

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(str(func))  # never computed with here


class OwnStorage(torch.Tensor):
    """A subclass with storage of its own that happens to define __tensor_flatten__."""

    def __tensor_flatten__(self):
        return ["other"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, size, stride):
        return inner["other"]


class BadLocal(torch.Tensor):
    @staticmethod
    def __new__(cls):
        r = torch.Tensor._make_wrapper_subclass(cls, (2,), dtype=torch.float32)
        r._local_tensor = "not a tensor"
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(str(func))  # never computed with here


def base(t):
    return t.data_ptr() - t.storage_offset() * t.element_size()


def logged_steps(hooks):
    """A _Steps whose scope begin and end calls (stand-ins for libtracerun's) log to a list:
    ("begin", name, first argument), ("end", token); a token is the begin's place in the log."""
    spans = []
    begin_proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                   ctypes.POINTER(hooks._Arg), ctypes.c_int)
    end_proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_char_p)

    def begin(kind, name, detail, args, n):
        spans.append(("begin", name.decode(), args[0].value if n else None))
        return len(spans)

    def end(token, detail):
        spans.append(("end", token))

    steps = hooks._Steps({"tracerun_annotate_scope_begin": begin_proto(begin),
                          "tracerun_annotate_scope_end": end_proto(end)})
    return steps, spans


def steps_across_threads(c, hooks):
    """Optimizer updates made while a backward runs, as the autograd engine's thread makes them
    on CUDA (optimizer in backward): the step ends with the backward, on its own thread. And a
    plain step on the training thread while another thread runs a backward ends at once."""
    steps, spans = logged_steps(hooks)

    def on_thread(f):
        t = threading.Thread(target=f)
        t.start()
        t.join()

    def update():
        steps.before_update()
        steps.after_update()

    steps.forward()
    token = hooks.backward_entered(steps)
    on_thread(update)  # the engine's thread, inside the training thread's backward
    on_thread(update)
    c.check(("end", 1) not in spans, "an update on the engine's thread leaves the step open",
            "%s" % spans)
    hooks.backward_left(steps, token)
    want = [("begin", "step", 1), ("begin", "backward", None), ("begin", "optimizer", None),
            ("end", 3), ("begin", "optimizer", None), ("end", 5), ("end", 2), ("end", 1)]
    c.check(spans == want, "the step ends when the training thread's backward returns",
            "%s" % spans)
    spans.clear()
    inside, leave = threading.Event(), threading.Event()

    def other_backward():
        token = hooks.backward_entered(steps)  # another thread's backward, running beside
        inside.set()
        leave.wait()
        hooks.backward_left(steps, token)

    t = threading.Thread(target=other_backward)
    steps.forward()  # step 2 opens on this thread
    t.start()
    inside.wait()
    update()
    c.check(spans[-1] == ("end", 1), "a plain step beside another thread's backward ends at once",
            "%s" % spans)
    leave.set()
    t.join()
    # Two threads' updates at once (optimizer-in-backward hooks on two device threads): each
    # opens and ends its own optimizer span.
    spans.clear()
    opened, finish = threading.Event(), threading.Event()

    def other_update():
        steps.before_update()
        opened.set()
        finish.wait()
        steps.after_update()

    t = threading.Thread(target=other_update)
    t.start()
    opened.wait()
    steps.before_update()
    finish.set()
    t.join()
    steps.after_update()
    begun = [i + 1 for i, x in enumerate(spans) if x[:2] == ("begin", "optimizer")]
    ended = sorted(x[1] for x in spans if x[0] == "end")
    c.check(len(begun) == 2 and ended == begun, "two threads' updates at once: two optimizer "
            "spans, each ended", "%s" % spans)


def grad_scaler(c, hooks):
    """GradScaler.step as torch's (a stand-in: without CUDA torch 1.13's scaler disables itself):
    it calls the optimizer's step only where no gradient overflowed. A skipped step still ends
    its step span, with no optimizer span; a step that ran ends it once."""
    steps, spans = logged_steps(hooks)
    mod = types.ModuleType("torch.cuda.amp.grad_scaler")

    class GradScaler:
        def __init__(self):
            self.found_inf = False

        def step(self, optimizer):
            if not self.found_inf:
                steps.before_update()  # what the optimizer step hooks do
                steps.after_update()

    class Inherits(GradScaler):  # torch 2.3 and later: torch.cuda.amp's subclass of torch.amp's
        pass

    mod.GradScaler = GradScaler
    hooks._hook_grad_scaler(steps, mod)
    hooks._hook_grad_scaler(steps, mod)
    hooks._hook_grad_scaler(steps, types.SimpleNamespace(GradScaler=Inherits))
    c.check(not hasattr(GradScaler.step.__wrapped__, "__wrapped__") and "step" not in
            vars(Inherits), "GradScaler.step is wrapped once, a subclass that inherits it not")
    scaler = GradScaler()
    for found_inf in (True, True, False):
        scaler.found_inf = found_inf
        steps.forward()
        scaler.step(None)
    want = [("begin", "step", 1), ("end", 1), ("begin", "step", 2), ("end", 3),
            ("begin", "step", 3), ("begin", "optimizer", None), ("end", 6), ("end", 5)]
    c.check(spans == want, "a step GradScaler skips ends its step span, without an optimizer span",
            "%s" % spans)
    # Inside another optimizer's step (which ends the step itself), a scaler's step that updates
    # nothing is no skip.
    steps.forward()
    running = hooks._optimizer_steps_running()
    running.append(object())  # as while an outer optimizer's step runs on this thread
    try:
        scaler.found_inf = True
        n = len(spans)
        scaler.step(None)
    finally:
        running.pop()
    c.check(len(spans) == n, "a scaler's step inside an optimizer's step ends nothing",
            "%s" % spans[n:])


def optimizer_wrapping(c, hooks):
    """torch 2.x's Optimizer as its source has it (a stand-in module: Debian's torch is 1.13):
    _patch_step_function wraps each class's step, once, in profile_hook_step, which opens the
    record_function and runs the global step hooks inside it. The step hooks must run outside that
    record (before it opens, after it closes), once for a subclass whose step calls its parent's,
    and once a class however many optimizers are made."""
    log = []
    pre, post = [], []
    mod = types.ModuleType("torch.optim.optimizer")

    class Optimizer:
        def __init__(self):
            self._patch_step_function()

        @staticmethod
        def profile_hook_step(func):
            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                self = args[0]
                log.append("record enter " + type(self).__name__)
                for hook in pre:
                    hook(self, args, kwargs)
                out = func(*args, **kwargs)
                for hook in post:
                    hook(self, args, kwargs)
                log.append("record exit")
                return out

            return wrapper

        def _patch_step_function(self):
            if not getattr(self.__class__.step, "hooked", None):
                self.__class__.step = self.profile_hook_step(self.__class__.step)
                self.__class__.step.hooked = True

    class Base(Optimizer):
        def step(self):
            log.append("Base.step")
            return 7

    class Sub(Base):
        def step(self):
            log.append("Sub.step")
            return super().step()

    mod.Optimizer = Optimizer
    mod.register_optimizer_step_pre_hook = pre.append
    mod.register_optimizer_step_post_hook = post.append
    def hook(which):
        def call(opt, spans=True):
            log.append("%s %s%s" % (which, type(opt).__name__, "" if spans else " (tags only)"))
        return call

    hooks._HOOKS["before"], hooks._HOOKS["after"] = hook("before"), hook("after")
    try:
        hooks._hook_optimizer(mod)
        Base(), Base(), Sub()
        got = Sub().step()
        want = ["before Sub", "record enter Sub", "Sub.step", "record enter Sub", "Base.step",
                "record exit", "record exit", "after Sub"]
        c.check(got == 7 and log == want, "torch 2.x: the step hooks run outside torch's "
                "record_function, once for a subclass calling its parent's step", "%s" % log)
        c.check(not pre and not post, "torch 2.x: no global step hooks registered beside it")
        c.check(getattr(Base.step, "_tracerun", False) and Base.step._tracerun_wraps.hooked and
                not hasattr(Base.step._tracerun_wraps, "_tracerun"),
                "torch 2.x: each class wrapped once, ours outside torch's")
        log.clear()
        hooks._TRACING["compile"] = lambda: True  # as while Dynamo traces a compiled step
        try:
            Base().step()
        finally:
            del hooks._TRACING["compile"]
        c.check(log == ["record enter Base", "Base.step", "record exit"] and
                hooks._PENDING.pop("step_end", False),
                "torch 2.x: a step Dynamo traces only leaves the end's mark", "%s" % log)
        # An optimizer stepping another one (ZeroRedundancyOptimizer its local optimizer): the
        # inner one's memory is tagged too, the spans are the outer step's alone.
        inner = Base()

        class Zero(Optimizer):
            def step(self):
                log.append("Zero.step")
                inner.step()

        log.clear()
        Zero().step()
        want = ["before Zero", "record enter Zero", "Zero.step", "before Base (tags only)",
                "record enter Base", "Base.step", "record exit", "after Base (tags only)",
                "record exit", "after Zero"]
        c.check(log == want, "torch 2.x: an optimizer stepped inside another's step is tagged, "
                "without spans of its own", "%s" % log)
        # torch.compile on torch 2.0 to 2.2 (Dynamo's TorchPatcher.patch) peels one wrapper off
        # each optimizer class whose step is `hooked`, through its __wrapped__, and marks what is
        # left hooked: ours must stay on, for the optimizers made before the compile too.
        made_before = Base()
        for cls in (Base, Sub, Zero):
            if getattr(cls.step, "hooked", False):
                unwrapped = getattr(cls.step, "__wrapped__", None)
                if unwrapped:
                    cls.step = unwrapped
            cls.step.hooked = True
        log.clear()
        made_before.step()
        c.check(log == ["before Base", "record enter Base", "Base.step", "record exit",
                        "after Base"],
                "torch 2.0-2.2: Dynamo's peel of the profiling wrapper leaves the step hooks on",
                "%s" % log)
    finally:
        del hooks._HOOKS["before"], hooks._HOOKS["after"]


class Slotted:
    """One slot: CPython keeps its object pointer right after the header, where pybind11 keeps a
    simple instance's C++ pointer."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) % (1 << 64)
    return h


def process_group_names(c):
    """_tracerun_groups.py: names as numbers, the address read, and the groups named as torch
    creates them (stand-ins of 2.x's and 1.13's distributed_c10d)."""
    import _tracerun_groups as groups

    # FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the published test vector); top two bits cleared.
    c.check(groups.group_id("a") == 0x2F63DC4C8601EC8C, "a hashed name: FNV-1a 64, 62 bits",
            hex(groups.group_id("a")))
    sha = "1f0b8a4c3e0d9e0c2b7f4a0d5c6e7f8091a2b3c4"
    got = [groups.group_id(n) for n in ("0", "17", "", None, "007", "1e3", sha)]
    want = [0, 17, -1, -1, fnv1a64(b"007") & ((1 << 62) - 1), fnv1a64(b"1e3") & ((1 << 62) - 1),
            fnv1a64(sha.encode()) & ((1 << 62) - 1)]
    c.check(got == want, "counter names are their number; others hashed; none -1",
            "%s vs %s" % (got, want))
    value = object()
    c.check(groups.address_of(Slotted(value)) == id(value),
            "the address is the pointer right after the object's header")

    named = []
    table = {}  # libtracerun's names, as tracerun_annotate_process_group leaves them

    def name_group(address, gid):
        named.append((address, gid))
        if gid < 0:
            table.pop(address, None)
        else:
            table[address] = gid

    lib = {"tracerun_annotate_process_group": name_group}
    for version in ("2.x", "1.13"):
        pgs = {}  # ProcessGroup -> name, as torch keeps them
        c10d = types.ModuleType("torch.distributed.distributed_c10d")
        if version == "2.x":
            c10d._world = types.SimpleNamespace(pg_names=pgs)
        else:
            c10d._pg_names = pgs

        def helper(name):
            group = Slotted(object())
            pgs[group] = name
            return group, None  # 2.x returns the group and its store

        def split_group(name):
            group = Slotted(object())
            pgs[group] = name
            return group

        def destroy_process_group(group=None):
            for g in [g for g in pgs if group is None or g is group]:
                del pgs[g]

        c10d._new_process_group_helper, c10d.split_group = helper, split_group
        c10d.destroy_process_group = destroy_process_group
        c10d.new_group = lambda name: c10d._new_process_group_helper(name)[0]  # global lookup
        distributed = types.ModuleType("torch.distributed")
        distributed.split_group = split_group  # `from .distributed_c10d import *` before
        del named[:]
        table.clear()
        world = Slotted(object())
        pgs[world] = "0"
        groups.install(lib, c10d, distributed)
        groups.install(lib, c10d, distributed)  # twice: wrapped once
        c.check(named == [(id(world.value), 0)], "[%s] a group made before: named" % version,
                "%s" % named)
        first = c10d.new_group("1")
        second = distributed.split_group(sha)
        c.check(named[1:] == [(id(first.value), 1), (id(second.value), groups.group_id(sha))],
                "[%s] groups named as they are made, by their name's number" % version,
                "%s" % named)
        c.check(getattr(c10d._new_process_group_helper, "__wrapped__", None) is helper and
                c10d.split_group is distributed.split_group and
                c10d.split_group.__wrapped__ is split_group,
                "[%s] each creation function wrapped once, the re-export too" % version)
        # Destroyed groups are forgotten; a group made at a dead one's address (here: the same
        # object put back, as an allocator reuses memory) takes its own name, or none.
        c10d.destroy_process_group(second)
        c.check(id(second.value) not in table, "[%s] a destroyed group is forgotten" % version,
                "%s" % table)
        c10d.destroy_process_group()
        c.check(table == {}, "[%s] destroying the world forgets every group" % version,
                "%s" % table)
        x, y = world, first
        for round_names in (("0", "1"), ("1", "0"), ("0", None)):  # torch's counter restarts
            pgs.clear()
            for group, name in zip((x, y), round_names):
                if name is not None:
                    pgs[group] = name
            c10d._new_process_group_helper("9")  # the next creation names them
            want = {id(g.value): int(n) for g, n in zip((x, y), round_names) if n is not None}
            want.update({id(g.value): 9 for g, n in pgs.items() if n == "9"})
            c.check(table == want, "[%s] addresses reused across re-inits: names %s" %
                    (version, round_names), "%s vs %s" % (table, want))
    class OlderLibrary:  # ctypes.CDLL without the entry point
        def __getitem__(self, name):
            raise AttributeError(name)

    try:
        groups.install(OlderLibrary(), types.ModuleType("c10d"))
        c.check(True, "an older libtracerun without the entry point: nothing installed")
    except Exception as e:
        c.check(False, "an older libtracerun without the entry point: nothing installed", str(e))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source-dir", required=True)
    a = p.parse_args()
    sys.path.insert(0, os.path.join(a.source_dir, "interpose", "python"))
    sys.path.insert(0, os.path.join(a.source_dir, "tests", "e2e"))
    import _tracerun_training as hooks
    from fsdp2_cpu_standin import ShardTensor

    hooks._PLAIN_TYPES.update((torch.Tensor, torch.nn.Parameter))
    c = Checks()

    plain = torch.randn(4)
    param = torch.nn.Parameter(torch.randn(3))
    local = torch.randn(2, 3)
    shard = ShardTensor(local, torch.Size([4, 3]))
    data, scale = torch.randn(5), torch.ones(1)
    pair = FlatPair(data, scale)
    own = torch.randn(3).as_subclass(OwnStorage)
    own.other = torch.randn(7)
    bad = BadLocal()

    def same(got, want):
        return len(got) == len(want) and all(g is w for g, w in zip(got, want))

    c.check(same(hooks._plain_tensors(plain, []), [plain]), "a plain tensor is itself")
    c.check(same(hooks._plain_tensors(param, []), [param]), "a Parameter is itself")
    c.check(same(hooks._plain_tensors(shard, []), [local]), "a DTensor-like wrapper is its shard")
    # nn.Parameter of a wrapper detaches it: another wrapper around a view of the same shard.
    c.check([u.data_ptr() for u in hooks._plain_tensors(torch.nn.Parameter(shard), [])] ==
            [local.data_ptr()], "a DTensor-like wrapper made a Parameter is its shard")
    c.check(same(hooks._plain_tensors(pair, []), [data, scale]),
            "a traceable wrapper subclass is what its __tensor_flatten__ names")
    c.check(same(hooks._plain_tensors(own, []), [own]),
            "a subclass with storage of its own is itself, whatever it flattens to")
    c.check(same(hooks._plain_tensors(bad, []), [bad]), "a non-tensor _local_tensor is passed over")
    c.check(hooks._addresses([plain, shard, pair]) ==
            [plain.data_ptr(), local.data_ptr(), data.data_ptr(), scale.data_ptr()],
            "the forward hook's key: the plain tensors' addresses")

    calls = []

    def tag(ptrs, n, device_type, device_index, category, total):
        calls.append((sorted(ptrs[i] for i in range(n)), device_type, category))

    proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_int, ctypes.c_int64)
    fn = proto(tag)
    tagger = hooks._Tagger({"tracerun_annotate_tag_memory": fn})
    tagger.tag([plain, shard, pair, bad], hooks._OPTIMIZER_STATE)
    want = sorted([base(plain), base(local), base(data), base(scale)])
    c.check(calls == [(want, 0, hooks._OPTIMIZER_STATE)],
            "one tag call with each plain tensor's storage base, the wrapper passed over",
            "%s vs %s" % (calls, want))

    # FSDP2's group, as torch 2.4 and later have it (the attributes the hook reads).
    mod = types.ModuleType("torch.distributed.fsdp._fully_shard._fsdp_param_group")

    class FSDPParam:
        def __init__(self):
            self._unsharded_param = None

    class FSDPParamGroup:
        def __init__(self, n):
            self.fsdp_params = [FSDPParam() for _ in range(n)]
            self._all_gather_result = None

        def wait_for_unshard(self):
            if not self._all_gather_result:
                return
            for q in self.fsdp_params:
                q._unsharded_param = torch.nn.Parameter(torch.randn(6))
            self._all_gather_result = None

    mod.FSDPParamGroup = FSDPParamGroup
    hooks._hook_fsdp2(tagger, mod)
    hooks._hook_fsdp2(tagger, mod)
    c.check(getattr(FSDPParamGroup.wait_for_unshard, "__wrapped__", None) is not None and
            not hasattr(FSDPParamGroup.wait_for_unshard.__wrapped__, "__wrapped__"),
            "the FSDP2 hook is installed once")
    group = FSDPParamGroup(3)
    calls.clear()
    group.wait_for_unshard()
    c.check(calls == [], "no all-gather pending: nothing tagged", "%s" % calls)
    group._all_gather_result = object()
    group.wait_for_unshard()
    want = sorted(base(q._unsharded_param) for q in group.fsdp_params)
    c.check(calls == [(want, 0, hooks._PARAMETER)],
            "after a wait with an all-gather pending every unsharded parameter is tagged parameter",
            "%s vs %s" % (calls, want))

    opt = torch.optim.SGD([torch.nn.Parameter(ShardTensor(torch.randn(2, 3), torch.Size([4, 3]))),
                           torch.nn.Parameter(torch.randn(5))], lr=0.1, momentum=0.9)
    got = hooks.model_states(opt)
    c.check(got == (11, 44, 1, 44), "model_states counts a wrapper's shard, not its whole numel",
            "%s vs (11, 44, 1, 44)" % (got,))
    # A tag call's CUDA live bytes: read from the allocator's nested statistics (not flattened),
    # equal to what torch.cuda.memory_stats (torch's own flattening of the same dict) gives.
    import torch.cuda.memory as cuda_memory  # memory_stats reads it from there

    real = torch.cuda.memory_stats_as_nested_dict
    try:
        for stats in ({"requested_bytes": {"all": {"current": 1234, "peak": 9}},
                       "allocated_bytes": {"all": {"current": 2048}}},
                      {"allocated_bytes": {"all": {"current": 4096}, "large_pool": {"current": 1}}}):
            fake = lambda device=None, s=stats: s  # noqa: E731
            torch.cuda.memory_stats_as_nested_dict = cuda_memory.memory_stats_as_nested_dict = fake
            flat = torch.cuda.memory_stats(0)
            want = flat.get("requested_bytes.all.current", flat.get("allocated_bytes.all.current"))
            got = hooks._cuda_live_bytes(0)
            c.check(got == want, "CUDA live bytes from the nested statistics = memory_stats'",
                    "%s vs %s" % (got, want))
    finally:
        torch.cuda.memory_stats_as_nested_dict = cuda_memory.memory_stats_as_nested_dict = real
    # The step a compiled optimizer step ended.
    steps, spans = logged_steps(hooks)
    steps.forward()
    steps.forward()  # inside the step: nothing
    hooks._HOOKS["after"] = lambda optimizer, spans=True: None
    hooks._TRACING["compile"] = lambda: True  # as while Dynamo traces
    try:
        hooks._call("after", None)
    finally:
        del hooks._TRACING["compile"]
        del hooks._HOOKS["after"]
    c.check(hooks._PENDING == {"step_end": True}, "a compiled step's end leaves a mark",
            "%s" % hooks._PENDING)
    steps.forward()
    c.check(spans == [("begin", "step", 1), ("end", 1), ("begin", "step", 2)],
            "the next forward ends the marked step and opens the next", "%s" % spans)
    c.check(not hooks._PENDING, "the mark is taken once")
    optimizer_wrapping(c, hooks)
    grad_scaler(c, hooks)
    steps_across_threads(c, hooks)
    process_group_names(c)
    print("%d check(s) failed" % c.failed if c.failed else "all checks passed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
