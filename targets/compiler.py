"""Compile MLIR text to an IREE VM flatbuffer, in-process, with diagnostics in the exception.

Input is what our lowering hands over: ``func``/``arith``/``math``/``tensor``/``linalg``
(+ ``scf``) in generic form. The IREE embedding API (``iree.compiler.api``) compiles without a
subprocess; its Python wrapper has no hook for diagnostics, so the C API's diagnostic callback
is bound here with ctypes and every message (with its location) goes into :class:`CompileError`.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import cache, events
from .table import DEFAULT_TARGET, Target, get_target
from .vulkan import check_supported

__all__ = ["CompileError", "Diagnostic", "compile_mlir", "compile_flags"]

# Buffer name that diagnostics use as the file part of their locations.
_BUFFER_NAME = "input.mlir"
# Long "see current operation" IR dumps are clipped in the exception message (the full text
# stays in ``CompileError.diagnostics``); a failing 5000-op module would otherwise print it all.
_MAX_DIAGNOSTIC_LINES = 40

# From iree/compiler/embedding_api.h: enum iree_compiler_diagnostic_severity_t.
_SEVERITY = {0: "note", 1: "warning", 2: "error", 3: "remark"}
# The message is not NUL-terminated: take it as a pointer and read exactly `size` bytes.
_DIAG_CALLBACK = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p
)


if TYPE_CHECKING:
    from iree.compiler.api import Session

# `iree.compiler.api` (the compiler library) is imported on the first compile, not with this
# module: a program whose compiled module is in the cache never needs it.


@lru_cache(maxsize=1)
def _enable_callback_diagnostics() -> Any:
    from iree.compiler.api import ctypes_dl as _dl

    fn = _dl._dylib.ireeCompilerInvocationEnableCallbackDiagnostics
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, _DIAG_CALLBACK, ctypes.c_void_p]
    return fn


@dataclass(frozen=True)
class Diagnostic:
    """One compiler diagnostic: severity ("error", "warning", "note", "remark") and its text,
    which starts with the location (``input.mlir:LINE:COL: ...``) and includes attached notes."""

    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


class CompileError(RuntimeError):
    """IREE rejected the input or the flags; the message carries the target, the flags, every
    diagnostic, where the input IR was saved, and a command that reproduces the failure."""

    def __init__(
        self,
        message: str,
        *,
        target: str,
        flags: Sequence[str],
        diagnostics: Sequence[Diagnostic] = (),
        ir_path: str | None = None,
        repro: str | None = None,
        stage: str = "compile",
    ) -> None:
        super().__init__(message)
        self.stage = stage  # "flags", "parse", "compile" or "api": where IREE failed
        self.target = target
        self.flags = tuple(flags)
        self.diagnostics = tuple(diagnostics)
        self.ir_path = ir_path
        self.repro = repro


def compile_flags(
    target: str | Target = DEFAULT_TARGET, extra_flags: Sequence[str] = ()
) -> list[str]:
    """The full IREE flag list for a target (its optional flags included); ``extra_flags``
    come last, so they override."""
    tgt = get_target(target)
    return [*tgt.device_flags, *tgt.optional_flags, *extra_flags]


def compile_mlir(
    source: str,
    target: str | Target = DEFAULT_TARGET,
    extra_flags: Sequence[str] = (),
    *,
    use_cache: bool = True,
    in_child: bool = False,
) -> bytes:
    """Compile MLIR text for ``target`` and return the VM flatbuffer (``.vmfb`` bytes).

    Results are cached in-process and on disk (see :mod:`flow.targets.cache`) unless
    ``use_cache`` is false. When the compiler rejects a program with the target's optional
    flags, it is compiled again without them (and cached under the same key).
    Raises :class:`CompileError` on any compiler failure,
    :class:`~flow.targets.vulkan.UnsupportedError` for a program the target cannot run (e.g.
    float64 on a Vulkan architecture without it) and
    :class:`~flow.targets.table.UnknownTargetError` for an unknown target name.
    ``in_child`` runs IREE as a child process (``iree-compile``) instead of in this one: what
    a compile in a background thread uses, since a child can be stopped when the interpreter
    exits (an in-process compile cannot), and it shares no state with the caller.
    """
    tgt = get_target(target)
    rec = events.ACTIVE
    if rec is None:
        return _compile(source, tgt, extra_flags, use_cache, in_child, {})
    info = {"target": tgt.name, "ir_bytes": len(source), "in_child": in_child}
    with rec.span("iree.compile", "compile", info):
        vmfb = _compile(source, tgt, extra_flags, use_cache, in_child, info)
    info["vmfb_bytes"] = len(vmfb)
    return vmfb


def _compile(source: str, tgt: Target, extra_flags: Sequence[str], use_cache: bool,
             in_child: bool, info: dict) -> bytes:  # fmt: skip
    """`compile_mlir`'s work; `info` learns whether the compile cache had the module."""
    if isinstance(extra_flags, str):
        extra_flags = (extra_flags,)
    flags = compile_flags(tgt, extra_flags)
    check_supported(tgt, flags, source)  # what the target cannot run, before IREE sees it
    key = cache.cache_key(source, tgt.name, flags) if use_cache else None
    if key is not None:
        hit = cache.lookup(key)
        info["cache"] = "miss" if hit is None else "hit"
        if hit is not None:
            return hit
    run = _compile_in_child if in_child else _compile_uncached
    try:
        vmfb = run(source, tgt, flags)
    except CompileError as err:
        plain = [f for f in flags if f not in tgt.optional_flags]
        if err.stage != "compile" or len(plain) == len(flags):
            raise
        if err.ir_path:  # not a failure to report: the retry decides
            os.unlink(err.ir_path)
        vmfb = run(source, tgt, plain)
    if key is not None:
        cache.store(key, vmfb)
    return vmfb


def _compile_uncached(source: str, target: Target, flags: list[str]) -> bytes:
    from iree.compiler.api import Output, Session, Source

    diagnostics: list[Diagnostic] = []

    @_DIAG_CALLBACK
    def on_diagnostic(severity: int, message: int, size: int, _user_data: int | None) -> None:
        text = ctypes.string_at(message, size).decode("utf-8", errors="replace")
        diagnostics.append(Diagnostic(_SEVERITY.get(severity, str(severity)), text))

    session = Session()
    try:
        problem = _set_flags(session, flags)
        if problem is not None:
            diagnostic = Diagnostic("error", problem)
            raise _error(
                "invalid compiler flags", source, target, flags, [diagnostic], stage="flags"
            )
        invocation = session.invocation()
        # The callback must outlive every call that can emit a diagnostic: keep it referenced
        # until the invocation is closed below.
        _enable_callback_diagnostics()(invocation._inv_p, 0, on_diagnostic, None)
        try:
            src = Source.wrap_buffer(session, source.encode("utf-8"), buffer_name=_BUFFER_NAME)
            if not invocation.parse_source(src):
                raise _error(
                    "failed to parse the input IR", source, target, flags, diagnostics, "parse"
                )
            if not invocation.execute():
                raise _error("compilation failed", source, target, flags, diagnostics)
            output = Output.open_membuffer()
            try:
                invocation.output_vm_bytecode(output)
                vmfb = bytes(output.map_memory())
            finally:
                output.close()
        except ValueError as err:  # errors returned (not diagnosed) by the C API
            msg = f"compiler API error: {err}"
            raise _error(msg, source, target, flags, diagnostics, "api") from None
        finally:
            invocation.close()
    finally:
        session.close()
    return vmfb


# The compiles running in child processes, stopped at interpreter exit: nobody waits for them.
_CHILDREN: set[subprocess.Popen] = set()
_CHILDREN_LOCK = threading.Lock()
_stopped = False  # set at exit: no child starts after it
_DIAGNOSTIC_START = re.compile(r"^\S+:\d+:\d+: (error|warning|note|remark):")


def _compile_in_child(source: str, target: Target, flags: list[str]) -> bytes:
    """`_compile_uncached` in an `iree-compile` child process; its diagnostics are read from
    its stderr (one per `FILE:LINE:COL: severity:` line, with the lines that follow it)."""
    with tempfile.TemporaryDirectory(prefix="flow-compile-") as tmp:
        src, out = os.path.join(tmp, _BUFFER_NAME), os.path.join(tmp, "out.vmfb")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        with _CHILDREN_LOCK:
            if _stopped:
                raise CompileError("not compiled: the interpreter is exiting", target=target.name,
                                   flags=tuple(flags), stage="api")  # fmt: skip
            proc = subprocess.Popen([_iree_compile(), _BUFFER_NAME, *flags, "-o", out],
                                    cwd=tmp, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)  # fmt: skip
            _CHILDREN.add(proc)
        try:
            _, err = proc.communicate()
        finally:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)
        diagnostics: list[Diagnostic] = []
        for line in err.decode("utf-8", errors="replace").splitlines():
            m = _DIAGNOSTIC_START.match(line)
            if m:  # as the in-process callback words it: the location, then the message
                where = line[: m.start(1) - 2]
                diagnostics.append(Diagnostic(m.group(1), f"{where}:{line[m.end():]}"))
            elif diagnostics:
                last = diagnostics[-1]
                diagnostics[-1] = Diagnostic(last.severity, f"{last.message}\n{line}")
            elif line.strip():
                diagnostics.append(Diagnostic("error", line))
        if proc.returncode != 0 or not os.path.exists(out):
            why = f"compilation failed (iree-compile exited with {proc.returncode})"
            raise _error(why, source, target, flags, diagnostics)
        with open(out, "rb") as f:
            return f.read()


@lru_cache(maxsize=1)
def _iree_compile() -> str:
    """The `iree-compile` binary of the installed compiler package (not its Python wrapper,
    which takes 0.3 s to start)."""
    import importlib.util

    spec = importlib.util.find_spec("iree.compiler")
    for folder in spec.submodule_search_locations or () if spec else ():
        path = os.path.join(folder, "_mlir_libs", "iree-compile")
        if os.access(path, os.X_OK):
            return path
    raise CompileError("IREE's iree-compile binary was not found in the iree-base-compiler "
                       "package (pip install iree-base-compiler)", target="", flags=(),
                       stage="api")  # fmt: skip


@atexit.register
def stop_children() -> None:
    """Kill the compiles running in child processes, and start no more (at exit)."""
    global _stopped
    with _CHILDREN_LOCK:
        _stopped = True
        for proc in _CHILDREN:
            proc.kill()


def _set_flags(session: Session, flags: list[str]) -> str | None:
    """Set the session's flags; return the full error text if IREE rejects them.

    LLVM prints the useful half of a flag error ("'maybe' is invalid value for boolean
    argument") to stderr rather than into the returned error, so stderr is captured while the
    flags are parsed and replayed unchanged when parsing succeeds.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, ValueError, OSError):
        saved = None
    if saved is None:  # no usable fd 2: set the flags without capturing
        try:
            session.set_flags(*flags)
            return None
        except ValueError as err:
            return str(err)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            session.set_flags(*flags)
            message = None
        except ValueError as err:
            message = str(err)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        printed = captured.read().decode("utf-8", errors="replace")
    if message is None:
        if printed:
            sys.stderr.write(printed)
        return None
    printed = printed.strip()
    return f"{message}\n  {printed}" if printed else message


def _clip(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= _MAX_DIAGNOSTIC_LINES:
        return text
    rest = len(lines) - _MAX_DIAGNOSTIC_LINES
    kept = "\n".join(lines[:_MAX_DIAGNOSTIC_LINES])
    return f"{kept}\n... ({rest} more lines; full text in CompileError.diagnostics)"


def _save_ir(source: str, target: Target) -> str | None:
    try:
        fd, path = tempfile.mkstemp(prefix=f"flow-{target.name}-failed-", suffix=".mlir")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        return path
    except OSError:
        return None


def _error(
    summary: str,
    source: str,
    target: Target,
    flags: list[str],
    diagnostics: list[Diagnostic],
    stage: str = "compile",
) -> CompileError:
    ir_path = _save_ir(source, target)
    repro = shlex.join(["iree-compile", ir_path or _BUFFER_NAME, *flags, "-o", "out.vmfb"])
    body = "\n".join(_clip(str(d)) for d in diagnostics) or "(the compiler emitted no diagnostics)"
    lines = [
        f"IREE {summary} for target {target.name!r}",
        f"flags: {shlex.join(flags)}",
        "diagnostics:",
        body,
        f"input IR saved to: {ir_path}" if ir_path else "input IR could not be saved",
        f"repro: {repro}",
    ]
    return CompileError(
        "\n".join(lines),
        target=target.name,
        flags=flags,
        diagnostics=diagnostics,
        ir_path=ir_path,
        repro=repro,
        stage=stage,
    )
