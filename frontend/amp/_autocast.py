"""`flow.autocast`: run the matrix products in a low float type, the numerically sensitive
ops in float32 (PyTorch's CPU autocast op lists, applied to flow's primitives).

Entering the context installs an operand hook in the primitive registry (`set_args_hook`), so
eager mode, `flow.jit` and `nn.Graph` traces see the same casts:

* ``matmul`` and ``conv`` (so ``mm``, ``bmm``, ``linear``, ``conv*d``, attention) cast their
  float operands to the autocast dtype; their results are of that dtype;
* ``reduce`` (sum, mean, max, ...), ``exp``, ``log`` and the other transcendental functions
  (so softmax, log_softmax, the norms and the losses) cast low-precision float operands to
  float32; their results are float32.

Casts are primitives with a VJP, so gradients reach float32 parameters as float32. The state
(enabled, dtype) is part of a compiled program's signature.
"""

from __future__ import annotations

import contextlib
import functools

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.primitives import registry

__all__ = ["autocast", "autocast_key", "get_autocast_dtype", "is_autocast_enabled"]

# primitive (or composite) name -> "low" (operands to the autocast dtype) or "f32" (low
# floats to float32); a composite's primitives see the operands it was given
CAST_POLICY: dict[str, str] = {
    "matmul": "low",
    "matmul_t": "low",
    "conv": "low",
    **dict.fromkeys(("reduce", "exp", "log", "log1p", "expm1", "log2", "log10", "rsqrt", "sqrt",
                     "pow", "erf", "tan", "sinh", "cosh", "asin", "acos", "softmax",
                     "softmax_grad", "log_softmax", "log_softmax_grad", "nll", "nll_grad"),
                    "f32"),
}  # fmt: skip

_LOW = (_dtypes.float16, _dtypes.bfloat16)
_DEVICE_TYPES = ("cpu", "cuda")
_STACK: list[tuple[bool, _dtypes.dtype]] = []  # innermost last


def is_autocast_enabled() -> bool:
    """Whether ops run under an enabled `flow.autocast` now."""
    return bool(_STACK) and _STACK[-1][0]


def get_autocast_dtype() -> _dtypes.dtype | None:
    """The low dtype of the enabled `flow.autocast`, None outside one."""
    return _STACK[-1][1] if is_autocast_enabled() else None


def autocast_key() -> tuple:
    """Signature entries of the autocast state a program traced now depends on (none
    outside autocast); `describe` shows it as `'autocast(bfloat16)'`."""
    if not is_autocast_enabled():
        return ()
    return (("S", "autocast", f"autocast({_STACK[-1][1].name})"),)


def _cast(x, dt):
    from flow.primitives.elementwise import cast

    return registry.bind(cast, x, dtype=dt)


def _hook(prim, args: tuple) -> tuple:
    policy = CAST_POLICY.get(prim.name)
    if policy is None:
        return args
    low = _STACK[-1][1]
    out = []
    for x in args:
        if isinstance(x, Tensor) and x.dtype.is_floating_point:
            if policy == "low" and x.dtype is not low:
                x = _cast(x, low)
            elif policy == "f32" and x.dtype in _LOW:
                x = _cast(x, _dtypes.float32)
        out.append(x)
    return tuple(out)


def _sync_hook() -> None:
    registry.set_args_hook(_hook if is_autocast_enabled() else None)


class autocast(contextlib.ContextDecorator):  # noqa: N801  (OneFlow / PyTorch spelling)
    """``flow.autocast(device_type="cpu", dtype=flow.bfloat16, enabled=True)``: a context
    manager (or decorator) under which matmul/linear/conv run in ``dtype`` and reductions,
    softmax, norms and losses in float32. Parameters stay float32; nesting works, and
    ``enabled=False`` turns autocast off inside an enabled region."""

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):  # fmt: skip
        if not isinstance(device_type, str) or device_type.split(":")[0] not in _DEVICE_TYPES:
            raise ValueError(f"flow.autocast: expected device_type 'cpu' or 'cuda', got "
                             f"{device_type!r}")  # fmt: skip
        self.device_type = device_type.split(":")[0]
        if dtype is None:
            dtype = _dtypes.bfloat16 if self.device_type == "cpu" else _dtypes.float16
        dt = _dtypes.as_dtype(dtype)
        if dt not in _LOW:
            raise ValueError(f"flow.autocast: expected dtype flow.bfloat16 or flow.float16, "
                             f"got {dt!r}")  # fmt: skip
        self.dtype = dt
        self.enabled = bool(enabled)

    def __enter__(self):
        _STACK.append((self.enabled, self.dtype))
        _sync_hook()
        return self

    def __exit__(self, *exc) -> None:
        _STACK.pop()
        _sync_hook()

    def __call__(self, fn):
        wrapped = super().__call__(fn)
        return functools.wraps(fn)(wrapped)
