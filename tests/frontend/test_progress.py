"""The status line of a compile the user waits for (compile/progress.py)."""

from __future__ import annotations

import time

import numpy as np

import flow
from flow.compile import progress


def test_a_long_compile_shows_what_compiles(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path))  # a real compile, not a cache hit
    monkeypatch.setenv("FLOW_VERBOSE", "1")
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    f = flow.jit(lambda x: flow.exp(x).sum(0) * 3.0, sync_compile=True)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(f(flow.tensor(x)).numpy(), np.exp(x).sum(0) * 3, rtol=1e-5)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("flow: compiling <lambda> for cpu"), err
    assert err[-1].startswith("flow: compiling <lambda> for cpu, ") and err[-1].endswith(": done")
    assert " linalg ops (" in err[-1], err


def test_a_short_or_silenced_compile_shows_nothing(monkeypatch, capsys):
    monkeypatch.setenv("FLOW_VERBOSE", "1")
    with progress.status("compiling quick"):
        pass  # well under AFTER_S
    monkeypatch.setenv("FLOW_VERBOSE", "0")
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    with progress.status("compiling silenced") as line:
        time.sleep(0.05)
        line.detail = "3 linalg ops"
    assert capsys.readouterr().err == ""


def test_the_line_names_the_detail_and_time(monkeypatch, capsys):
    monkeypatch.setenv("FLOW_VERBOSE", "1")
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    with progress.status("compiling step for cpu") as line:
        line.detail = "12 linalg ops"
        time.sleep(0.1)
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("flow: compiling step for cpu, 12 linalg ops (")
    assert err[-1].endswith(" s): done")
