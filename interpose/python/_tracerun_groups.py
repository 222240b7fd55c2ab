"""Process group names for tracerun's capture (sitecustomize.py installs it).

torch.distributed names every process group alike on every rank: "0" the world, then "1", "2"...
in the order the program creates them (every rank enters every new_group), or a hash of the
group's ranks (split groups, local synchronization). As torch creates a group, this gives
libtracerun the group's name as a number (vocab::arg::kGroupId) under its ProcessGroup object's
address (tracerun_annotate_process_group); each call's dispatcher op then records it, and the
report tells apart groups that size and place cannot ({0,3} and {1,2}; two groups of one size on
a rank): interpose/src/collective_groups.h.

Not a record of the groups' members, and nothing here runs per call: only when torch creates or
destroys a group (its _new_process_group_helper, split_group or destroy_process_group returns).
An address torch no longer knows (a destroyed group) is forgotten, so that a group made there
later, named or not, never takes the dead one's name.
"""
import ctypes
import functools
import sys

_MASK = (1 << 62) - 1
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def group_id(name):
    """vocab::arg::kGroupId of a group's name: the number itself for torch's counter names, else
    the name's FNV-1a 64-bit hash with the top two bits cleared; -1 for no name."""
    if not isinstance(name, str) or not name:
        return -1
    if name.isascii() and name.isdigit() and (name == "0" or name[0] != "0") and len(name) < 19:
        return int(name)
    h = _FNV_OFFSET
    for b in name.encode("utf-8", "surrogatepass"):
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h & _MASK


# pybind11 keeps the C++ object's pointer of a simply laid out instance right after the Python
# object's header: the ProcessGroup (its only C++ base is at offset 0) that the dispatcher's c10d
# ops hold. libtracerun only compares it with the pointers those ops hand it; it never reads it.
_HEADER = object.__basicsize__


def address_of(group):
    try:
        return ctypes.c_void_p.from_address(id(group) + _HEADER).value or 0
    except Exception:
        return 0


def _names(c10d):
    """torch's {ProcessGroup: name}: _world.pg_names on 2.x, _pg_names on 1.13."""
    world = getattr(c10d, "_world", None)
    names = getattr(world, "pg_names", None) if world is not None else None
    if names is None:
        names = getattr(c10d, "_pg_names", None)
    return names if isinstance(names, dict) else {}


def install(lib, c10d, distributed=None):
    """Names the groups torch.distributed.distributed_c10d (`c10d`, just imported) knows and
    creates. `distributed` is torch.distributed when it was imported before: its copies of the
    wrapped functions are replaced too."""
    if getattr(getattr(c10d, "_new_process_group_helper", None), "_tracerun_names", False):
        return  # installed already
    try:
        name_group = lib["tracerun_annotate_process_group"]
    except AttributeError:
        return  # an older libtracerun
    name_group.restype = None
    name_group.argtypes = [ctypes.c_uint64, ctypes.c_int64]
    given = {}  # address -> the id libtracerun has for it

    def name_all():
        try:
            now = {}
            for group, name in list(_names(c10d).items()):
                address = address_of(group)
                if address:
                    now[address] = group_id(name)
            for address in [a for a in given if a not in now]:  # destroyed: forgotten
                del given[address]
                name_group(address, -1)
            for address, gid in now.items():
                if given.get(address, -1) != gid:
                    given[address] = gid
                    name_group(address, gid)
        except Exception as e:  # never break the program being traced
            sys.stderr.write("tracerun: process group names: %s\n" % e)

    def naming(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            finally:
                name_all()

        return call

    # Every creation goes through the helper (init_process_group, new_group, new_subgroups,
    # DeviceMesh), found by module-global lookup; split_group (2.6 and later) builds its own.
    # destroy_process_group forgets the groups it ends (the whole world resets torch's counter).
    for attr in ("_new_process_group_helper", "split_group", "destroy_process_group"):
        function = getattr(c10d, attr, None)
        if function is None or getattr(function, "_tracerun_names", False):
            continue
        wrapped = naming(function)
        wrapped._tracerun_names = True
        setattr(c10d, attr, wrapped)
        if distributed is not None and getattr(distributed, attr, None) is function:
            setattr(distributed, attr, wrapped)
    name_all()  # groups made before these hooks
