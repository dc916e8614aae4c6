"""`flow.cuda`: whether CUDA devices can run flow's programs here, as in OneFlow and PyTorch.

`DEVICE = "cuda" if flow.cuda.is_available() else "cpu"` answers from the same check as
`x.to("cuda")` (flow.core.device): the `cuda` target of flow.targets is usable when its IREE
runtime driver creates a device. The runtime loads on the first call, not with `import flow`.

Programs run on the first device of each kind (`cuda:0`; under a launcher each rank's `cuda:0`
is the GPU of its local rank), so the current device is always 0 and `set_device` accepts it
only. flow draws every random number from one counter-based generator (flow.ops.random), for
all devices: with CUDA usable, `manual_seed` seeds it as `flow.manual_seed` does; without CUDA
it is ignored, as OneFlow and PyTorch document.
"""

from __future__ import annotations

from typing import Any

from flow.core.args import describe, is_int
from flow.core.device import as_device, device, require
from flow.ops import random as _random

__all__ = [
    "current_device", "device_count", "is_available", "manual_seed", "manual_seed_all",
    "set_device", "synchronize",
]  # fmt: skip


def is_available() -> bool:
    """Whether a CUDA device can run programs here (`x.to("cuda")` would succeed)."""
    from flow.targets import RuntimeUnavailableError

    try:
        require(device("cuda"))
    except RuntimeUnavailableError:
        return False
    return True


def device_count() -> int:
    """The number of CUDA devices usable here (0 without a usable CUDA runtime)."""
    if not is_available():
        return 0
    from flow.targets import device_names

    return len(device_names("cuda"))


def _cuda_index(fn: str, dev: Any) -> int:
    """The index named by `dev` (an int, 'cuda:1', a `flow.device`; None: the current one)."""
    if dev is None:
        return 0
    if is_int(dev) and not isinstance(dev, bool):
        return int(dev)
    if isinstance(dev, (str, device)):
        d = as_device(dev)
        if d.type == "cuda":
            return d.index or 0
    raise ValueError(f"flow.cuda.{fn}: expected a cuda device (an index, 'cuda:0' or "
                     f"flow.device('cuda', 0)), got {describe(dev)}")  # fmt: skip


def current_device() -> int:
    """The index of the current CUDA device (0: see the module's doc); raises
    `flow.targets.RuntimeUnavailableError` when no CUDA device is usable here."""
    require(device("cuda"))
    return 0


def set_device(dev: Any) -> None:
    """Select the current CUDA device; a negative index is a no-op (as in PyTorch). Raises when
    the device is not usable here, and for an index other than 0 (not supported yet)."""
    index = _cuda_index("set_device", dev)
    if index < 0:
        return
    require(device("cuda", index))


def synchronize(dev: Any = None) -> None:
    """Wait until the work queued for a CUDA device is done. flow's calls return when their
    results are computed, so this only flushes what `flow.lazy` still holds; raises when the
    device is not usable here, as in PyTorch."""
    require(device("cuda", max(_cuda_index("synchronize", dev), 0)))
    from flow.modes.lazy import lazy_sync

    lazy_sync()


def manual_seed(seed: int) -> None:
    """Seed the generator random ops draw from for cuda tensors (flow's one generator, see the
    module's doc); ignored when no CUDA device is usable here."""
    if is_available():
        _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the generator of every CUDA device (flow has one for all devices)."""
    manual_seed(seed)
