"""Attributes of the `flow` dialect: placement, SBP and the distributed-tensor encoding.

A global tensor's distribution is part of its type, as the tensor encoding
`#flow.dist<#flow.placement<...>, #flow.sbp<...>>`, so every value carries its
own SBP and no side table can drift out of sync with the IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, TensorType
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from .semantics import Sbp


@irdl_attr_definition
class PlacementAttr(ParametrizedAttribute):
    """A device type and an N-d array of ranks: `#flow.placement<"cpu", [[0, 1], [2, 3]]>`.

    The array's shape is the device mesh (one SBP entry per axis); its entries
    are the process ranks, in row-major order.
    """

    name = "flow.placement"

    device: StringAttr
    shape: ArrayAttr[IntAttr]
    ranks: ArrayAttr[IntAttr]

    @staticmethod
    def get(device: str, ranks: Sequence) -> PlacementAttr:
        """Build from a device type and a (nested) list of ranks."""
        shape, flat = _flatten_ranks(ranks)
        return PlacementAttr(
            StringAttr(device),
            ArrayAttr(IntAttr(s) for s in shape),
            ArrayAttr(IntAttr(r) for r in flat),
        )

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(s.data for s in self.shape.data)

    @property
    def rank_list(self) -> tuple[int, ...]:
        return tuple(r.data for r in self.ranks.data)

    def verify(self) -> None:
        shape, ranks = self.mesh_shape, self.rank_list
        if not self.device.data:
            raise VerifyException("placement device type must not be empty")
        if not shape or any(s <= 0 for s in shape):
            raise VerifyException(
                f"placement rank array must be non-empty, got shape {list(shape)}"
            )
        if prod(shape) != len(ranks):
            raise VerifyException(
                f"placement shape {list(shape)} holds {prod(shape)} ranks, got {len(ranks)}"
            )
        if any(r < 0 for r in ranks):
            raise VerifyException(f"placement ranks must be non-negative, got {list(ranks)}")
        if len(set(ranks)) != len(ranks):
            raise VerifyException(f"placement ranks must be distinct, got {list(ranks)}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        device = parser.parse_str_literal("placement device type")
        parser.parse_punctuation(",")
        nested = _parse_nested_ints(parser)
        parser.parse_punctuation(">")
        try:
            shape, flat = _flatten_ranks(nested)
        except ValueError as err:
            parser.raise_error(str(err))
        return (
            StringAttr(device),
            ArrayAttr(IntAttr(s) for s in shape),
            ArrayAttr(IntAttr(r) for r in flat),
        )

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f'<"{self.device.data}", ')
        printer.print_string(_format_nested(self.rank_list, self.mesh_shape))
        printer.print_string(">")


def _parse_nested_ints(parser: AttrParser) -> list | int:
    if parser.parse_optional_punctuation("[") is None:
        return parser.parse_integer(allow_boolean=False, allow_negative=True)
    items: list = []
    if parser.parse_optional_punctuation("]") is None:
        items.append(_parse_nested_ints(parser))
        while parser.parse_optional_punctuation(",") is not None:
            items.append(_parse_nested_ints(parser))
        parser.parse_punctuation("]")
    return items


def _flatten_ranks(ranks) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and row-major contents of a rectangular nested list of ints."""
    if isinstance(ranks, int):
        raise ValueError("placement ranks must be a list, got a single integer")
    ranks = list(ranks)
    if not ranks:
        raise ValueError("placement rank list must not be empty")
    if all(isinstance(r, int) for r in ranks):
        return (len(ranks),), tuple(int(r) for r in ranks)
    if any(isinstance(r, int) for r in ranks):
        raise ValueError("placement rank array must be rectangular (mixed lists and ints)")
    subs = [_flatten_ranks(r) for r in ranks]
    inner = subs[0][0]
    if any(s[0] != inner for s in subs):
        raise ValueError("placement rank array must be rectangular (rows of different shapes)")
    return (len(ranks), *inner), tuple(r for s in subs for r in s[1])


def _format_nested(flat: Sequence[int], shape: Sequence[int]) -> str:
    if len(shape) == 1:
        return "[" + ", ".join(str(r) for r in flat) + "]"
    step = len(flat) // shape[0]
    rows = (_format_nested(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0]))
    return "[" + ", ".join(rows) + "]"


@irdl_attr_definition
class SbpAttr(ParametrizedAttribute):
    """One SBP entry per placement axis: `#flow.sbp<[S(0), B, P]>`."""

    name = "flow.sbp"

    entries: ArrayAttr[StringAttr]

    @staticmethod
    def get(entries: Sequence[Sbp | str]) -> SbpAttr:
        parsed = [e if isinstance(e, Sbp) else Sbp.parse(e) for e in entries]
        return SbpAttr(ArrayAttr(StringAttr(str(e)) for e in parsed))

    @property
    def sbps(self) -> tuple[Sbp, ...]:
        return tuple(Sbp.parse(e.data) for e in self.entries.data)

    def verify(self) -> None:
        for e in self.entries.data:
            try:
                Sbp.parse(e.data)
            except ValueError as err:
                raise VerifyException(str(err)) from None

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")

        def entry() -> StringAttr:
            if parser.parse_optional_characters("B") is not None:
                return StringAttr("B")
            if parser.parse_optional_characters("P") is not None:
                return StringAttr("P")
            if parser.parse_optional_characters("S") is not None:
                parser.parse_punctuation("(")
                dim = parser.parse_integer(allow_boolean=False, allow_negative=False)
                parser.parse_punctuation(")")
                return StringAttr(f"S({dim})")
            parser.raise_error("expected an SBP entry: S(<dim>), B or P")

        entries = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, entry)
        parser.parse_punctuation(">")
        return (ArrayAttr(entries),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<[" + ", ".join(e.data for e in self.entries.data) + "]>")


@irdl_attr_definition
class DistAttr(ParametrizedAttribute):
    """Tensor encoding of a global tensor: `#flow.dist<#flow.placement<...>, #flow.sbp<...>>`."""

    name = "flow.dist"

    placement: PlacementAttr
    sbp: SbpAttr

    def verify(self) -> None:
        axes, entries = len(self.placement.mesh_shape), len(self.sbp.entries.data)
        if axes != entries:
            raise VerifyException(
                f"expected one SBP entry per placement axis ({axes}), got {entries}"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        placement = parser.parse_attribute()
        parser.parse_punctuation(",")
        sbp = parser.parse_attribute()
        parser.parse_punctuation(">")
        if not isinstance(placement, PlacementAttr) or not isinstance(sbp, SbpAttr):
            parser.raise_error("expected #flow.dist<#flow.placement<...>, #flow.sbp<...>>")
        return (placement, sbp)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_attribute(self.placement)
        printer.print_string(", ")
        printer.print_attribute(self.sbp)
        printer.print_string(">")


def dist_of(ty: Attribute) -> DistAttr | None:
    """The distribution of a tensor type, or None for a local tensor."""
    if isinstance(ty, TensorType) and isinstance(ty.encoding, DistAttr):
        return ty.encoding
    return None


def verify_dist_fits(ty: TensorType) -> None:
    """Every split dim of a global tensor type must name one of its dims."""
    dist = dist_of(ty)
    if dist is None:
        return
    rank = len(ty.get_shape())
    for sbp in dist.sbp.sbps:
        if sbp.kind == "S" and not 0 <= sbp.dim < rank:
            raise VerifyException(
                f"split dim {sbp.dim} is out of range for a tensor of rank {rank} ({ty})"
            )
