# tracerun's Python module hooks: when `tracerun` runs a Python program (its launcher puts this
# file's directory first on PYTHONPATH), every nn.Module forward becomes a module scope in the
# trace: name = module path ("layer1.0.conv1"), detail = "TYPE in=SHAPES out=SHAPES", arguments
# params (the module's parameter count, children included), shard (-1) and param_bytes (their
# bytes: tracedot model shows them). It records through
# libtracerun's C entry points (tracerun_annotate_scope_begin/end, via ctypes); it does not import
# torch itself, changes no result of the program, and records no backward module scopes. It also
# installs _tracerun_training.py (beside it): memory categories of parameters, gradients and
# optimizer state, and a "step" phase span per optimizer step (TRACERUN_TRAINING_HOOKS=0: not).
#
# - Installed when torch.nn.modules.module is first imported (a post-import hook), and only while
#   libtracerun captures: module scopes with "scopes" in its capture words, memory categories with
#   "memory", steps with "scopes"; otherwise it costs one import finder.
# - The sitecustomize module this file shadows (Debian's /etc/python3.X/sitecustomize.py, or one
#   on the user's PYTHONPATH) still runs: it is loaded after ours.
# - A module called with no module forward open is a root: its path is its type name ("ResNet"),
#   its descendants are named as root.named_modules() names them; a module the root does not list
#   is named parent path + "." + its type.
# - Not while torch.fx symbolically traces a module (its inputs are Proxies: formatting their
#   shapes would add nodes to the user's graph) nor while torch.compile's Dynamo traces one (the
#   hooks would be traced into the graph, or break it): tracing() in _tracerun_training.py.
# - A forward that raises still closes its scope (torch 2.1's always-called hooks; before, the
#   next call of the module drops what it left on the stack).
# - Shapes: "f32[32,3,32,32]", tensors of a tuple joined by ';' (the first 4; nested lists and
#   dicts flattened), the same dtype names as the op shapes of the trace.
# - At start-up it registers libtracerun's close with Py_AtExit (_close_at_python_exit), so the
#   shard is whole also when Python ends the process by SIGINT after an uncaught KeyboardInterrupt.
import sys


def _run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os

    # Every tracerun hooks directory is passed over, not only this one: a second copy on the path
    # (two installs, or this one through a symlink) would run this file again, which would look
    # for the next one, and so on without end.
    path = [p for p in sys.path
            if not os.path.isfile(os.path.join(p or ".", "_tracerun_training.py"))]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_tracerun_shadowed_sitecustomize"] = module
    spec.loader.exec_module(module)


_DTYPES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
    "complex64": "c64", "complex128": "c128",
}
_MAX_TENSORS = 4


def _capture_words():
    import os

    words = os.environ.get("TRACERUN_CAPTURE", "")
    return set(w for w in words.split(",") if w) if words else {"ops", "scopes", "memory"}


def _install(module_module):
    """Registers the global forward hooks in torch.nn.modules.module (just imported)."""
    import ctypes
    import threading
    import weakref

    lib = ctypes.CDLL(None)
    try:
        capturing = lib.tracerun_annotate_capturing
        begin = lib.tracerun_annotate_scope_begin
        end = lib.tracerun_annotate_scope_end
    except AttributeError:
        return  # libtracerun is not loaded in this process
    capturing.restype = ctypes.c_int
    if capturing() == 0:
        return
    words = _capture_words()
    from _tracerun_training import tracing, watch_tracing

    watch_tracing()  # also when TRACERUN_TRAINING_HOOKS=0 leaves install() out

    try:  # process group names (_tracerun_groups.py): whatever the words, nothing per call
        import _tracerun_groups
        from _tracerun_training import _after_import

        _after_import("torch.distributed.distributed_c10d", lambda c10d: _tracerun_groups.install(
            lib, c10d, sys.modules.get("torch.distributed")))
    except Exception as e:
        sys.stderr.write("tracerun: process group names not installed: %s\n" % e)

    try:  # memory categories and step spans (_tracerun_training.py), before the module scopes
        import os

        if os.environ.get("TRACERUN_TRAINING_HOOKS", "1") != "0":
            import _tracerun_training

            _tracerun_training.install(lib, words, module_module)
    except Exception as e:
        sys.stderr.write("tracerun: training hooks not installed: %s\n" % e)
    if "scopes" not in words:
        return
    if not hasattr(module_module, "register_module_forward_pre_hook"):
        sys.stderr.write("tracerun: this torch has no global module hooks; no module scopes\n")
        return

    class Arg(ctypes.Structure):
        _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_int64)]

    begin.restype = ctypes.c_int64
    begin.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Arg),
                      ctypes.c_int]
    end.restype = None
    end.argtypes = [ctypes.c_int64, ctypes.c_char_p]
    kind_module = 2  # tracerun::ScopeKind::kModule
    params_key, shard_key, bytes_key = b"params", b"shard", b"param_bytes"

    local = threading.local()  # .stack: [(module, path, token, detail)] of open module forwards
    root_names = weakref.WeakKeyDictionary()  # root -> {id(module): name}
    # module -> (path, weak root) where it ran inside a parent's forward: a module called inside
    # backward with nothing open on its thread is named so again (activation checkpointing re-runs
    # a block's forward there, from the autograd engine: it is still `h.3`, not a new root
    # `Block`). Outside backward a module called at the top is a root, as before (an unwrapped
    # model evaluated after training inside DDP is `GPT`). The root is held weakly: a child's
    # entry must not keep its model alive.
    child_paths = weakref.WeakKeyDictionary()
    try:
        from _tracerun_training import backward_running
    except ImportError:
        def backward_running():
            return False
    # module -> (type name, the begin arguments: params (children included) and shard)
    module_info = weakref.WeakKeyDictionary()
    # Shape text by (shape, dtype) keys: formatting dominated the hooks' cost (measured: 13.9 us
    # per module call before, docs/performance.md); a training loop sees few distinct shapes.
    shape_text = {}
    dtype_names = {}

    def tensor_keys(value, out):
        if len(out) > _MAX_TENSORS:
            return
        shape = getattr(value, "shape", None)
        if shape is not None:
            dtype = getattr(value, "dtype", None)
            if dtype is not None and hasattr(value, "numel"):
                out.append((shape, dtype))
        elif isinstance(value, (list, tuple)):
            for v in value:
                tensor_keys(v, out)
        elif isinstance(value, dict):
            for v in value.values():
                tensor_keys(v, out)

    def format_keys(keys):
        out = []
        for shape, dtype in keys[:_MAX_TENSORS]:
            name = dtype_names.get(dtype)
            if name is None:
                name = str(dtype).rpartition(".")[2]
                name = dtype_names[dtype] = _DTYPES.get(name, name)
            out.append("%s[%s]" % (name, ",".join(map(str, shape))))
        return ";".join(out) + (";..." if len(keys) > _MAX_TENSORS else "")

    def shapes(value):
        keys = []
        tensor_keys(value, keys)
        key = tuple(keys)
        text = shape_text.get(key)
        if text is None:
            if len(shape_text) > 4096:
                shape_text.clear()
            text = shape_text[key] = format_keys(keys)
        return text

    def path_of(module, stack):
        if not stack:
            known = child_paths.get(module) if backward_running() else None
            root = known[1]() if known is not None else None
            return (known[0], root) if root is not None else (type(module).__name__, module)
        parent, parent_path, _, _, root = stack[-1]
        names = root_names.get(root)
        if names is None:
            names = {id(m): n for n, m in root.named_modules() if n}
            root_names[root] = names
        name = names.get(id(module))
        if name is not None:
            if module not in child_paths:
                child_paths[module] = (name, weakref.ref(root))
            return name, root
        return parent_path + "." + type(module).__name__, root

    def pre_hook(module, inputs):
        try:
            if tracing():
                return None
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            if not always_call:
                # Without always-called post hooks (torch < 2.1), a forward that raised out of its
                # root (an out-of-memory error the program caught) left its entries here: called
                # again, the module is still on the stack, and what is above it is stale. (Their
                # scopes were closed by an enclosing scope's end, or close at the capture's end.)
                for i in range(len(stack)):
                    if stack[i][0] is module:
                        del stack[i:]
                        break
            elif stack and stack[0][0] is module:
                # torch 2.1 and later run the always-called post hooks for an Exception only: a
                # KeyboardInterrupt the program caught left the root's entries (one test: the
                # root called again, at the stack's bottom).
                del stack[:]
            path, root = path_of(module, stack)
            info = module_info.get(module)
            if info is None:
                params = nbytes = 0
                for p in module.parameters():
                    params += p.numel()
                    nbytes += p.numel() * p.element_size()
                args = (Arg * 3)(Arg(params_key, params), Arg(shard_key, -1), Arg(bytes_key, nbytes))
                info = (type(module).__name__, args)
                module_info[module] = info
            detail = info[0]
            text = shapes(inputs)
            if text:
                detail += " in=" + text
            token = begin(kind_module, path.encode(), detail.encode(), info[1], 3)
            stack.append((module, path, token, detail, root))
        except Exception as e:  # never break the program being traced
            sys.stderr.write("tracerun: module hook: %s\n" % e)
        return None

    def post_hook(module, inputs, output):
        try:
            if tracing():
                return None
            stack = getattr(local, "stack", None)
            if not stack:
                return None
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] is module:
                    _, _, token, detail, _ = stack[i]
                    text = shapes(output)
                    if text:
                        detail += " out=" + text
                    end(token, detail.encode())
                    del stack[i:]  # and any forward that raised inside this one
                    break
        except Exception as e:
            sys.stderr.write("tracerun: module hook: %s\n" % e)
        return None

    try:  # torch 2.1 and later: the post hook also runs for a forward that raised
        module_module.register_module_forward_hook(post_hook, always_call=True)
        always_call = True
    except TypeError:
        module_module.register_module_forward_hook(post_hook)
        always_call = False
    module_module.register_module_forward_pre_hook(pre_hook)  # after: it reads always_call


def _close_at_python_exit():
    """Has libtracerun close its shard at the end of Python's finalization (CPython's Py_AtExit).
    An uncaught KeyboardInterrupt reaches it too, after which CPython ends the process by SIGINT
    and C++ static destructors, the capture's usual close, never run. (libtracerun leaves SIGINT
    to Python, so the program's KeyboardInterrupt is raised as without tracerun.) Without
    libtracerun in the process it does nothing."""
    import ctypes

    try:
        close = ctypes.CDLL(None).tracerun_annotate_close
    except AttributeError:
        return
    ctypes.pythonapi.Py_AtExit.argtypes = [ctypes.c_void_p]
    ctypes.pythonapi.Py_AtExit(ctypes.cast(close, ctypes.c_void_p))


try:
    _close_at_python_exit()
except Exception as e:
    sys.stderr.write("tracerun: the trace's close at Python's exit not registered: %s\n" % e)

if "torch.nn.modules.module" not in sys.modules:
    # _install runs right after torch.nn.modules.module is executed: the one post-import hook,
    # _tracerun_training.PostImport (beside this file; it imports nothing of torch's). Whatever
    # fails here (a Python without ctypes) leaves the program's own sitecustomize to run below.
    try:
        from _tracerun_training import PostImport

        PostImport("torch.nn.modules.module", _install).insert()
    except Exception as e:
        sys.stderr.write("tracerun: Python hooks not installed: %s\n" % e)
try:
    _run_shadowed_sitecustomize()
except Exception as e:  # the shadowed file's own error, as Python would print it
    sys.stderr.write("Error in sitecustomize (run by tracerun's): %r\n" % (e,))
