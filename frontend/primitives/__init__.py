"""The primitives: the registry (`Primitive`, `bind`) and one module per family, named as in
`dialect/` and `lowering/`. `flow.primitives.X` is primitive X whatever its family."""

from __future__ import annotations

from flow.primitives.elementwise import *  # noqa: F403
from flow.primitives.movement import *  # noqa: F403
from flow.primitives.random import *  # noqa: F403
from flow.primitives.registry import PRIMITIVES, Primitive, bind, primitive
from flow.primitives.structured import *  # noqa: F403
from flow.primitives.window import *  # noqa: F403
