"""Parsing flow IR text safely: every malformed input is a located error, found fast.

xDSL's parser (pinned at 0.75) accepts or mishandles some malformed inputs: its
string-literal regex backtracks exponentially on an unterminated string, a splat
`dense<1.0>` is expanded to one Python float per element, tensor types may nest
or overflow int64, values may be used before they are defined, and verifier
errors carry no source position. `FlowParser` fixes these at the parser; the
tools parse through `parse_module`, which also verifies op by op so that every
error reads `file:line:col: error: ...`.
"""

from __future__ import annotations

import math
import re
import struct

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    ComplexType,
    IndexType,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, OpResult
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind

from .attrs import verify_dist_fits

MAX_DENSE_ELEMENTS = 1 << 20
"""Most elements a splat `dense<v>` in IR text may have (xDSL expands it in memory)."""

MAX_INTEGER_WIDTH = (1 << 24) - 1
"""Widest integer type MLIR (so IREE) can parse."""

MAX_ELEMENT_INT_WIDTH = 64
"""Widest integer element of a tensor (numpy's and the lowering's constants stop there)."""

MAX_TENSOR_BYTES = (1 << 63) - 1
"""A tensor's size in bytes must fit in int64, as IREE computes it."""

_DYNAMIC = -1

_VALUE_ERRORS = (ValueError, TypeError, OverflowError, struct.error)
"""What xDSL raises for a literal it cannot represent (e.g. 2^70 as an i32)."""


class LocatedVerifyException(VerifyException):
    """A verifier error at a source span: prints as `file:line:col: error: msg` and the line."""

    def __init__(self, span: Span, msg: str):
        super().__init__(msg)
        self.span = span
        self.msg = msg

    def __str__(self) -> str:
        head = f"{self.span.get_location()}: error: {self.msg}"
        return "\n".join([head, *self.span.print_with_context(None).splitlines()[1:]])


class FlowLexer(MLIRLexer):
    """MLIR's lexer with a string-literal rule that runs in linear time.

    xDSL's rule nests `[^"...]+` inside `(...)*`, which backtracks exponentially
    when the closing quote is missing. Here each repetition takes one character
    or one escape, and the alternatives start differently: every prefix of the
    text matches one way only, so a failing match gives up in linear time.
    """

    _unescaped_characters_regex = re.compile(
        r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
    )


class FlowParser(Parser):
    """xDSL's parser with flow's checks; records each op's source span for diagnostics."""

    def __init__(self, ctx: Context, text: str, name: str = "<unknown>") -> None:
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(FlowLexer(Input(text, name)))
        self.op_spans: dict[Operation, Span] = {}
        self._dense_start = 0

    def parse_optional_operation(self) -> Operation | None:
        start = self._current_token.span
        try:
            op = super().parse_optional_operation()
        except LocatedVerifyException:
            raise
        except (DiagnosticException, *_VALUE_ERRORS) as err:  # e.g. an op parser's type check
            raise LocatedVerifyException(start, _message(err)) from None
        if op is not None:
            self.op_spans[op] = start
        return op

    def _parse_block(self):
        if self._current_token.kind != MLIRTokenKind.CARET_IDENT:
            self.raise_error(
                f"expected an operation, a block label (^name) or '}}' in a region, "
                f"got '{self._current_token.text[:40]}'"
            )
        return super()._parse_block()

    def parse_optional_type(self):
        start = self._current_token.span.start
        try:
            ty = super().parse_optional_type()
        except LocatedVerifyException:
            raise
        except (DiagnosticException, *_VALUE_ERRORS) as err:
            self._raise_at(start, str(err))
        if isinstance(ty, IntegerType) and ty.width.data > MAX_INTEGER_WIDTH:
            msg = f"integer bitwidth {ty.width.data} exceeds MLIR's limit of {MAX_INTEGER_WIDTH}"
            self._raise_at(start, msg)
        return ty

    def parse_optional_attribute(self):
        start = self._current_token.span.start
        try:
            return super().parse_optional_attribute()
        except LocatedVerifyException:
            raise
        except (DiagnosticException, *_VALUE_ERRORS) as err:
            self._raise_at(start, str(err))

    def parse_shape(self):
        start = self._current_token.span.start
        shape, element_type = super().parse_shape()
        for dim in shape or ():
            if dim < _DYNAMIC or dim > MAX_TENSOR_BYTES:
                self._raise_at(start, f"shape dimension {dim} is out of range [0, 2^63)")
        return shape, element_type

    def _parse_tensor_attrs(self):
        start = self._current_token.span.start
        ty = super()._parse_tensor_attrs()
        if not isinstance(ty.element_type, IntegerType | IndexType | AnyFloat | ComplexType):
            self._raise_at(
                start,
                f"tensor element type must be an integer, index, float or complex type, "
                f"got {ty.element_type}",
            )
        element = ty.element_type
        if isinstance(element, IntegerType) and element.width.data > MAX_ELEMENT_INT_WIDTH:
            self._raise_at(
                start,
                f"tensor element type {element} is wider than {MAX_ELEMENT_INT_WIDTH} bits: "
                f"flow computes on integers of 1 to {MAX_ELEMENT_INT_WIDTH} bits",
            )
        if isinstance(ty, TensorType):
            size = _byte_size(ty)
            if size is not None and size > MAX_TENSOR_BYTES:
                self._raise_at(start, f"{ty} has {size} bytes, more than int64 can count")
            try:
                verify_dist_fits(ty)
            except LocatedVerifyException:
                raise
            except DiagnosticException as err:
                self._raise_at(start, str(err))
        return ty

    def parse_dense_int_or_fp_elements_attr(self, type):
        self._dense_start = self._current_token.span.start
        if type is not None:  # the type comes first: bound the elements before reading them
            self._check_dense_count(type, self._dense_start, written=0)
        return super().parse_dense_int_or_fp_elements_attr(type)

    def _parse_dense_literal_type(self):
        start = self._current_token.span.start
        ty = super()._parse_dense_literal_type()
        self._check_dense_count(ty, start, written=start - self._dense_start)
        return ty

    def _check_dense_count(self, ty, start: int, written: int) -> None:
        """A literal may hold as many elements as its text spells out; a splat (one value
        expanded to every element in memory) at most `MAX_DENSE_ELEMENTS`."""
        count = math.prod(ty.get_shape())
        if count > max(MAX_DENSE_ELEMENTS, written):
            self._raise_at(
                start,
                f"dense literal of {count} elements exceeds the limit of {MAX_DENSE_ELEMENTS} "
                "elements for a splat in IR text; write a splat constant as `flow.full`",
            )

    def _raise_at(self, start: int, msg: str):
        """A semantic error (the text parses, its meaning is wrong) at `start`."""
        end = max(start + 1, self._current_token.span.start)
        raise LocatedVerifyException(Span(start, end, self.lexer.input), msg)


def _byte_size(ty: TensorType) -> int | None:
    shape = ty.get_shape()
    if any(d == _DYNAMIC for d in shape):
        return None
    width = getattr(ty.element_type, "bitwidth", 64)
    if isinstance(ty.element_type, ComplexType):
        width = 2 * getattr(ty.element_type.element_type, "bitwidth", 64)
    return math.prod(shape) * max(1, (width + 7) // 8)


def decode(data: bytes | str, name: str) -> str:
    """`data` as text; invalid UTF-8 is a located `ParseError`."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        at = len(data[: err.start].decode("utf-8", errors="replace"))
        text = data.decode("utf-8", errors="replace")
        span = Span(at, at + 1, Input(text, name))
        raise ParseError(span, f"invalid UTF-8 byte 0x{data[err.start]:02x}") from None


def parse_module(
    data: str | bytes,
    name: str = "<stdin>",
    ctx: Context | None = None,
    *,
    allow_implicit_module: bool = True,
    verify: bool = True,
) -> ModuleOp:
    """Parse flow IR text (and verify it): any bad input raises a located `ParseError`."""
    if ctx is None:
        from . import make_context

        ctx = make_context()
    parser = FlowParser(ctx, decode(data, name), name)
    try:
        module = parser.parse_module(allow_implicit_module)
    except RecursionError:
        _raise_at_token(parser, "nesting too deep")
    except MemoryError:
        _raise_at_token(parser, "input too large to parse")
    except (struct.error, OverflowError) as err:
        _raise_at_token(parser, f"value out of range: {err}")
    if verify:
        verify_located(module, parser.op_spans)
    return module


def _raise_at_token(parser: FlowParser, msg: str):
    span = parser._current_token.span
    raise ParseError(Span(span.start, max(span.end, span.start + 1), span.input), msg) from None


def verify_located(module: ModuleOp, spans: dict[Operation, Span]) -> None:
    """Verify `module` op by op, innermost first; an error is reported at its op's span."""
    try:
        _check_dominance(module, spans)
        _verify_op(module, spans)
    except RecursionError:
        raise DiagnosticException("IR nesting too deep to verify") from None


def _verify_op(op: Operation, spans: dict[Operation, Span]) -> None:
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                _verify_op(child, spans)
    try:
        for region in op.regions:  # what Block.verify checks besides its ops
            if len(region.blocks) == 1 and region.block.first_op is None:
                if not op.has_trait(NoTerminator):
                    raise VerifyException(
                        f"Operation {op.name} contains empty block in single-block region "
                        "that expects at least a terminator"
                    )
        op.verify(verify_nested_ops=False)
        _verify_declaration(op)
    except LocatedVerifyException:
        raise
    except DiagnosticException as err:
        span = spans.get(op)
        if span is None:
            raise
        raise LocatedVerifyException(span, _message(err)) from None
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, struct.error) as err:
        span = spans.get(op)
        msg = f"'{op.name}' op does not verify: {err}"
        if span is None:
            raise DiagnosticException(msg) from None
        raise LocatedVerifyException(span, msg) from None


def _verify_declaration(op: Operation) -> None:
    """MLIR's rule xDSL lacks: a function without a body must be private."""
    if isinstance(op, FuncOp) and not op.body.blocks:
        if op.sym_visibility is None or op.sym_visibility.data != "private":
            raise VerifyException(
                f"'func.func' op @{op.sym_name.data} has no body: a declaration must be "
                "private (func.func private @name(...))"
            )


def _message(err: BaseException) -> str:
    msg = str(err)
    return msg.removeprefix("Operation does not verify: ")


def _check_dominance(module: ModuleOp, spans: dict[Operation, Span]) -> None:
    """Within a block, a value must be defined before the ops that use it (MLIR's SSA rule)."""
    index: dict[Block, dict[Operation, int]] = {}

    def position(op: Operation) -> int:
        block = op.parent
        assert block is not None
        if block not in index:
            index[block] = {o: i for i, o in enumerate(block.ops)}
        return index[block][op]

    for op in module.walk():
        for operand in op.operands:
            if not isinstance(operand, OpResult):
                continue
            owner = operand.op
            if owner.parent is None:
                continue
            user: Operation | None = op
            while user is not None and user.parent is not owner.parent:
                user = user.parent_op()
            if user is None or position(user) > position(owner):
                continue
            what = "its own result" if user is owner else "a value defined after it"
            msg = f"'{op.name}' op uses {what} (%{operand.name_hint or '?'}); " + (
                "values must be defined before their uses"
            )
            span = spans.get(op)
            if span is None:
                raise DiagnosticException(msg)
            raise LocatedVerifyException(span, msg)

