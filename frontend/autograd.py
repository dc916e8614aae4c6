"""`flow.autograd`: reverse-mode differentiation (see `flow._autograd`)."""

from __future__ import annotations

from ._autograd import Function, FunctionCtx, backward, grad

__all__ = ["Function", "FunctionCtx", "backward", "grad"]
