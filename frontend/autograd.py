"""`flow.autograd`: reverse-mode differentiation (see `flow.core.autograd`)."""

from __future__ import annotations

from flow.core.autograd import Function, FunctionCtx, backward, grad

__all__ = ["Function", "FunctionCtx", "backward", "grad"]
