"""Lowering rules for the flow dialect's random ops."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from ._linalg_builders import Lowered

RULES: dict[type[Operation], Callable[[Operation], Lowered]] = {}
