"""Matrix products handed to the host's BLAS (`flow-gemm-to-blas`, the `blas` runtime module,
the per-machine calibration): results against numpy, in compiled programs, training steps,
separate processes and two ranks under `flow-run`."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.targets import blas_calibration as bc
from flow.targets import get_target
from flow.targets.blas_abi import imported_products

_RNG = np.random.default_rng(7)


def _vmfb(staged) -> bytes:
    (program,) = staged._cache.values() if hasattr(staged, "_cache") else staged._compiled.values()
    return program.vmfb


def test_every_transpose_and_batched_f64_product_calls_blas_and_matches_numpy(monkeypatch):
    monkeypatch.setenv("FLOW_BLAS", "all")
    a = _RNG.standard_normal((6, 5)).astype(np.float32)
    b = _RNG.standard_normal((5, 7)).astype(np.float32)
    p = _RNG.standard_normal((2, 3, 4))
    q = _RNG.standard_normal((2, 4, 5))
    f = flow.jit(lambda a, b, at, bt, p, q: (
        a @ b, a @ bt.T, at.T @ b, at.T @ bt.T, flow.matmul(p, q) + 1.0))  # fmt: skip
    out = f(a, b, a.T.copy(), b.T.copy(), p, q)
    want = (a @ b,) * 4 + (p @ q + 1.0,)
    for got, ref in zip(out, want):
        assert got.numpy().dtype == ref.dtype
        rtol = 1e-5 if ref.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.numpy(), ref, rtol=rtol)
    products = {n.split(".", 1)[0] for n in imported_products(_vmfb(f))}
    assert products == {"matmul_nn", "matmul_nt", "matmul_tn", "matmul_tt"}


def test_products_stay_in_iree_with_blas_off(monkeypatch):
    monkeypatch.setenv("FLOW_BLAS", "0")
    a = _RNG.standard_normal((300, 200)).astype(np.float32)
    f = flow.jit(lambda x: x @ x.T)
    np.testing.assert_allclose(f(a).numpy(), a @ a.T, rtol=1e-4, atol=1e-3)
    assert not imported_products(_vmfb(f))


def test_policy_is_none_off_this_hosts_cpu_and_flow_blas_is_checked(monkeypatch):
    monkeypatch.delenv("FLOW_BLAS", raising=False)
    assert bc.policy(get_target("cpu")) == "auto"
    assert bc.policy(get_target("vulkan")) == "none"
    assert bc.policy(get_target("cpu", cpu_arch="arm64")) == "none"  # cross-compiled: no host BLAS
    monkeypatch.setenv("FLOW_BLAS", "sometimes")
    with pytest.raises(ValueError, match="FLOW_BLAS='sometimes': expected auto"):
        bc.policy(get_target("cpu"))


def test_auto_decides_small_and_unsupported_products_without_calibrating(monkeypatch):
    def no_calibration():
        raise AssertionError("calibrated for a product that needs no calibration")

    monkeypatch.setattr(bc, "calibration", no_calibration)
    assert not bc.prefers_blas("auto", 1, 4, 4, 4, "f32")
    assert not bc.prefers_blas("auto", 1, 1024, 1024, 1024, "f16")  # no half-precision gemm
    assert not bc.prefers_blas("auto", 1, 1024, 1024, 1024, "i32")
    assert not bc.prefers_blas("none", 1, 1024, 1024, 1024, "f32")
    assert bc.prefers_blas("all", 1, 2, 2, 2, "f64")
    with pytest.raises(ValueError, match="expected one of none, auto, all"):
        bc.prefers_blas("fast", 1, 4, 4, 4, "f32")


def test_auto_follows_the_calibrated_threshold_of_each_family(monkeypatch):
    fams = {"square": {"threshold_flops": 1e9}, "thin": {"threshold_flops": float("inf")}}
    monkeypatch.setattr(bc, "calibration", lambda: {"families": fams})
    assert bc.prefers_blas("auto", 1, 1024, 1024, 1024, "f32")  # 2.1e9 flops >= 1e9
    assert not bc.prefers_blas("auto", 1, 640, 640, 640, "f32")  # 5.2e8 < 1e9
    assert bc.prefers_blas("auto", 4, 640, 640, 640, "f64")  # batched: 2.1e9
    assert not bc.prefers_blas("auto", 1, 4096, 10, 4096, "f32")  # thin: IREE here
    # below MIN_FLOPS per matrix, whatever the batch: a host synchronisation per call costs
    # more than BLAS saves on such products (the GPT step's 1024x128x512)
    fams["square"]["threshold_flops"] = 0.0
    assert not bc.prefers_blas("auto", 1, 1024, 512, 128, "f32")
    assert not bc.prefers_blas("auto", 64, 64, 64, 32, "f32")
    assert bc.prefers_blas("auto", 1, 512, 512, 512, "f32")


def test_threshold_is_where_blas_wins_and_stays_even_at_every_larger_size():
    flops = [1e6, 1e7, 1e8, 1e9]
    # IREE's time over BLAS's: BLAS ahead from 1e8 flops on (a tie at 1e9 still counts)
    assert bc._threshold(flops, [0.5, 0.9, 1.2, 0.97]) == pytest.approx(np.sqrt(1e7 * 1e8))
    assert bc._threshold(flops, [1.1, 1.3, 1.6, 2.0]) == 0.0  # BLAS wins everywhere
    assert bc._threshold(flops, [0.5, 0.6, 0.8, 0.9]) == float("inf")  # IREE does
    # BLAS ahead at 1e7 but clearly behind at 1e8: only the sizes above count
    assert bc._threshold(flops, [0.5, 1.5, 0.7, 1.4]) == pytest.approx(np.sqrt(1e8 * 1e9))
    assert bc._threshold(flops, [1.5, 1.5, 1.5, 0.8]) == float("inf")  # behind at the largest


def _mlp_losses(policy: str, monkeypatch) -> list[float]:
    monkeypatch.setenv("FLOW_BLAS", policy)
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(96, 200), nn.ReLU(), nn.Linear(200, 10))
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = loss_fn(self.model(x), y)
            loss.backward()
            return loss

    rng = np.random.default_rng(3)
    x = flow.tensor(rng.standard_normal((128, 96)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 10, 128))
    step = Step()
    losses = [float(step(x, y).numpy()) for _ in range(4)]
    if policy == "all":  # forward, input and weight gradients of both layers
        assert len(imported_products(_vmfb(step))) >= 4
    return losses


def test_training_step_with_blas_matches_the_step_without(monkeypatch):
    with_blas = _mlp_losses("all", monkeypatch)
    without = _mlp_losses("0", monkeypatch)
    np.testing.assert_allclose(with_blas, without, rtol=1e-5)
    assert with_blas[-1] < with_blas[0]


_REPRO = """
import hashlib, numpy as np, flow
rng = np.random.default_rng(0)
a = rng.standard_normal((333, 517)).astype(np.float32)
b = rng.standard_normal((517, 259)).astype(np.float32)
f = flow.jit(lambda a, b: flow.relu(a @ b) @ b.T)
print(hashlib.sha256(f(a, b).numpy().tobytes()).hexdigest())
"""


def test_results_are_the_same_bit_for_bit_from_run_to_run(tmp_path):
    env = {**os.environ, "FLOW_BLAS": "all", "FLOW_CACHE_DIR": str(tmp_path / "cache")}
    digests = []
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", _REPRO], capture_output=True, text=True,
                             env=env, timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr
        digests.append(run.stdout.split()[-1])
    assert re.fullmatch(r"[0-9a-f]{64}", digests[0]), digests
    assert digests[0] == digests[1]


def test_calibration_is_measured_once_and_stored_per_machine(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FLOW_NO_CACHE", "FLOW_BLAS")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    code = ("from flow.targets import blas_calibration as bc; "
            "print(bc.threshold_flops('square'), bc.threshold_flops('thin'), "
            "bc.calibration()['seconds'])")  # fmt: skip
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]  # fmt: skip
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout == runs[1].stdout  # the second read the first's result
    (stored,) = (tmp_path / "flow").glob("blas-calibration-*.json")
    data = json.loads(stored.read_text())
    assert set(data["families"]) == set(bc.FAMILIES)
    for family, sizes in bc.FAMILIES.items():
        entry = data["families"][family]
        assert entry["sizes"] == list(sizes)
        assert all(t > 0 for t in entry["iree_s"] + entry["blas_s"])
        assert entry["threshold_flops"] >= 0


_RANKS = """
import numpy as np
import flow
import flow.env
from flow.distributed.placement import placement, sbp
from flow.targets.blas_abi import imported_products

RANK, WORLD = flow.env.get_rank(), flow.env.get_world_size()
PL = placement("cpu", list(range(WORLD)))
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 48)).astype(np.float32)
W = rng.standard_normal((48, 40)).astype(np.float32)

def glob(value, nd):
    return flow.tensor(value).to_global(PL, sbp.broadcast).to_global(sbp=nd)

F = flow.jit(lambda x, w: flow.relu(x @ w) @ w.T)  # a global program, split on the batch
OUT = F(glob(X, sbp.split(0)), glob(W, sbp.broadcast)).to_global(sbp=sbp.broadcast)
(PROGRAM,) = F._cache.values()
ok = np.allclose(OUT.numpy(), np.maximum(X @ W, 0) @ W.T, rtol=1e-4, atol=1e-4)
print(f"rank {RANK}: {ok} {len(imported_products(PROGRAM.vmfb))}")
"""


def test_two_ranks_call_blas_in_their_programs(tmp_path):
    from flow.distributed.launch import LauncherNotFoundError, find_mpiexec

    try:
        find_mpiexec()
    except LauncherNotFoundError as err:
        pytest.skip(f"no MPI launcher: {err}")
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed")
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(_RANKS))
    env = {**os.environ, "FLOW_BLAS": "all", "FLOW_SYNC_COMPILE": "1"}
    run = subprocess.run([sys.executable, "-m", "flow.tools.run", "-n", "2", str(script)],
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    found = sorted(re.findall(r"rank (\d): (True|False) (\d+)", run.stdout))
    assert [f[:2] for f in found] == [("0", "True"), ("1", "True")], run.stdout
    assert all(int(f[2]) >= 2 for f in found), run.stdout  # both products on both ranks


def test_loading_a_blas_program_off_the_cpu_says_why():
    from flow.lowering import run_pipeline, to_iree_text
    from flow.targets import LoadError, available, compile_mlir, load

    if "vulkan" not in available():
        pytest.skip("no Vulkan device")
    staged = flow.jit(lambda x: x @ x)
    lowered = staged.lower(np.ones((4, 4), np.float32))
    text = to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input{blas=all}"))
    vmfb = compile_mlir(text, "vulkan")
    with pytest.raises(LoadError, match="only a cpu driver provides"):
        load(vmfb, "vulkan")


def test_a_calibration_that_cannot_run_keeps_the_defaults_and_is_not_stored(tmp_path, monkeypatch):
    def broken():
        raise RuntimeError("no compiler here")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("FLOW_NO_CACHE", raising=False)
    monkeypatch.setattr(bc, "measure", broken)
    result = bc._load_or_measure()
    assert "no compiler here" in result["failed"]
    assert {f: e["threshold_flops"] for f, e in result["families"].items()} == bc.DEFAULT_THRESHOLDS
    assert not list((tmp_path / "flow").glob("blas-calibration-*.json"))


@pytest.mark.parametrize("env", [{"FLOW_CACHE_DIR": "off"}, {"FLOW_NO_CACHE": "1"}])
def test_with_caching_off_the_calibration_stays_in_the_process(monkeypatch, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert bc._folder() is None
