"""flow.modes: how each execution mode processes a primitive, and the order `bind` asks them.

`flow.primitives.bind` hands a primitive to the first mode below whose `applies` holds (a
mode may hand it on by returning None): lazy recording (`flow.lazy()`, outside traces;
it passes on what it does not record), eager creation of constants (arg-less `full` /
`iota`, global ones inside a global VJP rule), eager ops on global tensors, tracing
(`flow.jit`), and eager mode, which takes everything else, and the only one that
runs a composite's kernel (the others get the primitives it is made of).
"""

from __future__ import annotations

from flow.modes import eager, global_eager, lazy, tracing
from flow.primitives.registry import register_mode

register_mode("lazy", lazy.applies, lazy.process)
register_mode("global_creation", global_eager.creation_applies, global_eager.create)
register_mode("global_eager", global_eager.applies, global_eager.process)
register_mode("tracing", tracing.applies, tracing.process)
register_mode("eager", eager.applies, eager.process, composites=True)
