"""Random numbers: generators, and the sampling ops built on the `random_bits` primitive
(primitives/random.py).

flow's generator is counter based: a `Generator` holds a seed and a count of
keys drawn, each random op draws one key (a hash of seed and count) and
`flow.random_bits` hashes the key with each element's position. Eager code
and compiled code therefore draw identical numbers, and a compiled function
takes its keys as arguments, drawn from the generator at every call, so it
draws fresh numbers each time just like the eager code it was traced from.
Floats come from the top bits of the hash (24 for float32, 53 for float64);
normals from the Box-Muller transform of two such uniforms.
"""

from __future__ import annotations

import math
import os
from numbers import Integral, Real

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.dialect.semantics import splitmix64
from flow.ops.basic import (
    abs,
    created,
    full,
    like_args,
    log,
    mul,
    promote,
    reshape,
    shape_arg,
    sqrt,
    to,
    where,
)
from flow.ops.reduction import argsort
from flow.primitives.random import MASK64 as _MASK64
from flow.primitives.random import random_bits
from flow.primitives.registry import bind

DEFAULT_SEED = 67280421310721
"""The seed a fresh generator starts from (PyTorch's default, so a fresh process is reproducible)."""


def _signed64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


# --------------------------------------------------------------------------- generators


class Generator:
    """A counter-based random number generator: a seed plus the number of keys drawn.

    Each random op draws the key `splitmix64(seed, offset)` and advances
    `offset` by one, so the same seed replays the same sequence of ops and
    numbers; `get_state`/`set_state` save and restore the pair.
    """

    def __init__(self, device: str = "cpu"):
        if device != "cpu":
            raise ValueError(f"Generator: expected device 'cpu', got {device!r}")
        self._seed = DEFAULT_SEED
        self._offset = 0
        self._per_rank = False  # see default_generator

    @property
    def device(self) -> str:
        return "cpu"

    def manual_seed(self, seed: int) -> Generator:
        """Restart from `seed` (an int in [-2**63, 2**64); negatives wrap modulo 2**64)."""
        if isinstance(seed, bool) or not isinstance(seed, Integral):
            raise TypeError(f"manual_seed: expected an int seed, got {type(seed).__name__}")
        seed = int(seed)
        if not -(1 << 63) <= seed <= _MASK64:
            raise ValueError(f"manual_seed: seed must be in [-2**63, 2**64), got {seed}")
        self._seed = seed & _MASK64
        self._per_rank = False
        self._offset = 0
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy and return the new seed."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little"))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The state as an int64 tensor `[seed, offset]` (the seed's bits, signed)."""
        return Tensor._eager(np.array([_signed64(self._seed), self._offset], np.int64))

    def set_state(self, state) -> Generator:
        """Restore a state returned by `get_state`."""
        arr = state.numpy() if isinstance(state, Tensor) else state
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"set_state: expected an int64 tensor, got {type(state).__name__}")
        if arr.dtype != np.int64 or arr.shape != (2,) or arr[1] < 0:
            raise ValueError(
                f"set_state: expected the int64 tensor [seed, offset >= 0] that get_state "
                f"returns, got {arr.dtype}{list(arr.shape)}"
            )
        self._seed, self._offset = int(arr[0]) & _MASK64, int(arr[1])
        self._per_rank = False
        return self

    def _next_key(self) -> int:
        key = splitmix64(self._seed, self._offset)
        self._offset += 1
        return key

    def _next_key_array(self) -> np.ndarray:
        """The next key as the int64 array of shape [1] a compiled function takes."""
        return np.array([_signed64(self._next_key())], np.int64)

    def __repr__(self) -> str:
        return f"flow.Generator(seed={self._seed}, offset={self._offset})"


default_generator = Generator()
"""The generator random ops use when none is given."""
default_generator._per_rank = True  # until seeded: local random tensors differ per rank


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (like `torch.manual_seed`)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator non-deterministically and return the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


class _RankStream:
    """The default generator's stream for local tensors on rank `rank` > 0 before any
    `manual_seed`: each key is mixed with the rank, so unseeded local random tensors differ
    between ranks as in OneFlow (where each process seeds itself), while the generator's count
    advances as on every rank (global random tensors stay the same everywhere)."""

    __slots__ = ("generator", "rank")

    def __init__(self, generator: Generator, rank: int):
        self.generator, self.rank = generator, rank

    def _next_key(self) -> int:
        return splitmix64(self.generator._next_key(), self.rank)

    def _next_key_array(self) -> np.ndarray:
        return np.array([_signed64(self._next_key())], np.int64)


def _local_stream(placement) -> Generator | _RankStream:
    """The default generator's stream for a random tensor made local (`placement` None) or
    global: per rank for a local one until the generator is seeded (see `_RankStream`)."""
    if placement is not None or not default_generator._per_rank:
        return default_generator
    trace = current_trace()
    if trace is not None and trace.arg_dists:  # a global program's constants agree on ranks
        return default_generator
    from flow.distributed import env

    rank = env.get_rank()
    return _RankStream(default_generator, rank) if rank else default_generator


def generator_arg(op: str, generator, placement=None) -> Generator | _RankStream:
    """`generator`, checked, or when it is None the default generator (its per-rank stream
    for a tensor made local: `placement` None)."""
    if generator is None:
        return _local_stream(placement)
    if not isinstance(generator, Generator):
        raise op_error(op, f"expected generator to be a flow.Generator, got "
                           f"{type(generator).__name__}", cls=TypeError)  # fmt: skip
    return generator


def _key(generator: Generator) -> Tensor:
    """The key for one random op: drawn now eagerly; an argument filled per call when traced."""
    trace = current_trace()
    if trace is None:
        from flow.distributed.eager_ops import mark_constant

        return mark_constant(Tensor._eager(generator._next_key_array().reshape(())), drawn=True)
    # Compiled functions take keys as tensor<1xi64> arguments (the runtime passes
    # every argument with rank >= 1); the op's key is rank 0.
    return reshape(Tensor._traced(trace.random_key(generator), trace, _dtypes.int64), ())


# --------------------------------------------------------------------------- bit fields


def _bits(generator: Generator, shape: tuple[int, ...], dtype: _dtypes.dtype) -> Tensor:
    return bind(random_bits, _key(generator), shape=shape, dtype=dtype)


def _int_const(x: Tensor, value: int) -> Tensor:
    return full(x.shape, value, x.dtype)


def _field(z: Tensor, lo: int, width: int) -> Tensor:
    """Bits `[lo, lo + width)` of `z`, as a non-negative integer of z's dtype.

    Shifts are written with `and` and exact division (clearing the low bits
    first makes truncating division a shift), as the primitives have no shifts.
    """
    if lo > 0:
        z = bind(P.and_, z, _int_const(z, -(1 << lo)))
        z = bind(P.div, z, _int_const(z, 1 << lo))
    if lo > 0 or lo + width < 8 * z.dtype.itemsize:
        z = bind(P.and_, z, _int_const(z, (1 << width) - 1))
    return z


_MANTISSA = {_dtypes.float16: 11, _dtypes.bfloat16: 8, _dtypes.float32: 24, _dtypes.float64: 53}


def _scaled(u: Tensor, bits: int, dtype: _dtypes.dtype) -> Tensor:
    """`u * 2**-bits` in a float type that holds `u` exactly, then `dtype`."""
    wide = _dtypes.float64 if bits > 24 else _dtypes.float32
    return to(mul(to(u, wide), 2.0**-bits), dtype)


def _uniform(shape: tuple[int, ...], dtype: _dtypes.dtype, generator: Generator) -> Tensor:
    """Uniform floats in [0, 1): the top mantissa-many bits of the hash, times 2**-bits."""
    bits = _MANTISSA[dtype]
    if bits <= 24:
        return _scaled(_field(_bits(generator, shape, _dtypes.int32), 32 - bits, bits), bits, dtype)
    return _scaled(_field(_bits(generator, shape, _dtypes.int64), 64 - bits, bits), bits, dtype)


def _normal(shape: tuple[int, ...], dtype: _dtypes.dtype, generator: Generator) -> Tensor:
    """Standard normals by Box-Muller: `sqrt(-2 log(1 - u1)) * cos(2 pi u2)`.

    Up to float32 both uniforms (24 bits each) come from one 64-bit hash, so one
    key is drawn; float64 needs 2 x 53 bits and draws two keys.
    """
    if dtype is _dtypes.float64:
        u1, u2 = _uniform(shape, dtype, generator), _uniform(shape, dtype, generator)
    else:
        z = _bits(generator, shape, _dtypes.int64)
        f32 = _dtypes.float32
        u1, u2 = _scaled(_field(z, 40, 24), 24, f32), _scaled(_field(z, 8, 24), 24, f32)
    radius = sqrt(mul(log(1 - u1), -2.0))
    return to(radius * _cos_2pi(u2), dtype)


_COS_TAYLOR = [(-1) ** k / math.factorial(2 * k) for k in range(11)]


def _cos_2pi(u: Tensor) -> Tensor:
    """`cos(2 pi u)` for u in [0, 1); float64 by an exactly reduced Taylor series.

    The compiler's float64 `cos` needs a libm the CPU target does not link, and
    reducing the angle in turns is exact: with w = |u - 1/2| and x = 2 pi
    min(w, 1/2 - w) in [0, pi/2], cos(2 pi u) = -+cos(x), where 11 terms of the
    series are accurate to float64 rounding.
    """
    if u.dtype is not _dtypes.float64:
        return bind(P.cos, mul(u, 2 * math.pi))
    w = abs(u - 0.5)
    far = w > 0.25
    x = mul(where(far, 0.5 - w, w), 2 * math.pi)
    y = x * x
    c = full(tuple(u.shape), _COS_TAYLOR[-1], u.dtype)
    for coef in reversed(_COS_TAYLOR[:-1]):
        c = c * y + coef
    return where(far, c, -c)


def keep_mask(shape: tuple[int, ...], p: Tensor | float, generator: Generator) -> Tensor:
    """A bool tensor, True with probability `p` (a float or a broadcastable float tensor)."""
    wide = _dtypes.float64 if isinstance(p, Tensor) and p.dtype is _dtypes.float64 else None
    u = _uniform(shape, wide or _dtypes.float32, generator)
    return u < (to(p, u.dtype) if isinstance(p, Tensor) else p)


# --------------------------------------------------------------------------- public ops


def _float_dtype(op: str, dtype) -> _dtypes.dtype:
    dt = _dtypes.DEFAULT_FLOAT if dtype is None else _dtypes.as_dtype(dtype)
    if not dt.is_floating_point:
        raise op_error(op, f"expected a floating-point dtype, got {dt!r}", cls=TypeError)
    return dt


def rand(*size, dtype=None, generator: Generator | None = None, device=None, placement=None,
         sbp=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:  # fmt: skip
    """Uniform samples from [0, 1) of shape `size` (global with `placement` and `sbp`: the
    global value is drawn on every rank, so it does not depend on the SBP or world size)."""
    shape = shape_arg("rand", size)
    gen = generator_arg("rand", generator, placement)
    out = _uniform(shape, _float_dtype("rand", dtype), gen)
    return created("rand", out, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def randn(*size, dtype=None, generator: Generator | None = None, device=None, placement=None,
          sbp=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:  # fmt: skip
    """Standard normal samples of shape `size` (global with `placement` and `sbp`)."""
    shape = shape_arg("randn", size)
    gen = generator_arg("randn", generator, placement)
    out = _normal(shape, _float_dtype("randn", dtype), gen)
    return created("randn", out, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def rand_like(input: Tensor, *, dtype=None, generator: Generator | None = None, device=None,
              placement=None, sbp=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """`rand` of `input`'s shape, and its dtype and device (or placement and SBP) unless given."""
    return _float_like("rand_like", _uniform, input, dtype, generator, device, placement, sbp,
                       requires_grad)  # fmt: skip


def randn_like(input: Tensor, *, dtype=None, generator: Generator | None = None, device=None,
               placement=None, sbp=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """`randn` of `input`'s shape, and its dtype and device (or placement and SBP) unless given."""
    return _float_like("randn_like", _normal, input, dtype, generator, device, placement, sbp,
                       requires_grad)  # fmt: skip


def _float_like(op: str, sample, input, dtype, generator, device, placement, sbp,
                requires_grad: bool) -> Tensor:  # fmt: skip
    """`sample(shape, dtype, generator)` of `input`'s shape, with its `like_args` defaults."""
    x, dt, where = like_args(input, dtype, device, placement, sbp)
    gen = generator_arg(op, generator, where["placement"])
    out = sample(tuple(x.shape), _float_dtype(op, dt), gen)
    return created(op, out, requires_grad=requires_grad, **where)


def _check_int(op: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise op_error(op, f"expected {name} to be an int, got {value!r}", cls=TypeError)
    return int(value)


def _randint(op, low, high, shape, dtype, generator) -> Tensor:
    low, high = _check_int(op, "low", low), _check_int(op, "high", high)
    if low >= high:
        raise op_error(op, f"expected low < high, got low={low} and high={high}")
    if high - low >= 1 << 63:
        raise op_error(op, f"the range high - low = {high - low} must be below 2**63")
    if dtype.kind == 1:
        info = np.iinfo(dtype.np_dtype)
        if low < info.min or high - 1 > info.max:
            raise op_error(op, f"[{low}, {high}) does not fit in {dtype!r}")
    u = _field(_bits(generator, shape, _dtypes.int64), 0, 63)
    out = bind(P.rem, u, _int_const(u, high - low))
    if low:
        out = bind(P.add, out, _int_const(out, low))
    return to(out, dtype)


def _randint_args(op, low, high, size):
    """PyTorch's overloads: (high, size) and (low, high, size)."""
    if size is None:
        if high is None or isinstance(high, (tuple, list)):
            low, high, size = 0, low, high
    if high is None or size is None:
        raise op_error(op, "expected (high, size) or (low, high, size) arguments", cls=TypeError)
    return low, high, size


def randint(low=0, high=None, size=None, *, dtype=None, generator: Generator | None = None,
            device=None, placement=None, sbp=None, requires_grad: bool = False,
            pin_memory: bool = False) -> Tensor:  # fmt: skip
    """Uniform integers in [low, high) of shape `size`: `randint(high, size)` or
    `randint(low, high, size)`."""
    low, high, size = _randint_args("randint", low, high, size)
    shape = shape_arg("randint", tuple(size) if isinstance(size, (tuple, list)) else (size,))
    dt = _dtypes.DEFAULT_INT if dtype is None else _dtypes.as_dtype(dtype)
    out = _randint("randint", low, high, shape, dt, generator_arg("randint", generator, placement))
    return created("randint", out, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def randint_like(input: Tensor, low=0, high=None, *, dtype=None,
                 generator: Generator | None = None, device=None, placement=None, sbp=None,
                 requires_grad: bool = False) -> Tensor:  # fmt: skip
    """`randint` with the shape (and default dtype, device or placement and SBP) of `input`:
    `(input, high)` or `(input, low, high)`."""
    if high is None:
        low, high = 0, low
    x, dt, where = like_args(input, dtype, device, placement, sbp)
    gen = generator_arg("randint_like", generator, where["placement"])
    out = _randint("randint_like", low, high, tuple(x.shape), dt, gen)
    return created("randint_like", out, requires_grad=requires_grad, **where)


def randperm(n: int, *, generator: Generator | None = None, dtype=None, device=None,
             placement=None, sbp=None, requires_grad: bool = False,
             pin_memory: bool = False) -> Tensor:  # fmt: skip
    """A random permutation of `0 .. n-1` (int64 unless `dtype` says otherwise): the order
    that sorts one 63-bit hash per position."""
    n = _check_int("randperm", "n", n)
    if n < 0:
        raise op_error("randperm", f"expected n >= 0, got {n}")
    dt = _dtypes.int64 if dtype is None else _dtypes.as_dtype(dtype)
    gen = generator_arg("randperm", generator, placement)
    keys = _field(_bits(gen, (n,), _dtypes.int64), 0, 63)
    out = to(argsort(keys), dt)
    return created("randperm", out, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def normal(mean=0.0, std=1.0, size=None, *, generator: Generator | None = None, dtype=None,
           device=None, placement=None, sbp=None,
           requires_grad: bool = False) -> Tensor:  # fmt: skip
    """Normal samples `mean + std * randn`: tensors broadcast, or two numbers and a `size`."""
    out = _normal_samples(mean, std, size, generator, dtype, placement)
    return created("normal", out, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def _normal_samples(mean, std, size, generator, dtype, placement=None) -> Tensor:
    gen = generator_arg("normal", generator, placement)
    for name, v in (("mean", mean), ("std", std)):
        if not isinstance(v, (Tensor, Real)):
            raise op_error("normal", f"expected {name} to be a tensor or a number, got "
                                     f"{type(v).__name__}", cls=TypeError)  # fmt: skip
    if isinstance(std, Real) and not isinstance(std, Tensor) and std < 0:
        raise op_error("normal", f"expected std >= 0, got {std}")
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise op_error("normal", "needs a size when mean and std are numbers", cls=TypeError)
        shape = shape_arg("normal", tuple(size) if isinstance(size, (tuple, list)) else (size,))
        return _normal(shape, _float_dtype("normal", dtype), gen) * std + mean
    if size is not None:
        raise op_error("normal", "takes no size when mean or std is a tensor", cls=TypeError)
    m, s = promote("normal", mean, std, float_result=True)
    if dtype is not None:
        m, s = to(m, _float_dtype("normal", dtype)), to(s, _float_dtype("normal", dtype))
    return _normal(tuple(m.shape), m.dtype, gen) * s + m


def bernoulli(input: Tensor, p: float | None = None, *,
              generator: Generator | None = None) -> Tensor:  # fmt: skip
    """0/1 samples of `input`'s shape and dtype, 1 with probability `input` (or `p`)."""
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        got = input.dtype if isinstance(input, Tensor) else type(input).__name__
        raise op_error("bernoulli", f"expected a floating-point tensor of probabilities, "
                                    f"got {got!r}", cls=TypeError)  # fmt: skip
    if p is not None and not 0 <= p <= 1:
        raise op_error("bernoulli", f"expected p in [0, 1], got {p}")
    probs = input if p is None else float(p)
    gen = generator_arg("bernoulli", generator, input.placement if input.is_global else None)
    mask = keep_mask(tuple(input.shape), probs, gen)
    return to(mask, input.dtype)


TENSOR_METHODS: dict = {"bernoulli": bernoulli}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__: list[str] = [
    "Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
    "set_rng_state", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
    "randperm", "normal", "bernoulli",
]  # fmt: skip
