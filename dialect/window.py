"""The flow dialect's window ops: N-d convolution and reductions over sliding windows.

Both ops describe a window sliding over a padded operand with strides and
dilations, so they share one output-size rule, `(padded - dilated_window) //
stride + 1` per dim, and one way of spelling padding: a flat property of
`(low, high)` pairs, `padding = [l0, h0, l1, h1, ...]` (StableHLO's padding
flattened). Bias, `ceil_mode` and averaging are the frontend's business: it
expresses them with extra high padding and elementwise ops.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Attribute
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from .base import FlowOp, expect_tensor, i64_array, is_float, is_int, verify_error
from .semantics import window_output_size
from .structured import ReduceKind, ReduceKindAttr

Pairs = Sequence[Sequence[int]]


def _numeric(ty: TensorType, op_name: str, what: str) -> None:
    if not (is_float(ty.element_type) or is_int(ty.element_type)):
        raise verify_error(op_name, f"expected a float or integer {what}, got {ty}")


def _ints(values: Sequence[int], n: int, op_name: str, what: str, low: int) -> tuple[int, ...]:
    """`n` ints, each >= `low` (one per dim the property describes)."""
    values = tuple(int(v) for v in values)
    if len(values) != n:
        raise verify_error(op_name, f"expected {n} {what}, got {list(values)}")
    if any(v < low for v in values):
        raise verify_error(op_name, f"expected {what} >= {low}, got {list(values)}")
    return values


def _pairs(padding: Pairs, n: int, op_name: str) -> tuple[tuple[int, int], ...]:
    pairs = tuple(tuple(int(v) for v in p) for p in padding)
    if len(pairs) != n or any(len(p) != 2 for p in pairs):
        raise verify_error(
            op_name, f"expected {n} (low, high) padding pairs, got {[list(p) for p in pairs]}"
        )
    if any(v < 0 for p in pairs for v in p):
        raise verify_error(
            op_name, f"expected non-negative padding, got {[list(p) for p in pairs]}"
        )
    return pairs  # type: ignore[return-value]


def _flat(padding: Pairs) -> DenseArrayBase:
    return i64_array([v for p in padding for v in p])


def _unflat(values: Sequence[int]) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(values[i : i + 2]) for i in range(0, len(values), 2))  # type: ignore[misc]


@irdl_op_definition
class ConvOp(FlowOp):
    """N-d convolution (N = 1, 2, 3) of `[N, C_in, *spatial]` with `[C_out, C_in/groups, *kernel]`.

    The result is `[N, C_out, *out]`, with PyTorch's output size per spatial dim
    `(size + low + high - dilation * (kernel - 1) - 1) // stride + 1`, which must
    be positive. Input channels and output channels are split into `groups`
    independent convolutions. It is a cross-correlation (the kernel is not
    flipped), as in every deep learning framework.
    """

    name = "flow.conv"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    strides = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    padding = prop_def(DenseArrayBase.constr(i64))
    groups = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = (
        "$input `,` $weight `,` `strides` `=` $strides `,` `dilations` `=` $dilations `,` "
        "`padding` `=` $padding `,` `groups` `=` $groups attr-dict "
        "`:` type($input) `,` type($weight) `->` type($result)"
    )

    @classmethod
    def infer(
        cls,
        operand_types: Sequence[Attribute],
        *,
        strides: Sequence[int],
        dilations: Sequence[int],
        padding: Pairs,
        groups: int,
    ) -> TensorType:
        x, w = (
            expect_tensor(t, cls.name, what) for t, what in zip(operand_types, ("input", "weight"))
        )
        xs, ws = x.get_shape(), w.get_shape()
        if len(xs) not in (3, 4, 5):
            raise verify_error(
                cls.name, f"expected an input of rank 3, 4 or 5 ([N, C, spatial...]), got {x}"
            )
        if len(ws) != len(xs):
            raise verify_error(
                cls.name, f"expected a weight of rank {len(xs)} like the input, got {w}"
            )
        if x.element_type != w.element_type:
            raise verify_error(
                cls.name, f"expected input and weight of one element type, got {x} and {w}"
            )
        _numeric(x, cls.name, "input")
        n = len(xs) - 2
        strides = _ints(strides, n, cls.name, "strides", 1)
        dilations = _ints(dilations, n, cls.name, "dilations", 1)
        pads = _pairs(padding, n, cls.name)
        if int(groups) < 1:
            raise verify_error(cls.name, f"expected groups >= 1, got {groups}")
        c_in, c_out = xs[1], ws[0]
        if c_in % groups:
            raise verify_error(
                cls.name, f"expected input channels ({c_in}) divisible by groups ({groups})"
            )
        if ws[1] * groups != c_in:
            raise verify_error(
                cls.name,
                f"expected weight dim 1 to be input channels / groups = {c_in // groups}, "
                f"got {ws[1]} (input {x}, weight {w}, groups = {groups})",
            )
        if c_out % groups:
            raise verify_error(
                cls.name, f"expected output channels ({c_out}) divisible by groups ({groups})"
            )
        out = []
        for i in range(n):
            size = window_output_size(xs[2 + i], ws[2 + i], strides[i], dilations[i], pads[i])
            if size < 1:
                padded = xs[2 + i] + pads[i][0] + pads[i][1]
                raise verify_error(
                    cls.name,
                    f"expected the dilated kernel (size {dilations[i] * (ws[2 + i] - 1) + 1}) to "
                    f"fit in the padded input (size {padded}) in spatial dim {i}, "
                    f"got input {x} and weight {w}",
                )
            out.append(size)
        return TensorType(x.element_type, [xs[0], c_out, *out])

    def params(self) -> dict:
        return {
            "strides": self.strides.get_values(),
            "dilations": self.dilations.get_values(),
            "padding": _unflat(self.padding.get_values()),
            "groups": self.groups.value.data,
        }

    @classmethod
    def _props(cls, *, strides, dilations, padding, groups) -> dict[str, Attribute]:
        return {
            "strides": i64_array(strides),
            "dilations": i64_array(dilations),
            "padding": _flat(padding),
            "groups": IntegerAttr(int(groups), i64),
        }


@irdl_op_definition
class ReduceWindowOp(FlowOp):
    """Reduce every window of a padded operand with sum / max / min / prod (pooling).

    `window`, `strides`, `dilations` and the `(low, high)` padding pairs have one
    entry per operand dim (1 / 1 / 1 / 0 for dims that are not pooled). Padded
    elements hold the combiner's identity (0 for sum, -inf or the smallest
    integer for max), so they never win a max. Each result dim counts the
    windows that fit: `(padded - dilations * (window - 1) - 1) // strides + 1`.
    """

    name = "flow.reduce_window"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(ReduceKindAttr)
    window = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    padding = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$kind $operand `,` `window` `=` $window `,` `strides` `=` $strides `,` "
        "`dilations` `=` $dilations `,` `padding` `=` $padding attr-dict "
        "`:` type($operand) `->` type($result)"
    )

    @classmethod
    def infer(
        cls,
        operand_types: Sequence[Attribute],
        *,
        kind: str,
        window: Sequence[int],
        strides: Sequence[int],
        dilations: Sequence[int],
        padding: Pairs,
    ) -> TensorType:
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        if kind not in {k.value for k in ReduceKind}:
            raise verify_error(cls.name, f"expected kind in sum/max/min/prod, got {kind!r}")
        _numeric(ty, cls.name, "operand")
        shape = ty.get_shape()
        r = len(shape)
        window = _ints(window, r, cls.name, "window sizes", 1)
        strides = _ints(strides, r, cls.name, "strides", 1)
        dilations = _ints(dilations, r, cls.name, "dilations", 1)
        pads = _pairs(padding, r, cls.name)
        out = []
        for i in range(r):
            padded = shape[i] + pads[i][0] + pads[i][1]
            extent = dilations[i] * (window[i] - 1) + 1
            # An empty dim under a window of 1 gives an empty result dim.
            if extent > max(padded, 1):
                raise verify_error(
                    cls.name,
                    f"expected the dilated window (size {extent}) to fit in the padded "
                    f"operand (size {padded}) in dim {i}, got {ty}",
                )
            out.append(window_output_size(shape[i], window[i], strides[i], dilations[i], pads[i]))
        return TensorType(ty.element_type, out)

    def params(self) -> dict:
        return {
            "kind": self.kind.data.value,
            "window": self.window.get_values(),
            "strides": self.strides.get_values(),
            "dilations": self.dilations.get_values(),
            "padding": _unflat(self.padding.get_values()),
        }

    @classmethod
    def _props(cls, *, kind, window, strides, dilations, padding) -> dict[str, Attribute]:
        return {
            "kind": ReduceKindAttr(ReduceKind(kind)),
            "window": i64_array(window),
            "strides": i64_array(strides),
            "dilations": i64_array(dilations),
            "padding": _flat(padding),
        }


OPS: tuple = (ConvOp, ReduceWindowOp)
ATTRS: tuple = ()

__all__: list[str] = ["ConvOp", "ReduceWindowOp"]
