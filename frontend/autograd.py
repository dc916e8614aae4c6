"""`flow.autograd`: reverse-mode differentiation (see `flow.core.autograd`)."""

from __future__ import annotations

from flow.core.autograd import backward, grad
from flow.core.function import Function, FunctionCtx

__all__ = ["Function", "FunctionCtx", "backward", "grad"]
