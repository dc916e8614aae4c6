"""Random numbers: the documented bit recipe, reproducibility, statistics, and jit == eager.

The references below rebuild every sample from SplitMix64 written out in plain
Python: the generator's key for draw `n` is `splitmix64(seed, n)`, and element
`i` of a draw is `splitmix64(key, i)`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from checks import check

import flow
from flow import primitives as P
from flow.primitives.random import random_bits

MASK = (1 << 64) - 1


def sm64(key: int, i: int) -> int:
    z = (key + (i + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def hashes(seed: int, draw: int, count: int) -> list[int]:
    """The 64-bit hashes of the elements of the `draw`-th random op after `manual_seed(seed)`."""
    key = sm64(seed & MASK, draw)
    return [sm64(key, i) for i in range(count)]


def uniforms(seed, draw, shape, bits, dtype):
    n = math.prod(shape)
    u = [(z >> (64 - bits)) * 2.0**-bits for z in hashes(seed, draw, n)]
    return np.array(u, np.float64).astype(dtype).reshape(shape)


def box_muller(u1, u2):
    return np.sqrt(-2 * np.log(1 - u1)) * np.cos(2 * np.pi * u2)


# --------------------------------------------------------------------------- the recipe


@pytest.mark.parametrize(
    "dtype, bits",
    [(flow.float32, 24), (flow.float64, 53), (flow.float16, 11), (flow.bfloat16, 8)],
)
def test_rand_takes_the_top_mantissa_bits_of_the_hash(dtype, bits):
    flow.manual_seed(5)
    first, second = flow.rand(3, 4, dtype=dtype), flow.rand((7,), dtype=dtype)
    assert first.dtype is dtype and tuple(first.shape) == (3, 4)
    np.testing.assert_array_equal(first.numpy(), uniforms(5, 0, (3, 4), bits, dtype.np_dtype))
    np.testing.assert_array_equal(second.numpy(), uniforms(5, 1, (7,), bits, dtype.np_dtype))


def test_randn_is_box_muller_of_two_uniforms():
    flow.manual_seed(11)
    got32, got64 = flow.randn(2, 5), flow.randn(6, dtype=flow.float64)
    z = np.array(hashes(11, 0, 10), np.uint64)
    u1 = (z >> np.uint64(40)).astype(np.float64) * 2.0**-24  # one hash gives both float32 uniforms
    u2 = ((z >> np.uint64(8)) & np.uint64(0xFFFFFF)).astype(np.float64) * 2.0**-24
    np.testing.assert_allclose(got32.numpy(), box_muller(u1, u2).reshape(2, 5), rtol=1e-5,
                               atol=1e-6)  # fmt: skip
    assert got32.dtype is flow.float32
    # float64 needs 2 x 53 bits: two draws (keys 1 and 2).
    ref64 = box_muller(uniforms(11, 1, (6,), 53, np.float64), uniforms(11, 2, (6,), 53, np.float64))
    np.testing.assert_allclose(got64.numpy(), ref64, rtol=1e-13, atol=1e-14)


def test_randint_is_the_low_63_bits_modulo_the_range():
    flow.manual_seed(-3)  # negative seeds wrap modulo 2**64
    got = flow.randint(-5, 12, (4, 3))
    ref = [(z & ((1 << 63) - 1)) % 17 - 5 for z in hashes(-3, 0, 12)]
    assert got.dtype is flow.int64
    np.testing.assert_array_equal(got.numpy(), np.array(ref).reshape(4, 3))
    assert flow.initial_seed() == (-3) & MASK


def test_an_element_depends_only_on_its_position():
    """Shape does not matter, only the linear index: a split tensor can draw its part alone."""
    flow.manual_seed(9)
    a = flow.rand(4, 6)
    flow.manual_seed(9)
    b = flow.rand(24)
    np.testing.assert_array_equal(a.numpy().reshape(-1), b.numpy())
    key = flow.tensor(np.array(123, np.int64)).reshape(())
    wide = P.bind(random_bits, key, shape=(5, 4), dtype=flow.int64)
    narrow = P.bind(random_bits, key, shape=(3, 2), dtype=flow.int32)
    assert (narrow.numpy().reshape(-1).view(np.uint32).astype(np.uint64)
            == wide.numpy().reshape(-1)[:6].view(np.uint64) >> np.uint64(32)).all()  # fmt: skip


# --------------------------------------------------------------------------- generators


def test_same_seed_reproduces_and_each_call_differs():
    flow.manual_seed(0)
    a = [flow.rand(50), flow.randn(50), flow.randint(0, 1000, (50,))]
    flow.manual_seed(0)
    b = [flow.rand(50), flow.randn(50), flow.randint(0, 1000, (50,))]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert not np.array_equal(flow.rand(50).numpy(), a[0].numpy())
    flow.manual_seed(1)
    assert not np.array_equal(flow.rand(50).numpy(), a[0].numpy())


def test_generators_are_independent_and_save_state():
    g = flow.Generator().manual_seed(7)
    flow.manual_seed(7)
    before = flow.get_rng_state().numpy().copy()
    x = flow.rand(10, generator=g)
    np.testing.assert_array_equal(flow.get_rng_state().numpy(), before)  # default untouched
    np.testing.assert_array_equal(x.numpy(), flow.rand(10).numpy())
    state = g.get_state()
    assert state.dtype is flow.int64 and state.tolist() == [7, 1]
    y = flow.randn(4, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(flow.randn(4, generator=g).numpy(), y.numpy())
    flow.set_rng_state(flow.tensor([7, 0], dtype=flow.int64))
    np.testing.assert_array_equal(flow.rand(10).numpy(), x.numpy())
    s = g.seed()
    assert g.initial_seed() == s and g.get_state().tolist()[1] == 0


@pytest.mark.parametrize(
    "fn, exc, message",
    [
        (lambda: flow.rand(2, dtype=flow.int64), TypeError,
         "rand: expected a floating-point dtype, got flow.int64"),
        (lambda: flow.randn(-1), ValueError, "randn: expected a shape of non-negative ints"),
        (lambda: flow.randint(5, 5, (2,)), ValueError,
         "randint: expected low < high, got low=5 and high=5"),
        (lambda: flow.randint(0, 300, (2,), dtype=flow.int8), ValueError,
         r"randint: \[0, 300\) does not fit in flow.int8"),
        (lambda: flow.randint(1.5, (2,)), TypeError, "randint: expected high to be an int"),
        (lambda: flow.randint(3), TypeError, r"expected \(high, size\) or \(low, high, size\)"),
        (lambda: flow.normal(0.0, -1.0, (2,)), ValueError, "normal: expected std >= 0, got -1.0"),
        (lambda: flow.normal(0.0, 1.0), TypeError, "normal: needs a size"),
        (lambda: flow.bernoulli(flow.ones(3, dtype=flow.int64)), TypeError,
         "bernoulli: expected a floating-point tensor of probabilities, got flow.int64"),
        (lambda: flow.bernoulli(flow.ones(3), 1.5), ValueError,
         r"bernoulli: expected p in \[0, 1\], got 1.5"),
        (lambda: flow.rand(2, generator=3), TypeError,
         "rand: expected generator to be a flow.Generator, got int"),
        (lambda: flow.manual_seed(1 << 64), ValueError, r"seed must be in \[-2\*\*63, 2\*\*64\)"),
        (lambda: flow.manual_seed(1.0), TypeError, "manual_seed: expected an int seed"),
        (lambda: flow.set_rng_state(flow.zeros(2)), ValueError,
         r"set_state: expected the int64 tensor \[seed, offset >= 0\]"),
    ],
)  # fmt: skip
def test_errors(fn, exc, message):
    with pytest.raises(exc, match=message):
        fn()


def test_errors_are_the_same_inside_jit():
    with pytest.raises(TypeError, match="rand: expected a floating-point dtype, got flow.int64"):
        flow.jit(lambda x: x + flow.rand(2, dtype=flow.int64))(np.zeros(2, np.float32))
    key = np.zeros(1, np.int64)
    for run in (lambda f, k: f(flow.tensor(k)), lambda f, k: flow.jit(f)(k)):
        with pytest.raises(ValueError, match="random_bits: expected key of type tensor<i64>, "
                                             "got tensor<1xi64>"):  # fmt: skip
            run(lambda k: P.bind(random_bits, k, shape=(2,), dtype=flow.int32), key)


# --------------------------------------------------------------------------- statistics


N = 100_000


def _chi2(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def test_uniform_statistics():
    flow.manual_seed(2024)
    u = flow.rand(N).numpy().astype(np.float64)
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.std() - math.sqrt(1 / 12)) < 0.003
    # 100 bins: chi-square has mean 99 and sd 14; 99 + 6 sd leaves no room for bad bins.
    assert _chi2(np.histogram(u, 100, (0, 1))[0]) < 185
    # consecutive draws are uncorrelated, so are neighbours within a draw
    assert abs(np.corrcoef(u, flow.rand(N).numpy())[0, 1]) < 0.02
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.02


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64])
def test_normal_statistics(dtype):
    flow.manual_seed(77)
    z = flow.randn(N, dtype=dtype).numpy().astype(np.float64)
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.015
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.008
    assert abs(np.mean(z**3)) < 0.05 and abs(np.mean(z**4) - 3) < 0.15  # skew 0, kurtosis 3
    m = flow.normal(flow.full((N,), 3.0), 0.5).numpy()
    assert abs(m.mean() - 3) < 0.01 and abs(m.std() - 0.5) < 0.008


def test_integer_and_bernoulli_statistics():
    flow.manual_seed(5)
    r = flow.randint(3, 13, (N,), dtype=flow.int32).numpy()
    assert r.dtype == np.int32 and r.min() == 3 and r.max() == 12
    assert _chi2(np.bincount(r - 3, minlength=10)) < 40  # 9 dof: mean 9, sd 4.2
    p = np.linspace(0, 1, 11, dtype=np.float32)
    b = flow.bernoulli(flow.tensor(np.repeat(p[None], 20_000, 0))).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and b.dtype == np.float32
    assert (b[:, 0] == 0).all() and (b[:, -1] == 1).all()
    np.testing.assert_allclose(b.mean(0), p, atol=0.015)
    assert abs(flow.bernoulli(flow.zeros(N), 0.3).numpy().mean() - 0.3) < 0.008


def test_like_variants_and_broadcast_normal():
    x = flow.zeros(3, 2, dtype=flow.float64)
    assert flow.rand_like(x).dtype is flow.float64 and tuple(flow.randn_like(x).shape) == (3, 2)
    r = flow.randint_like(flow.zeros(4, dtype=flow.int32), 5)
    assert r.dtype is flow.int32 and ((0 <= r.numpy()) & (r.numpy() < 5)).all()
    r = flow.randint_like(x, 2, 4)
    assert r.dtype is flow.float64 and set(np.unique(r.numpy())) <= {2.0, 3.0}
    out = flow.normal(flow.tensor([[0.0], [100.0]]), flow.tensor([1.0, 0.0, 2.0]))
    assert tuple(out.shape) == (2, 3) and out.numpy()[1, 1] == 100.0
    assert flow.rand(0, 3).shape == (0, 3) and flow.randn(()).shape == ()


# --------------------------------------------------------------------------- jit


def test_jit_bits_equal_eager_bit_for_bit():
    def bits(k):
        key = k.reshape(())
        return (P.bind(random_bits, key, shape=(3, 5), dtype=flow.int32),
                P.bind(random_bits, key, shape=(2, 0), dtype=flow.int64),
                P.bind(random_bits, key, shape=(), dtype=flow.int64))  # fmt: skip

    def ref(k):
        key = int(k[0]) & MASK
        z = np.array([sm64(key, i) for i in range(15)], np.uint64)
        return ((z >> np.uint64(32)).astype(np.uint32).view(np.int32).reshape(3, 5),
                np.zeros((2, 0), np.int64), np.array(sm64(key, 0), np.uint64).view(np.int64))  # fmt: skip

    for key in (0, -(1 << 63), 987654321):
        check(bits, ref, np.array([key], np.int64), rtol=0, atol=0)


def sampler(x):
    return (x + flow.rand(16), flow.randn(2, 2), flow.randint(0, 9, (4,)),
            flow.rand(2, dtype=flow.float64), flow.randn(3, dtype=flow.float64),
            flow.rand(0, 2), flow.nn.functional.dropout(x, 0.5),
            flow.rand(5, dtype=flow.float16), flow.rand(5, dtype=flow.bfloat16),
            flow.bernoulli(flow.full((6,), 0.5, flow.float64)), flow.randn(()))  # fmt: skip


def test_jit_draws_fresh_numbers_per_call_exactly_like_eager():
    x = np.ones(16, np.float32)
    flow.manual_seed(0)
    eager = [sampler(flow.tensor(x)) for _ in range(2)]
    state = flow.get_rng_state().tolist()
    jf = flow.jit(sampler)
    flow.manual_seed(0)
    compiled = [jf(x) for _ in range(2)]
    assert flow.get_rng_state().tolist() == state  # same number of keys drawn
    for e, c in zip(eager, compiled):
        for i, (a, b) in enumerate(zip(e, c)):
            assert a.dtype is b.dtype and a.shape == b.shape
            if i in (1, 10):  # float32 normals: cos/log differ by an ulp between numpy and IREE
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=f"output {i}")
    for i in (0, 1, 2, 3, 4, 6, 7, 8, 9):
        assert not np.array_equal(compiled[0][i].numpy(), compiled[1][i].numpy()), i


def test_jit_keys_are_arguments_drawn_at_call_time():
    g = flow.Generator().manual_seed(3)

    @flow.jit
    def f(x):
        return x * flow.rand(4, generator=g)

    x = np.ones(4, np.float32)
    text = f.lower(x).as_text()
    assert "%rng_key: tensor<1xi64>" in text and "flow.random_bits" in text
    assert g.get_state().tolist() == [3, 0]  # tracing draws nothing
    default_before = flow.get_rng_state().tolist()
    a, b = f(x), f(x)
    assert g.get_state().tolist() == [3, 2] and flow.get_rng_state().tolist() == default_before
    g.manual_seed(3)
    np.testing.assert_array_equal(a.numpy(), flow.rand(4, generator=g).numpy())
    np.testing.assert_array_equal(b.numpy(), flow.rand(4, generator=g).numpy())
