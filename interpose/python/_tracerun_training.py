# tracerun's training hooks for unmodified Python programs (loaded by sitecustomize.py, which
# tracerun's launcher puts first on PYTHONPATH): memory categories and step boundaries. Not the
# module scopes (sitecustomize.py) and not the classification of untagged memory (the analysis's
# lifetime rule, trace/src/analysis/memory.cpp).
#
# Memory categories, with the meanings of PyTorch's memory profiler (torch/profiler/
# _memory_profiler.py), tagged through libtracerun's tracerun_annotate_tag_memory (a block's whole
# allocation takes the category; one record per tagged storage, docs/report.md):
# - parameter: every nn.Module's own parameters, at each of its forwards (read from the module each
#   time, so storages that move or are gathered, e.g. FSDP's flat parameters and FSDP2's unsharded
#   ones, are tagged where they live), the optimizer's parameters at each step, and what FSDP and
#   FSDP2 gather, as they gather it (a backward's re-gather has no forward);
# - gradient: the .grad of the optimizer's parameters, just before each step (DDP's bucket views
#   share one storage: tagged, and counted, once), and DistributedDataParallel's gradient buckets
#   (allocated while its reducer is built or rebuilt, under this thread's memory category);
# - optimizer state: the tensors of optimizer.state, just after each step;
# - input: the tensors passed to a root module's forward, by position or by keyword (model(**batch))
#   (a root: a module no module seen before contains: the model, and a loss module such as
#   nn.CrossEntropyLoss called beside it, whose targets are inputs too) that do not require grad
#   (so not parameters, nor the output of a tracked op), each tensor object once (a WeakSet of those
#   tagged: a new batch at a reused address is tagged again);
# - other: every nn.Module's own buffers (BatchNorm's running statistics and counter, a causal
#   mask registered as a buffer), at its forward: PyTorch's profiler leaves them unknown, and the
#   lifetime rule would count them as activations (made outside backward, freed after one);
# - activations and temporaries: not tagged here; the analysis infers them from lifetimes.
# A tensor subclass without storage of its own (DTensor: FSDP2's and tensor parallelism's sharded
# parameters, their gradients and optimizer states; other wrapper subclasses) is tagged, and
# counted in the closed form, by the tensors inside it: the rank's local shard (_plain_tensors).
# Cost: one ctypes call per module forward that has parameters, one per root forward with new
# input tensors, one the first time a module's buffers are seen, and three per optimizer step.
#
# The closed form (the Memory tab's dashed line, trace/analysis/memory_live.h): at an optimizer's
# first step, and when its param groups change, a zero-length "model_states" phase inside the
# "optimizer" phase records what it holds: its class (the detail), params and param_bytes over its
# param groups, states per parameter (Adam/AdamW 2, 3 with amsgrad; SGD 1 with momentum, 0 without;
# -1 for another optimizer: no line) and state_bytes (core/vocabulary.h).
#
# Steps: each optimizer step ends a "step" phase span (argument step = 1, 2, ...) that opened at the
# first module forward after the previous step (or, where no forward hook ran eagerly, at the first
# backward: model.compile(), a compiled train step, a direct model.forward call), and runs inside
# an "optimizer" phase span (a step GradScaler skips ends where GradScaler.step returns, with no
# "optimizer" span; optimizer steps run inside a backward end the step with that backward); each
# torch.autograd.backward (Tensor.backward) is a "backward" phase span: the same spans gpttrain's
# tracerun::Step and PhaseScope make, so per-step views (and the analysis's activation rule, freed
# in backward) work on user programs. No "forward" phase: its end is not known. A program that
# opens its own record_function("step") scopes keeps those as its steps: no step span is added.
# Hooks: a wrapper around each optimizer class's step, outside torch's own (its record_function
# "Optimizer.step#..." and, from 2.0, its global step hooks), put on where torch puts its own
# (_hook_optimizer). While torch.compile traces (a compiled optimizer step) the step hooks only
# leave a mark (_PENDING), as the module hooks do nothing: Dynamo would break its graph on their
# ctypes calls (fullgraph=True would raise). The step then ends at the next eager forward,
# backward or step (settle), and its memory is not tagged there.
import ctypes
import itertools
import sys
import threading
import weakref

_PARAMETER, _GRADIENT, _OPTIMIZER_STATE, _OTHER, _INPUT = 1, 2, 3, 6, 7  # tracerun::MemoryCategory
_KIND_PHASE = 1  # tracerun::ScopeKind::kPhase


class _Arg(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_int64)]


# torch's "tracing now" flags, found as their modules are imported (watch_tracing): "fx"
# torch.fx's is_fx_tracing, "compile" torch.compiler.is_compiling (torch 2.3 and later) or else
# torch._dynamo.is_compiling. Looked up once, outside any trace: a hook that Dynamo traces reads a
# global dict and calls a function it knows, nothing it would break its graph on.
_TRACING = {}


def watch_tracing():
    """Starts looking for torch's tracing flags (once; sitecustomize.py and install() call it)."""
    if _TRACING.get("watching"):
        return
    _TRACING["watching"] = True

    def fx(mod):
        if getattr(mod, "is_fx_tracing", None) is not None:
            _TRACING["fx"] = mod.is_fx_tracing

    def compiler(mod):
        if getattr(mod, "is_compiling", None) is not None:
            _TRACING["compile"] = mod.is_compiling  # preferred to torch._dynamo's

    def dynamo(mod):
        if "compile" not in _TRACING and getattr(mod, "is_compiling", None) is not None:
            _TRACING["compile"] = mod.is_compiling

    _after_import("torch.fx._symbolic_trace", fx)
    _after_import("torch.compiler", compiler)
    _after_import("torch._dynamo", dynamo)


def tracing():
    """True while torch.fx symbolically traces a module (its inputs are Proxies, and whatever the
    hooks do with them becomes nodes of the user's graph) or torch.compile's Dynamo traces one
    (the hooks would be compiled into the graph, or break it): every hook then does nothing."""
    fx = _TRACING.get("fx")
    if fx is not None and fx():
        return True
    compiling = _TRACING.get("compile")
    return compiling is not None and bool(compiling())


def _plain_tensors(t, out, depth=0):
    """Appends to `out` the tensors that hold t's bytes: t itself, or, for a tensor subclass with
    no storage of its own (its data_ptr() is 0 or raises), the tensors inside it: a DTensor's
    _local_tensor (this rank's shard), or what a traceable wrapper subclass's __tensor_flatten__
    names (one that also has __tensor_unflatten__, as torch's is_traceable_wrapper_subclass
    asks), recursively. A plain tensor or Parameter is itself, at once (the forward hook's path)."""
    if type(t) in _PLAIN_TYPES or depth >= 4 or not _storageless(t):
        out.append(t)
        return out
    local = getattr(t, "_local_tensor", None)
    if isinstance(local, sys.modules["torch"].Tensor):
        return _plain_tensors(local, out, depth + 1)
    inner = []
    if hasattr(type(t), "__tensor_unflatten__"):
        try:
            names = t.__tensor_flatten__()[0]
        except Exception:
            names = ()
        tensor = sys.modules["torch"].Tensor
        inner = [u for u in (getattr(t, n, None) for n in names) if isinstance(u, tensor)]
    if not inner:
        out.append(t)
        return out
    for u in inner:
        _plain_tensors(u, out, depth + 1)
    return out


def _storageless(t):
    try:
        return t.data_ptr() == 0
    except RuntimeError:
        return True


def _data_ptrs(values):
    """The data addresses of the tensors among `values` (None passed over): each one's data_ptr(),
    or, where one has no storage of its own (0, or it raises), those of the tensors inside it."""
    try:
        out = [t.data_ptr() for t in values if t is not None]
        if 0 not in out:
            return out
    except RuntimeError:
        pass
    return _addresses([t for t in values if t is not None])


def _addresses(tensors):
    """The data addresses of the plain tensors inside `tensors` (a key that changes when one of
    them moves or is swapped for another)."""
    out = []
    for t in tensors:
        if type(t) in _PLAIN_TYPES:
            out.append(t.data_ptr())
            continue
        for u in _plain_tensors(t, []):
            try:
                out.append(u.data_ptr())
            except RuntimeError:  # no storage
                out.append(0)
    return out


# torch.Tensor and nn.Parameter, set by install() once torch is imported (a DTensor made a
# Parameter keeps its own type).
_PLAIN_TYPES = set()


class _Tagger:
    """Tags tensors' storages with a memory category, batched by device (one C call each)."""

    def __init__(self, lib):
        self._tag = lib["tracerun_annotate_tag_memory"]
        self._tag.restype = None
        self._tag.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_int, ctypes.c_int64]

    @staticmethod
    def base(t):
        """(device key, the storage's base address) of tensor t, or None."""
        dev = t.device
        if dev.type == "cpu":
            key = (0, -1)
        elif dev.type == "cuda":
            key = (1, dev.index if dev.index is not None else 0)
        else:
            return None
        # Only strided tensors with storage (a sparse tensor in optimizer.state, a tensor
        # subclass without one: data_ptr() raises).
        if getattr(t, "layout", None) is not _strided():
            return None
        try:
            ptr = t.data_ptr() - t.storage_offset() * t.element_size()
        except RuntimeError:
            return None
        return (key, ptr) if ptr else None

    def tag(self, tensors, category, totals=None):
        """totals: a dict that keeps each CUDA device's live bytes across calls made at one moment
        (the allocator's statistics are read once per device)."""
        by_device = {}
        for t in tensors:
            for u in _plain_tensors(t, []):
                b = self.base(u)
                if b is not None:
                    by_device.setdefault(b[0], []).append(b[1])
        for (dtype, dindex), ptrs in by_device.items():
            total = -1
            if dtype == 1:
                totals = {} if totals is None else totals
                if dindex not in totals:
                    totals[dindex] = _cuda_live_bytes(dindex)
                total = totals[dindex]
            arr = (ctypes.c_uint64 * len(ptrs))(*ptrs)
            self._tag(arr, len(ptrs), dtype, dindex, category, total)


def _strided():
    return sys.modules["torch"].strided  # the hooks run only once torch is imported


def _cuda_live_bytes(index):
    """The device's live bytes as tracerun's CUDA allocation records count them (requested)."""
    import torch

    # The nested dict as the allocator gives it: memory_stats() flattens and sorts its hundreds of
    # keys at every call, and this runs at every tag call (each forward of an FSDP leaf).
    stats = torch.cuda.memory_stats_as_nested_dict(index)

    def current(name):
        return stats.get(name, {}).get("all", {}).get("current")

    requested = current("requested_bytes")
    return int(requested if requested is not None else (current("allocated_bytes") or 0))


class _Steps:
    """The "step" and "optimizer" phase spans around optimizer steps, on the training thread."""

    def __init__(self, lib):
        self._begin = lib["tracerun_annotate_scope_begin"]  # own object: argtypes differ
        self._begin.restype = ctypes.c_int64
        self._begin.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.POINTER(_Arg), ctypes.c_int]
        self._end = lib["tracerun_annotate_scope_end"]
        self._end.restype = None
        self._end.argtypes = [ctypes.c_int64, ctypes.c_char_p]
        self.step = 1  # gpttrain's steps count from 1 too
        self.updates = 0  # after_update calls: a GradScaler.step that made none skipped its step
        self.disabled = False  # the program marks its own steps
        self._open = None  # (thread id, token) of the open step span
        # thread id -> token of its open optimizer span (optimizer-in-backward hooks may run on
        # several autograd device threads at once)
        self._optimizer = {}
        self._ends_with_backward = False  # an optimizer step ran inside the running backward

    def program_marks_steps(self):
        """The program opened a scope named "step" itself: it keeps its steps, we add none."""
        self.disabled = True
        if self._open is not None and self._open[0] == threading.get_ident():
            self._end(self._open[1], None)
        self._open = None

    def forward(self):
        if _PENDING:
            self.settle()
        # Only a forward that autograd records opens a step: evaluation under torch.no_grad()
        # (after the last optimizer step, or forward-only code) is no step.
        if self._open is None and not self.disabled and sys.modules["torch"].is_grad_enabled():
            self._open_step()

    def settle(self):
        """Ends the step a compiled optimizer step ended (_call: its hooks could only leave a
        mark), at the first eager moment after it: the step's end is then late, its count right."""
        if _PENDING.pop("step_end", False):
            self.after_update()

    def _open_step(self):
        if self._open is None and not self.disabled:
            args = (_Arg * 1)(_Arg(b"step", self.step))
            token = self._begin(_KIND_PHASE, b"step", None, args, 1)
            if token > 0:
                self._open = (threading.get_ident(), token)

    def before_update(self):
        me = threading.get_ident()
        if me not in self._optimizer:
            token = self._begin(_KIND_PHASE, b"optimizer", None, None, 0)
            if token > 0:
                self._optimizer[me] = token

    def model_states(self, detail, values):
        """A zero-length "model_states" phase (vocabulary.h) with the optimizer's numbers: params,
        param_bytes, states, state_bytes (memory_live.h's closed form reads them)."""
        keys = (b"params", b"param_bytes", b"states", b"state_bytes")
        args = (_Arg * 4)(*[_Arg(k, int(v)) for k, v in zip(keys, values)])
        token = self._begin(_KIND_PHASE, b"model_states", detail.encode(), args, 4)
        if token > 0:
            self._end(token, None)

    def begin_backward(self):
        # No forward hook ran eagerly since the last step (a compiled model, model.forward called
        # directly): the step opens here, before its backward.
        if _PENDING:
            self.settle()
        self._open_step()
        return self._begin(_KIND_PHASE, b"backward", None, None, 0)

    def end_backward(self, token):
        if token > 0:
            self._end(token, None)
        # The step's own thread ends it, once no backward runs (optimizer in backward).
        if (self._ends_with_backward and not backward_running() and self._open is not None and
                self._open[0] == threading.get_ident()):
            self._ends_with_backward = False
            self._end_step()

    def after_update(self):
        """Ends the optimizer span and the step span (an optimizer step's end, or a skipped
        step's: _hook_grad_scaler). An optimizer step run inside a backward (optimizer in
        backward: each parameter stepped from its gradient hook, on the autograd engine's thread
        on CUDA) ends only its optimizer span: the step ends with that backward."""
        self.updates += 1
        me = threading.get_ident()
        token = self._optimizer.pop(me, None)
        if token is not None:
            self._end(token, None)
        # Inside a backward: this thread's own (CPU), or the autograd engine's thread serving the
        # step's thread (CUDA); not another thread's backward running beside a plain step.
        if self._open is not None and (backward_running_here() or
                                       (backward_running() and self._open[0] != me)):
            self._ends_with_backward = True
            return
        self._end_step()

    def _end_step(self):
        if self._open is not None and self._open[0] == threading.get_ident():
            self._end(self._open[1], None)
            self._open = None
            self.step += 1


def install(lib, words, module_module):
    """Installs the hooks for the capture words (a set); call before the module-scope hooks, so
    that a step span opens outside the first module's scope."""
    watch_tracing()
    # torch.nn is still being imported: its Parameter is the one module.py imported.
    _PLAIN_TYPES.update((sys.modules["torch"].Tensor, module_module.Parameter))
    memory = "memory" in words
    steps = _Steps(lib) if "scopes" in words else None
    tagger = _Tagger(lib) if memory else None
    if tagger is None and steps is None:
        return
    # module -> [unused, its parameters' last addresses, whether they ever moved, root,
    #            its buffers' last (id, address)]
    own = weakref.WeakKeyDictionary()
    inputs_seen = _Inputs(tagger)
    optimizers = _ModelStates()

    def pre_forward(module, inputs):
        try:
            if tracing():
                return None
            if steps is not None:
                steps.forward()
            if tagger is None:
                return None
            info = own.get(module)
            if info is None:
                info = own[module] = _first_sight(module, own)
            if info[3]:
                inputs_seen.tag(inputs, _call_kwargs(sys._getframe(1)).values())
            if module._buffers:
                _tag_buffers(module, info, tagger)
            # Read at every forward, never cached: FSDP2 swaps the module's Parameter objects
            # (sharded DTensors, then the gathered plain tensors) at each unshard and reshard.
            params = module._parameters
            if not params:
                return None
            bases = _data_ptrs(params.values())
            if bases != info[1] or info[2]:
                # A storage that moved once (to a device, gathered by FSDP) may come back at the
                # same address as a new block: such a module is tagged at every forward.
                info[2] = info[2] or info[1] is not None
                info[1] = bases
                tagger.tag([p for p in params.values() if p is not None], _PARAMETER)
        except Exception as e:  # never break the program being traced
            sys.stderr.write("tracerun: training hook: %s\n" % e)
        return None

    if tagger is not None or steps is not None:
        module_module.register_module_forward_pre_hook(pre_forward)

    def before_step(optimizer, spans=True):
        if steps is not None and spans:
            if _PENDING:
                steps.settle()
            steps.before_update()
        if tagger is None:
            return
        if steps is not None:
            optimizers.record(optimizer, steps)
        params, grads = [], []
        for group in optimizer.param_groups:
            for p in group["params"]:
                params.append(p)
                if p.grad is not None:
                    grads.append(p.grad)
        totals = {}  # no allocation between the two calls
        tagger.tag(params, _PARAMETER, totals)
        tagger.tag(grads, _GRADIENT, totals)

    def after_step(optimizer, spans=True):
        try:
            if tagger is not None:
                state = []
                for s in optimizer.state.values():
                    for v in s.values() if isinstance(s, dict) else ():
                        if hasattr(v, "data_ptr") and hasattr(v, "storage_offset"):
                            state.append(v)
                tagger.tag(state, _OPTIMIZER_STATE)
        finally:  # the step ends whatever the tagging did (else no later step would open)
            if steps is not None and spans:
                steps.after_update()

    _HOOKS["before"], _HOOKS["after"] = before_step, after_step
    _install_optimizer_hooks()
    if steps is not None:
        _install_backward_phase(steps)
        # torch.amp's (2.3 and later; torch.cuda.amp's subclasses it) and torch.cuda.amp's own.
        for name in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
            _after_import(name, lambda mod: _hook_grad_scaler(steps, mod))
        _after_import("torch.autograd.profiler", lambda mod: _watch_step_scopes(mod, steps))
    if memory:
        _after_import("torch.nn.parallel.distributed", lambda mod: _hook_ddp(lib, mod))
        # FSDP's FlatParamHandle: torch 1.13 and 2.0 in flat_param, 2.1 and later in _flat_param.
        for name in ("torch.distributed.fsdp.flat_param", "torch.distributed.fsdp._flat_param"):
            _after_import(name, lambda mod: _hook_fsdp(tagger, mod))
        # FSDP2's FSDPParamGroup: torch 2.4 and 2.5 in _composable, 2.6 and later in _fully_shard.
        for name in ("torch.distributed._composable.fsdp._fsdp_param_group",
                     "torch.distributed.fsdp._fully_shard._fsdp_param_group"):
            _after_import(name, lambda mod: _hook_fsdp2(tagger, mod))


def _watch_step_scopes(mod, steps):
    """A program whose own record_function("step") scopes mark its steps keeps them alone (two
    kinds of "step" span would number each step twice)."""
    cls = getattr(mod, "record_function", None)
    if cls is None or not hasattr(cls, "__enter__"):
        return
    enter = cls.__enter__

    def __enter__(self):
        if not steps.disabled and getattr(self, "name", None) == "step":
            steps.program_marks_steps()
        return enter(self)

    __enter__.__wrapped__ = enter
    cls.__enter__ = __enter__


def _after_import(name, then):
    mod = sys.modules.get(name)
    if mod is not None:
        then(mod)
    else:
        PostImport(name, then).insert()


def _hook_ddp(lib, mod):
    """DistributedDataParallel's buckets are gradients: allocations made while its reducer is
    built (_ddp_init_helper) or rebuilds its buckets (Reducer._rebuild_buckets) are tagged so."""
    set_category = lib["tracerun_annotate_set_memory_category"]
    set_category.restype = ctypes.c_int
    set_category.argtypes = [ctypes.c_int]

    def tagged(function):
        def call(*args, **kwargs):
            previous = set_category(_GRADIENT)
            try:
                return function(*args, **kwargs)
            finally:
                set_category(previous)

        call.__wrapped__ = function
        call.__doc__ = function.__doc__
        return call

    ddp = getattr(mod, "DistributedDataParallel", None)
    if ddp is not None and hasattr(ddp, "_ddp_init_helper"):
        ddp._ddp_init_helper = tagged(ddp._ddp_init_helper)
    reducer = getattr(getattr(mod, "dist", None), "Reducer", None)
    if reducer is not None and hasattr(reducer, "_rebuild_buckets"):
        reducer._rebuild_buckets = tagged(reducer._rebuild_buckets)


# How many torch.autograd.backward calls are running, over all threads: the autograd engine runs
# a backward on threads of its own (CUDA), where nothing of the caller's thread is visible.
_backwards_running = [0]
_BACKWARD_HERE = threading.local()  # n: torch.autograd.backward calls running on this thread


def backward_running():
    """Whether some thread is inside torch.autograd.backward (sitecustomize's module hooks: a
    forward re-run there is activation checkpointing's recomputation)."""
    return _backwards_running[0] > 0


def backward_running_here():
    """Whether this thread called torch.autograd.backward and is still inside it."""
    return getattr(_BACKWARD_HERE, "n", 0) > 0


def backward_entered(steps):
    """A torch.autograd.backward call starts on this thread: its phase span's token."""
    token = steps.begin_backward()
    _backwards_running[0] += 1
    _BACKWARD_HERE.n = getattr(_BACKWARD_HERE, "n", 0) + 1
    return token


def backward_left(steps, token):
    _BACKWARD_HERE.n -= 1
    _backwards_running[0] -= 1
    steps.end_backward(token)


def _install_backward_phase(steps):
    """Wraps torch.autograd.backward (Tensor.backward calls it) in a "backward" phase span."""

    def hook(autograd):
        original = autograd.backward

        def backward(*args, **kwargs):
            token = backward_entered(steps)
            try:
                return original(*args, **kwargs)
            finally:
                backward_left(steps, token)

        backward.__wrapped__ = original
        backward.__doc__ = original.__doc__
        autograd.backward = backward

    _after_import("torch.autograd", hook)


def _hook_grad_scaler(steps, mod):
    """Mixed precision's GradScaler.step skips the optimizer's step where the scaled gradients
    overflowed (the first iterations, while it lowers the scale, and wherever the scale grows too
    high): no step hook runs, and the iteration's step span would run on into the next one. It
    ends when GradScaler.step returns instead: a step with no "optimizer" phase inside."""
    cls = getattr(mod, "GradScaler", None)
    if cls is None or "step" not in vars(cls):
        return  # torch 2.3 and later: torch.cuda.amp's GradScaler inherits torch.amp's step

    def then(scaler, updates_before):
        # A compiled optimizer step leaves its end's mark instead of updating: settled later.
        # Inside another optimizer's step (which ends the step itself) the inner one updates
        # without spans: not a skip.
        if (steps.updates == updates_before and not _PENDING and not tracing() and
                not _optimizer_steps_running()):
            steps.after_update()

    _after_method(cls, "step", then, before=lambda scaler: steps.updates)


def _hook_fsdp(tagger, mod):
    """FullyShardedDataParallel (FSDP1) gathers each unit's flat parameter into a new storage
    (FlatParamHandle.unshard: before the unit's forward, again before its backward, and when it
    prefetches the next unit): that storage is tagged parameter as soon as it is gathered. The
    forward hook would tag it too, but only at a forward; the backward's re-gather has none."""
    _after_method(getattr(mod, "FlatParamHandle", None), "unshard",
                  lambda handle: tagger.tag([handle.flat_param], _PARAMETER))


def _hook_fsdp2(tagger, mod):
    """FSDP2 (fully_shard) gathers each group's parameters into new storages
    (FSDPParamGroup.wait_for_unshard: before the group's forward, again before its backward, which
    has no forward hook to tag them): each FSDPParam's unsharded parameter is tagged parameter once
    the gather is waited for (when one was pending: else the wait returns at once)."""

    def tag(group, pending):
        if pending and not tracing():
            params = (getattr(p, "_unsharded_param", None) for p in getattr(group, "fsdp_params", ()))
            tagger.tag([u for u in params if u is not None], _PARAMETER)

    _after_method(getattr(mod, "FSDPParamGroup", None), "wait_for_unshard", tag,
                  before=lambda group: getattr(group, "_all_gather_result", True) is not None)


def _after_method(cls, name, then, before=None):
    """Wraps cls.name (once) so that then(self) runs after it, or then(self, before(self)) with
    `before` read just before it; what `then` raises is said on stderr, never passed on."""
    method = getattr(cls, name, None)
    if method is None or getattr(method, "_tracerun", False):
        return

    def wrapped(self, *args, **kwargs):
        seen = before(self) if before is not None else None
        result = method(self, *args, **kwargs)
        try:
            if before is None:
                then(self)
            else:
                then(self, seen)
        except Exception as e:  # never break the program being traced
            sys.stderr.write("tracerun: training hook: %s\n" % e)
        return result

    wrapped.__wrapped__ = method
    wrapped.__doc__ = method.__doc__
    wrapped._tracerun = True
    setattr(cls, name, wrapped)


def _tag_buffers(module, info, tagger):
    """Tags the module's own buffers (BatchNorm's running statistics, a registered causal mask)
    "other": PyTorch's memory profiler leaves them unknown, and without a tag the lifetime rule
    would call them activations (made outside backward, freed after one). Again when one is
    replaced or moved (its tensor or address changes)."""
    buffers = [b for b in module._buffers.values() if b is not None]
    key = ([id(b) for b in buffers], _data_ptrs(buffers))
    if key != info[4]:
        info[4] = key
        tagger.tag(buffers, _OTHER)


def _first_sight(module, own):
    """The hook state of a module seen for the first time. It is a root unless a module seen before
    contains it (that one marked it at its own first sight); whatever it contains is marked as no
    root: each module is walked once, by the first root that contains it."""
    info = [None, None, False, True, None]
    for inner in module.modules():
        if inner is module:
            continue
        known = own.get(inner)
        if known is not None:
            known[3] = False  # called alone before, now part of a bigger model
        else:
            own[inner] = [None, None, False, False, None]
    return info


def _call_kwargs(frame):
    """The keyword arguments of the module call whose global forward pre-hook is running: torch
    hands such a hook the positional ones only, and Hugging Face models are called model(**batch).
    They are the local `kwargs` of the frame that calls the hook: Module._call_impl (torch 1.13 and
    2.0) or the inner() it defines (2.1 and later). {} for any other caller."""
    if frame is None or frame.f_code.co_name not in ("_call_impl", "inner"):
        return {}
    kwargs = frame.f_locals.get("kwargs")
    return kwargs if isinstance(kwargs, dict) else {}


class _Inputs:
    """Tags the tensors passed to a root module's forward as input (PyTorch's INPUT: not a
    parameter, not made by an autograd-tracked op), each tensor object once: a dict by id() whose
    entries go with their tensors (a weak reference's callback), so a new batch is tagged again."""

    def __init__(self, tagger):
        self._tagger = tagger
        self._tagged = {}  # id(tensor) -> weakref.ref(tensor)

    def tag(self, inputs, keyword_values=()):
        new = []
        for t in itertools.chain(inputs, keyword_values):
            if isinstance(t, (list, tuple)):
                for u in t:
                    self._take(u, new)
            else:
                self._take(t, new)
        if new:
            self._tagger.tag(new, _INPUT)

    def _take(self, t, new):
        if getattr(t, "requires_grad", True) or type(t).__name__ == "Parameter":
            return
        if not hasattr(t, "data_ptr") or not hasattr(t, "storage_offset"):
            return
        key = id(t)
        seen = self._tagged.get(key)
        if seen is not None and seen() is t:
            return
        tagged = self._tagged
        self._tagged[key] = weakref.ref(t, lambda _, k=key: tagged.pop(k, None))
        new.append(t)


class _ModelStates:
    """What each optimizer holds, for the memory view's closed form (memory_live.h): recorded as a
    "model_states" phase at its first step and again when its param groups change (a key of their
    sizes and options is compared at each step; the sums are taken only when it changes)."""

    def __init__(self):
        self._seen = weakref.WeakKeyDictionary()  # optimizer -> [ordinal, key]
        self._count = 0

    def record(self, optimizer, steps):
        groups = optimizer.param_groups
        key = tuple((len(g["params"]), g.get("momentum"), g.get("amsgrad")) for g in groups)
        seen = self._seen.get(optimizer)
        if seen is not None and seen[1] == key:
            return
        if seen is None:
            self._count += 1
            seen = self._seen[optimizer] = [self._count, None]
        seen[1] = key
        detail = type(optimizer).__name__ + (" #%d" % seen[0] if seen[0] > 1 else "")
        steps.model_states(detail, model_states(optimizer))


def states_per_parameter(optimizer, group):
    """The state tensors torch.optim keeps per parameter of `group`, each the parameter's size
    (zeros_like): Adam and AdamW 2 (exp_avg, exp_avg_sq), 3 with amsgrad (max_exp_avg_sq); SGD 1
    with momentum (momentum_buffer), 0 without; None for another optimizer (not known). Adam's
    scalar step counters are left out (4 or 8 bytes a parameter tensor)."""
    import torch

    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return 3 if group.get("amsgrad") else 2
    if isinstance(optimizer, torch.optim.SGD):
        return 1 if group.get("momentum", 0) else 0
    return None


def model_states(optimizer):
    """(params, param_bytes, states, state_bytes) over the optimizer's param groups: states is the
    largest number per parameter among its groups, -1 (and state_bytes -1) when not known."""
    params = param_bytes = state_bytes = 0
    states = 0
    for group in optimizer.param_groups:
        k = states_per_parameter(optimizer, group)
        n = b = 0
        for p in group["params"]:
            for q in _plain_tensors(p, []):  # a DTensor's numel is the whole model's: its shard
                n += q.numel()
                b += q.numel() * q.element_size()
        params += n
        param_bytes += b
        if k is None or states < 0:
            states = -1
        else:
            states = max(states, k)
            state_bytes += k * b
    return (params, param_bytes, states, state_bytes if states >= 0 else -1)


_HOOKS = {}  # "before", "after": the step hooks of install(); empty when not installed


# A compiled optimizer step's mark, written while Dynamo traces (it replays such writes to a
# module-level dict after each run of its graph, with no graph break): "step_end".
_PENDING = {}


def _call(which, optimizer, spans=True):
    """Runs the step hook `which` ("before", "after") on optimizer; spans=False: its memory tags
    only (an optimizer stepped inside another one's step, whose spans are the step's)."""
    hook = _HOOKS.get(which)
    if hook is None:
        return
    if tracing():
        if which == "after":
            _PENDING["step_end"] = True
        return
    try:
        hook(optimizer, spans)
    except Exception as e:
        sys.stderr.write("tracerun: optimizer hook: %s\n" % e)


# The optimizers whose step is running on this thread, outermost first (_hook_optimizer).
_STEPS_RUNNING = threading.local()


def _optimizer_steps_running():
    running = getattr(_STEPS_RUNNING, "optimizers", None)
    if running is None:
        running = _STEPS_RUNNING.optimizers = []
    return running


def _install_optimizer_hooks():
    """Hooks torch.optim.Optimizer's step, now or when torch.optim.optimizer is imported."""
    _after_import("torch.optim.optimizer", _hook_optimizer)


def _hook_optimizer(mod):
    """Wraps each optimizer class's step (once per class) in the step hooks, outside torch's own
    wrapper: that one opens a record_function ("Optimizer.step#AdamW.step") and, from torch 2.0,
    runs the global step hooks inside it. Ending the step span from such a hook would end it
    inside its own child (capture_spans_closed_by_parent, the record cut short). torch installs
    its wrapper where each optimizer is made (2.0 and later Optimizer._patch_step_function, 1.13
    _hook_for_profile); ours goes on right after it. Global hooks only where neither exists."""
    optimizer_class = mod.Optimizer
    patch_name = next((n for n in ("_patch_step_function", "_hook_for_profile")
                       if callable(getattr(optimizer_class, n, None))), None)
    if patch_name is None:
        if hasattr(mod, "register_optimizer_step_pre_hook"):
            mod.register_optimizer_step_pre_hook(lambda opt, args, kwargs: _call("before", opt))
            mod.register_optimizer_step_post_hook(lambda opt, args, kwargs: _call("after", opt))
        return
    torch_patch = getattr(optimizer_class, patch_name)

    def wrap(step):
        def step_hooked(self, *args, **kwargs):
            if tracing():  # Dynamo compiles this step: only the end's mark (_call), no locals
                out = step(self, *args, **kwargs)
                _call("after", self)
                return out
            # A subclass's step calling its parent's is one step (hooked once); an optimizer
            # stepping another (ZeroRedundancyOptimizer its local one) tags the inner one's
            # memory too, but only the outermost step ends the step span.
            running = _optimizer_steps_running()
            first = all(o is not self for o in running)
            outermost = not running
            running.append(self)
            try:
                if first:
                    _call("before", self, outermost)
                out = step(self, *args, **kwargs)
                if first:
                    _call("after", self, outermost)
                return out
            finally:
                running.pop()

        # No __wrapped__: torch.compile on 2.0 to 2.2 (Dynamo's TorchPatcher) replaces a `hooked`
        # step by its __wrapped__, to peel torch's profiling wrapper off; it would peel ours.
        step_hooked._tracerun_wraps = step
        step_hooked.__doc__ = step.__doc__
        step_hooked.__name__ = getattr(step, "__name__", "step")
        step_hooked.__qualname__ = getattr(step, "__qualname__", "step")
        step_hooked.hooked = True  # torch's patch: already wrapped
        step_hooked._tracerun = True
        return step_hooked

    def patch_step(self, *args, **kwargs):
        out = torch_patch(self, *args, **kwargs)  # torch's record_function wrapper, once a class
        cls = self.__class__
        if not getattr(cls.step, "_tracerun", False):
            cls.step = wrap(cls.step)
        return out

    patch_step.__wrapped__ = torch_patch
    patch_step.__doc__ = torch_patch.__doc__
    setattr(optimizer_class, patch_name, patch_step)


class PostImport:
    """Runs `then(module)` right after the module named `target` is executed (sitecustomize.py
    uses it too)."""

    def __init__(self, target, then):
        self.target = target
        self.then = then

    def insert(self):
        sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        if name != self.target:
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module
        then = self.then

        def exec_module(module):
            loader_exec(module)
            try:
                then(module)
            except Exception as e:
                sys.stderr.write("tracerun: hooks on %s not installed: %s\n" % (name, e))

        spec.loader.exec_module = exec_module
        return spec
