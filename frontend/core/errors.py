"""Errors that name the op, what is wrong, and the user's line of source.

Every frontend error goes through `op_error`; `user_location` finds the innermost frame outside
flow's frontend, which is also the location traced ops carry into the IR.
"""

from __future__ import annotations

import os
import sys

FRONTEND_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # frontend/


def user_frame():
    """The innermost stack frame outside flow's own frontend (the user's code)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(FRONTEND_DIR):
        f = f.f_back
    return f


def user_location() -> tuple[str, int, int] | None:
    f = user_frame()
    if f is None:
        return None
    return (f.f_code.co_filename, f.f_lineno, 1)


def describe_location(loc: tuple[str, int, int] | None) -> str:
    """`file:line: source text` for error messages."""
    if loc is None:
        return "<unknown location>"
    import linecache

    filename, line, _ = loc
    text = linecache.getline(filename, line).strip()
    return f"{filename}:{line}" + (f": {text}" if text else "")


def op_error(op_name: str, message: str, loc=None, cls: type[Exception] = ValueError) -> Exception:
    """An exception naming the op, what is wrong, and the user's source line."""
    if loc is None:
        loc = user_location()
    return cls(f"{op_name}: {message}\n  at {describe_location(loc)}")


def strip_op_prefix(msg: str) -> str:
    first = msg.strip().splitlines()[0] if msg.strip() else msg
    if first.startswith("'flow.") and "' op " in first:
        return first.split("' op ", 1)[1]
    return first
