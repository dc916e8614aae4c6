"""OneFlow's directory checkpoints (`flow.save(state, "dir")`) and whole-model save/load without
pickle: round trips of module, optimizer and nn.Graph states against numpy, the layout on disk,
corruption and crash safety, `allowed=` for whole models, the docs' flow in fresh processes."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow import _checkpoint_dir, _checkpoint_file
from flow.serialization import CheckpointError, DisallowedClassError, load, save


def _leaves(obj, path=""):
    """(path, value) of every leaf, tensors as numpy arrays."""
    if isinstance(obj, dict):
        out = [(f"{path}:{type(obj).__name__}{list(obj)!r}", None)]
        for k, v in obj.items():
            out += _leaves(v, f"{path}/{k!r}")
        return out
    if isinstance(obj, (list, tuple)):
        out = [(f"{path}:{type(obj).__name__}{len(obj)}", None)]
        for i, v in enumerate(obj):
            out += _leaves(v, f"{path}/{i}")
        return out
    if isinstance(obj, flow.Tensor):
        return [(path, ("tensor", obj.numpy()))]
    return [(path, obj)]


def assert_same_tree(got, want):
    a, b = _leaves(got), _leaves(want)
    assert [p for p, _ in a] == [p for p, _ in b]
    for (path, x), (_, y) in zip(a, b):
        if isinstance(y, tuple) and y and y[0] == "tensor":
            assert x[0] == "tensor", path
            assert x[1].dtype == y[1].dtype and x[1].shape == y[1].shape, path
            assert x[1].tobytes() == np.ascontiguousarray(y[1]).tobytes(), path
        else:
            assert type(x) is type(y) and x == y, (path, x, y)


def _trained_model_and_optimizer(rng):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.BatchNorm1d(2))
    opt = flow.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.99))
    sched = flow.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):
        x = flow.tensor(rng.standard_normal((5, 3)).astype(np.float32))
        loss = (model(x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model, opt, sched


# ------------------------------------------------------------------------ round trips


def test_module_optimizer_and_scheduler_states_round_trip(tmp_path, rng):
    model, opt, sched = _trained_model_and_optimizer(rng)
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(),
             "scheduler": sched.state_dict(), "epoch": 2}  # fmt: skip
    save(state, tmp_path / "ckpt")
    assert (tmp_path / "ckpt").is_dir()
    got = load(tmp_path / "ckpt")
    assert_same_tree(got, state)
    assert type(got["model"]) is OrderedDict
    assert got["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.99)

    fresh, opt2, sched2 = _trained_model_and_optimizer(np.random.default_rng(5))
    fresh.load_state_dict(got["model"])
    opt2.load_state_dict(got["optimizer"])
    sched2.load_state_dict(got["scheduler"])
    x = flow.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    fresh.eval(), model.eval()
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())
    assert_same_tree(opt2.state_dict(), opt.state_dict())


class _TrainGraph(nn.Graph):
    def __init__(self, model, optimizer):
        super().__init__(sync_compile=True)
        self.model = model
        self.add_optimizer(optimizer)

    def build(self, x):
        loss = (self.model(x) ** 2).mean()
        loss.backward()
        return loss


def test_graph_state_round_trips_and_resumes(tmp_path, rng):
    """08_nn_graph: flow.save(graph.state_dict(), DIR); graph.load_state_dict(flow.load(DIR))."""
    init = {"weight": rng.standard_normal((2, 3)).astype(np.float32),
            "bias": np.zeros(2, np.float32)}  # fmt: skip
    x = flow.tensor(rng.standard_normal((4, 3)).astype(np.float32))

    def graph():
        model = nn.Linear(3, 2)
        model.load_state_dict({k: flow.tensor(v) for k, v in init.items()})
        return _TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))

    first = graph()
    losses = [first(x).numpy().item() for _ in range(2)]
    state = first.state_dict()
    save(state, str(tmp_path / "GraphState"))
    got = load(str(tmp_path / "GraphState"))
    assert_same_tree(got, state)
    assert (tmp_path / "GraphState" / "System-Train-TrainStep" / "out").is_file()
    expect = losses + [first(x).numpy().item() for _ in range(2)]

    resumed = graph()
    resumed.load_state_dict(got)
    assert losses + [resumed(x).numpy().item() for _ in range(2)] == expect


@pytest.mark.parametrize("key", ["a/b", "..", ".hidden", "", "ü☃", "x" * 300, "out", "meta",
                                 "snapshot_done", "flow_checkpoint.json", "a%2Fb", "A"])
def test_any_key_round_trips(tmp_path, key):
    state = {key: flow.ones(2), "a": {0: flow.zeros(1), "0": flow.arange(3)}, "a/b#1": 7}
    save(state, tmp_path / "k")
    assert_same_tree(load(tmp_path / "k"), state)
    for root, dirs, files in os.walk(tmp_path / "k"):
        assert all(not n.startswith(".") and len(n) <= 255 for n in dirs + files), (root, dirs)


def test_tied_and_top_level_tensors(tmp_path):
    w = flow.arange(6).reshape(2, 3)
    save({"enc": w, "dec": w}, tmp_path / "tied")
    got = load(tmp_path / "tied")
    assert got["enc"] is got["dec"]
    # stored once, in the folder of its first key
    assert sorted(os.listdir(tmp_path / "tied")) == ["enc", "flow_checkpoint.json",
                                                     "snapshot_done"]  # fmt: skip
    save(w, tmp_path / "top")
    np.testing.assert_array_equal(load(tmp_path / "top").numpy(), w.numpy())
    save([1, "two", None], tmp_path / "plain")
    assert load(tmp_path / "plain") == [1, "two", None]


# ------------------------------------------------------------------------ layout on disk


def test_layout_is_one_folder_per_entry_with_raw_bytes(tmp_path, rng):
    w = rng.standard_normal((3, 2)).astype(np.float32)
    state = {"weight": flow.tensor(w), "bias": flow.tensor(np.arange(3, dtype=np.int64)),
             "optimizer": {"state": {0: {"exp_avg": flow.tensor(w.T)}},
                           "param_groups": [{"lr": 0.1, "params": [0]}]}}  # fmt: skip
    root = tmp_path / "model"
    save(state, root)
    assert sorted(os.listdir(root)) == ["bias", "flow_checkpoint.json", "optimizer",
                                        "snapshot_done", "weight"]  # fmt: skip
    assert sorted(os.listdir(root / "weight")) == ["meta", "out"]
    assert (root / "weight" / "out").read_bytes() == w.tobytes()
    assert (root / "bias" / "out").read_bytes() == np.arange(3, dtype="<i8").tobytes()
    exp_avg = root / "optimizer" / "state" / "0" / "exp_avg"
    assert (exp_avg / "out").read_bytes() == np.ascontiguousarray(w.T).tobytes()
    meta = json.loads((root / "weight" / "meta").read_text())
    assert meta == {"dtype": "float32", "shape": [3, 2], "nbytes": 24,
                    "sha256": hashlib.sha256(w.tobytes()).hexdigest()}  # fmt: skip
    index = (root / "flow_checkpoint.json").read_bytes()
    assert (root / "snapshot_done").read_text() == hashlib.sha256(index).hexdigest()
    assert not (root / "optimizer" / "param_groups").exists()  # non-tensor leaves: in the index
    assert json.loads(index)["tree"]["dict"][2][1]["dict"][1][0] == "param_groups"


def test_file_or_directory_by_path(tmp_path):
    save({"x": 1}, tmp_path / "a.safetensors")
    assert (tmp_path / "a.safetensors").is_file()
    (tmp_path / "b").write_bytes(b"")
    save({"x": 2}, tmp_path / "b")  # an existing file stays the single-file format
    assert (tmp_path / "b").is_file() and load(tmp_path / "b") == {"x": 2}
    (tmp_path / "empty").mkdir()
    save({"x": 3}, tmp_path / "empty")  # an empty directory becomes the checkpoint
    assert load(tmp_path / "empty") == {"x": 3}
    save({"x": 4}, tmp_path / "empty")  # a checkpoint directory is replaced
    assert load(tmp_path / "empty") == {"x": 4}
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes").write_text("keep")
    with pytest.raises(FileExistsError, match="does not hold a checkpoint"):
        save({"x": 5}, tmp_path / "mine")
    assert os.listdir(tmp_path / "mine") == ["notes"]


# ------------------------------------------------------------------------ corruption


@pytest.fixture
def ckpt(tmp_path):
    root = tmp_path / "ckpt"
    save({"model": {"w": flow.ones(4, 4), "b": flow.zeros(4)}, "epoch": 3}, root)
    return root


def _resign_index(root, edit):
    index = json.loads((root / "flow_checkpoint.json").read_bytes())
    raw = json.dumps(edit(index)).encode()
    (root / "flow_checkpoint.json").write_bytes(raw)
    (root / "snapshot_done").write_text(hashlib.sha256(raw).hexdigest())


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda r: (r / "model/w/out").write_bytes((r / "model/w/out").read_bytes()[:40]),
         r"at 'model\.w' \(folder 'model/w'\): its out file holds 40 bytes.*\(truncated\)"),
        (lambda r: (r / "model/w/out").write_bytes(b"\0" * 64),
         r"at 'model\.w'.*data in out does not match the checksum"),
        (lambda r: (r / "model/b/out").unlink(), r"at 'model\.b'.*out file is missing"),
        (lambda r: (r / "model/b/meta").write_text('{"dtype":"float64","shape":[2]}'),
         r"at 'model\.b'.*meta file does not match the checksum"),
        (lambda r: shutil.rmtree(r / "model/w"), r"at 'model\.w'.*meta file is missing"),
        (lambda r: (r / "snapshot_done").unlink(), r"incomplete checkpoint \(no snapshot_done"),
        (lambda r: (r / "flow_checkpoint.json").write_bytes(
            (r / "flow_checkpoint.json").read_bytes().replace(b'"epoch",3', b'"epoch",4')),
         r"flow_checkpoint\.json does not match the checksum in snapshot_done"),
        (lambda r: _resign_index(r, lambda i: {**i, "version": 9}),
         r"checkpoint directory version 9 is not supported"),
        (lambda r: _resign_index(r, lambda i: {**i, "tensors": {"../../etc": "0" * 64}}),
         r"bad tensor list"),
    ],
    ids=["truncated", "flipped", "no-out", "meta-edited", "no-folder", "no-marker", "index-edited",
         "version", "escape"],
)
def test_damage_is_detected_and_names_the_entry(ckpt, damage, match):
    damage(ckpt)
    with pytest.raises(CheckpointError, match=match):
        load(ckpt)


# ------------------------------------------------------------------------ crash safety


def _old(root):
    save({"version": 1, "w": flow.ones(8)}, root)
    return {p: (root / p).read_bytes() for p in ("snapshot_done", "flow_checkpoint.json",
                                                  "w/out", "w/meta")}  # fmt: skip


def _assert_intact(root, before):
    assert {p: (root / p).read_bytes() for p in before} == before
    assert load(root)["version"] == 1
    assert sorted(os.listdir(root.parent)) == [root.name], "a temporary was left behind"


def test_failed_save_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    root = tmp_path / "ckpt"
    before = _old(root)
    real = _checkpoint_dir._write_tensor
    calls = []

    def fail_on_second(folder, arr):
        calls.append(folder)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(folder, arr)

    monkeypatch.setattr(_checkpoint_dir, "_write_tensor", fail_on_second)
    with pytest.raises(OSError, match="No space left"):
        save({"version": 2, "a": flow.zeros(3), "w": flow.zeros(8)}, root)
    _assert_intact(root, before)


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_failed_swap_leaves_the_old_checkpoint(tmp_path, monkeypatch, exchange):
    root = tmp_path / "ckpt"
    before = _old(root)
    if not exchange:
        monkeypatch.setattr(_checkpoint_dir, "_exchange", lambda a, b: False)
    real_rename = os.rename

    def rename(a, b):  # the new checkpoint cannot be moved into place
        if str(b) == str(root) and ".tmp" in str(a):
            raise OSError(5, "Input/output error")
        return real_rename(a, b)

    monkeypatch.setattr(os, "rename", rename)
    if exchange:
        monkeypatch.setattr(_checkpoint_dir, "_exchange",
                            lambda a, b: (_ for _ in ()).throw(OSError(5, "Input/output error")))
    with pytest.raises(OSError, match="Input/output error"):
        save({"version": 2, "w": flow.zeros(8)}, root)
    monkeypatch.undo()
    _assert_intact(root, before)


def test_a_save_that_died_after_moving_the_old_aside_is_undone(tmp_path):
    root = tmp_path / "ckpt"
    before = _old(root)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    os.rename(root, tmp_path / f".ckpt.{dead}.0a0b0c0d.old")  # killed between the two renames
    save({"other": 1}, tmp_path / "unrelated")
    assert not root.exists()
    _checkpoint_file.remove_stale_temps(str(tmp_path), "ckpt")  # what the next save does first
    shutil.rmtree(tmp_path / "unrelated")
    _assert_intact(root, before)
    save({"version": 2}, root)
    assert load(root) == {"version": 2} and os.listdir(tmp_path) == ["ckpt"]


_KILLED = """
import os, sys, time
import numpy as np
import flow
from flow import _checkpoint_dir, _checkpoint_file
real = _checkpoint_dir._write_synced
def stuck(file, data):
    if file.endswith("snapshot_done"):
        print("writing", flush=True)
        time.sleep(600)
    real(file, data)
_checkpoint_dir._write_synced = stuck
flow.save({"version": 2, "w": np.zeros(8, np.float32)}, sys.argv[1])
"""


def test_a_killed_save_leaves_the_old_checkpoint_and_its_temp_goes(tmp_path):
    root = tmp_path / "ckpt"
    before = _old(root)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(root)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout.readline() == "writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    temps = [n for n in os.listdir(tmp_path) if n != "ckpt"]
    assert len(temps) == 1 and f".ckpt.{proc.pid}." in temps[0], temps
    assert {p: (root / p).read_bytes() for p in before} == before
    save({"version": 3}, root)
    assert sorted(os.listdir(tmp_path)) == ["ckpt"] and load(root) == {"version": 3}


# ------------------------------------------------------------------------ whole models


class Net(nn.Module):
    def __init__(self, sizes, act="relu", *, scale=1.0, dtype=flow.float32):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(a, b, dtype=dtype) for a, b in zip(sizes, sizes[1:])])
        self.act, self.scale = act, scale
        self.register_buffer("calls", flow.zeros(1))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu() if self.act == "relu" else layer(x).tanh()
        return x * self.scale


class Wrapper(nn.Module):
    def __init__(self, inner, head_size=2):
        super().__init__()
        self.inner = inner
        self.head = nn.Linear(inner.layers[-1].out_features, head_size)

    def forward(self, x):
        return self.head(self.inner(x))


def test_whole_flow_nn_model_loads_without_allowed(tmp_path, rng):
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Dropout(0.5), nn.Linear(4, 1))
    model.eval()
    save(model, tmp_path / "seq")
    got = load(tmp_path / "seq")
    assert type(got) is nn.Sequential and got is not model and not got.training
    x = flow.tensor(rng.standard_normal((2, 3)).astype(np.float32))
    np.testing.assert_array_equal(got(x).numpy(), model(x).numpy())
    save(model, tmp_path / "seq.safetensors")  # the single-file format holds one as well
    np.testing.assert_array_equal(load(tmp_path / "seq.safetensors")(x).numpy(),
                                  model(x).numpy())  # fmt: skip


def test_whole_user_model_needs_allowed(tmp_path, rng):
    model = Wrapper(Net([3, 5, 4], "tanh", scale=0.5, dtype=flow.float64), head_size=3)
    model.inner.layers[1].eval()
    save(model, tmp_path / "net")
    with pytest.raises(DisallowedClassError, match=rf"builds a {__name__}\.Wrapper at the top "
                       r"level.*allowed=\[Wrapper\]"):  # fmt: skip
        load(tmp_path / "net")
    with pytest.raises(DisallowedClassError, match=rf"{__name__}\.Net"):
        load(tmp_path / "net", allowed=[Wrapper])
    for allowed in ([Wrapper, Net], [f"{__name__}.Wrapper", f"{__name__}.Net"]):
        got = load(tmp_path / "net", allowed=allowed)
        assert type(got) is Wrapper and type(got.inner) is Net and got.inner.scale == 0.5
        assert got.inner.layers[0].weight.dtype is flow.float64
        assert [m.training for m in got.modules()] == [m.training for m in model.modules()]
        x = flow.tensor(rng.standard_normal((2, 3)))
        np.testing.assert_array_equal(got(x.double()).numpy(), model(x.double()).numpy())


def test_unsaveable_models_suggest_state_dict(tmp_path):
    class Local(nn.Module):
        pass

    with pytest.raises(TypeError, match=r"defined inside a function.*save its state_dict\(\)"):
        save(Local(), tmp_path / "x")
    with pytest.raises(TypeError, match=r"cannot save function at 'Net\(args\)\.1'.*"
                                        r"save its state_dict\(\) instead"):  # fmt: skip
        save(Net([2, 2], lambda t: t), tmp_path / "x")
    outside = nn.Linear(2, 2)
    odd = Wrapper.__new__(Wrapper)
    nn.Module.__init__(odd)
    odd.__dict__["_init_call"] = ((outside,), {})
    with pytest.raises(TypeError, match=r"not one of its submodules.*state_dict\(\)"):
        save(odd, tmp_path / "x")
    opt = flow.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"cannot save flow\.optim\.\w+\.SGD at the top level.*"
                                        r"save its state_dict\(\) instead"):  # fmt: skip
        save(opt, tmp_path / "x")
    assert os.listdir(tmp_path) == []


def _forge(tmp_path, record):
    """A checkpoint directory whose tree is a forged module record."""
    root = tmp_path / "forged"
    save({"x": 1}, root)
    _resign_index(root, lambda i: {**i, "tree": {"module": record}})
    return root


def test_untrusted_record_never_imports_or_runs(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    record = {"module": "os", "qualname": "system", "args": [f"touch {marker}"],
              "kwargs": {"dict": []}}  # fmt: skip
    root = _forge(tmp_path, record)
    with pytest.raises(DisallowedClassError, match=r"builds a os\.system.*not allowed"):
        load(root)
    assert not marker.exists()
    sys.modules.pop("antigravity", None)
    with pytest.raises(DisallowedClassError):
        load(_forge(tmp_path, {**record, "module": "antigravity", "qualname": "X"}))
    assert "antigravity" not in sys.modules  # refused before any import
    with pytest.raises(CheckpointError, match="is not an nn.Module class"):
        load(_forge(tmp_path, {**record, "module": "os", "qualname": "system"}),
             allowed=["os.system"])
    assert not marker.exists()
    with pytest.raises(CheckpointError, match="bad module class"):
        load(_forge(tmp_path, {**record, "module": "flow.nn", "qualname": "Linear.__init__"}))
    with pytest.raises(TypeError, match="allowed= holds 3"):
        load(root, allowed=[3])


def test_whole_model_never_pickles(tmp_path, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("dump", "dumps", "load", "loads", "Pickler", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    model = Net([2, 3])
    save(model, tmp_path / "m")
    got = load(tmp_path / "m", allowed=Net)
    assert_same_tree(got.state_dict(), model.state_dict())


# ------------------------------------------------------------------------ the docs' flow


_MODELS = """
import flow

class Tiny(flow.nn.Module):
    def __init__(self, n, bias=True):
        super().__init__()
        self.fc = flow.nn.Linear(n, 3, bias=bias)

    def forward(self, x):
        return self.fc(x).relu()
"""

_SAVE = """
import flow
from models import Tiny
m = flow.nn.Linear(2, 3)
m.load_state_dict({"weight": flow.ones(3, 2), "bias": flow.zeros(3)})
flow.save(m.state_dict(), "./model")
t = Tiny(2, bias=False)
flow.save(t, "./tiny")
print(t(flow.tensor([[1.0, -2.0]])).numpy().tolist())
"""

_LOAD = """
import flow
from models import Tiny
params = flow.load("./model")
m2 = flow.nn.Linear(2, 3)
m2.load_state_dict(params)
print(m2.state_dict()["weight"].numpy().tolist(), m2.state_dict()["bias"].numpy().tolist())
try:
    flow.load("./tiny")
except flow.serialization.DisallowedClassError as err:
    print("refused:", err)
t = flow.load("./tiny", allowed=[Tiny])
print(t(flow.tensor([[1.0, -2.0]])).numpy().tolist())
"""


def test_model_load_save_page_in_fresh_processes(tmp_path):
    (tmp_path / "models.py").write_text(_MODELS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def run(code):
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.splitlines()

    (saved_out,) = run(_SAVE)
    assert sorted(os.listdir(tmp_path / "model")) == ["bias", "flow_checkpoint.json",
                                                      "snapshot_done", "weight"]  # fmt: skip
    params, refused, loaded_out = run(_LOAD)
    assert params == "[[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]] [0.0, 0.0, 0.0]"
    assert refused.startswith("refused:") and "models.Tiny" in refused
    assert loaded_out == saved_out
