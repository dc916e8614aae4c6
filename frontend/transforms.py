"""Image transforms for data pipelines, a small built-in subset of `flowvision.transforms`
(`torchvision.transforms`): `Compose`, `ToTensor`, `Normalize`, `CenterCrop`,
`RandomCrop`, `RandomHorizontalFlip` and `Lambda`.

Two kinds of images, as torchvision has PIL images and tensors: a numpy array
is an image as loaded from disk, `(H, W)` or `(H, W, C)` (a PIL image is read
as one); a `flow.Tensor` is `(..., C, H, W)`, as `ToTensor` returns. Each
transform returns the kind it was given. Random transforms draw from their
`generator` (an int seed, a `numpy.random.Generator` or a `flow.Generator`)
or, by default, from flow's default generator, so `flow.manual_seed` (or a
`DataLoader` worker's seeding) makes augmentation reproducible.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy
from flow.utils.rng import as_generator, numpy_rng

__all__ = [
    "Compose", "ToTensor", "Normalize", "Resize", "CenterCrop", "RandomCrop",
    "RandomHorizontalFlip", "RandomVerticalFlip", "Lambda",
]  # fmt: skip

Image = Any  # a numpy array (H, W[, C]) or a flow.Tensor (..., C, H, W)


class Compose:
    """Apply `transforms` one after the other."""

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, img: Image) -> Image:
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        lines = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"Compose({lines}\n)"


class ToTensor:
    """A `(H, W, C)` or `(H, W)` image (numpy array or PIL image) as a `(C, H, W)` flow tensor;
    uint8 images are scaled to float32 in [0, 1], other dtypes keep their values."""

    def __call__(self, pic: Any) -> Tensor:
        if isinstance(pic, Tensor) or not (isinstance(pic, np.ndarray) or
                                                hasattr(pic, "__array_interface__")):  # fmt: skip
            raise TypeError(f"ToTensor: expected a numpy array or a PIL image, got "
                            f"{type(pic).__name__}")  # fmt: skip
        arr = np.asarray(pic)
        if arr.ndim not in (2, 3):
            raise ValueError(f"ToTensor: expected an image of 2 or 3 dims (H, W[, C]), got "
                             f"shape {list(arr.shape)}")  # fmt: skip
        if arr.dtype == np.bool_:  # a 1-bit PIL image
            arr = arr.astype(np.uint8) * 255
        chw = np.ascontiguousarray(arr.reshape(*arr.shape[:2], -1).transpose(2, 0, 1))
        if chw.dtype == np.uint8:
            return from_numpy(chw.astype(np.float32) / 255)
        return from_numpy(chw)

    def __repr__(self) -> str:
        return "ToTensor()"


def _as_array(img: Image, owner: str) -> np.ndarray:
    if isinstance(img, Tensor):
        return img.numpy()
    if isinstance(img, np.ndarray):
        return img
    raise TypeError(f"{owner}: expected a numpy array or a flow.Tensor, got {type(img).__name__}")


def _like(result: np.ndarray, img: Image) -> Image:
    return from_numpy(np.ascontiguousarray(result)) if isinstance(img, Tensor) else result


class Normalize:
    """`(img - mean[c]) / std[c]` for each channel `c` of a float image; the channel dim is
    -3 of a tensor and -1 of a `(H, W, C)` array."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False):
        self.mean, self.std, self.inplace = list(mean), list(std), inplace

    def __call__(self, img: Image) -> Image:
        arr = _as_array(img, "Normalize")
        if arr.dtype.kind != "f":
            raise TypeError(f"Normalize: expected a floating-point image, got {arr.dtype}")
        is_tensor = isinstance(img, Tensor)
        if arr.ndim < (3 if is_tensor else 2):
            raise ValueError(f"Normalize: expected a tensor image of shape (..., C, H, W) or an "
                             f"array (H, W[, C]), got shape {list(arr.shape)}")  # fmt: skip
        mean = np.asarray(self.mean, arr.dtype)
        std = np.asarray(self.std, arr.dtype)
        if (std == 0).any():
            raise ValueError(f"Normalize: std evaluated to zero after conversion to {arr.dtype}, "
                             f"leading to division by zero")  # fmt: skip
        shape = (-1, 1, 1) if is_tensor else (-1,)
        out = np.subtract(arr, mean.reshape(shape), out=arr if self.inplace else None)
        np.divide(out, std.reshape(shape), out=out)
        return img if self.inplace and is_tensor else _like(out, img)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


def _size_pair(size: int | Sequence[int], owner: str) -> tuple[int, int]:
    if isinstance(size, numbers.Integral):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) in (1, 2):
        return (int(size[0]), int(size[-1]))
    raise ValueError(f"{owner}: size should be an int or a sequence (h, w), got {size!r}")


def _hw_axes(img: Image) -> tuple[int, int]:
    return (-2, -1) if isinstance(img, Tensor) else (0, 1)


def _pad(arr: np.ndarray, axes: tuple[int, int], ltrb: Sequence[int], fill: float = 0,
         mode: str = "constant") -> np.ndarray:  # fmt: skip
    """Pad the (H, W) axes by (left, top, right, bottom)."""
    left, top, right, bottom = ltrb
    widths = [(0, 0)] * arr.ndim
    widths[axes[0]], widths[axes[1]] = (top, bottom), (left, right)
    if mode == "constant":
        return np.pad(arr, widths, mode="constant", constant_values=fill)
    return np.pad(arr, widths, mode=mode)


def _crop(arr: np.ndarray, axes: tuple[int, int], top: int, left: int, h: int, w: int):
    index = [slice(None)] * arr.ndim
    index[axes[0]], index[axes[1]] = slice(top, top + h), slice(left, left + w)
    return arr[tuple(index)]


class CenterCrop:
    """The central `size` (int or (h, w)) region; a smaller image is zero-padded first."""

    def __init__(self, size: int | Sequence[int]):
        self.size = _size_pair(size, "CenterCrop")

    def __call__(self, img: Image) -> Image:
        arr, axes = _as_array(img, "CenterCrop"), _hw_axes(img)
        th, tw = self.size
        h, w = arr.shape[axes[0]], arr.shape[axes[1]]
        if th > h or tw > w:
            ltrb = [max(tw - w, 0) // 2, max(th - h, 0) // 2,
                    max(tw - w + 1, 0) // 2, max(th - h + 1, 0) // 2]  # fmt: skip
            arr = _pad(arr, axes, ltrb)
            h, w = arr.shape[axes[0]], arr.shape[axes[1]]
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return _like(_crop(arr, axes, top, left, th, tw), img)

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size})"


def _padding_ltrb(padding: int | Sequence[int]) -> list[int]:
    if isinstance(padding, numbers.Integral):
        return [int(padding)] * 4
    if isinstance(padding, Sequence) and len(padding) in (1, 2, 4):
        p = [int(x) for x in padding]
        return p * 4 if len(p) == 1 else p * 2 if len(p) == 2 else p
    raise ValueError(f"RandomCrop: padding should be an int or a sequence of 1, 2 or 4 ints, "
                     f"got {padding!r}")  # fmt: skip


class RandomCrop:
    """A random `size` region, after optional `padding` (int, (left/right, top/bottom) or
    (left, top, right, bottom)) with `fill` or `padding_mode` 'edge', 'reflect' or
    'symmetric'; `pad_if_needed` pads an image smaller than `size`."""

    _MODES = ("constant", "edge", "reflect", "symmetric")

    def __init__(self, size: int | Sequence[int], padding: int | Sequence[int] | None = None,
                 pad_if_needed: bool = False, fill: float = 0, padding_mode: str = "constant",
                 generator=None):  # fmt: skip
        self.size = _size_pair(size, "RandomCrop")
        self.padding = None if padding is None else _padding_ltrb(padding)
        if padding_mode not in self._MODES:
            raise ValueError(f"RandomCrop: padding_mode should be one of {self._MODES}, got "
                             f"{padding_mode!r}")  # fmt: skip
        self.pad_if_needed, self.fill, self.padding_mode = pad_if_needed, fill, padding_mode
        self.generator = as_generator(generator, "RandomCrop")

    def __call__(self, img: Image) -> Image:
        arr, axes = _as_array(img, "RandomCrop"), _hw_axes(img)
        if self.padding is not None:
            arr = _pad(arr, axes, self.padding, self.fill, self.padding_mode)
        th, tw = self.size
        h, w = arr.shape[axes[0]], arr.shape[axes[1]]
        if self.pad_if_needed and (h < th or w < tw):
            dw, dh = max(tw - w, 0), max(th - h, 0)
            arr = _pad(arr, axes, [dw, dh, dw, dh], self.fill, self.padding_mode)
            h, w = arr.shape[axes[0]], arr.shape[axes[1]]
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: required crop size {(th, tw)} is larger than the "
                             f"input image size {(h, w)}")  # fmt: skip
        rng = numpy_rng(self.generator)
        top = int(rng.integers(0, h - th + 1))
        left = int(rng.integers(0, w - tw + 1))
        return _like(_crop(arr, axes, top, left, th, tw), img)

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class _RandomFlip:
    """Mirror the image along one of its (H, W) axes with probability `p`."""

    _axis = 1  # of (H, W): 1 mirrors left-right, 0 upside down

    def __init__(self, p: float = 0.5, generator=None):
        name = type(self).__name__
        if not 0 <= p <= 1:
            raise ValueError(f"{name}: expected p in [0, 1], got {p}")
        self.p = p
        self.generator = as_generator(generator, name)

    def __call__(self, img: Image) -> Image:
        arr, axes = _as_array(img, type(self).__name__), _hw_axes(img)
        if numpy_rng(self.generator).random() < self.p:
            return _like(np.flip(arr, axes[self._axis]), img)
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class RandomHorizontalFlip(_RandomFlip):
    """Mirror the image left-right with probability `p`."""


class RandomVerticalFlip(_RandomFlip):
    """Flip the image upside down with probability `p`."""

    _axis = 0


def _resize_weights(n_in: int, n_out: int, mode: str, antialias: bool) -> np.ndarray:
    """The (n_out, n_in) matrix resampling one axis: nearest, or bilinear (a triangle filter on
    pixel centres, renormalised at the edges, as PIL's); when shrinking with `antialias` the
    filter widens by the scale, so each output pixel averages the input pixels it covers."""
    scale = n_in / n_out
    centres = (np.arange(n_out) + 0.5) * scale
    if mode == "nearest":
        w = np.zeros((n_out, n_in))
        src = np.minimum(np.floor(centres), n_in - 1).astype(int)  # as PIL: the centre's pixel
        w[np.arange(n_out), src] = 1
        return w
    support = max(scale, 1.0) if antialias else 1.0
    taps = np.arange(n_in) + 0.5
    w = np.clip(1.0 - np.abs(taps[None, :] - centres[:, None]) / support, 0.0, None)
    return w / w.sum(1, keepdims=True)


class Resize:
    """Resize to `size`: an int makes the shorter side that long (keeping the aspect ratio;
    `max_size` caps the longer side), (h, w) is exact. `interpolation` "bilinear" (antialiased
    when shrinking, as PIL and torchvision do) or "nearest"; a uint8 image stays uint8."""

    def __init__(self, size, interpolation: str = "bilinear", max_size: int | None = None,
                 antialias: bool = True):  # fmt: skip
        self.interpolation = str(getattr(interpolation, "value", interpolation)).lower()
        if self.interpolation not in ("bilinear", "nearest"):
            raise ValueError(f"Resize: interpolation should be 'bilinear' or 'nearest', got "
                             f"{interpolation!r}")  # fmt: skip
        if isinstance(size, Sequence) and len(size) == 1:
            size = size[0]
        self.size = size if isinstance(size, numbers.Integral) else _size_pair(size, "Resize")
        self.max_size, self.antialias = max_size, antialias

    def _target(self, h: int, w: int) -> tuple[int, int]:
        if not isinstance(self.size, numbers.Integral):
            return self.size
        short, long = (h, w) if h <= w else (w, h)
        new_short, new_long = int(self.size), int(self.size * long / short)
        if self.max_size is not None and new_long > self.max_size:
            new_short, new_long = int(self.max_size * new_short / new_long), int(self.max_size)
        return (new_short, new_long) if h <= w else (new_long, new_short)

    def __call__(self, img: Image) -> Image:
        arr, axes = _as_array(img, "Resize"), _hw_axes(img)
        h, w = arr.shape[axes[0]], arr.shape[axes[1]]
        th, tw = self._target(h, w)
        if (th, tw) == (h, w):
            return img
        wh = _resize_weights(h, th, self.interpolation, self.antialias)
        ww = _resize_weights(w, tw, self.interpolation, self.antialias)
        x = np.moveaxis(arr.astype(np.float64), axes, (0, 1))
        out = np.tensordot(ww, np.tensordot(wh, x, axes=(1, 0)), axes=(1, 1)).swapaxes(0, 1)
        out = np.moveaxis(out, (0, 1), axes)
        if arr.dtype == np.uint8:
            out = np.clip(np.rint(out), 0, 255)
        return _like(out.astype(arr.dtype), img)

    def __repr__(self) -> str:
        return f"Resize(size={self.size}, interpolation={self.interpolation})"


class Lambda:
    """Apply a user function as a transform."""

    def __init__(self, lambd: Callable[[Any], Any]):
        if not callable(lambd):
            raise TypeError(f"Lambda: expected a callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, img: Any) -> Any:
        return self.lambd(img)

    def __repr__(self) -> str:
        return "Lambda()"
