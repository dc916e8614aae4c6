"""The random primitive: `random_bits` (dialect/random.py, lowered by lowering/_random.py).

`random_bits(key)` hashes a rank-0 int64 key with each element's linear position
(splitmix64), so eager and compiled code draw identical bits. It has no VJP: its only
operand is a key. Generators and the sampling ops built on it are in ops/random.py.
"""

from __future__ import annotations

import math

import numpy as np

from flow.core import dtypes as _dtypes
from flow.dialect.semantics import SPLITMIX64_FINAL_SHIFT, SPLITMIX64_GAMMA, SPLITMIX64_ROUNDS
from flow.primitives.registry import primitive

MASK64 = (1 << 64) - 1


def splitmix64_array(key: int, n: int) -> np.ndarray:
    """`flow.random_bits`' hash of `key` with linear indices `0..n-1`, as uint64 (numpy)."""
    z = np.arange(1, n + 1, dtype=np.uint64)
    z *= np.uint64(SPLITMIX64_GAMMA)
    z += np.uint64(key & MASK64)
    for shift, multiplier in SPLITMIX64_ROUNDS:
        z ^= z >> np.uint64(shift)
        z *= np.uint64(multiplier)
    z ^= z >> np.uint64(SPLITMIX64_FINAL_SHIFT)
    return z


@primitive(
    "random_bits",
    "RandomBitsOp",
    to_ir=lambda p: {"shape": tuple(p["shape"]), "element_type": p["dtype"].ir_type},
)
def random_bits(key, *, shape, dtype):
    z = splitmix64_array(int(np.asarray(key, np.int64)), math.prod(shape))
    if dtype is _dtypes.int32:
        z = (z >> np.uint64(32)).astype(np.uint32)
    return z.view(dtype.np_dtype).reshape(shape)


__all__ = ["random_bits"]
