"""`flow.save` / `flow.load`: checkpoints without pickle, as a directory or one file.

`flow.save(state, "model")` writes OneFlow's directory layout (one folder per entry, each
tensor's raw bytes in `out`; `flow._checkpoint_dir`); a path ending in `.safetensors`, or an
existing file, gets one safetensors file instead (`flow._checkpoint_file`). Both hold the
object tree as JSON (`flow._checkpoint_tree`), are written atomically and carry checksums
over every byte. `flow.save(model, path)` stores a whole `nn.Module` as its class name,
constructor arguments and state dict (`flow._checkpoint_model`); `flow.load` rebuilds it only
from classes it is allowed to (`allowed=`), so loading an untrusted checkpoint never runs code.

With several processes, `global_dst_rank=r` saves global tensors whole from rank r (the
others do no disk I/O) and `global_src_rank=r` reads on rank r only, returning global tensors
placed on rank r (broadcast SBP) on every rank, as OneFlow does.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from flow import _checkpoint_dir, _checkpoint_file, _graph_export
from flow._checkpoint_model import DisallowedClassError, allowed_names
from flow._checkpoint_tree import CheckpointError, _Decoder, _Encoder, _where
from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy

__all__ = ["CheckpointError", "DisallowedClassError", "load", "save"]

FILE_SUFFIX = ".safetensors"


def _fspath(path: Any, op: str) -> str:
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(
            f"flow.{op}: path must be a str or os.PathLike, got {type(path).__name__}"
        ) from None


def _check_rank(value: Any, keyword: str) -> None:
    from flow.distributed import env

    world = env.get_world_size()
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < world:
        raise ValueError(f"flow.{'save' if 'dst' in keyword else 'load'}: {keyword} must be a "
                         f"rank in [0, {world}), got {value!r}")  # fmt: skip


# ---------------------------------------------------------------------------- save


def save(obj: Any, path: str | os.PathLike[str], global_dst_rank: int | None = None) -> None:
    """Write `obj` (nested dicts/lists/tuples of tensors, arrays and scalars, or a whole
    nn.Module) to `path`: a directory in OneFlow's layout, or one safetensors file when `path`
    ends in `.safetensors` or is an existing file.

    The write is atomic: the checkpoint is built next to `path`, synced, then swapped in, so
    a failure leaves any previous checkpoint intact. With `global_dst_rank`, every rank must
    call `save` (global tensors are gathered to that rank), and only that rank writes.
    """
    shown = _fspath(path, "save")
    target = os.path.realpath(shown)
    if _graph_export.is_graph(obj):
        if global_dst_rank is not None or shown.endswith(FILE_SUFFIX) or os.path.isfile(target):
            raise ValueError(f"flow.save: an nn.Graph is exported to a directory (without "
                             f"global_dst_rank), got {shown!r}")  # fmt: skip
        return _graph_export.save_graph(obj, target, shown)
    as_file = shown.endswith(FILE_SUFFIX) or os.path.isfile(target)
    if global_dst_rank is not None:
        _check_rank(global_dst_rank, "global_dst_rank")
    writes = global_dst_rank is None or _rank() == global_dst_rank
    if writes:
        parent = os.path.dirname(target)
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"flow.save: directory {parent!r} does not exist")
        if as_file and os.path.isdir(target):
            raise IsADirectoryError(f"flow.save: {shown!r} is a directory; a {FILE_SUFFIX} "
                                    "path is written as one file")  # fmt: skip
        if not as_file:
            _checkpoint_dir.check_target(target, shown)

    gather = _GlobalGather(global_dst_rank, writes)
    encoder = (_Encoder if as_file else _checkpoint_dir.DirEncoder)(gather)
    tree = encoder.encode(obj, "")
    if not writes:
        return
    if as_file:
        _checkpoint_file.save_file(target, tree, encoder.arrays)
    else:
        _checkpoint_dir.save_dir(target, tree, encoder.arrays)


def _rank() -> int:
    from flow.distributed import env

    return env.get_rank()


class _GlobalGather:
    """The whole value of a global tensor for the encoder: on `dst` only with a destination
    rank (the others get None), else on this process when it is the only one."""

    def __init__(self, dst: int | None, writes: bool) -> None:
        self.dst, self.writes = dst, writes

    def __call__(self, t: Tensor, path: str) -> np.ndarray | None:
        from flow.core.autograd import no_grad
        from flow.distributed import env
        from flow.distributed.placement import placement, sbp

        if self.dst is None:
            if env.get_world_size() > 1:
                raise ValueError(
                    f"flow.save: the tensor {_where(path)} is global and "
                    f"{env.get_world_size()} processes run; pass global_dst_rank=0 (say) to "
                    "save global tensors whole from that rank, or save each rank's "
                    "to_local() shards to a path of its own"
                )
            return t.numpy()
        with no_grad():
            whole = t.detach().to_global(placement(t.placement.type, [self.dst]), sbp.broadcast)
        return whole.to_local().numpy() if self.writes else None


# ---------------------------------------------------------------------------- load


def load(path: str | os.PathLike[str], global_src_rank: int | None = None,
         map_location: str | None = None, *, allowed: Any = None) -> Any:  # fmt: skip
    """Read a checkpoint written by `save` (a directory or a file), with the same nesting and
    exact dtypes and shapes. A safetensors file written by another tool loads as a flat dict
    name -> tensor.

    A whole-model checkpoint is rebuilt only from flow's own `flow.nn` classes and those in
    `allowed` (classes or "package.module.Class" names); any other class raises
    `DisallowedClassError` before anything is imported. With `global_src_rank`, every rank
    must call `load`: only that rank reads `path`, and every rank gets the tensors as global
    tensors on that rank (broadcast SBP), ready for `load_state_dict` or `to_global`.
    Tensors live in host memory, so `map_location` may only be None or "cpu".
    """
    if isinstance(global_src_rank, str) and map_location is None:
        global_src_rank, map_location = None, global_src_rank  # load(path, "cpu")
    if map_location not in (None, "cpu"):
        raise ValueError(f"flow.load: map_location={map_location!r} is not supported; use 'cpu'")
    shown = _fspath(path, "load")
    names = allowed_names(allowed)
    if global_src_rank is None:
        return _load_here(shown, names)
    _check_rank(global_src_rank, "global_src_rank")
    return _load_from_rank(shown, names, global_src_rank)


def _load_here(shown: str, names: set[str], make_tensor=from_numpy) -> Any:
    if os.path.isdir(shown):
        return _checkpoint_dir.load_dir(shown, names, make_tensor, _graph_export.GraphDecoder)
    if not os.path.exists(shown):
        raise FileNotFoundError(f"flow.load: no such checkpoint file or directory: {shown!r}")
    return _checkpoint_file.load_file(shown, names, make_tensor)


_ERRORS = {cls.__name__: cls for cls in (
    CheckpointError, DisallowedClassError, FileNotFoundError, IsADirectoryError,
    PermissionError, ValueError, TypeError)}  # fmt: skip


def _load_from_rank(shown: str, names: set[str], src: int) -> Any:
    """`load` with global_src_rank=src: rank src reads; the tree goes to every rank as JSON
    (never pickle), then each tensor becomes a global tensor on [src], broadcast."""
    from flow.distributed import env
    from flow.distributed.boxing import world_bcast

    def bcast(x: Any) -> np.ndarray:
        return x if env.get_world_size() == 1 else world_bcast(x, src, "flow.load")

    here = _rank() == src
    message: dict[str, Any]
    arrays: dict[str, np.ndarray] = {}
    if here:
        try:
            obj = _load_here(shown, names)
            encoder = _Encoder()
            tree = encoder.encode(_reject_modules(obj, shown), "")
            arrays = encoder.arrays
            message = {"tree": tree, "names": sorted(arrays)}
        except Exception as err:  # every rank raises it: the others must not wait forever
            failure, message = err, {"error": [type(err).__name__, str(err)]}
    raw = json.dumps(message).encode() if here else b""
    message = json.loads(bcast(np.frombuffer(raw, np.uint8)).tobytes())
    if "error" in message:
        if here:
            raise failure
        kind, text = message["error"]
        raise _ERRORS.get(kind, RuntimeError)(f"flow.load on rank {src}: {text}")

    from flow.distributed.placement import GlobalInfo, empty_shard, make_global, nd_sbp, placement
    from flow.distributed.placement import sbp as _sbp

    info = GlobalInfo(placement("cpu", [src]), nd_sbp(_sbp.broadcast, 1, "flow.load"))

    def make_tensor(value: np.ndarray) -> Tensor:
        arr = np.asarray(value) if here else empty_shard(value.shape, value.dtype)
        return make_global(arr, value.shape, info)

    decoder = _RankDecoder(shown, lambda name, where: arrays[name], set(message["names"]),
                           names, make_tensor)  # fmt: skip
    decoder.here, decoder.bcast = here, bcast
    return decoder.decode(message["tree"], "")


class _RankDecoder(_Decoder):
    """Decodes the broadcast tree: tensors stay on the source rank; numpy arrays and numpy
    scalars (data, not tensors) are broadcast to every rank."""

    def _array(self, tag: str, node: dict, path: str) -> Any:
        if not self.here:
            name = node[tag]
            if (tag, name) not in self.used:
                shape, dtype = tuple(node["shape"]), _checkpoint_dir._np_dtype(node["dtype"])
                if tag == "tensor":
                    ph = np.lib.stride_tricks.as_strided(np.zeros((), dtype), shape,
                                                         (0,) * len(shape))  # fmt: skip
                    self.used[tag, name] = self.make_tensor(ph)
                else:
                    value = self.bcast(None)
                    self.used[tag, name] = value[()] if tag == "npscalar" else value
            return self.used[tag, name]
        fresh = (tag, node[tag]) not in self.used
        value = super()._array(tag, node, path)
        if fresh and tag != "tensor":
            self.bcast(np.asarray(value))
        return value


def _reject_modules(obj: Any, shown: str) -> Any:
    from flow._checkpoint_model import is_module
    from flow.nn import LoadedGraph

    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, LoadedGraph):
            raise ValueError(f"flow.load: {shown!r} is an exported nn.Graph; load it without "
                             "global_src_rank (it runs local tensors)")  # fmt: skip
        if is_module(item):
            raise ValueError(f"flow.load: {shown!r} holds a whole nn.Module; global_src_rank "
                             "loads state dicts (load the model on every rank without it, "
                             "then call to_global)")  # fmt: skip
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return obj
