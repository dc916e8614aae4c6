"""`flow-compile FILE --target T -o out.vmfb`: flow IR to an IREE module.

`--emit flow` stops after parsing and verifying, `--emit linalg` after the
`flow-to-iree-input` pipeline (generic form, as handed to IREE), `--emit vmfb`
(the default) compiles with IREE for the target.

`--rank R` compiles rank R's program of a global program (SBP inference,
partitioning, collectives: `comm` calls on cpu, IREE's native collectives on
cuda and rocm), as `flow.jit` does on each rank. `--cpu-arch arm64` (or
`x86-64`) cross-compiles the cpu target for that architecture instead of this
machine's.
"""

from __future__ import annotations

import argparse
import sys

from ._driver import fail, parse_module_file, run_target_tool


def main(argv: list[str] | None = None) -> int:
    from flow.targets.table import CPU_ARCHS, TARGETS

    parser = argparse.ArgumentParser(prog="flow-compile", description=__doc__.splitlines()[0])
    parser.add_argument("input", help="flow IR file ('-' for stdin)")
    parser.add_argument("--target", default="cpu", help=f"one of: {', '.join(TARGETS)}")
    archs = ["host", *CPU_ARCHS, *(a for arch in CPU_ARCHS.values() for a in arch.aliases)]
    parser.add_argument(
        "--cpu-arch",
        default="host",
        choices=archs,
        help="architecture the cpu target compiles for (default: host, this machine)",
    )
    parser.add_argument(
        "--rank", type=int, default=None, help="compile this rank's program of a global program"
    )
    parser.add_argument("--emit", choices=("flow", "linalg", "vmfb"), default="vmfb")
    parser.add_argument("-o", "--output", default="-", help="output file ('-' for stdout)")
    parser.add_argument(
        "--iree-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra flag passed to the IREE compiler (repeatable)",
    )
    parser.add_argument("--no-cache", action="store_true", help="bypass the compile cache")
    parser.add_argument(
        "--traceback", action="store_true", help="show the Python traceback of internal errors"
    )
    args = parser.parse_args(argv)
    return run_target_tool("flow-compile", lambda: _compile(args), args.traceback)


def _compile(args) -> int:
    from flow.lowering import run_pipeline, to_iree_text
    from flow.targets import compile_mlir, get_target

    # Before any work: an unknown target or architecture fails fast.
    target = get_target(args.target, cpu_arch=args.cpu_arch)
    module = parse_module_file(args.input)
    if args.emit == "flow":
        return _write(args.output, str(module) + "\n")
    if args.rank is not None:
        from flow.compile.per_rank import lower_for_rank

        text, _ = lower_for_rank(module, args.rank, target.name)
    else:
        text = to_iree_text(run_pipeline(module, "flow-to-iree-input", source=args.input))
    if args.emit == "linalg":
        return _write(args.output, text)
    vmfb = compile_mlir(text, target, args.iree_flag, use_cache=not args.no_cache)
    if args.output == "-":
        if sys.stdout.isatty():
            fail("refusing to write a binary module to a terminal; use -o FILE")
        sys.stdout.buffer.write(vmfb)
        return 0
    with open(args.output, "wb") as f:
        f.write(vmfb)
    return 0


def _write(path: str, text: str) -> int:
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
