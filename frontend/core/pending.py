"""A tensor's value that is not computed yet: the protocol `Tensor` relies on.

Under `flow.lazy()` a tensor's storage (`Tensor._buf`) may hold a recorded node instead of a
numpy array. Core only knows this base class; `flow.modes.lazy` implements it (`LazyValue`)
and registers what must happen before numpy writes into an array pending work may read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["PendingValue", "before_host_write", "register_host_write_hook"]


class PendingValue:
    """A value a tensor holds before it is computed (a node of a pending graph)."""

    __slots__ = ()

    def materialize(self, tensor: Any) -> np.ndarray:
        """`tensor`'s array (this value computed, with whatever else is pending)."""
        raise NotImplementedError

    def alias(self, tensor: Any, copy: bool) -> Any:
        """A new tensor with `tensor`'s pending value: sharing it (`detach`) or a copy (`clone`)."""
        raise NotImplementedError

    def rebind(self, tensor: Any) -> None:
        """`tensor` now holds this pending value (an in-place update)."""
        raise NotImplementedError


def _no_pending_work(array: np.ndarray) -> None:
    return None


_host_write: Callable[[np.ndarray], None] = _no_pending_work


def before_host_write(array: np.ndarray) -> None:
    """Called before numpy writes into `array`: pending work reading it is computed first."""
    _host_write(array)


def register_host_write_hook(hook: Callable[[np.ndarray], None]) -> None:
    """Make `before_host_write` call `hook` (flow.modes.lazy registers its flush check)."""
    global _host_write
    _host_write = hook
