"""`flow.device`: where a tensor's programs run ("cpu", "cuda:0", "rocm:0", "vulkan").

A device names a target of `flow.targets` (cuda -> cuda, rocm or hip -> rocm, vulkan ->
vulkan, cpu -> cpu). The semantics, chosen to be honest about what runs where:

* A tensor carries its device (`tensor.device`; cpu unless moved with `tensor.to(device)` or
  made by a program that ran on a device). Eager ops always compute on the host (numpy, or
  the cpu target under `flow.lazy`); their result takes the device of their inputs, so a
  chain of eager ops keeps the device.
* `flow.jit` and `nn.Graph` without `target=` compile for the device of their tensors (the
  arguments and the tensors the function captures, e.g. the parameters of a module moved with
  `module.to(device)`), and their results are on that device; with `target=` they compile for
  it. That is where values stay on the device: results passed back as arguments (parameters
  updated by a training step) are handed to the runtime as the device buffers they came from.
  The device of the arguments is part of the compiled-program cache key; that of captured
  tensors is read when a signature is first compiled (move a model before its first call).
* cpu tensors mix with tensors of any device (they are host values, uploaded as needed);
  tensors of two different non-cpu devices do not (an error, like a `target=` that contradicts
  the tensors' device).
* Moving to a device checks that it is usable here: `flow.device("cuda:0")` is only a name,
  but `x.to("cuda:0")` without a CUDA device says so and lists the targets usable here.
  Compiling for a device that is absent (`flow-compile --target cuda`) needs no device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["device"]

# Device type -> target name; "hip" is ROCm's runtime and names the same device type.
_TARGETS = {"cpu": "cpu", "cuda": "cuda", "rocm": "rocm", "hip": "rocm", "vulkan": "vulkan"}


class device:  # noqa: N801  (torch's and OneFlow's name)
    """A device: a type (`cpu`, `cuda`, `rocm`, `vulkan`) and an optional index.

    `flow.device("cuda:0")`, `flow.device("cuda", 0)`, `flow.device("vulkan")`; `hip` is an
    alias of `rocm`. Compares equal to its string form (`t.device == "cpu"`)."""

    __slots__ = ("_type", "_index")

    def __init__(self, type: str | device, index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            if index is not None and index != type.index:
                raise ValueError(f"flow.device: {type!r} already has an index")
            self._type, self._index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError(f"flow.device: expected a string like 'cuda:0', got {type!r}")
        name, sep, idx = type.strip().partition(":")
        if name not in _TARGETS:
            raise ValueError(
                f"flow.device: unknown device type {name!r}; expected one of: "
                f"{', '.join(_TARGETS)} (e.g. 'cuda:0', 'vulkan')"
            )
        if sep:
            if index is not None:
                raise ValueError(f"flow.device: {type!r} already has an index; got index={index}")
            if not idx.isdigit():
                raise ValueError(f"flow.device: invalid device index in {type!r}")
            index = int(idx)
        if index is not None and (not isinstance(index, int) or index < 0):
            raise ValueError(f"flow.device: the index must be an int >= 0, got {index!r}")
        if name == "cpu" and index not in (None, 0):
            raise ValueError(f"flow.device: the cpu has no index {index}")
        self._type, self._index = _TARGETS[name] if name == "hip" else name, index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self) -> int | None:
        return self._index

    @property
    def target(self) -> str:
        """The `flow.targets` target that runs programs on this device."""
        return _TARGETS[self._type]

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self) -> str:
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        return isinstance(other, device) and (other._type, other._index) == (
            self._type,
            self._index,
        )

    def __hash__(self) -> int:
        return hash((self._type, self._index))


CPU = device("cpu")


def as_device(value: Any) -> device:
    """A `device` from a device or a string."""
    if isinstance(value, device):
        return value
    if isinstance(value, str):
        return device(value)
    raise TypeError(f"expected a device (flow.device or a string like 'vulkan'), got {value!r}")


def require(dev: device) -> device:
    """`dev` with its index resolved (0 when unset), after checking that it can run programs
    here; raises `flow.targets.RuntimeUnavailableError` naming what was found otherwise."""
    if dev.type == "cpu":
        return CPU
    from flow.targets import RuntimeUnavailableError, available, device_names, require

    require(dev.target)
    index = dev.index or 0
    names = device_names(dev.target)
    if index >= max(len(names), 1):
        found = "; ".join(f"{dev.type}:{i} {n}" for i, n in enumerate(names))
        raise RuntimeUnavailableError(
            f"no {dev.type} device {index}: this machine has {len(names)} ({found}); targets "
            f"usable here: {', '.join(available())}"
        )
    if index > 0:
        raise NotImplementedError(
            f"{dev}: programs run on the first device of each kind ({dev.type}:0); choosing "
            f"another one is not supported yet"
        )
    return device(dev.type, index)


def of(t: Any) -> device | None:
    """The device of a tensor when it is not the cpu, else None."""
    return getattr(t, "_device", None)


def propagate(args: Any, result: Any) -> None:
    """Give an eager op's result the device of its inputs (cpu inputs mix with any device)."""
    dev = None
    for a in args:
        d = getattr(a, "_device", None)
        if d is not None and d != dev:
            if dev is not None:
                raise RuntimeError(
                    f"expected all tensors on one device, got {dev} and {d} (cpu tensors may "
                    "be combined with tensors of any device)"
                )
            dev = d
    if dev is not None:
        result._device = dev


def _no_copy(x: Any) -> Any:
    raise RuntimeError("x.to(device) needs flow's ops (import flow)")


_copy: Callable[[Any], Any] = _no_copy


def register_copy(copy: Callable[[Any], Any]) -> None:
    """`to_device` copies a tensor with `copy` (a differentiable copy: flow.ops.methods
    registers a cast to the same dtype)."""
    global _copy
    _copy = copy


def to_device(x: Any, dev: Any) -> Any:
    """`x.to(device)`: a copy of `x` on `dev` (differentiable), or `x` itself when it is there
    already; inside a traced function, `x` (the program runs where `flow.jit` compiles it)."""
    dev = require(as_device(dev))
    if x._trace is not None or (of(x) or CPU) == dev:
        return x
    out = _copy(x)  # a copy, whose gradient flows back to x
    out._device = None if dev.type == "cpu" else dev
    return out


def place(tensors: Any, dev: Any) -> None:
    """Put existing tensors (a module's parameters and buffers) on `dev` in place."""
    dev = require(as_device(dev))
    value = None if dev.type == "cpu" else dev
    for t in tensors:
        if t is not None:
            t._device = value
            if t.grad is not None:
                t.grad._device = value


def program_target(explicit: str | None, tensors: Any, what: str) -> str:
    """The target a program runs on: `explicit` (a `target=`), else the one non-cpu device of
    `tensors` (arguments and captured tensors; global tensors by their placement type), else
    the default target."""
    from flow.targets import DEFAULT_TARGET, get_target

    found: dict[device, None] = {}
    for t in tensors:
        d = getattr(t, "_device", None)
        if d is None:
            info = getattr(t, "_dist", None)
            if info is not None and info.placement.type != "cpu":
                d = device(info.placement.type, 0)
        if d is not None:
            found[d] = None
    if len(found) > 1:
        raise RuntimeError(
            f"{what}: expected all tensors on one device, got {', '.join(map(str, found))}"
        )
    dev = next(iter(found), None)
    if explicit is not None:
        name = get_target(explicit).name
        if dev is not None and dev.target != name:
            raise RuntimeError(
                f"{what}: target={explicit!r} but the tensors are on {dev}; move them with "
                f".to({name!r}) or drop target= to run on {dev}"
            )
        return name
    if dev is None:
        return DEFAULT_TARGET
    return require(dev).target


def of_target(target: str) -> device | None:
    """The device of a program's results on `target`: None for the cpu (and for targets that
    are not a device here, e.g. a cross-compiled cpu)."""
    if target == "cpu" or target not in _TARGETS:
        return None
    return device(target, 0)


def of_all(tensors: Any) -> tuple | None:
    """The devices of a call's arguments (part of a compiled-program cache key); None when
    all are on the cpu, the common case."""
    devices = tuple(getattr(t, "_device", None) for t in tensors)
    return devices if any(d is not None for d in devices) else None
