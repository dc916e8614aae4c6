"""Multi-process execution (`flow.distributed`): launching ranks over MPI, and global tensors.

``python -m flow.distributed.launch --nproc-per-node N script.py`` (or ``flow-run -n N``) starts
the ranks; ``flow.env`` tells each one who it is. ``flow.distributed.launch.launch`` does the
same from Python. (The submodule is not imported here, so ``python -m`` runs it cleanly.)

Global tensors, lowest first: ``placement`` (``flow.placement``, ``flow.sbp``, the
``GlobalInfo`` a global tensor carries), ``boxing`` (every MPI call of eager global tensors),
``eager_ops`` (primitives on global tensors, creation ops and constants), ``global_tensor``
(``to_global`` / ``to_local``, the global value). They build on ``flow.core`` and the dialect
only.
"""

from __future__ import annotations

__all__: list[str] = []
