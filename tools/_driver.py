"""Shared error reporting for flow's command-line tools.

Users see MLIR-style diagnostics (`file:line:col: error: message`, the source
line and a caret) and an exit code, never a Python traceback, unless they ask
for one with `--traceback`.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable

from xdsl.utils.exceptions import DiagnosticException, MultipleSpansParseError, ParseError


def format_parse_error(err: ParseError) -> str:
    """`file:line:col: error: msg`, then the offending source line(s) with carets."""
    lines = [f"{err.span.get_location()}: error: {err.msg}"]
    lines += err.span.print_with_context(None).splitlines()[1:]
    if isinstance(err, MultipleSpansParseError):
        if err.ref_text:
            lines.append(err.ref_text.rstrip("\n"))
        for span, msg in err.refs:
            lines.append(span.print_with_context(msg).rstrip("\n"))
    return "\n".join(lines)


def format_diagnostic(err: BaseException, where: str, notes: list[str] | None = None) -> str:
    """`where: error: msg`, then the exception's notes (e.g. the IR around a failing op)."""
    lines = [f"{where}: error: {err}"]
    lines += [n.rstrip("\n") for n in getattr(err, "__notes__", ())]
    lines += notes or []
    return "\n".join(lines)


class ToolError(Exception):
    """Bad input a tool reports as `prog: error: message`."""


def fail(message: str):
    raise ToolError(message)


def parse_module_file(path: str):
    """Parse and verify a flow IR file ('-' for stdin); errors carry file:line:col."""
    from flow.dialect.parsing import parse_module

    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        if not os.path.exists(path):
            fail(f"no such file: {path}")
        with open(path, "rb") as f:
            data, name = f.read(), path
    return parse_module(data, name)


def run_reporting_errors(
    prog: str,
    body: Callable[[], None],
    *,
    where: Callable[[], str],
    notes: Callable[[], list[str]] = list,
    traceback: bool = False,
    expected: tuple[type[BaseException], ...] = (),
) -> int:
    """Run `body`; print any error as a diagnostic on stderr and return the exit code.

    `where` names the input for diagnostics without a source position; `notes`
    adds context lines (e.g. the pass that was running); `expected` lists further
    exception types that are the user's errors, not bugs (e.g. compile errors).
    """
    try:
        body()
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except SystemExit as err:  # argparse errors and --help already printed their message
        return err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    except ParseError as err:
        _report(format_parse_error(err), traceback)
        return 1
    except DiagnosticException as err:
        from flow.dialect.parsing import LocatedVerifyException

        if isinstance(err, LocatedVerifyException):  # already `file:line:col: error: ...`
            _report("\n".join([str(err), *notes()]), traceback)
            return 1
        _report(format_diagnostic(err, where(), notes()), traceback)
        return 1
    except RESOURCE_ERRORS as err:  # bad input that exhausted a limit, not a bug
        _report("\n".join([f"{where()}: error: {_resource_message(err)}", *notes()]), traceback)
        return 1
    except (ToolError, ValueError, OSError, *expected) as err:
        _report("\n".join([f"{prog}: error: {err}", *notes()]), traceback)
        return 1
    except Exception as err:  # noqa: BLE001 - a bug; say so without a traceback
        head = f"{prog}: internal error: {type(err).__name__}: {err}"
        hint = [] if traceback else ["(rerun with --traceback for the Python traceback)"]
        _report("\n".join([head, *notes(), *hint]), traceback)
        return 1
    return 0


def run_target_tool(prog: str, body: Callable[[], None], traceback: bool) -> int:
    """`run_reporting_errors` for tools that compile or run modules through `flow.targets`."""
    from flow.targets import CompileError, LoadError, RuntimeUnavailableError, UnknownFunctionError

    expected = (CompileError, RuntimeUnavailableError, LoadError, UnknownFunctionError)
    return run_reporting_errors(
        prog, body, where=lambda: prog, traceback=traceback, expected=expected
    )


RESOURCE_ERRORS = (RecursionError, MemoryError, OverflowError, struct.error)
"""Errors that malformed input (deep nesting, huge or out-of-range values) can cause anywhere."""


def _resource_message(err: BaseException) -> str:
    if isinstance(err, RecursionError):
        return "input nested too deeply to process"
    if isinstance(err, MemoryError):
        return "input too large to process (out of memory)"
    return f"value out of range: {err}"


def _report(message: str, traceback: bool) -> None:
    if traceback:
        import traceback as tb

        tb.print_exc()
    sys.stdout.flush()
    print(message, file=sys.stderr)
