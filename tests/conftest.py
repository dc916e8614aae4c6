"""Shared pytest setup: a per-session compile cache directory unless one is configured."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault(
    "FLOW_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "flow-tests")
)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
