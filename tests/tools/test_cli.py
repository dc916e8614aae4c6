"""The command-line tools end to end, as a user runs them: `flow-compile` writes a `.vmfb` for
every target, `flow-run` executes it with `.npy` and inline inputs (and runs Python scripts),
and every bad input ends in exit code 1 with a message and no Python traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import iree.runtime as rt
import numpy as np
import pytest

from flow.targets import TARGETS, available

# Two functions, so that the unknown-function error has a list to show.
FLOW_IR = """\
func.func @mlp_sum(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = flow.matmul %x, %w : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %1 = flow.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<2x2xf32>
  %2 = flow.add %0, %1 : tensor<2x2xf32>
  %3 = flow.full 0.0 : f32 -> tensor<2x2xf32>
  %4 = flow.maximum %2, %3 : tensor<2x2xf32>
  %5 = flow.reduce sum %4, dims = [1] : tensor<2x2xf32> -> tensor<2xf32>
  return %5 : tensor<2xf32>
}
func.func @mm_shift(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2xf32>) {
  %0 = flow.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %1 = flow.full 5.0 : f32 -> tensor<2x2xf32>
  %2 = flow.sub %0, %1 : tensor<2x2xf32>
  %3 = flow.reduce max %2, dims = [1] : tensor<2x2xf32> -> tensor<2xf32>
  return %2, %3 : tensor<2x2xf32>, tensor<2xf32>
}
"""

# Line 2 has an unterminated type: the error must point at line 3, column 3.
MALFORMED_IR = """\
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.exp %a : tensor<4xf32
  return %0 : tensor<4xf32>
}
"""


def mlp_sum(x, w, b):
    return np.maximum(x @ w + b, 0).sum(axis=1)


def mm_shift(a, b):
    y = a @ b - 5
    return y, y.max(axis=1)


def tool(name: str, *args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m flow.tools.<name> ARGS` and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", f"flow.tools.{name}", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def assert_user_error(res: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit code 1, every needle in stderr, and no Python traceback."""
    out = res.stdout + res.stderr
    assert res.returncode == 1, f"exit code {res.returncode}\n{out}"
    assert "Traceback" not in out, out
    for needle in needles:
        assert needle in res.stderr, f"{needle!r} not in stderr:\n{res.stderr}"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    (d / "model.mlir").write_text(FLOW_IR)
    return d


@pytest.fixture(scope="module")
def vmfb(work) -> dict[str, Path]:
    """`flow-compile model.mlir --target T -o model.T.vmfb`, compiled on first use per target."""

    class Lazy(dict):
        def __missing__(self, target: str) -> Path:
            out = work / f"model.{target}.vmfb"
            res = tool("compile", work / "model.mlir", "--target", target, "-o", out)
            assert res.returncode == 0, res.stderr
            self[target] = out
            return out

    return Lazy()


# --------------------------------------------------------------------------- flow-compile


@pytest.mark.parametrize("target", ["cpu", "cuda", "rocm", "vulkan"])
def test_compile_writes_a_module_for_every_target(vmfb, target):
    data = vmfb[target].read_bytes()
    assert data, "empty module"
    # Parsing the flatbuffer needs no device, so this works for GPU targets on this machine.
    module = rt.VmModule.copy_buffer(rt.VmInstance(), data)
    assert {"mlp_sum", "mm_shift"} <= set(module.function_names)
    decl = module.lookup_function("mlp_sum").reflection["iree.abi.declaration"]
    assert "tensor<2x3xf32>" in decl and "tensor<2xf32>" in decl


def test_compile_to_stdout_writes_the_same_module(work, vmfb):
    res = subprocess.run(
        [sys.executable, "-m", "flow.tools.compile", str(work / "model.mlir"), "-o", "-"],
        capture_output=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr.decode()
    assert res.stdout == vmfb["cpu"].read_bytes()


@pytest.mark.parametrize(("emit", "present", "absent"),
                         [("flow", "flow.matmul", "linalg."), ("linalg", "linalg.generic", "flow.")])  # fmt: skip
def test_compile_emit_stops_early(work, emit, present, absent):
    res = tool("compile", work / "model.mlir", "--emit", emit)
    assert res.returncode == 0, res.stderr
    assert present in res.stdout and absent not in res.stdout


def test_compile_unknown_target_lists_targets(work):
    res = tool("compile", work / "model.mlir", "--target", "tpu", "-o", work / "x.vmfb")
    assert_user_error(res, "unknown target 'tpu'", "cpu, cuda, rocm, vulkan")
    assert not (work / "x.vmfb").exists()


def test_compile_malformed_ir_reports_file_line_col(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text(MALFORMED_IR)
    res = tool("compile", bad, "-o", tmp_path / "bad.vmfb")
    assert_user_error(res, f"{bad}:3:3: error:")
    assert "^" in res.stderr  # the caret under the offending source


def test_compile_missing_file(tmp_path):
    res = tool("compile", tmp_path / "nope.mlir", "-o", tmp_path / "x.vmfb")
    assert_user_error(res, "no such file", "nope.mlir")


# --------------------------------------------------------------------------- flow-run


X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
W = np.array([[1, 0], [0, 1], [1, -1]], np.float32)
B = np.array([0.5, -1], np.float32)


def test_run_npy_inputs_matches_numpy(vmfb, tmp_path):
    paths = []
    for name, arr in (("x", X), ("w", W), ("b", B)):
        np.save(tmp_path / f"{name}.npy", arr)
        paths += ["--input", tmp_path / f"{name}.npy"]
    out = tmp_path / "out.npy"
    res = tool("run", vmfb["cpu"], "--function", "mlp_sum", *paths, "--output", out)
    assert res.returncode == 0, res.stderr
    assert "result[0]: 2xf32" in res.stdout
    assert "[ 4.5 10.5]" in res.stdout
    got = np.load(out)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, mlp_sum(X, W, B), rtol=1e-6)


def test_run_inline_inputs_and_outputs(vmfb, tmp_path):
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[0.5, -1], [2, 0]], np.float32)
    outs = [tmp_path / "y.npy", tmp_path / "m.npy"]
    res = tool("run", vmfb["cpu"], "--function", "mm_shift",
               "--input", "2x2xf32=1,2,3,4", "--input", "2x2xf32=0.5,-1,2,0",
               "--output", outs[0], "--output", outs[1])  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "result[0]: 2x2xf32" in res.stdout and "result[1]: 2xf32" in res.stdout
    for path, expected in zip(outs, mm_shift(a, b)):
        np.testing.assert_allclose(np.load(path), expected, rtol=1e-6)


def test_run_splat_inline_input(vmfb, tmp_path):
    """A single value fills the whole shape (`2x2xf32=1`), as in iree-run-module."""
    out = tmp_path / "y.npy"
    res = tool("run", vmfb["cpu"], "--function", "mm_shift",
               "--input", "2x2xf32=1", "--input", "2x2xf32=2", "--output", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    np.testing.assert_allclose(np.load(out), np.full((2, 2), -1, np.float32))


@pytest.mark.skipif("vulkan" not in available(), reason="no Vulkan device (lavapipe) here")
def test_run_vulkan_module(vmfb, tmp_path):
    out = tmp_path / "out.npy"
    res = tool("run", vmfb["vulkan"], "--target", "vulkan", "--function", "mlp_sum",
               "--input", "2x3xf32=1,2,3,4,5,6", "--input", "3x2xf32=1,0,0,1,1,-1",
               "--input", "2xf32=0.5,-1", "--output", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    np.testing.assert_allclose(np.load(out), mlp_sum(X, W, B), rtol=1e-6)


def test_run_missing_input_file(vmfb, tmp_path):
    res = tool("run", vmfb["cpu"], "--function", "mlp_sum", "--input", tmp_path / "nope.npy")
    assert_user_error(res, "input file not found", "nope.npy")


@pytest.mark.parametrize(("spec", "needle"), [
    ("2x2", "expected FILE.npy or SHAPExTYPE=v1,v2,..."),
    ("2x2=1,2,3,4", "cannot parse input type '2x2'"),
    ("2x2xq7=1,2,3,4", "cannot parse input type '2x2xq7'"),
    ("2xax2xf32=1", "cannot parse input type"),
    ("2x2xf32=1,2,3", "needs 4 values, got 3"),
    ("2x2xf32=1,2,x,4", "cannot parse input values"),
])  # fmt: skip
def test_run_bad_input_spec(vmfb, spec, needle):
    res = tool("run", vmfb["cpu"], "--function", "mm_shift", "--input", spec)
    assert_user_error(res, needle)


def test_run_unknown_function_lists_exported_functions(vmfb):
    res = tool("run", vmfb["cpu"], "--function", "nope")
    assert_user_error(res, "no function 'nope'", "mlp_sum", "mm_shift")


def test_run_unknown_function_is_not_an_internal_error(vmfb):
    res = tool("run", vmfb["cpu"], "--function", "nope")
    assert "internal error" not in res.stderr and "--traceback" not in res.stderr


@pytest.mark.parametrize(("inputs", "needles"), [
    (["2x2xf32=1"], ["expected 2 arguments but passed 1"]),
    (["2x2xf32=1"] * 3, ["expected 2 arguments but passed 3"]),
    (["2x2xf32=1", "2x3xf32=1"], ["input1 shape dimension 1 mismatch", "expected 2 but have 3"]),
    (["2x2xf32=1", "2x2xi32=1"], ["input1 element type mismatch"]),
])  # fmt: skip
def test_run_wrong_inputs_is_a_clear_error(vmfb, inputs, needles):
    args = [a for spec in inputs for a in ("--input", spec)]
    res = tool("run", vmfb["cpu"], "--function", "mm_shift", *args)
    assert_user_error(res, *needles)
    assert "internal error" not in res.stderr


@pytest.mark.skipif("cuda" in available(), reason="this machine has a CUDA device")
def test_run_cuda_module_without_gpu_names_the_driver(vmfb):
    res = tool("run", vmfb["cuda"], "--target", "cuda", "--function", "mlp_sum")
    assert_user_error(res, "driver 'cuda'", "no usable device", "targets usable here: cpu")
    assert "internal error" not in res.stderr


def test_run_cuda_module_on_the_cpu_target_fails_cleanly(vmfb):
    """Loading a cuda module with the default cpu target: exit 1, no traceback."""
    res = tool("run", vmfb["cuda"], "--function", "mlp_sum")
    assert_user_error(res, "cuda")


def test_run_cuda_module_on_the_cpu_target_says_what_to_do(vmfb):
    res = tool("run", vmfb["cuda"], "--function", "mlp_sum")
    assert "internal error" not in res.stderr
    assert "--target cuda" in res.stderr  # or flow-run picks the module's own target


def test_run_non_module_file_is_a_user_error(work):
    res = tool("run", work / "model.mlir")
    assert_user_error(res, "model.mlir")
    assert "internal error" not in res.stderr


def test_run_missing_module(tmp_path):
    assert_user_error(tool("run", tmp_path / "nope.vmfb"), "module not found", "nope.vmfb")


def test_run_unknown_target_lists_targets(vmfb):
    res = tool("run", vmfb["cpu"], "--target", "tpu")
    assert_user_error(res, "unknown target 'tpu'", "cpu, cuda, rocm, vulkan")


def test_run_python_script(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text(
        "import sys\n"
        "import flow\n"
        "x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
        "print('hello from', sys.argv[0].rsplit('/', 1)[-1], sys.argv[1:], __name__)\n"
        "print('sum', float(x.sum().numpy()))\n"
    )
    res = tool("run", script, "a", "--b", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["hello from hello.py ['a', '--b'] __main__", "sum 10.0"]


def test_run_python_script_exit_code_passes_through(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("raise SystemExit(3)\n")
    assert tool("run", script).returncode == 3


def test_run_missing_script(tmp_path):
    assert_user_error(tool("run", tmp_path / "nope.py"), "script not found", "nope.py")


# --------------------------------------------------------------------------- flow-opt


def test_opt_unknown_pass_lists_registered_passes(work):
    res = tool("opt", work / "model.mlir", "-p", "no-such-pass")
    assert_user_error(res, "unknown pass 'no-such-pass'", "registered passes:",
                      "flow-lower-to-linalg", "flow-to-iree-input")  # fmt: skip


def test_opt_runs_the_handoff_pipeline(work):
    res = tool("opt", work / "model.mlir", "-p", "flow-to-iree-input")
    assert res.returncode == 0, res.stderr
    assert "linalg.generic" in res.stdout and "flow." not in res.stdout


# --------------------------------------------------------------------------- console scripts


@pytest.mark.parametrize("script", ["flow-opt", "flow-compile", "flow-run"])
def test_console_scripts_are_installed(script):
    exe = shutil.which(script)
    if exe is None:
        pytest.skip(f"{script} is not on PATH (package not pip-installed here)")
    res = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "usage:" in res.stdout


def test_console_scripts_compile_and_run(tmp_path):
    if shutil.which("flow-compile") is None or shutil.which("flow-run") is None:
        pytest.skip("flow-compile / flow-run are not on PATH")
    src = tmp_path / "model.mlir"
    src.write_text(FLOW_IR)
    out = tmp_path / "model.vmfb"
    res = subprocess.run(["flow-compile", src, "-o", out], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    res = subprocess.run(["flow-run", out, "--function", "mm_shift", "--input", "2x2xf32=1,0,0,1",
                          "--input", "2x2xf32=1,2,3,4"], capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "[[-4. -3.]\n [-2. -1.]]" in res.stdout
    assert "[-3. -1.]" in res.stdout


def test_targets_table_is_what_the_cli_documents():
    """The error messages above list exactly these targets, in this order."""
    assert list(TARGETS) == ["cpu", "cuda", "rocm", "vulkan"]
