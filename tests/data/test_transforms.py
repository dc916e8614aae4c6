"""`flow.transforms` numerics against numpy, for numpy (H, W, C) images and (C, H, W) tensors."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.transforms as T


@pytest.fixture
def image(rng) -> np.ndarray:
    return rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)


def _chw(arr: np.ndarray) -> flow.Tensor:
    """The (C, H, W) float32 tensor of an (H, W, C) image (flow has no uint8)."""
    return flow.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1), dtype=np.float32))


def test_to_tensor_scales_uint8(image):
    out = T.ToTensor()(image)
    assert isinstance(out, flow.Tensor) and out.dtype == flow.float32 and out.shape == (3, 5, 7)
    np.testing.assert_array_equal(out.numpy(), image.transpose(2, 0, 1).astype(np.float32) / 255)


def test_to_tensor_grayscale_and_float(rng):
    gray = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    out = T.ToTensor()(gray)
    assert out.shape == (1, 4, 6)
    np.testing.assert_array_equal(out.numpy()[0], gray.astype(np.float32) / 255)
    values = rng.standard_normal((4, 6, 2))
    out = T.ToTensor()(values)
    assert out.dtype == flow.float64  # no scaling for other dtypes, as in torchvision
    np.testing.assert_array_equal(out.numpy(), values.transpose(2, 0, 1))


def test_to_tensor_errors():
    with pytest.raises(TypeError, match="expected a numpy array or a PIL image, got Tensor"):
        T.ToTensor()(flow.from_numpy(np.zeros((3, 2, 2), np.float32)))
    with pytest.raises(ValueError, match=r"2 or 3 dims .*got shape \[2\]"):
        T.ToTensor()(np.zeros(2, np.uint8))


def test_normalize_tensor_and_array(rng):
    x = rng.random((3, 4, 5), dtype=np.float32)
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.5]
    m, s = np.array(mean, np.float32)[:, None, None], np.array(std, np.float32)[:, None, None]
    out = T.Normalize(mean, std)(flow.from_numpy(x.copy()))
    assert isinstance(out, flow.Tensor) and out.dtype == flow.float32
    np.testing.assert_allclose(out.numpy(), (x - m) / s, rtol=1e-6)
    hwc = x.transpose(1, 2, 0)
    out = T.Normalize(mean, std)(hwc)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, ((x - m) / s).transpose(1, 2, 0), rtol=1e-6)
    batch = flow.from_numpy(np.stack([x, x]))
    np.testing.assert_allclose(T.Normalize(mean, std)(batch).numpy()[1], (x - m) / s, rtol=1e-6)


def test_normalize_inplace_and_errors(rng):
    x = rng.random((2, 3, 3), dtype=np.float32)
    t = flow.from_numpy(x.copy())
    assert T.Normalize([1.0, 1.0], [2.0, 2.0], inplace=True)(t) is t
    np.testing.assert_allclose(t.numpy(), (x - 1) / 2, rtol=1e-6)
    with pytest.raises(ValueError, match="std evaluated to zero"):
        T.Normalize([0.0], [0.0])(flow.from_numpy(x))
    with pytest.raises(TypeError, match="expected a floating-point image, got int64"):
        T.Normalize([0.0], [1.0])(flow.from_numpy(np.zeros((1, 2, 2), np.int64)))


@pytest.mark.parametrize("size, top, left", [(3, 1, 2), ((2, 4), 2, 2), ((5, 7), 0, 0)])
def test_center_crop(image, size, top, left):
    h, w = (size, size) if isinstance(size, int) else size
    expected = image[top : top + h, left : left + w]
    np.testing.assert_array_equal(T.CenterCrop(size)(image), expected)
    out = T.CenterCrop(size)(_chw(image))
    np.testing.assert_array_equal(out.numpy(), expected.transpose(2, 0, 1))


def test_center_crop_pads_small_images(image):
    out = T.CenterCrop((7, 8))(image)
    padded = np.pad(image, [(1, 1), (0, 1), (0, 0)])
    np.testing.assert_array_equal(out, padded)


def _windows(arr: np.ndarray, h: int, w: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(arr.shape[0] - h + 1) for j in range(arr.shape[1] - w + 1)]


def test_random_crop_is_a_window_of_the_padded_image(image):
    crop = T.RandomCrop((4, 5), padding=2, generator=0)
    padded = np.pad(image, [(2, 2), (2, 2), (0, 0)])
    seen = set()
    for _ in range(60):
        out = crop(image)
        assert out.shape == (4, 5, 3)
        found = [(i, j) for i, j in _windows(padded, 4, 5)
                 if np.array_equal(padded[i : i + 4, j : j + 5], out)]  # fmt: skip
        assert found
        seen.add(found[0])
    assert len(seen) > 10  # positions vary


def test_random_crop_tensor_matches_array(image):
    a = T.RandomCrop(3, padding=(1, 2), padding_mode="reflect", generator=5)(image)
    t = T.RandomCrop(3, padding=(1, 2), padding_mode="reflect", generator=5)(_chw(image))
    np.testing.assert_array_equal(t.numpy(), a.transpose(2, 0, 1))


def test_random_crop_padding_modes_and_errors(image):
    full = T.RandomCrop((9, 9), padding=[1, 2, 1, 2], padding_mode="edge")(image)
    np.testing.assert_array_equal(full, np.pad(image, [(2, 2), (1, 1), (0, 0)], mode="edge"))
    out = T.RandomCrop(8, pad_if_needed=True, fill=7, generator=0)(image)
    assert out.shape == (8, 8, 3)
    with pytest.raises(
        ValueError, match=r"crop size \(6, 6\) is larger than the input image size \(5, 7\)"
    ):
        T.RandomCrop(6)(image)
    with pytest.raises(ValueError, match="padding_mode should be one of"):
        T.RandomCrop(2, padding_mode="wrap")


def test_random_horizontal_flip(image):
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(image), image[:, ::-1])
    assert T.RandomHorizontalFlip(p=0.0)(image) is image
    out = T.RandomHorizontalFlip(p=1.0)(_chw(image))
    np.testing.assert_array_equal(out.numpy(), image[:, ::-1].transpose(2, 0, 1))
    flip = T.RandomHorizontalFlip(generator=np.random.default_rng(2))
    flipped = [not np.array_equal(flip(image), image) for _ in range(40)]
    assert 5 < sum(flipped) < 35
    with pytest.raises(ValueError, match=r"p in \[0, 1\]"):
        T.RandomHorizontalFlip(p=2)


def test_seeded_transforms_are_reproducible(image):
    def run(generator):
        t = T.Compose([T.RandomCrop(4, padding=1, generator=generator),
                       T.RandomHorizontalFlip(generator=generator)])  # fmt: skip
        return [t(image).tolist() for _ in range(8)]

    assert run(3) != run(4)
    gen = flow.Generator
    assert run(gen().manual_seed(9)) == run(gen().manual_seed(9))


def test_default_randomness_follows_flow_manual_seed(image):
    t = T.Compose([T.RandomCrop(4, padding=1), T.RandomHorizontalFlip()])
    flow.manual_seed(1)
    a = [t(image).tolist() for _ in range(8)]
    flow.manual_seed(1)
    b = [t(image).tolist() for _ in range(8)]
    assert a == b


def test_compose_pipeline_and_lambda(image):
    pipeline = T.Compose([T.CenterCrop(3), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3),
                          T.Lambda(lambda t: t * 2)])  # fmt: skip
    out = pipeline(image)
    crop = image[1:4, 2:5].transpose(2, 0, 1).astype(np.float32) / 255
    np.testing.assert_allclose(out.numpy(), (crop - 0.5) / 0.5 * 2, rtol=1e-6)
    assert "CenterCrop(size=(3, 3))" in repr(pipeline)
    with pytest.raises(TypeError, match="expected a callable"):
        T.Lambda(3)


def test_random_vertical_flip(image):
    flipped = T.RandomVerticalFlip(p=1.0)(image)
    np.testing.assert_array_equal(flipped, image[::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=0.0)(image), image)
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(_chw(image)).numpy(),
                                  _chw(image[::-1]).numpy())  # fmt: skip
    with pytest.raises(ValueError, match=r"RandomVerticalFlip: expected p in \[0, 1\]"):
        T.RandomVerticalFlip(p=2)


def _halve(x: np.ndarray, axis: int) -> np.ndarray:
    """Antialiased bilinear halving along `axis` by hand: output j averages inputs 2j-1 ..
    2j+2 with weights 1, 3, 3, 1 (a triangle twice as wide), those off the edge left out
    and the rest renormalised."""
    x = np.moveaxis(x, axis, 0)
    n = x.shape[0]
    rows = []
    for j in range(n // 2):
        taps = [(i, w) for i, w in zip(range(2 * j - 1, 2 * j + 3), (1, 3, 3, 1)) if 0 <= i < n]
        rows.append(sum(w * x[i] for i, w in taps) / sum(w for _, w in taps))
    return np.moveaxis(np.stack(rows), 0, axis)


def test_resize_sizes_and_values(rng):
    img = rng.random((12, 18, 3))
    assert T.Resize(6)(img).shape == (6, 9, 3)  # the shorter side, aspect kept
    assert T.Resize((5, 4))(img).shape == (5, 4, 3)
    assert T.Resize(6, max_size=8)(img).shape == (5, 8, 3)
    np.testing.assert_allclose(T.Resize((6, 9))(img), _halve(_halve(img, 0), 1), atol=1e-12)
    up = T.Resize((24, 36), interpolation="nearest")(img)
    np.testing.assert_array_equal(up, img.repeat(2, 0).repeat(2, 1))
    flat = np.full((7, 5), 3.5)
    np.testing.assert_allclose(T.Resize((11, 3))(flat), np.full((11, 3), 3.5))  # weights sum 1
    chw = flow.tensor(img.transpose(2, 0, 1).astype(np.float32))
    want = _halve(_halve(img, 0), 1).transpose(2, 0, 1)
    np.testing.assert_allclose(T.Resize(6)(chw).numpy(), want, rtol=1e-5)
    with pytest.raises(ValueError, match="interpolation should be 'bilinear' or 'nearest'"):
        T.Resize(4, interpolation="cubic")


def test_resize_uint8_matches_pil_bilinear(rng):
    pil = pytest.importorskip("PIL.Image", reason="PIL cross-check (optional)")
    img = rng.integers(0, 256, (32, 48, 3), dtype=np.uint8)
    for size in (20, (40, 70), 64):
        ours = T.Resize(size)(img)
        assert ours.dtype == np.uint8
        theirs = np.asarray(pil.fromarray(img).resize(ours.shape[1::-1], pil.BILINEAR))
        assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1  # PIL rounds in fixed point
