"""Shared pytest setup: a per-session compile cache directory unless one is configured, and
compiles before first calls.

Tests of compiled programs compare what IREE's code computes with eager mode, so a first
call must run compiled, not on the interpreter that runs a program while it compiles in
the background (compile/tiers.py): `FLOW_SYNC_COMPILE=1` here, inherited by the scripts the
tests start. The tiers themselves are tested with `sync_compile=False` (tests/frontend/
test_tiers.py) and in whole processes with the variable unset.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault(
    "FLOW_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "flow-tests")
)
os.environ.setdefault("FLOW_SYNC_COMPILE", "1")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
