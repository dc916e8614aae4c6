"""A call of a loaded function (targets/calls.py): arguments copied into per-position staging
buffers on CPU drivers, results mapped and remembered through their base, or left unmapped
(`call_deferred`) once they are known to share no memory. References: numpy."""

from __future__ import annotations

import copy
import pickle
import threading

import ml_dtypes
import numpy as np
import pytest
from call_programs import SCALE, private_cache_dir  # noqa: F401 -- the fixture

from flow.targets import available, compile_mlir, load, runtime
from flow.targets.mapping import Unmapped

PROGRAM = SCALE + """\
func.func @same(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func @both(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  %s = tensor.extract_slice %a[2] [2] [1] : tensor<4xf32> to tensor<2xf32>
  return %a, %s : tensor<4xf32>, tensor<2xf32>
}
func.func @twice(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r, %r : tensor<4xf32>, tensor<4xf32>
}
func.func @dyn(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @shift(%a: tensor<4xf32>, %s: f32) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %s : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @neg_bf16(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  %e = tensor.empty() : tensor<4xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xbf16>) outs(%e : tensor<4xbf16>) {
  ^bb0(%x: bf16, %o: bf16):
    %y = arith.negf %x : bf16
    linalg.yield %y : bf16
  } -> tensor<4xbf16>
  return %r : tensor<4xbf16>
}
"""


@pytest.fixture(scope="module")
def vmfb() -> bytes:
    return compile_mlir(PROGRAM, "cpu")


@pytest.fixture(params=["local-task", "local-sync"])
def module(request: pytest.FixtureRequest, vmfb: bytes):
    return load(vmfb, "cpu", driver=request.param)


def test_staged_arguments_leave_earlier_results_unchanged(module) -> None:
    scale = module["scale"]
    xs = [np.arange(4, dtype=np.float32) * k for k in range(1, 6)]
    ys = [scale(x)[0] for x in xs]  # one staging buffer serves every call
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(y, x * 2)


def test_a_result_returned_in_a_staging_buffer_is_a_copy(module) -> None:
    same = module["same"]
    a = np.arange(4, dtype=np.float32)
    (first,) = same(a)  # IREE returns the argument's buffer: the staging buffer
    (second,) = same(a + 10)  # writes the staging buffer again
    np.testing.assert_array_equal(first, a)
    np.testing.assert_array_equal(second, a + 10)
    first[0] = -1.0  # a copy of its own: the next call does not see it
    np.testing.assert_array_equal(same(a)[0], a)


def test_sizes_changing_at_one_position(module) -> None:
    dyn = module["dyn"]
    for n in (4, 3, 4, 7, 0, 2):
        x = np.arange(n, dtype=np.float32) + 0.5
        (y,) = dyn(x)
        assert y.shape == (n,)
        np.testing.assert_array_equal(y, x * x)


def test_non_contiguous_and_read_only_arguments(module) -> None:
    scale = module["scale"]
    base = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(scale(base[::2])[0], base[::2] * 2)
    frozen = np.arange(4, dtype=np.float32)
    frozen.flags.writeable = False
    np.testing.assert_array_equal(scale(frozen)[0], frozen * 2)
    np.testing.assert_array_equal(scale(base[1::2])[0], base[1::2] * 2)


def test_a_wrong_shape_or_dtype_is_refused(module) -> None:
    scale = module["scale"]
    scale(np.zeros(4, np.float32))
    with pytest.raises(Exception, match="4") as shape_err:
        scale(np.zeros(5, np.float32))
    assert "5" in str(shape_err.value)
    with pytest.raises(Exception):  # noqa: B017  (IREE's error type: a ValueError here)
        scale(np.zeros(4, np.int32))
    np.testing.assert_array_equal(scale(np.ones(4, np.float32))[0], np.full(4, 2.0))


def test_scalar_arguments_go_through_the_invoker(module) -> None:
    x = np.arange(4, dtype=np.float32)
    runtime.reset_transfer_stats()
    (y,) = module["shift"](x, 1.5)
    np.testing.assert_array_equal(y, x + 1.5)
    (z,) = module["shift"](y, 1.0)  # a result passed back: its device buffer
    np.testing.assert_array_equal(z, x + 2.5)
    stats = runtime.transfer_stats()
    assert stats.calls == 2 and stats.uploads == 1 and stats.resident_args == 1


def test_bf16_results_are_typed_and_stay_resident(module) -> None:
    neg = module["neg_bf16"]
    x = np.array([1.0, -2.0, 0.5, 3.0], ml_dtypes.bfloat16)
    runtime.reset_transfer_stats()
    (y,) = neg(x)
    (z,) = neg(y)
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), -x.astype(np.float32))
    np.testing.assert_array_equal(z.astype(np.float32), x.astype(np.float32))
    stats = runtime.transfer_stats()
    assert stats.uploads == 1 and stats.resident_args == 1


def test_concurrent_calls_get_their_own_results(module) -> None:
    scale = module["scale"]
    errors: list[str] = []

    def work(k: int) -> None:
        for i in range(200):
            x = np.full(4, k * 1000 + i, np.float32)
            (y,) = scale(x)
            if not np.array_equal(y, x * 2):
                errors.append(f"thread {k} call {i}: {y} for {x}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_results_mapped_on_one_cpu_driver_are_resident_on_the_other(vmfb: bytes) -> None:
    task = load(vmfb, "cpu", driver="local-task")["scale"]
    sync = load(vmfb, "cpu", driver="local-sync")["scale"]
    x = np.arange(4, dtype=np.float32)
    runtime.reset_transfer_stats()
    (y,) = task(x)
    (z,) = sync(y)
    (w,) = sync(z.reshape(2, 2).reshape(4))  # a view of a result is not the result: uploaded
    np.testing.assert_array_equal(w, x * 8)
    stats = runtime.transfer_stats()
    assert stats.uploads == 2 and stats.resident_args == 1


class _Value(Unmapped):
    __slots__ = ()


def test_results_stay_unmapped_once_the_first_call_shows_them_fresh(module) -> None:
    scale = module["scale"]
    x = np.arange(4, dtype=np.float32)
    (first,) = scale.call_deferred(_Value, x)  # (the first call maps its results, and checks)
    runtime.reset_transfer_stats()
    (y,) = scale.call_deferred(_Value, x)
    assert isinstance(y, _Value) and (y.shape, y.dtype, y.nbytes) == ((4,), np.float32, 16)
    (z,) = scale.call_deferred(_Value, y)  # passed back: its buffer, neither mapped nor uploaded
    assert y._array is None
    stats = runtime.transfer_stats()
    assert stats.uploads == 1 and stats.resident_args == 1 and stats.resident_bytes == 16
    np.testing.assert_array_equal(np.asarray(z), x * 4)
    arr = y.array()
    assert arr is y.array() and arr.flags.writeable  # mapped once, as `call` maps a result
    np.testing.assert_array_equal(arr, x * 2)
    arr[0] = 5.0  # the mapping is the buffer: a later call reads the write
    np.testing.assert_array_equal(scale(y)[0], [10.0, 4.0, 8.0, 12.0])
    (w,) = module["shift"](z, 0.5)  # a scalar argument too: the invoker takes the array
    np.testing.assert_array_equal(w, x * 4 + 0.5)
    np.testing.assert_array_equal(first, x * 2)  # earlier results unchanged by all of these


@pytest.mark.parametrize("name", ["same", "both", "twice"])
def test_results_sharing_memory_are_never_deferred(module, name: str) -> None:
    """A result in an argument's buffer (the argument, with a slice of it) or returned twice."""
    fn = module[name]
    a = np.arange(4, dtype=np.float32)
    calls = [fn.call_deferred(_Value, a + 10 * k) for k in range(3)]
    want = {"same": lambda v: [v], "both": lambda v: [v, v[2:]], "twice": lambda v: [v * v] * 2}
    for k, outs in enumerate(calls):
        assert all(o.__class__ is np.ndarray for o in outs), outs
        for got, ref in zip(outs, want[name](a + 10 * k), strict=True):
            np.testing.assert_array_equal(got, ref)  # copies: later calls left them alone
    if name == "twice":
        assert not np.shares_memory(*calls[-1])


def test_unmapped_results_of_every_kind(module) -> None:
    dyn, neg = module["dyn"], module["neg_bf16"]
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    dyn.call_deferred(_Value, x)
    neg.call_deferred(_Value, x.astype(ml_dtypes.bfloat16))
    for n in (3, 0):  # an empty result maps nothing
        (y,) = dyn.call_deferred(_Value, x[:n].copy())
        assert isinstance(y, _Value) and y.shape == (n,)
        np.testing.assert_array_equal(y.array(), x[:n] ** 2)
    (h,) = neg.call_deferred(_Value, x.astype(ml_dtypes.bfloat16))
    assert h.dtype == ml_dtypes.bfloat16 and h.array().dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(h.array().astype(np.float32), -x)
    (y,) = dyn.call_deferred(_Value, x)
    for twin in (pickle.loads(pickle.dumps(y)), copy.deepcopy(y)):  # as arrays of their own
        assert twin.__class__ is np.ndarray and not np.shares_memory(twin, y.array())
        np.testing.assert_array_equal(twin, x**2)


@pytest.mark.skipif("vulkan" not in available(), reason="no Vulkan device on this machine")
def test_vulkan_calls_upload_and_read_back() -> None:
    scale = load(compile_mlir(PROGRAM, "vulkan"), "vulkan")["scale"]
    x = np.arange(4, dtype=np.float32)
    ys = [scale(x * k)[0] for k in range(1, 4)]
    for k, y in enumerate(ys, start=1):
        np.testing.assert_array_equal(y, x * k * 2)
    np.testing.assert_array_equal(scale(ys[0])[0], x * 4)
