"""Facts about a compiled module, read from its vmfb: how many dispatches IREE generated.

The count is what compile time scales with (IREE configures, translates and serializes each
dispatch separately) and bounds the launches of one call, so benchmarks report it next to
compile seconds. It is read from the module's VM bytecode through the runtime wheel's
``iree-dump-module`` (the runtime's Python API does not expose executables): in IREE 3.13 a
function launches a dispatch by looking its entry point up by name
(``hal.executable.lookup.function(executable, name)``) and passing the result to
``hal.command_buffer.dispatch``; the distinct names looked up are the entry points.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import tempfile

__all__ = ["dispatch_count"]

_RODATA_REF = re.compile(r"^\s*%r(\d+) = vm\.const\.ref\.rodata (\d+)\b")
_LOOKUP = re.compile(r"vm\.call @hal\.executable\.lookup\.function\(%[rR]\d+, %[rR](\d+)\)")
_LAUNCH = re.compile(r"^\s*vm\.call(\.variadic)? @hal\.command_buffer\.dispatch\b")


def dispatch_count(vmfb: bytes) -> int:
    """The number of dispatch entry points (executable exports) in a compiled module.

    Dispatches that IREE found identical share one entry point and count once, however many
    times (or from however many functions) the module launches them. A module with no
    dispatch (a function that only returns its arguments) has 0.
    """
    if not isinstance(vmfb, (bytes, bytearray, memoryview)):
        raise TypeError(f"dispatch_count expects the vmfb as bytes, got {type(vmfb).__name__}")
    names: set[int] = set()
    launches = 0
    rodata_in: dict[int, int] = {}  # register -> rodata ordinal, within the current function
    for line in _disassemble(bytes(vmfb)).splitlines():
        if line.startswith("vm.func "):
            rodata_in.clear()
        elif match := _RODATA_REF.match(line):
            rodata_in[int(match[1])] = int(match[2])
        elif match := _LOOKUP.search(line):
            register = int(match[1])
            if register not in rodata_in:
                raise ValueError(
                    "unrecognized VM bytecode: an entry point looked up by a name that is not a "
                    f"constant of the same function: {line.strip()}"
                )
            names.add(rodata_in[register])
        elif _LAUNCH.match(line):
            launches += 1
    if launches and not names:
        raise ValueError(
            f"unrecognized VM bytecode: {launches} dispatch launches but no "
            "hal.executable.lookup.function call (expected IREE 3.13's lookup by name)"
        )
    return len(names)


def _disassemble(vmfb: bytes) -> str:
    """The module's VM disassembly, as ``iree-dump-module --output=disassembly`` prints it."""
    tool = _dump_module_tool()
    with tempfile.NamedTemporaryFile(suffix=".vmfb") as file:
        file.write(vmfb)
        file.flush()
        done = subprocess.run(
            [tool, "--output=disassembly", file.name], capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        raise ValueError(f"not an IREE VM module (expected a compiled .vmfb): {detail}")
    return done.stdout


def _dump_module_tool() -> str:
    try:
        spec = importlib.util.find_spec("iree._runtime_libs")
    except ModuleNotFoundError:  # no `iree` package at all
        spec = None
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(spec.submodule_search_locations[0], "iree-dump-module")
        if os.path.exists(path):
            return path
    raise RuntimeError(
        "dispatch_count needs iree-dump-module from the IREE runtime wheel "
        "(pip install iree-base-runtime)"
    )
