"""`flow.nn.LoadedGraph`: an exported `nn.Graph` loaded back by `flow.load(dir)`.

It holds what the export wrote (flow._graph_export: the signature, the flow IR, the IREE
module, the parameters) and runs the module through IREE's runtime: no model code, no
pickle. The module saved is used when it fits this machine; otherwise the program is
compiled again from the saved flow IR.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.pytree import flatten, unflatten
from flow.core.tensor import Tensor

__all__ = ["LoadedGraph"]


class LoadedGraph:
    """An exported graph, loaded by `flow.load(dir)`: call it with tensors or numpy arrays of
    its signature (`signature["inputs"]`) to get flow tensors, nested as the original graph
    returned them.

    The saved IREE module (graph.vmfb) runs when it fits this machine: its target has a
    device here, the IREE version is the one that compiled it and, for the cpu, the CPU
    features are the same (it was compiled for the host CPU). Otherwise the program is
    recompiled from the saved flow IR (graph.mlir) for the saved target, or the cpu when that
    target has no device here (`recompiled` is then True). `state_dict()` gives the
    parameters and buffers by their names in the graph."""

    def __init__(self, path: str, manifest: dict, mlir: str, vmfb: bytes, state: dict,
                 params: list[Tensor], *, module_fits: bool) -> None:  # fmt: skip
        from flow.core import device as _device
        from flow.targets import LoadError, available, load

        self.path, self.manifest, self._mlir, self._state = path, manifest, mlir, state
        self._params = [np.asarray(t.numpy(), order="C") for t in params]
        self._in_tree = _tree_from_json(manifest["input_tree"])
        self._out_tree = _tree_from_json(manifest["output_tree"])
        saved = manifest["target"]
        self.target = saved if saved in available() else "cpu"
        fn = None
        if module_fits and self.target == saved:
            try:
                fn = load(vmfb, saved)[manifest["function"]]
            except LoadError:
                fn = None
        self.recompiled = fn is None
        if fn is None:
            fn = load(self._rebuild(self.target), self.target)[manifest["function"]]
        self._fn, self.device = fn, _device.of_target(self.target)

    @property
    def signature(self) -> dict:
        """The inputs and outputs: the name, shape and dtype of each (as in graph.json)."""
        return {"inputs": self.manifest["inputs"], "outputs": self.manifest["outputs"]}

    def state_dict(self) -> dict:
        return self._state

    def _rebuild(self, target: str) -> bytes:
        """The module for `target`, compiled from the saved flow IR."""
        from flow.dialect.parsing import parse_module
        from flow.lowering import run_pipeline, to_iree_text
        from flow.targets import compile_mlir, execution_target, get_target

        from flow.compile.stages import handoff_pipeline

        tgt = execution_target(get_target(target))
        module = parse_module(self._mlir, os.path.join(self.path, "graph.mlir"))
        lowered = run_pipeline(module, handoff_pipeline(tgt))
        return compile_mlir(to_iree_text(lowered), tgt)

    def __call__(self, *args):
        name = f"{self.manifest['graph']} (exported)"
        specs = self.manifest["inputs"]
        top = self._in_tree[1]  # (leaf count, structure) per positional argument
        if len(args) != len(top):
            raise TypeError(f"{name}: expected {len(top)} argument(s) {_describe(specs)}, got "
                            f"{len(args)}")  # fmt: skip
        leaves, first = [], 0
        for i, (arg, (n, sub)) in enumerate(zip(args, top)):
            got = flatten(arg)[0]
            if (sub is None) != (got == [arg]) or len(got) != n:
                want = _describe(specs[first:first + n])
                shape = ("a tensor or numpy array" if sub is None
                         else f"nested as exported, with {n} leaves")  # fmt: skip
                extra = "" if sub is None else f" with {len(got)} leaves"
                raise TypeError(f"{name}: argument {i} must be {shape} {want}, got "
                                f"{type(arg).__name__}{extra}")  # fmt: skip
            leaves += got
            first += n
        arrays = []
        for i, (x, spec) in enumerate(zip(leaves, specs)):
            if "static" in spec:
                if type(x) is not type(spec["static"]) or x != spec["static"]:
                    raise ValueError(f"{name}: input {i} was exported as the static value "
                                     f"{spec['static']!r}, got {x!r:.40}")  # fmt: skip
                continue
            arrays.append(_input_array(name, i, x, spec))
        results = []
        for o in self._fn(*arrays, *self._params):
            t = Tensor._eager(np.asarray(o))
            if self.device is not None:
                t._device = self.device
            results.append(t)
        return unflatten(self._out_tree, results)

    def __repr__(self) -> str:
        m = self.manifest
        return (f"LoadedGraph({m['graph']}, inputs={_describe(m['inputs'])}, "
                f"outputs={_describe(m['outputs'])}, target={self.target!r})")


def _describe(specs: list) -> str:
    parts = [repr(s["static"]) if "static" in s else f"{s['name']}: {s['dtype']}{s['shape']}"
             for s in specs]  # fmt: skip
    return "(" + ", ".join(parts) + ")"


def _input_array(name: str, i: int, x: Any, spec: dict) -> np.ndarray:
    """The input `x` as the array the module takes, checked against its `spec`."""
    what = f"{name}: input {i} ({spec['name']})"
    if isinstance(x, Tensor):
        if x.is_global:
            raise TypeError(f"{what} is a global tensor; an exported graph takes local tensors")
        dtype, shape, get = x.dtype.name, list(x.shape), x.numpy
    elif isinstance(x, np.ndarray):
        try:
            dtype = _dtypes.as_dtype(x.dtype).name
        except (TypeError, ValueError, KeyError):
            dtype = str(x.dtype)
        shape, get = list(x.shape), lambda: x
    else:
        raise TypeError(f"{what} must be a tensor or numpy array of "
                        f"{spec['dtype']}{spec['shape']}, got {type(x).__name__}")  # fmt: skip
    if dtype != spec["dtype"] or shape != spec["shape"]:
        raise ValueError(f"{what}: expected {spec['dtype']}{spec['shape']}, got {dtype}{shape}")
    return np.asarray(get(), order="C")


def _tree_from_json(node: Any) -> Any:
    """A pytree structure from its JSON form (flow._graph_export writes it)."""
    if node is None:
        return None
    (tag, inner), = node.items()  # fmt: skip
    if tag == "dict":
        keys, sub = inner
        return (dict, (tuple(keys), _tree_from_json(sub)))
    return ({"list": list, "tuple": tuple}[tag], tuple((n, _tree_from_json(s)) for n, s in inner))
