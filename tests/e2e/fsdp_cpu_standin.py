# Lets Debian's torch 1.13 run torch.distributed.fsdp.FullyShardedDataParallel on the CPU over
# Gloo, for python_memory_train.py --dist fsdp (issue 33's FSDP run, on this CUDA-less machine).
# Imported by that script before it builds the model, on torch < 2.1 only: PyTorch 2.1 and later
# run FSDP on the CPU themselves (device_id=cpu), and tests/gpu/test_memory_categories.py traces
# that unmodified. Not part of tracerun: tracerun's hooks (interpose/python/_tracerun_training.py)
# see FSDP's own code, which this file leaves as it is.
#
# What 1.13 lacks, and what stands in for it (each found by running FSDP here, 2026-11-27):
# - `import torch.distributed.fsdp` fails on Python 3.11: sharded_tensor/metadata.py gives a
#   dataclass field the instance default TensorProperties(), which 3.11 rejects as mutable. The
#   field gets default_factory=TensorProperties instead, while that one import runs.
# - FSDP 1.13 is CUDA-only: its compute device is torch.cuda.current_device()
#   (_get_compute_device), _lazy_init refuses "FSDP does not support CPU only execution", and it
#   orders its gathers and reductions with CUDA streams and events. Here the compute device is the
#   CPU, and the fsdp modules' `torch.cuda` is a namespace of streams and events that do nothing:
#   on the CPU every op has finished when it returns, so the order they enforce already holds.
#   Tensor.record_stream (CUDA-only) does nothing for CPU tensors.
# - 1.13's Gloo has no _all_gather_base nor _reduce_scatter_base (flat tensor in, flat tensor
#   out), which FSDP gathers and reduces with: all_gather into the output's chunks, and all_reduce
#   of the input then the rank's chunk, give the same bytes.
# FSDP's own work, the one tracerun must account (flattening, sharding, the gathered storages,
# freeing them after forward and backward, the sharded gradients, the optimizer over the shards),
# runs as written. python_memory_test.py checks the result against the single-process run's
# losses.
import contextlib
import dataclasses

import torch
import torch.distributed as dist


def _import_fsdp():
    get_field = dataclasses._get_field

    def with_factory(cls, name, *rest):
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if (isinstance(default, dataclasses.Field)
                and type(default.default).__name__ == "TensorProperties"):
            setattr(cls, name, dataclasses.field(default_factory=type(default.default)))
        return get_field(cls, name, *rest)

    dataclasses._get_field = with_factory
    try:
        import torch.distributed.fsdp  # noqa: F401
    finally:
        dataclasses._get_field = get_field


class _Stream:
    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass

    def synchronize(self):
        pass


class _Event:
    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


class _NoCuda:
    """What FSDP 1.13 calls on torch.cuda, for a CPU that has finished each op on return."""

    Stream = _Stream
    Event = _Event

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def current_stream(device=None):
        return _Stream()

    @staticmethod
    def stream(stream):
        return contextlib.nullcontext()

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def device_count():
        return 1


class _TorchWithoutCuda:
    cuda = _NoCuda()

    def __getattr__(self, name):
        return getattr(torch, name)


def _all_gather_base(output, input, group=None, async_op=False):
    dist.all_gather(list(output.chunk(dist.get_world_size(group))), input, group=group)


def _reduce_scatter_base(output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
    # In place: FSDP 1.13 drops the unsharded gradient it passes here as soon as this returns
    # (_post_backward_hook), and a copy would add a temporary the real collective does not make.
    dist.all_reduce(input, op=op, group=group)
    output.copy_(input.chunk(dist.get_world_size(group))[dist.get_rank(group)])


def needed():
    """Whether this torch needs the stand-in: before 2.1, FSDP cannot compute on the CPU."""
    return tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) < (2, 1)


def install():
    """Makes FullyShardedDataParallel usable on the CPU (torch < 2.1; a no-op on later ones)."""
    if not needed():
        return
    _import_fsdp()
    from torch.distributed.fsdp import flat_param, fully_sharded_data_parallel as fsdp

    fsdp.torch = flat_param.torch = _TorchWithoutCuda()
    fsdp.FullyShardedDataParallel._get_compute_device = (
        lambda self, *args, **kwargs: torch.device("cpu"))
    record_stream = torch.Tensor.record_stream

    def record_stream_cpu(self, stream):
        if self.device.type != "cpu":
            record_stream(self, stream)

    torch.Tensor.record_stream = record_stream_cpu
    dist._all_gather_base = _all_gather_base
    dist._reduce_scatter_base = _reduce_scatter_base
