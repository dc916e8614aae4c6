"""Exporting an inference nn.Graph for deployment (OneFlow's 08_nn_graph, "Graph and
Deployment"): `flow.save(graph, dir)` writes parameters, flow IR, signature and IREE module;
`flow.load(dir)` runs it with no model code. Outputs are checked against numpy values saved
from the original run (and, for the MLP, a numpy forward pass), in a fresh process that never
defines the model classes; bad inputs, tampered files and graphs that cannot be exported are
refused with errors naming what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow import _graph_export
from flow.serialization import CheckpointError

RNG = np.random.default_rng(7)
IMAGES = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
ROWS = RNG.standard_normal((5, 6)).astype(np.float32)


class SmallCNN(nn.Module):
    """conv → BatchNorm (eval) → ReLU → depthwise conv → ReLU6 → pool → linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = flow.relu(self.bn(self.conv(x)))
        x = nn.functional.relu6(self.dw(x))
        return self.fc(self.pool(x).flatten(1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(flow.relu(self.fc1(x)))


class GraphMobileNetV2(nn.Graph):
    """08_nn_graph's inference graph (a small CNN standing in for mobilenet_v2)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


class TwoHeads(nn.Graph):
    """An MLP graph returning a dict (the output nesting must survive the export)."""

    def __init__(self, model):
        super().__init__()
        self.mlp = model

    def build(self, x):
        logits = self.mlp(x)
        return {"logits": logits, "probs": flow.softmax(logits, dim=1)}


def _trained_cnn() -> SmallCNN:
    """A CNN whose BatchNorm has non-trivial running statistics, then in eval mode."""
    model = SmallCNN()
    with flow.no_grad():
        model(flow.tensor(IMAGES * 2 + 1))  # training mode: updates the running stats
    model.eval()
    return model


def _mlp_numpy(state: dict, x: np.ndarray) -> dict:
    h = np.maximum(x @ state["fc1.weight"].T + state["fc1.bias"], 0)
    logits = h @ state["fc2.weight"].T + state["fc2.bias"]
    e = np.exp(logits - logits.max(1, keepdims=True))
    return {"logits": logits, "probs": e / e.sum(1, keepdims=True)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Both graphs exported once (the 08_nn_graph block for the CNN), with their outputs."""
    root = tmp_path_factory.mktemp("export")
    cnn_graph = GraphMobileNetV2(_trained_cnn())
    cnn_out = cnn_graph(flow.tensor(IMAGES)).numpy()
    MODEL_SAVE_DIR = str(root / "mobile_net_v2_model")  # the page's block, verbatim below
    if not os.path.exists(MODEL_SAVE_DIR):
        os.makedirs(MODEL_SAVE_DIR)
    flow.save(cnn_graph, MODEL_SAVE_DIR)

    mlp = MLP()
    mlp.eval()
    mlp_graph = TwoHeads(mlp)
    mlp_out = {k: v.numpy() for k, v in mlp_graph(flow.tensor(ROWS)).items()}
    mlp_dir = str(root / "mlp_model")
    flow.save(mlp_graph, mlp_dir)
    state = {k: v.numpy() for k, v in mlp.state_dict().items()}
    return {"root": root, "cnn": MODEL_SAVE_DIR, "cnn_out": cnn_out, "mlp": mlp_dir,
            "mlp_out": mlp_out, "mlp_state": state}  # fmt: skip


_FRESH = r"""
import sys, numpy as np, flow
cnn_dir, mlp_dir, images, rows, out = sys.argv[1:6]
cnn = flow.load(cnn_dir)
mlp = flow.load(mlp_dir)
assert type(cnn).__name__ == "LoadedGraph" and not cnn.recompiled, (cnn, cnn.recompiled)
y = cnn(flow.tensor(np.load(images)))
heads = mlp(np.load(rows))  # a numpy array works as well
assert isinstance(y, flow.Tensor) and sorted(heads) == ["logits", "probs"], heads
np.savez(out, cnn=y.numpy(), logits=heads["logits"].numpy(), probs=heads["probs"].numpy())
assert "test_graph_export" not in sys.modules and not hasattr(sys.modules["__main__"], "MLP")
print("fresh process ok")
"""


def test_export_loads_and_runs_in_a_fresh_process_without_the_model_code(exported):
    root = exported["root"]
    np.save(root / "images.npy", IMAGES)
    np.save(root / "rows.npy", ROWS)
    out = root / "fresh.npz"
    proc = subprocess.run([sys.executable, "-c", _FRESH, exported["cnn"], exported["mlp"],
                           str(root / "images.npy"), str(root / "rows.npy"), str(out)],
                          capture_output=True, text=True, cwd=str(root), timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fresh process ok" in proc.stdout
    got = np.load(out)
    np.testing.assert_allclose(got["cnn"], exported["cnn_out"], rtol=1e-5, atol=1e-6)
    for key in ("logits", "probs"):
        np.testing.assert_allclose(got[key], exported["mlp_out"][key], rtol=1e-5, atol=1e-6)
        reference = _mlp_numpy(exported["mlp_state"], ROWS)[key]
        np.testing.assert_allclose(got[key], reference, rtol=1e-4, atol=1e-5)


def test_export_directory_layout_and_signature(exported):
    names = set(os.listdir(exported["cnn"]))
    assert {"snapshot_done", "flow_checkpoint.json", "graph.json", "graph.mlir",
            "graph.vmfb", "model"} <= names  # fmt: skip
    weight = os.path.join(exported["cnn"], "model", "conv.weight", "out")
    stored = np.fromfile(weight, np.float32).reshape(8, 3, 3, 3)
    loaded = flow.load(exported["cnn"])
    np.testing.assert_array_equal(stored, loaded.state_dict()["model"]["conv.weight"].numpy())
    with open(os.path.join(exported["cnn"], "graph.json")) as f:
        manifest = json.load(f)
    assert manifest["inputs"] == [{"name": "x", "shape": [2, 3, 8, 8], "dtype": "float32"}]
    assert manifest["outputs"] == [{"name": "output_0", "shape": [2, 4], "dtype": "float32"}]
    assert manifest["target"] == "cpu" and "--iree-hal-target-device=local" in manifest[
        "compile_flags"]  # fmt: skip
    assert [p["name"] for p in manifest["parameters"]][:2] == ["model.conv.weight",
                                                                "model.conv.bias"]  # fmt: skip
    with open(os.path.join(exported["cnn"], "graph.mlir")) as f:
        assert '"flow.conv"' in f.read()
    assert loaded.signature["outputs"] == manifest["outputs"]
    with pytest.raises(ValueError, match="is an exported nn.Graph; load it without "
                                         "global_src_rank"):  # fmt: skip
        flow.load(exported["cnn"], global_src_rank=0)


def test_a_module_that_does_not_fit_is_recompiled_from_the_flow_ir(exported, monkeypatch):
    """Another CPU (or IREE version) than the one the module was compiled on: rebuilt from
    graph.mlir, same outputs."""
    monkeypatch.setattr(_graph_export, "_host_id", lambda: {"machine": "other"})
    loaded = flow.load(exported["mlp"])
    assert loaded.recompiled
    got = loaded(flow.tensor(ROWS))
    np.testing.assert_allclose(got["probs"].numpy(), exported["mlp_out"]["probs"], rtol=1e-5,
                               atol=1e-6)  # fmt: skip


def test_wrong_inputs_name_expected_and_got(exported):
    loaded = flow.load(exported["cnn"])
    with pytest.raises(ValueError, match=r"input 0 \(x\): expected float32\[2, 3, 8, 8\], got "
                                         r"float32\[1, 3, 8, 8\]"):  # fmt: skip
        loaded(flow.tensor(IMAGES[:1]))
    with pytest.raises(ValueError, match=r"expected float32\[2, 3, 8, 8\], got float64"):
        loaded(IMAGES.astype(np.float64))
    with pytest.raises(TypeError, match=r"expected 1 argument\(s\) \(x: float32\[2, 3, 8, "
                                        r"8\]\), got 2"):  # fmt: skip
        loaded(flow.tensor(IMAGES), flow.tensor(IMAGES))
    with pytest.raises(TypeError, match=r"argument 0 must be a tensor or numpy array \(x: "
                                        r"float32\[2, 3, 8, 8\]\), got list"):  # fmt: skip
        loaded(IMAGES.tolist())


def _copy(src: str, dst: str) -> str:
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("victim", ["graph.vmfb", "graph.mlir", "graph.json",
                                    os.path.join("mlp", "fc1.weight", "out")])  # fmt: skip
def test_tampered_export_is_detected(exported, tmp_path, victim):
    where = _copy(exported["mlp"], str(tmp_path / "copy"))
    path = os.path.join(where, victim)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    name = os.path.basename(victim) if victim.startswith("graph") else "fc1.weight"
    with pytest.raises(CheckpointError, match=f"corrupted .*{name}"):
        flow.load(where)


def test_a_missing_program_file_is_detected(exported, tmp_path):
    where = _copy(exported["mlp"], str(tmp_path / "copy"))
    os.remove(os.path.join(where, "graph.vmfb"))
    with pytest.raises(CheckpointError, match="graph.vmfb is missing"):
        flow.load(where)


def test_training_graph_is_refused(tmp_path):
    model = MLP()

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1))

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    graph = Train()
    graph(flow.tensor(ROWS))
    with pytest.raises(ValueError, match="export an inference graph: a Graph without "
                                         "add_optimizer"):  # fmt: skip
        flow.save(graph, str(tmp_path / "train"))
    assert not (tmp_path / "train").exists()


def test_graph_not_called_yet_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="has not been called yet.*call it once with "
                                           "example inputs"):  # fmt: skip
        flow.save(TwoHeads(MLP()), str(tmp_path / "never"))


def test_a_graph_in_training_mode_is_refused(tmp_path):
    """BatchNorm in training mode updates its running stats on every call: not a program
    an export can replay."""
    graph = GraphMobileNetV2(SmallCNN())
    graph(flow.tensor(IMAGES))
    with pytest.raises(ValueError, match="updates tensors .*call model.eval"):
        flow.save(graph, str(tmp_path / "bn_train"))


def test_export_refuses_files_and_foreign_directories(exported, tmp_path):
    mlp = MLP()
    mlp.eval()
    graph = TwoHeads(mlp)
    graph(flow.tensor(ROWS))
    with pytest.raises(ValueError, match="exported to a directory"):
        flow.save(graph, str(tmp_path / "g.safetensors"))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError, match="does not hold a checkpoint"):
        flow.save(graph, str(tmp_path / "busy"))
    where = _copy(exported["mlp"], str(tmp_path / "again"))  # an export is replaced
    flow.save(graph, where)
    again = flow.load(where)
    np.testing.assert_allclose(again(ROWS)["logits"].numpy(),
                               _mlp_numpy({k: v.numpy() for k, v in mlp.state_dict().items()},
                                          ROWS)["logits"], rtol=1e-4, atol=1e-5)  # fmt: skip


def test_export_right_after_a_first_call_that_compiles_in_the_background(tmp_path):
    """With background compiles the first call ran interpreted; the export waits for the
    module rather than exporting without one."""

    class Background(nn.Graph):
        def __init__(self, model):
            super().__init__(sync_compile=False)
            self.mlp = model

        def build(self, x):
            return self.mlp(x)

    mlp = MLP()
    mlp.eval()
    graph = Background(mlp)
    first = graph(flow.tensor(ROWS)).numpy()
    flow.save(graph, str(tmp_path / "bg"))
    assert os.path.getsize(tmp_path / "bg" / "graph.vmfb") > 0
    got = flow.load(str(tmp_path / "bg"))(ROWS).numpy()
    np.testing.assert_allclose(got, first, rtol=1e-5, atol=1e-6)


def test_static_arguments_are_part_of_the_signature(tmp_path):
    class Scaled(nn.Graph):
        def __init__(self, model):
            super().__init__()
            self.mlp = model

        def build(self, x, scale):
            return self.mlp(x) * scale

    mlp = MLP()
    mlp.eval()
    graph = Scaled(mlp)
    want = graph(flow.tensor(ROWS), 3).numpy()
    flow.save(graph, str(tmp_path / "scaled"))
    loaded = flow.load(str(tmp_path / "scaled"))
    np.testing.assert_allclose(loaded(ROWS, 3).numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="input 1 was exported as the static value 3, got 4"):
        loaded(ROWS, 4)
