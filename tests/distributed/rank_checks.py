"""What the rank scripts check with: a counter of passed checks that fails naming the rank.

check = Checks(rank)
check(ok, "what")             # counts, or raises AssertionError("rank R: what")
check.close(a, b, "what")     # numpy allclose (and equal shapes unless shapes=False)
check.done()                  # prints "rank R: N checks passed", which the tests parse
"""

from __future__ import annotations

import sys

import numpy as np


class Checks:
    def __init__(self, rank: int):
        self.rank = rank
        self.count = 0

    def __call__(self, ok: bool, what: str) -> None:
        if not ok:
            raise AssertionError(f"rank {self.rank}: {what}")
        self.count += 1

    def close(self, a, b, what: str, *, rtol=1e-5, atol=1e-5, shapes: bool = True) -> None:
        a, b = np.asarray(a), np.asarray(b)
        if shapes and a.shape != b.shape:
            self(False, f"{what}: shapes {a.shape} and {b.shape}")
        if not np.allclose(a, b, rtol=rtol, atol=atol):
            self(False, f"{what}: {a} vs {b}")
        self(True, what)

    def done(self, extra: str = "") -> None:
        # One write with its newline: ranks share the launcher's stdout, and a separate
        # newline (print) lets another rank's line land in between.
        sys.stdout.write(f"rank {self.rank}: {self.count} checks passed{extra}\n")
        sys.stdout.flush()
