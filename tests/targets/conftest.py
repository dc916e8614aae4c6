"""Fixtures shared by the target tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from flow.targets import cache


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty compile-cache directory for this test, with the in-memory cache and the
    counters reset."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("FLOW_CACHE_DIR", str(directory))
    cache.clear_memory()
    cache.reset_stats()
    return directory
