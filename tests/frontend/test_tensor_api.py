"""OneFlow's documented tensor API as its tutorials use it: `flow.cuda` and `f"{loss:>7f}"`
(cross-checked with PyTorch)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import flow
from flow.targets import RuntimeUnavailableError, device_names

# --------------------------------------------------------------------------- flow.cuda


def _to_cuda_works() -> bool:
    try:
        flow.ones(2).to("cuda")
    except RuntimeUnavailableError:
        return False
    return True


def test_cuda_is_available_answers_as_moving_a_tensor_to_cuda_does():
    available = flow.cuda.is_available()
    assert isinstance(available, bool)
    assert available == _to_cuda_works()
    expected = len(device_names("cuda")) if available else 0
    assert flow.cuda.device_count() == expected
    assert flow.cuda.device_count() >= (1 if available else 0)


def test_current_device_and_set_device():
    flow.cuda.set_device(-1)  # a negative index is a no-op, as in PyTorch
    with pytest.raises(ValueError, match="expected a cuda device"):
        flow.cuda.set_device("cpu")
    with pytest.raises(ValueError, match="expected a cuda device"):
        flow.cuda.set_device(1.5)
    if flow.cuda.is_available():
        flow.cuda.set_device(0)
        flow.cuda.set_device("cuda:0")
        flow.cuda.set_device(flow.device("cuda", 0))
        assert flow.cuda.current_device() == 0
        flow.cuda.synchronize()
    else:
        for call in (flow.cuda.current_device, flow.cuda.synchronize,
                     lambda: flow.cuda.set_device(0)):  # fmt: skip
            with pytest.raises(RuntimeUnavailableError, match="no CUDA device"):
                call()


def test_cuda_manual_seed_seeds_the_generator_of_cuda_tensors_when_there_is_one():
    flow.manual_seed(1)
    before = flow.default_generator.get_state().numpy().copy()
    flow.cuda.manual_seed(5)
    flow.cuda.manual_seed_all(5)
    after = flow.default_generator.get_state().numpy()
    if flow.cuda.is_available():  # one generator serves every device
        assert after.tolist() == flow.Generator().manual_seed(5).get_state().numpy().tolist()
    else:  # ignored without CUDA, as OneFlow and PyTorch document
        assert after.tolist() == before.tolist()


# --------------------------------------------------------------------------- __format__


@pytest.mark.parametrize(
    ("value", "dtype", "spec"),
    [(0.123456, "float32", ">7f"), (2.5, "float64", ".3e"), (-1.25, "float32", "8.2%"),
     (7, "int64", "d"), (7, "int32", ">5"), (3.0, "float32", "g")],
)  # fmt: skip
def test_a_0d_tensor_formats_as_its_number_like_torch(value, dtype, spec):
    torch = pytest.importorskip("torch")
    t = flow.tensor(value, dtype=getattr(flow, dtype))
    expected = format(torch.tensor(value, dtype=getattr(torch, dtype)), spec)
    assert format(t, spec) == expected
    assert f"{t:{spec}}" == expected


def test_a_one_element_tensor_formats_as_the_number_it_holds():
    loss = flow.tensor([[0.5]])
    assert f"loss: {loss:>7f}" == "loss: 0.500000"
    assert format(flow.tensor([3]), "03d") == "003"


def test_an_empty_spec_gives_str():
    for t in (flow.tensor(1.5), flow.tensor([[1.0, 2.0]])):
        assert f"{t}" == str(t) == format(t, "")


def test_a_multi_element_tensor_with_a_spec_is_a_type_error_naming_its_shape():
    with pytest.raises(TypeError, match=r"shape \[2, 3\]"):
        format(flow.ones(2, 3), ">7f")
    with pytest.raises(TypeError, match=r"shape \[0\]"):
        format(flow.ones(0), ".2f")


def test_a_global_tensor_formats_as_its_value():
    t = flow.tensor([0.25]).to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    assert t.is_global
    assert f"{t:.3f}" == "0.250" == format(t.item(), ".3f")


# --------------------------------------------------------------------------- a tutorial script


def test_a_tutorial_script_runs(tmp_path):
    script = tmp_path / "tutorial.py"
    script.write_text(textwrap.dedent("""
        import flow
        from flow import nn

        DEVICE = "cuda" if flow.cuda.is_available() else "cpu"
        model = nn.Linear(3, 1).to(DEVICE)
        loss_fn = nn.MSELoss()
        opt = flow.optim.SGD(model.parameters(), lr=0.1)
        x, y = flow.ones(4, 3).to(DEVICE), flow.zeros(4, 1).to(DEVICE)
        for step in range(3):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"loss: {loss:>7f}  [{step:>2d}]")
        print("device", DEVICE, flow.cuda.device_count())
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**os.environ})  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("loss: ") for line in lines[:3])
    float(lines[0].split()[1])  # a number, formatted
    expected = "cuda" if flow.cuda.is_available() else "cpu"
    assert lines[3] == f"device {expected} {flow.cuda.device_count()}"
