"""Multi-process execution (`flow.distributed`): launching ranks over MPI.

``python -m flow.distributed.launch --nproc-per-node N script.py`` (or ``flow-run -n N``) starts
the ranks; ``flow.env`` tells each one who it is. ``flow.distributed.launch.launch`` does the
same from Python. (The submodule is not imported here, so ``python -m`` runs it cleanly.)
"""

from __future__ import annotations

__all__: list[str] = []
