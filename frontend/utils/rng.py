"""Where the data pipeline's random numbers come from (`flow.utils.data` and `flow.transforms`).

Samplers, `random_split`, worker seeds and random transforms all accept the
same `generator` argument: a `numpy.random.Generator` (used as is), an int
seed (turned into one), a `flow.Generator`, or None for flow's default
generator, so `flow.manual_seed` makes shuffling and augmentation
reproducible as `torch.manual_seed` does. A flow generator is not drawn from
per sample (its ops are too costly for that): a numpy generator is seeded
from it once and reused until the flow generator's state changes (it is
reseeded or used elsewhere), when a fresh one is derived.
"""

from __future__ import annotations

import weakref
from numbers import Integral
from typing import Any

import numpy as np

from flow.ops import random as random_ops

SEED_BOUND = 1 << 63
"""Seeds drawn here lie in [0, 2**63)."""

_derived: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def as_generator(generator: Any, owner: str) -> Any:
    """Validate a `generator` argument; an int seed becomes a `numpy.random.Generator`."""
    if generator is None or isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, Integral) and not isinstance(generator, bool):
        return np.random.default_rng(int(generator))
    if isinstance(generator, random_ops.Generator):
        return generator
    raise TypeError(
        f"{owner}: expected generator to be None, an int seed, a numpy.random.Generator "
        f"or a flow.Generator, got {type(generator).__name__}"
    )


def _state(generator: Any) -> tuple[int, ...]:
    return tuple(generator.get_state().numpy().tolist())


def _derive(generator: Any) -> np.random.Generator:
    """A numpy generator seeded from `generator` (a flow generator) and cached against its state."""
    try:
        cached = _derived.get(generator)
    except TypeError:  # a generator type without weak references: derive on every call
        cached = None
    if cached is not None and cached[0] == _state(generator):
        return cached[1]
    seed = int(random_ops.randint(0, SEED_BOUND - 1, (1,), generator=generator).item())
    rng = np.random.default_rng(seed)
    try:
        _derived[generator] = (_state(generator), rng)
    except TypeError:
        pass
    return rng


def numpy_rng(generator: Any) -> np.random.Generator:
    """The numpy generator to draw from for `generator` (already passed through `as_generator`)."""
    if isinstance(generator, np.random.Generator):
        return generator
    return _derive(random_ops.default_generator if generator is None else generator)


def draw_seed(generator: Any) -> int:
    """One seed in [0, 2**63) drawn from `generator`."""
    return int(numpy_rng(generator).integers(SEED_BOUND))
