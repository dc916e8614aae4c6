"""The GPT example (examples/train_gpt.py) as whole processes, at a tiny size: one process,
then data parallel, tensor parallel and ZeRO stage 3 with activation checkpointing on 2 ranks,
whose losses must match the one-process run step by step; a run saved part way and resumed
continues it exactly; bf16 autocast tracks float32, and with ZeRO-2 on 2 ranks matches it on
one; a layout that needs more processes than it has is refused."""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest
from conftest import HERE, launch, run_command

EXAMPLE = HERE.parent.parent / "examples" / "train_gpt.py"
TINY = ["--steps", "3", "--log-every", "1", "--layers", "1", "--dim", "32", "--context", "32",
        "--batch-size", "8", "--eval-batches", "1", "--sample", "0"]  # fmt: skip
_BAD = ("Traceback", "leaked", "Segmentation", "Fatal Python error")


def _one(*args: str, timeout: float = 180):
    return run_command([sys.executable, str(EXAMPLE), *TINY, *args], timeout=timeout)


def _losses(run) -> list[float]:
    assert run.returncode == 0, run.describe()
    assert not [b for b in _BAD if b in run.stderr], run.describe()
    return [float(v) for v in re.findall(r"^step +\d+ +loss (\S+)", run.stdout, re.M)]


def _validation(run) -> float:
    found = re.search(r"^validation loss (\S+)", run.stdout, re.M)
    assert found, run.describe()
    return float(found.group(1))


@pytest.fixture(scope="module")
def single():
    run = _one("--sample", "16")
    losses = _losses(run)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses), run.describe()
    assert abs(losses[0] - math.log(256)) < 0.5, run.describe()  # an untrained byte model
    assert "sample:" in run.stdout, run.describe()
    return losses, _validation(run)


@pytest.mark.parametrize("layout", ["dp", "tp", "zero --zero-stage 3 --checkpointing"])
def test_parallel_runs_match_one_process(single, layout):
    run = launch(2, EXAMPLE, *TINY, "--parallel", *layout.split(), timeout=300)
    assert not run.left_behind, run.describe()
    want, want_val = single
    np.testing.assert_allclose(_losses(run), want, rtol=1e-4, err_msg=run.describe())
    np.testing.assert_allclose(_validation(run), want_val, rtol=1e-4, err_msg=run.describe())


def test_a_resumed_run_continues_the_saved_one(single, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    first = _losses(_one("--until", "2", "--save", ckpt))
    resumed = _one("--resume", ckpt)
    assert f"resumed from {ckpt} at step 2" in resumed.stdout, resumed.describe()
    want, want_val = single
    np.testing.assert_allclose(first + _losses(resumed), want, rtol=1e-6)
    np.testing.assert_allclose(_validation(resumed), want_val, rtol=1e-6)


@pytest.fixture(scope="module")
def single_amp():
    return _losses(_one("--amp"))


def test_bf16_autocast_tracks_float32(single, single_amp):
    np.testing.assert_allclose(single_amp, single[0], rtol=2e-2)


def test_bf16_autocast_with_zero_matches_one_process(single_amp):
    """AMP and ZeRO-2 together: the loss scaling and the sharded update compose."""
    run = launch(2, EXAMPLE, *TINY, "--amp", "--parallel", "zero", "--zero-stage", "2",
                 timeout=300)  # fmt: skip
    np.testing.assert_allclose(_losses(run), single_amp, rtol=1e-3, err_msg=run.describe())


def test_a_parallel_layout_on_one_process_is_refused():
    run = _one("--parallel", "dp", timeout=60)
    assert run.returncode != 0, run.describe()
    assert "--parallel dp needs flow-run -n 2 or more" in run.stderr, run.describe()
