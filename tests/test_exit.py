"""Whole-process behaviour at exit: scripts that use compiled code end with their own exit code
and clean output (no segfault in IREE's runtime while Python tears down, no nanobind "leaked
instances" report), whichever order the garbage collector frees runtime objects in. Each case
runs a small script in a subprocess: a single process (flow.jit, nn.Graph, flow.lazy), a
Vulkan device, and two ranks under ``flow-run -n 2``."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# What must never reach stderr at exit.
_BAD = ("Segmentation", "Fatal Python error", "leaked", "Exception ignored", "core dumped")

# Registered before flow is imported, so it runs after flow's own exit hook: result arrays must
# still read correctly (not dangle), and calling compiled code says why it cannot run.
_LATE_HOOK = """
import atexit
import numpy as np
KEEP = {}

def after_flow_exit():
    print("late read", all(np.allclose(np.asarray(a), w, atol=1e-5) for a, w in KEEP["pairs"]))
    try:
        KEEP["call"]()
    except Exception as err:
        print("late call", type(err).__name__)

atexit.register(after_flow_exit)
"""

_JIT = _LATE_HOOK + """
import flow

def mlp(x, w1, w2):
    return flow.tanh(flow.matmul(flow.maximum(flow.matmul(x, w1), flow.tensor(np.float32(0))), w2))

rng = np.random.default_rng(0)
ARRAYS = [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32, 4)]]
ARGS = [flow.tensor(a) for a in ARRAYS]
X, W1, W2 = ARRAYS
WANT = np.tanh(np.maximum(X @ W1, 0) @ W2)
JMLP = flow.jit(mlp)
OUT = JMLP(*ARGS).numpy()
print("mlp", np.allclose(OUT, WANT, atol=1e-5))
# many programs, their results (tensors and arrays mapping device memory) kept in globals
FNS = [flow.jit(lambda x, k=k: flow.tanh(x * float(k)) + float(k)) for k in range(1, 4)]
RESULTS = [f(ARGS[0]) for f in FNS]
print("many", all(np.allclose(r.numpy(), np.tanh(X * k) + k, atol=1e-5)
                  for k, r in zip(range(1, 4), RESULTS)))
# 1 MiB: memory IREE unmaps when its device goes, so reading it after would crash
BIG = flow.jit(lambda x: x * 2.0)(flow.tensor(np.ones((512, 512), np.float32)))
# empty results, called twice (a zero-size result once mapped a buffer that outlived its device)
EMPTY = flow.jit(lambda a: a[:0] * 2)
EMPTIES = [EMPTY(flow.tensor(np.arange(6, dtype=np.int32))) for _ in range(2)]
print("empty", [tuple(e.shape) for e in EMPTIES] == [(0,), (0,)])
# past its first calls a program's results stay unmapped until read: these are read only late
SYNC = flow.jit(mlp, sync_compile=True)
DEFERRED = [SYNC(*ARGS) for _ in range(16)]
print("deferred", type(DEFERRED[-1]._buf).__name__)
KEEP["pairs"] = [(OUT, WANT), (RESULTS[-1].numpy(), np.tanh(X * 3) + 3), (BIG.numpy(), 2.0),
                 (DEFERRED[-1], WANT), (DEFERRED[-2], WANT)]  # fmt: skip
KEEP["call"] = lambda: JMLP(*ARGS)
"""

_TRAIN = """
import numpy as np
import flow
import flow.nn as nn

rng = np.random.default_rng(0)
X = flow.tensor(rng.standard_normal((6, 8)).astype(np.float32))
Y = flow.tensor(np.array([0, 1, 2, 0, 1, 2]))
MODEL = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
OPT = flow.optim.SGD(MODEL.parameters(), lr=0.1, momentum=0.9)
EAGER = float(nn.functional.cross_entropy(MODEL(X), Y).numpy())

class Step(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = MODEL
        self.add_optimizer(OPT)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss

STEP = Step()
LOSSES = [float(STEP(X, Y).numpy()) for _ in range(3)]
print("graph", abs(LOSSES[0] - EAGER) < 1e-4 and LOSSES[2] < LOSSES[0])
with flow.lazy():
    for _ in range(2):
        OPT.zero_grad()
        LOSS = nn.functional.cross_entropy(MODEL(X), Y)
        LOSS.backward()
        OPT.step()
        LAZY = LOSS.item()
print("lazy", LAZY < LOSSES[2])
raise RuntimeError("deliberate failure with compiled state alive")
"""

_VULKAN = _LATE_HOOK + """
import flow

rng = np.random.default_rng(0)
A = rng.standard_normal((4, 8)).astype(np.float32)
B = rng.standard_normal((8, 2)).astype(np.float32)
F = flow.jit(lambda x, y: flow.tanh(flow.matmul(x, y)) + 1.0, target="vulkan")
R = F(flow.tensor(A), flow.tensor(B))
AGAIN = F(R, flow.tensor(np.ones((2, 2), np.float32)))  # a result passed back (device buffer)
WANT = np.tanh(A @ B) + 1
print("vulkan", np.allclose(R.numpy(), WANT, atol=1e-5),
      np.allclose(AGAIN.numpy(), np.tanh(WANT @ np.ones((2, 2))) + 1, atol=1e-5))
KEEP["pairs"] = [(R.numpy(), WANT)]
KEEP["call"] = lambda: F(flow.tensor(A), flow.tensor(B))
"""

_RANKS = """
import sys
import numpy as np
import flow
import flow.env
from flow.distributed.placement import placement, sbp

RANK, WORLD = flow.env.get_rank(), flow.env.get_world_size()
PL = placement("cpu", list(range(WORLD)))
X = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
W = np.ones((4, 3), np.float32)

def glob(value, nd):
    return flow.tensor(value).to_global(PL, sbp.broadcast).to_global(sbp=nd)

PROGRAM = flow.jit(lambda x, w: flow.matmul(flow.tanh(x), w).sum())  # a global program
OUT = PROGRAM(glob(X, sbp.split(0)), glob(W, sbp.broadcast))
LOCAL = flow.jit(lambda a: a * 3.0)(flow.tensor(X))
ok = abs(float(OUT.numpy()) - float((np.tanh(X) @ W).sum())) < 1e-3
(TIERED,) = PROGRAM._cache.values()
sys.stdout.write(f"rank {RANK}: {ok and np.allclose(LOCAL.numpy(), X * 3)} "
                 f"{getattr(TIERED, 'tier', 'compiled')}\\n")
"""


def _run(tmp_path: Path, name: str, script: str, *launcher: str,
         env: dict | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """Run `script` (under `launcher`, else plain python) in its own session; kill the whole
    session and fail on a hang."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(script))
    cmd = [*launcher, str(path)] if launcher else [sys.executable, str(path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{name} did not finish in 240 s\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _check_clean(run: subprocess.CompletedProcess, code: int = 0) -> None:
    report = f"exit {run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    assert run.returncode == code, report
    assert not [bad for bad in _BAD if bad in run.stderr], report


def test_jit_script_exits_cleanly(tmp_path: Path) -> None:
    run = _run(tmp_path, "jit_exit", _JIT)
    _check_clean(run)
    assert run.stdout.splitlines() == [
        "mlp True",
        "many True",
        "empty True",
        "deferred DeviceValue",
        "late read True",
        "late call RuntimeClosedError",
    ], run.stdout
    assert not run.stderr.strip(), run.stderr


def test_training_script_failing_with_state_alive_exits_with_its_error(tmp_path: Path) -> None:
    run = _run(tmp_path, "train_exit", _TRAIN)
    _check_clean(run, code=1)
    assert run.stdout.splitlines() == ["graph True", "lazy True"], run.stdout
    last = run.stderr.strip().splitlines()[-1]
    assert last == "RuntimeError: deliberate failure with compiled state alive", run.stderr


def test_vulkan_script_exits_cleanly(tmp_path: Path) -> None:
    from flow.targets import available

    if "vulkan" not in available():
        pytest.skip("no Vulkan device on this machine")
    run = _run(tmp_path, "vulkan_exit", _VULKAN)
    _check_clean(run)
    assert run.stdout.splitlines() == [
        "vulkan True True",
        "late read True",
        "late call RuntimeClosedError",
    ], run.stdout


@pytest.mark.parametrize("tiered", [False, True], ids=["sync", "tiered"])
def test_two_ranks_exit_cleanly(tmp_path: Path, tiered: bool) -> None:
    """Tiered, the global program runs interpreted and each rank exits while its background
    compile may still run (compile/tiers.py)."""
    from flow.distributed.launch import LauncherNotFoundError, find_mpiexec

    try:
        find_mpiexec()
    except LauncherNotFoundError as err:
        pytest.skip(f"no MPI launcher: {err}")
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed")
    env = _tiered_env(tmp_path) if tiered else None
    run = _run(tmp_path, "ranks_exit", _RANKS, sys.executable, "-m", "flow.tools.run", "-n", "2",
               env=env)  # fmt: skip
    _check_clean(run)
    # (the launcher forwards each rank's output in chunks: lines may run together)
    found = sorted(re.findall(r"rank (\d): (True|False) (\w+)", run.stdout))
    tier = "interpreted" if tiered else "compiled"
    assert found == [("0", "True", tier), ("1", "True", tier)], run.stdout


# A training step on the tiers (compile/tiers.py), against the same steps run eagerly: it runs
# interpreted at once, and either exits while IREE still compiles in the background (the
# compiler child is stopped, the exit stays clean) or waits for the compile and goes on
# compiled. Under `flow-run -n 2` every rank does the same with its local program.
_TIERED = """
import sys
import numpy as np
import flow
import flow.nn as nn
import flow.env

WAIT = sys.argv[0].endswith("wait.py")

def make():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

rng = np.random.default_rng(0)
x = flow.tensor(rng.standard_normal((16, 20)).astype(np.float32))
y = flow.tensor(rng.integers(0, 5, 16))
steps = 5 if WAIT else 3

model, opt = make()
want = []
for _ in range(steps):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    want.append(float(loss))

model, opt = make()

class Step(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss

step = Step()
got = [float(step(x, y)) for _ in range(3)]
program = next(iter(step._engine.programs.values()))
tiers = [program.tier]
if WAIT:
    program.wait()
    got += [float(step(x, y)) for _ in range(2)]
    tiers.append(program.tier)
ok = np.allclose(got, want, rtol=1e-4, atol=1e-5)
print(f"rank {flow.env.get_rank()}: {' '.join(tiers)} {ok}")
"""


def _tiered_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "FLOW_SYNC_COMPILE"}
    env["FLOW_CACHE_DIR"] = str(tmp_path / "cache")  # empty: nothing is loaded from a cache
    return env


@pytest.mark.parametrize("name,expected", [("tiered_exit", "rank 0: interpreted True"),
                                           ("tiered_wait", "rank 0: interpreted compiled True")])
def test_tiered_script_exits_cleanly(tmp_path: Path, name: str, expected: str) -> None:
    run = _run(tmp_path, name, _TIERED, env=_tiered_env(tmp_path))
    _check_clean(run)
    assert run.stdout.splitlines() == [expected], run.stdout
    assert not run.stderr.strip(), run.stderr


def test_tiered_script_on_two_ranks(tmp_path: Path) -> None:
    from flow.distributed.launch import LauncherNotFoundError, find_mpiexec

    try:
        find_mpiexec()
    except LauncherNotFoundError as err:
        pytest.skip(f"no MPI launcher: {err}")
    run = _run(tmp_path, "tiered_wait", _TIERED, sys.executable, "-m", "flow.tools.run", "-n",
               "2", env=_tiered_env(tmp_path))  # fmt: skip
    _check_clean(run)
    found = sorted(re.findall(r"rank (\d): (interpreted compiled True)", run.stdout))
    assert found == [("0", "interpreted compiled True"), ("1", "interpreted compiled True")], (
        run.stdout)


# A step compiled first (its parameters then live in IREE buffers), then a second graph on
# the same model whose background compile is still running at exit: the compile thread holds
# that program, and through it the device-resident parameters, so exit must stop it before
# the runtime shuts down.
_COMPILING_AT_EXIT = """
import numpy as np
import flow
import flow.nn as nn

flow.manual_seed(0)
MODEL = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
OPT = flow.optim.SGD(MODEL.parameters(), lr=0.1)
X = flow.tensor(np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32))

class Train(nn.Graph):
    def __init__(self):
        super().__init__(sync_compile=True)
        self.model = MODEL
        self.add_optimizer(OPT)

    def build(self, x):
        loss = self.model(x).square().mean()
        loss.backward()
        return loss

class Eval(nn.Graph):
    def __init__(self):
        super().__init__(sync_compile=False)
        self.model = MODEL

    def build(self, x):
        return self.model(x).sum()

Train()(X)
EVAL = Eval()
GOT = float(EVAL(X))
print("eval", abs(GOT - float(MODEL(X).sum())) < 1e-4, EVAL._engine.programs and
      next(iter(EVAL._engine.programs.values())).tier)
"""


def test_exit_while_a_background_compile_holds_device_state(tmp_path: Path) -> None:
    run = _run(tmp_path, "compiling_at_exit", _COMPILING_AT_EXIT, env=_tiered_env(tmp_path))
    _check_clean(run)
    assert run.stdout.splitlines() == ["eval True interpreted"], run.stdout
