"""flow.mock_torch: PyTorch code running on flow unedited, in-process (enable / disable, as
functions and as `with` blocks, lazy placeholders) and as a whole program through
`eval $(python -m flow.mock_torch)` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flow
import flow.mock_torch as mock


@pytest.fixture(autouse=True)
def _off_afterwards():
    yield
    mock.disable()
    assert not mock.is_enabled()


def test_enable_makes_torch_flow_and_disable_gives_it_back():
    real = sys.modules.get("torch")
    with mock.enable():
        import torch
        import torch.nn.functional as F

        assert torch is flow and F is flow.nn.functional and mock.is_enabled()
        x = torch.zeros(2, 3)
        assert isinstance(x, flow.Tensor)
        model = torch.nn.Linear(3, 1)
        np.testing.assert_allclose(model(x).numpy(), np.tile(model.bias.numpy(), (2, 1)))
    assert not mock.is_enabled()
    assert sys.modules.get("torch") is real  # the real torch (or none) is back
    assert "torch" not in globals() or globals()["torch"] is not flow


def test_each_mode_keeps_its_own_names():
    global torch  # the swap is of module-level names, as in a script
    mock.enable()
    import torch

    assert torch is flow
    with mock.disable():
        with pytest.raises(NameError):
            torch.ones(2, 3)  # noqa: F821  (imported under the other mode only)
    assert torch is flow  # back under the mock, its name is back


def test_a_name_flow_lacks_is_an_error_or_with_lazy_a_placeholder(capsys):
    with mock.enable():
        with pytest.raises(ModuleNotFoundError, match="no counterpart in flow.*lazy=True"):
            import torch.not_a_module  # noqa: F401
    with mock.enable(lazy=True, verbose=True):
        import torch.not_a_module.deeper as deeper

        assert "torch.not_a_module.deeper is a placeholder" in capsys.readouterr().out
        with pytest.raises(NotImplementedError, match="torch.not_a_module.deeper.fn has no "):
            deeper.fn(1)
        import torch

        assert torch.zeros(1).dtype is flow.float32  # flow's names still work
        assert not torch.missing_name  # a placeholder, falsy until used


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip


def test_whole_program_mock_through_pythonpath():
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_MOCK_TORCH")}
    line = subprocess.run([sys.executable, "-m", "flow.mock_torch", "--lazy"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    env = dict(base)
    for part in line.strip().split(";"):
        name, _, value = part.strip().removeprefix("export ").partition("=")
        env[name] = value
    run = _run("""
        import torch, flow
        import torch.nn as nn, torch.optim as optim
        assert torch is not None and isinstance(torch.zeros(2, 3), flow.Tensor)
        m = nn.Linear(4, 2)
        opt = optim.SGD(m.parameters(), lr=0.1)
        loss = m(torch.ones(3, 4)).sum()
        loss.backward()
        opt.step()
        print("trained", type(m).__module__)
    """, env)
    assert run.returncode == 0, run.stderr
    assert "trained flow.nn" in run.stdout
    off = subprocess.run([sys.executable, "-m", "flow.mock_torch", "disable"],
                         capture_output=True, text=True, check=True, env=env).stdout  # fmt: skip
    assert "_mock_path" not in off
    with pytest.raises(SystemExit, match="unknown arguments"):
        mock._shell(["--fast"])
