"""``python -m flow.distributed``: the same launcher as ``python -m flow.distributed.launch``."""

from __future__ import annotations

import sys

from flow.distributed.launch import main

if __name__ == "__main__":
    sys.exit(main())
