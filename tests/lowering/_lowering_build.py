"""Build flow modules in tests through the dialect's `make` builders (as the tracer does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue


class Body:
    """Appends flow ops to a block: `b(AddOp, x, y)` makes the op and returns its result."""

    def __init__(self, block: Block):
        self.block = block

    def __call__(self, cls, *operands: SSAValue, **params) -> SSAValue:
        op = cls.make(*operands, **params)
        self.block.add_op(op)
        return op.results[0]


def function(
    name: str,
    arg_types: Sequence[Attribute],
    build: Callable[..., Sequence[SSAValue]],
) -> func.FuncOp:
    """`func.func @name(args) -> results`, its body built by `build(body, *args)`."""
    block = Block(arg_types=arg_types)
    results = list(build(Body(block), *block.args))
    block.add_op(func.ReturnOp(*results))
    return func.FuncOp(name, (list(arg_types), [r.type for r in results]), Region(block))


def module(*funcs: func.FuncOp) -> ModuleOp:
    return ModuleOp(list(funcs))


def tensor(el: Attribute, *shape: int) -> TensorType:
    return TensorType(el, list(shape))
