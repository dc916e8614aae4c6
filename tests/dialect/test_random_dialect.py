"""`flow.random_bits`: the hash it specifies, shape inference and errors, and its lowering.

The op's function (SplitMix64 of the key and the linear index) is checked
against published SplitMix64 outputs, then the numpy kernel and the compiled
lowering are both checked bit for bit against it.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType, f32, i1, i16, i32, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

import flow.dialect as fd
from flow.primitives.random import splitmix64_array
from flow.dialect import make_context
from flow.dialect.random import splitmix64

MASK = (1 << 64) - 1


def t(el, *shape):
    return TensorType(el, list(shape))


def reference_splitmix64(seed: int, count: int) -> list[int]:
    """The first `count` outputs of Vigna's SplitMix64 seeded with `seed`, written out."""
    out, state = [], seed
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


# --------------------------------------------------------------------------- the function


def test_hash_is_splitmix64_of_the_linear_index():
    # Published outputs of SplitMix64 seeded with 0.
    assert reference_splitmix64(0, 3) == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                          0x06C45D188009454F]  # fmt: skip
    for key in (0, 1, 12345, MASK, 1 << 63):
        assert [splitmix64(key, i) for i in range(5)] == reference_splitmix64(key, 5)


def test_numpy_kernel_matches_the_spec():
    for key in (0, 7, MASK, 0x0123456789ABCDEF):
        got = splitmix64_array(key, 6)
        assert got.dtype == np.uint64
        assert got.tolist() == reference_splitmix64(key, 6)
    assert splitmix64_array(3, 0).shape == (0,)


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize("shape", [(4, 8), (3,), (), (0, 5)])
@pytest.mark.parametrize("el", [i32, i64])
def test_infer_and_make(shape, el):
    assert fd.RandomBitsOp.infer([t(i64)], shape=shape, element_type=el) == t(el, *shape)
    block = Block(arg_types=[t(i64)])
    op = fd.RandomBitsOp.make(block.args[0], shape=shape, element_type=el)
    op.verify()
    assert op.params() == {"shape": shape, "element_type": el}


@pytest.mark.parametrize(
    "key, shape, el, message",
    [
        (t(i64, 2), (4,), i32, "expected key of type tensor<i64>, got tensor<2xi64>"),
        (t(i32), (4,), i32, "expected key of type tensor<i64>, got tensor<i32>"),
        (t(f32), (4,), i32, "expected key of type tensor<i64>, got tensor<f32>"),
        (i64, (4,), i32, "expected key to be a ranked tensor, got i64"),
        (t(i64), (-1, 4), i32, r"expected a static shape of non-negative sizes, got \[-1, 4\]"),
        (t(i64), (4,), f32, "expected result elements i32 or i64, got f32"),
        (t(i64), (4,), i16, "expected result elements i32 or i64, got i16"),
        (t(i64), (4,), i1, "expected result elements i32 or i64, got i1"),
    ],
)
def test_infer_errors(key, shape, el, message):
    with pytest.raises(VerifyException, match=r"'flow.random_bits' op " + message):
        fd.RandomBitsOp.infer([key], shape=shape, element_type=el)


def _parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def test_parse_print_round_trip():
    text = """func.func @f(%k: tensor<i64>) -> tensor<2x3xi32> {
  %0 = flow.random_bits %k : tensor<i64> -> tensor<2x3xi32>
  func.return %0 : tensor<2x3xi32>
}"""
    module = _parse(text)
    module.verify()
    out = io.StringIO()
    Printer(stream=out).print_op(module)
    assert "flow.random_bits %k : tensor<i64> -> tensor<2x3xi32>" in out.getvalue()


def test_verifier_rejects_a_bad_result_type():
    module = _parse('func.func @f(%k: tensor<i64>) {\n'
                    '  %0 = "flow.random_bits"(%k) : (tensor<i64>) -> tensor<3xui32>\n'
                    '  func.return\n}')  # fmt: skip
    with pytest.raises(VerifyException, match="expected result elements i32 or i64, got ui32"):
        module.verify()


# --------------------------------------------------------------------------- lowering

CASES = [((2, 3), i32), ((5,), i64), ((), i64), ((0, 4), i32), ((3, 1, 2), i64), ((7,), i32)]


def _module() -> ModuleOp:
    block = Block(arg_types=[t(i64)])
    results = []
    for shape, el in CASES:
        op = fd.RandomBitsOp.make(block.args[0], shape=shape, element_type=el)
        block.add_op(op)
        results.append(op.results[0])
    block.add_op(ReturnOp(*results))
    fn = FuncOp("bits", ([t(i64)], [r.type for r in results]), Region(block))
    return ModuleOp([fn])


@pytest.fixture(scope="module")
def compiled_bits():
    import iree.runtime as rt

    from flow.lowering import run_pipeline, to_iree_text
    from flow.targets import compile_mlir

    module = _module()
    run_pipeline(module, "flow-to-iree-input", verify=True)
    text = to_iree_text(module)
    assert "flow." not in text
    vm = rt.load_vm_flatbuffer(compile_mlir(text, "cpu"), driver="local-sync")
    return vm.bits


def _expected(key: int, shape, el) -> np.ndarray:
    z = np.array(reference_splitmix64(key, int(np.prod(shape))), dtype=np.uint64)
    if el == i32:
        return (z >> np.uint64(32)).astype(np.uint32).view(np.int32).reshape(shape)
    return z.view(np.int64).reshape(shape)


@pytest.mark.parametrize("key", [0, 42, -1, -(1 << 63)])
def test_compiled_bits_equal_the_spec_bit_for_bit(compiled_bits, key):
    outs = compiled_bits(np.array(key, np.int64))
    for (shape, el), got in zip(CASES, outs):
        got = np.asarray(got)
        expected = _expected(key & MASK, shape, el)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (shape, el)
        np.testing.assert_array_equal(got, expected, err_msg=f"{el}{list(shape)}")
