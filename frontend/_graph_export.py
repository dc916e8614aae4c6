"""Exporting an inference `nn.Graph` for deployment: `flow.save(graph, dir)` / `flow.load(dir)`.

`flow.save(graph, "model")` (after the graph was called once, so its program is traced and
compiled) writes a checkpoint directory (`flow._checkpoint_dir`: atomic, every byte
checksummed) holding the graph's parameters and buffers under their names in the graph, plus

    graph.json   the signature (inputs' and outputs' names, shapes, dtypes, their nesting), the
                 program's parameters in order, the target, IREE flags and versions
    graph.mlir   the traced program as flow IR (generic form)
    graph.vmfb   the compiled IREE module for the target it ran on

whose SHA-256 sums sit in the checkpoint's index. `flow.load("model")` returns a
`flow.nn.LoadedGraph` (nn/_loaded_graph.py): callable with tensors or arrays of the
signature, it runs the module through IREE's runtime and needs none of the model's code.
Loading parses JSON and MLIR text and copies bytes; it never unpickles or imports anything
named by the files. A module that does not fit the loading machine (another IREE version, CPU
or target) is recompiled from graph.mlir.

Exported are local inference graphs: a graph with optimizers (`add_optimizer`), one that
updates tensors when called (BatchNorm in training mode), draws random numbers (Dropout in
training mode), or runs on several ranks (global tensors) is refused with the reason. A
training graph's forward pass is exported by wrapping the trained model in an inference graph
(OneFlow's own recipe), which keeps the export to one program with no optimizer state.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from typing import Any

from flow import _checkpoint_dir
from flow._checkpoint_tree import CheckpointError, _Decoder
from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor

__all__ = ["GraphDecoder", "decode_graph", "is_graph", "save_graph"]

FORMAT = "flow.graph-export"
VERSION = 1
MANIFEST, PROGRAM, MODULE = "graph.json", "graph.mlir", "graph.vmfb"
_FILES = (MANIFEST, PROGRAM, MODULE)
_INPUTS = "(inputs)"  # folder of the program's captured tensors that are not graph state


def is_graph(obj: Any) -> bool:
    """Whether `obj` is an `nn.Graph` (known by its engine: flow.nn imports this module)."""
    from flow.compile.graph import GraphEngine

    return isinstance(getattr(obj, "_engine", None), GraphEngine)


# ---------------------------------------------------------------------------- save


def save_graph(graph: Any, target: str, shown: str) -> None:
    """Export `graph` (see the module docstring) to the directory `target` (shown as `shown`
    in errors). An empty or missing directory, or an earlier checkpoint, is accepted."""
    lowered, program = _traced_program(graph)
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"flow.save: directory {parent!r} does not exist")
    _checkpoint_dir.check_target(target, shown)
    tgt = lowered.execution_target(program.target)
    vmfb = getattr(program, "vmfb", None) or lowered.cached_vmfb(tgt) or lowered.build_vmfb(tgt)

    encoder = _checkpoint_dir.DirEncoder()
    modules = graph._modules()
    state = {attr: m.state_dict(keep_vars=True) for attr, m in modules}
    names = {id(t): f"{attr}.{key}" for attr, sd in state.items() for key, t in sd.items()}
    state_node = encoder.encode(state, "")
    token = encoder._enter(_INPUTS)
    try:
        inputs_node = encoder.encode(list(lowered.captured), _INPUTS)
    finally:
        encoder._leave(token)

    manifest = _manifest(graph, lowered, program.target, tgt, names)
    files = {MANIFEST: json.dumps(manifest, indent=1).encode(),
             PROGRAM: _generic_text(lowered.module).encode(), MODULE: bytes(vmfb)}  # fmt: skip
    record = {"format": FORMAT, "version": VERSION, "state": state_node, "inputs": inputs_node,
              "files": {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}}  # fmt: skip
    _checkpoint_dir.save_dir(target, {"graph": record}, encoder.arrays, files)


def _traced_program(graph: Any):
    """The graph's last traced program and its runnable form, checked to be exportable."""
    name = type(graph).__name__
    engine = graph._engine
    if engine.optimizers:
        raise ValueError(f"flow.save: {name} has optimizers (add_optimizer): export an "
                         "inference graph: a Graph without add_optimizer, whose build() "
                         "runs the forward pass of the trained model")  # fmt: skip
    lowered = engine.last_lowered
    if lowered is None:
        raise RuntimeError(f"flow.save: {name} has not been called yet, so it has no traced "
                           f"program to export; call it once with example inputs "
                           f"(graph(x)) before flow.save(graph, dir)")  # fmt: skip
    why = None
    if lowered.is_global:
        why = "it runs on global tensors (several ranks); export a local graph"
    elif lowered.key_slots:
        why = ("it draws random numbers (e.g. Dropout in training mode); call model.eval() "
               "before tracing it")
    elif lowered.mutated:
        why = ("it updates tensors when called (e.g. BatchNorm running statistics in "
               "training mode); call model.eval() before tracing it")
    elif lowered.checks:
        why = "it was traced with index checks (FLOW_CHECK_INDICES); trace it without them"
    elif lowered.born:
        why = "its step creates state"
    if why is not None:
        raise ValueError(f"flow.save: cannot export {name}: {why}")
    program = next(p for p in engine.programs.values() if p.lowered is lowered)
    if hasattr(program, "wait"):  # compiling in the background: the module is needed now
        program.wait()
    return lowered, program


def _manifest(graph: Any, lowered: Any, ran_on: str, tgt: Any, names: dict) -> dict:
    from flow.targets import compile_flags

    f = lowered.module.body.block.first_op
    hints = [a.name_hint for a in f.body.block.args]
    inputs, k = [], 0
    for entry in lowered.signature:
        if entry[0] == "T":
            inputs.append({"name": hints[k] or f"input_{k}", "shape": list(entry[1]),
                           "dtype": entry[2]})  # fmt: skip
            k += 1
        else:
            value = entry[2]
            if value is not None and not isinstance(value, (bool, int, float, str)):
                raise ValueError(f"flow.save: cannot export {type(graph).__name__}: it was "
                                 f"called with the static argument {value!r:.60}, which is not "
                                 "an int, float, bool, str or None")  # fmt: skip
            inputs.append({"name": f"static_{len(inputs)}", "static": value})
    outputs = [{"name": f"output_{i}", "shape": list(t.get_shape()),
                "dtype": _dtypes.from_ir(t.element_type).name}
               for i, t in enumerate(f.function_type.outputs.data)]  # fmt: skip
    params = [{"name": names.get(id(t), f"{_INPUTS}.{i}"), "shape": list(t.shape),
               "dtype": t.dtype.name} for i, t in enumerate(lowered.captured)]  # fmt: skip
    return {"format": FORMAT, "version": VERSION, "graph": type(graph).__name__,
            "function": f.sym_name.data, "inputs": inputs, "outputs": outputs,
            "input_tree": _tree_json(lowered.in_tree), "output_tree": _tree_json(lowered.out_tree),
            "parameters": params, "target": ran_on, "compile_flags": compile_flags(tgt),
            "versions": _versions(), "host": _host_id()}  # fmt: skip


def _generic_text(module: Any) -> str:
    import io

    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue() + "\n"


def _tree_json(tree: Any) -> Any:
    """A pytree structure as JSON (a namedtuple becomes a tuple)."""
    if tree is None:
        return None
    kind, inner = tree
    if kind is dict:
        keys, sub = inner
        if not all(isinstance(k, str) for k in keys):
            raise ValueError(f"flow.save: a graph's inputs and outputs may nest dicts with str "
                             f"keys only, got keys {list(keys)!r:.60}")  # fmt: skip
        return {"dict": [list(keys), _tree_json(sub)]}
    tag = "list" if kind is list else "tuple"
    return {tag: [[n, _tree_json(s)] for n, s in inner]}


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("flow", "iree-base-compiler", "iree-base-runtime"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def _host_id() -> dict:
    """What a cpu module compiled for this host's CPU (`target-cpu=host`) depends on."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        pass
    features = hashlib.sha256(" ".join(sorted(flags.split()[2:])).encode()).hexdigest()[:16]
    return {"machine": platform.machine(), "cpu_features": features}


# ---------------------------------------------------------------------------- load


class GraphDecoder(_Decoder):
    """The checkpoint directory decoder that also knows the top-level `{"graph": record}`
    node of a graph export (`flow.load` reads directories with it)."""

    def decode(self, node: Any, path: str) -> Any:
        if not path and isinstance(node, dict) and list(node) == ["graph"]:
            return decode_graph(self, node["graph"], path)
        return super().decode(node, path)


def decode_graph(decoder: _Decoder, record: Any, path: str) -> Any:
    """The `{"graph": record}` node of a checkpoint directory's tree, as a `LoadedGraph`."""
    directory = decoder.source
    if not isinstance(record, dict):
        raise decoder.fail(path, f"bad graph export record {record!r:.80}")
    if record.get("format") != FORMAT or record.get("version") != VERSION:
        raise CheckpointError(f"{directory}: graph export format {record.get('format')!r} "
                              f"version {record.get('version')!r} is not supported (this flow "
                              f"reads {FORMAT} version {VERSION})")  # fmt: skip
    digests = record.get("files")
    if not isinstance(digests, dict) or sorted(digests) != sorted(_FILES):
        raise decoder.fail(path, f"the graph export lists files {digests!r:.80}, expected "
                                 f"{', '.join(_FILES)}")  # fmt: skip
    files = {name: _read_checked(directory, name, digests[name]) for name in _FILES}
    state = decoder.decode(record.get("state"), "state")
    inputs = decoder.decode(record.get("inputs"), "inputs")
    try:
        manifest = json.loads(files[MANIFEST])
    except ValueError as err:
        raise CheckpointError(f"{directory}: bad {MANIFEST} ({err})") from None
    if not isinstance(inputs, list) or not all(isinstance(t, Tensor) for t in inputs):
        raise decoder.fail("inputs", "the program's parameters are not a list of tensors")
    from flow.nn import LoadedGraph

    fits = (manifest.get("versions") == _versions()
            and (manifest.get("target") != "cpu" or manifest.get("host") == _host_id()))
    return LoadedGraph(directory, manifest, files[PROGRAM].decode("utf-8"), files[MODULE],
                       state, inputs, module_fits=fits)  # fmt: skip


def _read_checked(directory: str, name: str, digest: Any) -> bytes:
    try:
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CheckpointError(f"{directory}: corrupted graph export: {name} is missing") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise CheckpointError(f"{directory}: corrupted graph export: {name} does not match the "
                              f"checksum recorded in {_checkpoint_dir.INDEX}")  # fmt: skip
    return data
