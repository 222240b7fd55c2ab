# A stand-in for FSDP2 (torch.distributed.fsdp.fully_shard, torch 2.4 and later) on Debian's torch
# 1.13, for python_memory_train.py --dist fsdp2: what tracerun's hooks (interpose/python/
# _tracerun_training.py) must handle of it, built from the same pieces. Not part of tracerun, and
# not FSDP2's code (1.13 has none): the real one is torch's, on the GPU machine.
#
# What FSDP2 does that the hooks see (torch/distributed/fsdp/_fully_shard/_fsdp_param.py):
# - each parameter is sharded on dim 0 and registered as an nn.Parameter around a DTensor: a
#   wrapper subclass with no storage of its own (data_ptr() 0 on 1.13), the rank's shard in its
#   _local_tensor, numel() the whole parameter's. Its .grad and the optimizer's states
#   (zeros_like of a DTensor) are DTensors too. ShardTensor below is such a wrapper: every op on
#   it runs on the local shards (__torch_dispatch__) and returns a ShardTensor.
# - before a unit's forward it all-gathers the unit's parameters into new plain tensors and swaps
#   them into the modules' _parameters (unsafe_setattr_param), after the global forward pre-hooks
#   have run for the unit's own module; the leaf modules then run with the gathered ones.
# - after the forward it swaps the sharded ones back; the gathered tensors live on in autograd's
#   graph until backward (reshard_after_forward=False: no re-gather before backward), whose
#   gradients are reduce-scattered (here: all-reduced, averaged, the rank's chunk kept) into the
#   sharded parameters' .grad; at the end of backward the gathered storages and their gradients
#   are freed (FSDP2's post-backward reshard), though the program's last loss still holds the
#   graph.
# Gloo on 1.13 has all_gather and all_reduce; the bytes are the same as FSDP2's collectives'.
import torch
import torch.distributed as dist
from torch.utils._pytree import tree_map


class ShardTensor(torch.Tensor):
    """A DTensor-like wrapper subclass: no storage of its own, this rank's shard in _local_tensor,
    the shape of the whole parameter."""

    @staticmethod
    def __new__(cls, local, shape):
        r = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=local.dtype, device=local.device,
                                                requires_grad=local.requires_grad)
        r._local_tensor = local
        return r

    def __repr__(self):
        return "ShardTensor(%r)" % (self._local_tensor,)

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        shape = next(t.shape for t in args if isinstance(t, ShardTensor))

        def unwrap(t):
            return t._local_tensor if isinstance(t, ShardTensor) else t

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        if func._schema.is_mutable:  # in place: the wrapper itself
            return args[0]
        # zeros_like, the optimizer's new states: shards of the same whole shape.
        return tree_map(lambda t: ShardTensor(t, shape) if isinstance(t, torch.Tensor) else t, out)


class _Param:
    """One sharded parameter: where it is registered, its whole shape, and its shard."""

    def __init__(self, module, name, full, rank, world):
        self.places = [(module, name)]  # a tied weight (nanoGPT's wte and lm_head) has two
        self.shape = full.shape
        self.numel = full.numel()
        self.world = world
        self.chunk = -(-self.numel // world)  # padded to a multiple of the world size
        flat = torch.zeros(self.chunk * world, dtype=full.dtype)
        flat[:self.numel] = full.detach().reshape(-1)
        local = flat[rank * self.chunk:(rank + 1) * self.chunk].clone()
        self.sharded = torch.nn.Parameter(ShardTensor(local, self.shape))
        self.rank = rank
        self.full = None  # the gathered parameter, until the backward after its forward ends
        self.reshard()

    def gather(self):
        parts = [torch.empty(self.chunk, dtype=self.sharded.dtype) for _ in range(self.world)]
        dist.all_gather(parts, self.sharded._local_tensor)
        full = torch.nn.Parameter(torch.cat(parts)[:self.numel].view(self.shape).clone())
        full.register_hook(self.reduce)
        self.full = full
        for module, name in self.places:
            module._parameters[name] = full

    def reshard(self):
        for module, name in self.places:
            module._parameters[name] = self.sharded

    def reduce(self, grad):
        flat = torch.zeros(self.chunk * self.world, dtype=grad.dtype)
        flat[:self.numel] = grad.reshape(-1)
        dist.all_reduce(flat)
        mine = flat[self.rank * self.chunk:(self.rank + 1) * self.chunk] / self.world
        if self.sharded.grad is None:
            self.sharded.grad = ShardTensor(mine.clone(), self.shape)
        else:
            self.sharded.grad._local_tensor.add_(mine)
        if not _PENDING:  # the first reduction of this backward: free at its end
            _PENDING.append(True)
            torch.autograd.Variable._execution_engine.queue_callback(_free_gathered)
        return grad

    def free(self):
        if self.full is not None:
            self.full.grad = None
            self.full.data = torch.empty(0, dtype=self.full.dtype)
            self.full = None


_UNITS = []  # every unit's _Params
_PENDING = []  # a free is queued for the running backward


def _free_gathered():
    for params in _UNITS:
        for q in params:
            q.free()
    _PENDING.clear()


def fully_shard(module):
    """Shards the parameters of `module` not already in a unit (call on the inner units first, as
    FSDP2 is applied), and gathers them around its forward."""
    rank, world = dist.get_rank(), dist.get_world_size()
    params, mine = [], {}  # mine: id of an original parameter -> its _Param
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is None or isinstance(p, ShardTensor):
                continue
            if id(p) in mine:  # tied: the same parameter under another module
                mine[id(p)].places.append((sub, name))
                sub._parameters[name] = mine[id(p)].sharded
                continue
            q = mine[id(p)] = _Param(sub, name, p, rank, world)
            params.append(q)

    def pre(mod, inputs):
        for q in params:
            q.gather()

    def post(mod, inputs, output):
        for q in params:
            q.reshard()

    module.register_forward_pre_hook(pre)
    module.register_forward_hook(post)
    _UNITS.append(params)
    return module
