"""`flow.nn.init`: fill tensors in place with the standard initial values for weights.

Every function writes into its tensor under `no_grad` and returns it. Random
ones draw from flow's generators (`flow.manual_seed` makes them reproducible;
each takes an optional `generator=`). Fan-based schemes read fan-in / fan-out
from the weight layout of Linear `(out, in)` and Conv `(out, in / groups, *kernel)`.
"""

from __future__ import annotations

import math
import warnings
from numbers import Real

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.autograd import no_grad
from flow.ops.math import erf
from flow.ops.basic import tensor as _to_tensor
from flow.ops.random import Generator, rand, randn
from flow.core.tensor import Tensor

_LINEAR_GAINS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid")  # fmt: skip


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended scale of weights feeding `nonlinearity` (e.g. sqrt(2) for relu)."""
    if nonlinearity in _LINEAR_GAINS:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, Real) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _check(op: str, tensor) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"init.{op}: expected a flow.Tensor, got {type(tensor).__name__}")
    if tensor.is_traced:
        raise NotImplementedError(f"init.{op}: cannot initialize a tensor traced inside "
                                  "flow.jit; initialize the eager parameters before "
                                  "tracing")  # fmt: skip
    return tensor


def _write(tensor: Tensor, value: Tensor) -> Tensor:
    with no_grad():
        return tensor.copy_(value)


def _float_dtype(op: str, tensor: Tensor) -> _dtypes.dtype:
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"init.{op}: expected a floating-point tensor, got {tensor.dtype!r}")
    return tensor.dtype


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:  # fmt: skip
    """Fill with samples of U(a, b)."""
    t = _check("uniform_", tensor)
    dt = _float_dtype("uniform_", t)
    u = rand(*t.shape, dtype=dt, generator=generator)
    return _write(t, u * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:  # fmt: skip
    """Fill with samples of N(mean, std**2)."""
    t = _check("normal_", tensor)
    dt = _float_dtype("normal_", t)
    return _write(t, randn(*t.shape, dtype=dt, generator=generator) * std + mean)


def _erfinv(y: np.ndarray) -> np.ndarray:
    """Inverse error function on (-1, 1): a polynomial first guess refined by Newton steps."""
    w = -np.log((1.0 - y) * (1.0 + y))
    central = w < 5.0
    wc, wt = w - 2.5, np.sqrt(np.maximum(w, 5.0)) - 3.0
    pc = np.full_like(y, 2.81022636e-08)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):  # fmt: skip
        pc = pc * wc + c
    pt = np.full_like(y, -0.000200214257)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):  # fmt: skip
        pt = pt * wt + c
    x = np.where(central, pc, pt) * y
    for _ in range(2):
        err = erf(_to_tensor(x, dtype=_dtypes.float64)).numpy() - y
        x = x - err / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Generator | None = None) -> Tensor:  # fmt: skip
    """Fill with N(mean, std**2) samples conditioned on lying in [a, b] (inverse-CDF sampling)."""
    t = _check("trunc_normal_", tensor)
    dt = _float_dtype("trunc_normal_", t)
    if not a < b:
        raise ValueError(f"init.trunc_normal_: expected a < b, got a={a}, b={b}")

    def cdf(v: float) -> float:
        return 0.5 * (1.0 + math.erf((v - mean) / (std * math.sqrt(2.0))))

    lo, hi = cdf(a), cdf(b)
    u = rand(*t.shape, dtype=_dtypes.float64, generator=generator).numpy()
    y = np.clip(2.0 * (lo + (hi - lo) * u) - 1.0, -1.0 + 1e-15, 1.0 - 1e-15)
    x = np.clip(mean + std * math.sqrt(2.0) * _erfinv(y), a, b)
    return _write(t, _to_tensor(x.astype(dt.np_dtype)))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with `val`."""
    t = _check("constant_", tensor)
    with no_grad():
        return t.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix (a Linear layer that passes inputs through)."""
    t = _check("eye_", tensor)
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(t, _to_tensor(np.eye(*t.shape, dtype=t.dtype.np_dtype)))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-5-D conv weight with the Dirac delta, so the conv passes its input through."""
    t = _check("dirac_", tensor)
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per_group = t.shape[0] // groups
    if t.shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    w = np.zeros(tuple(t.shape), t.dtype.np_dtype)
    centre = tuple(k // 2 for k in t.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, t.shape[1])):
            w[(g * out_per_group + d, d, *centre)] = 1
    return _write(t, _to_tensor(w))


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out): `size(1)` and `size(0)` times the kernel's size (1 for Linear)."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")  # fmt: skip
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty(op: str, tensor: Tensor) -> bool:
    if tensor.numel() == 0:
        warnings.warn(f"Initializing zero-element tensors is a no-op ({op})", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:  # fmt: skip
    """U(-a, a) with `a = gain * sqrt(6 / (fan_in + fan_out))` (Glorot & Bengio, 2010)."""
    t = _check("xavier_uniform_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:  # fmt: skip
    """N(0, std**2) with `std = gain * sqrt(2 / (fan_in + fan_out))`."""
    t = _check("xavier_normal_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(t, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:  # fmt: skip
    """U(-bound, bound) with `bound = gain * sqrt(3 / fan)` (He et al., 2015).

    `a` is the negative slope of the leaky_relu the weights feed; `mode` picks
    fan_in (preserves forward variance) or fan_out (backward).
    """
    t = _check("kaiming_uniform_", tensor)
    if _empty("kaiming_uniform_", t):
        return t
    fan = _calculate_correct_fan(t, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:  # fmt: skip
    """N(0, std**2) with `std = gain / sqrt(fan)` (He et al., 2015)."""
    t = _check("kaiming_normal_", tensor)
    if _empty("kaiming_normal_", t):
        return t
    fan = _calculate_correct_fan(t, mode)
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0,
                generator: Generator | None = None) -> Tensor:  # fmt: skip
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one, times `gain`."""
    t = _check("orthogonal_", tensor)
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows, cols = t.shape[0], t.numel() // t.shape[0]
    flat = randn(rows, cols, dtype=_dtypes.float64, generator=generator).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    value = (gain * q).reshape(tuple(t.shape)).astype(t.dtype.np_dtype)
    return _write(t, _to_tensor(value))


__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "orthogonal_",
]  # fmt: skip
