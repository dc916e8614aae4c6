"""`flow-run`: run a function of a compiled `.vmfb`, or launch a Python script.

flow-run module.vmfb --function main --input x.npy --input 2x2xf32=1,2,3,4
flow-run script.py [args...]
flow-run -n 4 script.py [args...]     (4 ranks under mpiexec; -n 1 runs in this process)
flow-run -n 4 --hosts a,b script.py   (ranks across machines: mpiexec's -hosts, over ssh)
flow-run -n 4 --hostfile F script.py  (mpiexec's -f: a host, or host:N, a line)
    --launcher L (mpiexec's -launcher: ssh, rsh, slurm, ...) and --launcher-exec CMD (a command
    called as ssh would be) choose how the other machines are reached.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

import numpy as np

from ._driver import fail, run_target_tool

_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
           "i8": np.int8, "i32": np.int32, "i64": np.int64}  # fmt: skip


def parse_input(spec: str) -> np.ndarray:
    """A `.npy` path, or IREE-style `2x3xf32=1,2,3,4,5,6` (`f32=1.5` for a scalar)."""
    if spec.endswith(".npy"):
        if not os.path.exists(spec):
            fail(f"input file not found: {spec}")
        return np.load(spec, allow_pickle=False)
    if "=" not in spec:
        fail(
            f"cannot parse input {spec!r}; expected FILE.npy or SHAPExTYPE=v1,v2,... "
            "(e.g. 2x2xf32=1,2,3,4)"
        )
    ty, values = spec.split("=", 1)
    *dims, el = ty.split("x")
    if el not in _DTYPES or not all(d.isdigit() for d in dims):
        fail(f"cannot parse input type {ty!r}; expected dims and one of {', '.join(_DTYPES)}")
    shape = tuple(int(d) for d in dims)
    items = [v for v in values.split(",") if v.strip()]
    try:
        flat = np.array([float(v) for v in items], dtype=np.float64)
    except ValueError:
        fail(f"cannot parse input values {values!r}; expected comma-separated numbers")
    n = int(np.prod(shape))
    if flat.size == 1 and n != 1:
        flat = np.full(n, flat[0])
    if flat.size != n:
        fail(f"input {spec!r}: shape {list(shape)} needs {n} values, got {flat.size}")
    return flat.astype(_DTYPES[el]).reshape(shape)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts, argv = _split_launch(argv)
    nproc, hosts = opts.get("nproc"), {k: v for k, v in opts.items() if k != "nproc"}
    if argv and argv[0].endswith(".py"):
        if hosts or (nproc or 1) > 1:
            return _launch_script(nproc, argv[0], argv[1:], hosts)
        return _run_script(argv[0], argv[1:])
    if opts:
        print("flow-run: error: -n N and the host options run a Python script: "
              "flow-run -n N [--hosts a,b] script.py [args]", file=sys.stderr)  # fmt: skip
        return 2
    parser = argparse.ArgumentParser(prog="flow-run", description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a .vmfb written by flow-compile, or a .py script")
    parser.add_argument("--function", default="main")
    parser.add_argument("--input", action="append", default=[], metavar="X")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--driver", default=None, help="override the target's runtime driver")
    parser.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="FILE.npy",
        help="save result i to the i-th --output file",
    )
    parser.add_argument(
        "--traceback", action="store_true", help="show the Python traceback of internal errors"
    )
    args = parser.parse_args(argv)
    return run_target_tool("flow-run", lambda: _run_module(args), args.traceback)


def _run_module(args) -> int:
    from flow.targets import LoadError, load

    if not os.path.exists(args.module):
        fail(f"module not found: {args.module}")
    if args.module.endswith((".mlir", ".py")):
        fail(f"{args.module} is not a compiled module; compile it with flow-compile first")
    with open(args.module, "rb") as f:
        vmfb = f.read()
    inputs = [parse_input(s) for s in args.input]
    try:
        module = load(vmfb, args.target, driver=args.driver)
    except LoadError as err:
        if err.compiled_for is None:
            raise
        fail(f"{args.module}: {err}: pass --target {err.compiled_for}")
    results = module[args.function](*inputs)
    if len(args.output) > len(results):
        fail(
            f"{len(args.output)} --output files given, but {args.function} returns "
            f"{len(results)} result(s)"
        )
    for i, r in enumerate(results):
        r = np.asarray(r)
        print(f"result[{i}]: {_type_name(r)}")
        print(np.array2string(r, threshold=64))
        if i < len(args.output):
            np.save(args.output[i], r)
    return 0


def _type_name(r: np.ndarray) -> str:
    """IREE-style `2x3xf32`."""
    el = next((k for k, v in _DTYPES.items() if np.dtype(v) == r.dtype), str(r.dtype))
    return "x".join([*map(str, r.shape), el])


_LAUNCH_OPTIONS = {"-n": "nproc", "--nproc": "nproc", "--hosts": "hosts", "--hostfile": "hostfile",
                   "--launcher": "launcher", "--launcher-exec": "launcher_exec"}  # fmt: skip


def _split_launch(argv: list[str]) -> tuple[dict, list[str]]:
    """The launch options in front of a script (``-n N`` / ``--nproc N``, also ``-nN`` and
    ``--opt=value``; ``--hosts``, ``--hostfile``, ``--launcher``, ``--launcher-exec``), and the
    remaining arguments."""
    opts: dict = {}
    while argv:
        head = argv[0]
        name, eq, value = head.partition("=")
        if head.startswith("-n") and head[2:].isdigit():
            name, value, argv = "-n", head[2:], argv[1:]
        elif name in _LAUNCH_OPTIONS and eq:
            argv = argv[1:]
        elif head in _LAUNCH_OPTIONS and len(argv) > 1:
            value, argv = argv[1], argv[2:]
        else:
            break
        key = _LAUNCH_OPTIONS[name]
        if key == "nproc":
            if not value.isdigit() or int(value) < 1:
                print(f"flow-run: error: -n expects a number of processes >= 1, got {value!r}",
                      file=sys.stderr)  # fmt: skip
                sys.exit(2)
            opts[key] = int(value)
        elif key == "hosts":
            opts[key] = tuple(h.strip() for h in value.split(","))
        else:
            opts[key] = value
    return opts, argv


def _launch_script(nproc: int | None, path: str, script_args: list[str], hosts: dict) -> int:
    """Run a script on ``nproc`` ranks under mpiexec, on ``hosts`` (``Hosts`` fields; ``nproc``
    defaults to the hosts' slots); the largest exit code of the ranks."""
    from flow.distributed.launch import Hosts, LauncherNotFoundError, launch

    if not os.path.exists(path):
        print(f"flow-run: error: script not found: {path}", file=sys.stderr)
        return 1
    try:
        where = Hosts(**hosts) if hosts else None
        if nproc is None:
            nproc = sum(n for _, n in where.slots()) if where else 1
        return launch(nproc, path, script_args, prog="flow-run", hosts=where)
    except (LauncherNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"flow-run: error: {err}", file=sys.stderr)
        return 1


def _run_script(path: str, script_args: list[str]) -> int:
    """Run a user script in this process (one rank); its own errors keep their traceback."""
    if not os.path.exists(path):
        print(f"flow-run: error: script not found: {path}", file=sys.stderr)
        return 1
    sys.argv = [path, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    runpy.run_path(path, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
