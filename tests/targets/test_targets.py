"""Tests for flow.targets: the table, in-process compile for every target, the compile cache,
diagnostics in CompileError, and running modules on the devices this machine has."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import iree.runtime as rt
import numpy as np
import pytest

import flow.targets as targets
from flow.targets import (
    DEFAULT_TARGET,
    TARGETS,
    CompileError,
    RuntimeUnavailableError,
    Target,
    UnknownFunctionError,
    UnknownTargetError,
    available,
    cache,
    compile_mlir,
    get_target,
    load,
)

# What our lowering hands to IREE: func/arith/tensor/linalg in generic form.
MODULE = """\
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>, sym_name = "add"}> ({
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %e = "tensor.empty"() : () -> tensor<4xf32>
    %r = "linalg.generic"(%a, %b, %e) <{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = [#linalg.iterator_type<parallel>], operandSegmentSizes = array<i32: 2, 1>}> ({
    ^bb1(%x: f32, %y: f32, %o: f32):
      %s = "arith.addf"(%x, %y) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
      "linalg.yield"(%s) : (f32) -> ()
    }) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%r) : (tensor<4xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>, sym_name = "matmul"}> ({
  ^bb0(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>):
    %z = "arith.constant"() <{value = dense<0.000000e+00> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
    %r = "linalg.generic"(%a, %b, %z) <{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>], operandSegmentSizes = array<i32: 2, 1>}> ({
    ^bb1(%x: f32, %y: f32, %acc: f32):
      %p = "arith.mulf"(%x, %y) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
      %s = "arith.addf"(%acc, %p) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
      "linalg.yield"(%s) : (f32) -> ()
    }) : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    "func.return"(%r) : (tensor<8x4xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>), sym_name = "twice"}> ({
  ^bb0(%a: tensor<4xf32>):
    "func.return"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : () -> ()
}) : () -> ()
"""

# No dispatch, so it compiles in ~0.1 s; used where only the compile itself matters.
TINY = """\
func.func @id(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
"""

TYPE_ERROR = """\
func.func @main(%a: tensor<4xf32>) -> tensor<8xf32> {
  return %a : tensor<4xf32>
}
"""

SYNTAX_ERROR = "func.func @main(%a: tensor<4xf32> {\n"

EXPECTED_DEVICE = {"cpu": "local", "cuda": "cuda", "rocm": "hip", "vulkan": "vulkan"}
EXPECTED_DRIVERS = {"cpu": "local-task", "cuda": "cuda", "rocm": "hip", "vulkan": "vulkan"}

rng = np.random.default_rng(0)


@pytest.fixture(scope="module", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Never touch the user's cache from these tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOW_CACHE_DIR", str(tmp_path_factory.mktemp("flow-cache")))
        mp.delenv("FLOW_NO_CACHE", raising=False)
        yield


@pytest.fixture(autouse=True)
def _private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """IR saved by failing compiles lands in the test's own directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture(scope="module")
def vmfbs() -> dict[str, bytes]:
    """MODULE compiled once per target (uncached, so the cache tests see clean counters)."""
    return {name: compile_mlir(MODULE, name, use_cache=False) for name in TARGETS}


@pytest.fixture(scope="module")
def cpu_module(vmfbs: dict[str, bytes]) -> targets.Module:
    return load(vmfbs["cpu"], "cpu")


def _cache_files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.vmfb")) if directory.exists() else []


# --- the table ---------------------------------------------------------------------------


def test_table_flags_and_drivers() -> None:
    assert set(TARGETS) == {"cpu", "cuda", "rocm", "vulkan"}
    for name, target in TARGETS.items():
        assert target.name == name
        assert f"--iree-hal-target-device={EXPECTED_DEVICE[name]}" in target.device_flags
        if name != "vulkan":  # f64 tensors keep their type where the hardware has f64
            assert "--iree-input-demote-f64-to-f32=false" in target.device_flags
        assert target.driver == EXPECTED_DRIVERS[name]
        assert target.description
    assert DEFAULT_TARGET == "cpu"
    cpu = TARGETS["cpu"].device_flags
    assert "--iree-llvmcpu-target-cpu=host" in cpu and "--iree-global-opt-data-tiling=true" in cpu


def test_table_drivers_are_known_to_iree_runtime() -> None:
    known = set(rt.query_available_drivers())
    for target in TARGETS.values():
        assert target.driver in known, (target.name, target.driver, sorted(known))


def test_get_target() -> None:
    assert get_target("vulkan") is TARGETS["vulkan"]
    custom = Target("cpu-generic", ("--iree-hal-target-device=local",), "local-sync", "test")
    assert get_target(custom) is custom
    with pytest.raises(UnknownTargetError) as info:
        get_target("tpu")
    assert str(info.value) == "unknown target 'tpu'; expected one of: cpu, cuda, rocm, vulkan"
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnknownTargetError):
        compile_mlir(TINY, "tpu")


def test_targets_package_imports_nothing_else_of_ours() -> None:
    package = Path(targets.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name != "flow" and (
                    not name.startswith("flow.") or name.startswith("flow.targets")
                ), f"{path.name} imports {name}"


# --- compile -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(TARGETS))
def test_compiles_for_every_target(vmfbs: dict[str, bytes], name: str) -> None:
    vmfb = vmfbs[name]
    assert isinstance(vmfb, bytes) and len(vmfb) > 1000


# --- run -----------------------------------------------------------------------------------


def _check_module(module: targets.Module) -> None:
    a, b = rng.standard_normal(4, np.float32), rng.standard_normal(4, np.float32)
    (out,) = module["add"](a, b)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    x, y = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 4), np.float32)
    result = module["matmul"](x, y)
    assert isinstance(result, tuple) and len(result) == 1
    assert result[0].shape == (8, 4) and result[0].dtype == np.float32
    np.testing.assert_allclose(result[0], x @ y, rtol=1e-5, atol=1e-5)


def test_run_cpu(cpu_module: targets.Module) -> None:
    assert cpu_module.names == ("add", "matmul", "twice")
    assert "add" in cpu_module and "nope" not in cpu_module
    _check_module(cpu_module)


def test_run_cpu_local_sync(vmfbs: dict[str, bytes]) -> None:
    module = load(vmfbs["cpu"], "cpu", driver="local-sync")
    assert module.driver == "local-sync"
    _check_module(module)


def test_cpu_results_stay_valid_after_next_call(cpu_module: targets.Module) -> None:
    add = cpu_module["add"]
    ones = np.ones(4, np.float32)
    (first,) = add(ones, ones)
    kept = first.copy()
    for _ in range(5):
        add(ones * 10, ones)
    np.testing.assert_array_equal(first, kept)


def test_cpu_results_never_alias(cpu_module: targets.Module) -> None:
    x = np.arange(4, dtype=np.float32)
    a, b = cpu_module["twice"](x)
    a[0] = 42.0
    assert b[0] == 0.0 and x[0] == 0.0


def test_non_contiguous_input(cpu_module: targets.Module) -> None:
    big = rng.standard_normal((16, 8), np.float32)
    x = big.T  # 8x16, Fortran-ordered view
    y = rng.standard_normal((16, 4), np.float32)
    (out,) = cpu_module["matmul"](x, y)
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["vulkan", "cuda", "rocm"])
def test_run_device(vmfbs: dict[str, bytes], name: str) -> None:
    if name not in available():
        with pytest.raises(RuntimeUnavailableError) as info:
            load(vmfbs[name], name)
        message = str(info.value)
        assert repr(name) in message and repr(TARGETS[name].driver) in message
        assert "local-task" in message  # lists the drivers this runtime has
        hint = " (Mesa lavapipe: mesa-vulkan-drivers libvulkan1)" if name == "vulkan" else ""
        pytest.skip(f"no {TARGETS[name].driver} device on this machine{hint}")
    module = load(vmfbs[name], name)
    _check_module(module)
    a, b = module["twice"](np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(a, b)


BOOL_AND_SCALAR = """\
func.func @gt(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xi1>, tensor<i32>) {
  %0 = arith.cmpf ogt, %a, %b : tensor<4xf32>
  %c = arith.constant dense<7> : tensor<i32>
  return %0, %c : tensor<4xi1>, tensor<i32>
}
"""


@pytest.mark.parametrize("name", ["cpu", "vulkan"])
def test_bool_and_rank0_results(name: str) -> None:
    if name not in available():
        pytest.skip(f"no {TARGETS[name].driver} device on this machine")
    # For the device here: the portable vulkan architecture refuses bool results (no 8-bit
    # storage; flow.targets.vulkan), the device's own (lavapipe's) has them.
    target = targets.execution_target(name)
    module = load(compile_mlir(BOOL_AND_SCALAR, target, use_cache=False), name)
    a = np.array([1, 2, 3, 4], np.float32)
    mask, seven = module["gt"](a, a[::-1].copy())
    assert mask.dtype == np.bool_ and mask.tolist() == [False, False, True, True]
    assert seven.shape == () and seven.dtype == np.int32 and int(seven) == 7


def test_available() -> None:
    names = available()
    assert names[0] == "cpu"
    assert set(names) <= set(TARGETS)
    assert available() is names  # cached


def test_unknown_function(cpu_module: targets.Module) -> None:
    with pytest.raises(UnknownFunctionError) as info:
        cpu_module["mian"]
    assert isinstance(info.value, KeyError)
    expected = "module has no function 'mian'; exported functions: add, matmul, twice"
    assert str(info.value) == expected


def test_module_built_for_another_device(vmfbs: dict[str, bytes]) -> None:
    with pytest.raises(targets.LoadError, match="compiled for target 'vulkan', not 'cpu'") as info:
        load(vmfbs["vulkan"], "cpu")
    assert info.value.compiled_for == "vulkan"
    with pytest.raises(targets.LoadError, match="'cpu'"):
        load(b"not a module" * 10, "cpu")


# --- cache ---------------------------------------------------------------------------------


def test_second_compile_is_a_hit(fresh_cache: Path) -> None:
    first = compile_mlir(TINY)
    assert cache.stats().misses == 1 and cache.stats().writes == 1
    assert len(_cache_files(fresh_cache)) == 1
    second = compile_mlir(TINY)
    assert second == first
    assert cache.stats().memory_hits == 1
    # A new process (empty memo) reads it from disk.
    cache.clear_memory()
    assert compile_mlir(TINY) == first
    assert cache.stats().disk_hits == 1 and cache.stats().hits == 2
    assert cache.stats().misses == 1


def test_key_covers_target_flags_and_text(fresh_cache: Path) -> None:
    base = cache.cache_key(TINY, "cpu", TARGETS["cpu"].device_flags)
    assert base == cache.cache_key(TINY, "cpu", list(TARGETS["cpu"].device_flags))
    assert base != cache.cache_key(TINY + " ", "cpu", TARGETS["cpu"].device_flags)
    assert base != cache.cache_key(TINY, "vulkan", TARGETS["cpu"].device_flags)
    assert base != cache.cache_key(TINY, "cpu", TARGETS["cpu"].device_flags[:-1])
    compile_mlir(TINY, "cpu")
    compile_mlir(TINY, "cpu", ["--iree-opt-data-tiling=false"])
    assert cache.stats().misses == 2 and len(_cache_files(fresh_cache)) == 2


def test_corrupt_entry_is_a_miss(fresh_cache: Path) -> None:
    good = compile_mlir(TINY)
    (entry,) = _cache_files(fresh_cache)
    for damage in (b"garbage", entry.read_bytes()[:-10]):  # foreign bytes; a torn write
        entry.write_bytes(damage)
        cache.clear_memory()
        assert compile_mlir(TINY) == good
        assert cache.stats().disk_hits == 0
    assert cache.stats().misses == 3 and cache.stats().corrupt == 2
    cache.clear_memory()
    compile_mlir(TINY)  # rewritten after the miss
    assert cache.stats().disk_hits == 1


@pytest.mark.parametrize("env", [{"FLOW_CACHE_DIR": "off"}, {"FLOW_NO_CACHE": "1"}])
def test_cache_disabled(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cache.cache_dir() is None
    compile_mlir(TINY)
    compile_mlir(TINY)
    assert cache.stats() == cache.CacheStats()
    assert not _cache_files(fresh_cache)


def test_use_cache_false(fresh_cache: Path) -> None:
    compile_mlir(TINY, use_cache=False)
    assert cache.stats() == cache.CacheStats() and not _cache_files(fresh_cache)


def test_cache_dir_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FLOW_CACHE_DIR", raising=False)
    monkeypatch.delenv("FLOW_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "flow"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "flow"


def test_unwritable_cache_dir_warns_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FLOW_CACHE_DIR", str(blocker / "cache"))
    cache.clear_memory()
    with pytest.warns(RuntimeWarning, match="not writable") as record:
        assert compile_mlir(TINY + "// one\n")
        assert compile_mlir(TINY + "// two\n")
    assert len([w for w in record if "not writable" in str(w.message)]) == 1


# --- compile errors ------------------------------------------------------------------------


def _check_error(err: CompileError, source: str, target: str, *texts: str) -> str:
    message = str(err)
    assert f"target {target!r}" in message
    for flag in TARGETS[target].device_flags:
        assert flag in message
    for text in texts:
        assert text in message, message
    assert "see diagnostics" not in message
    repro_lines = [line for line in message.splitlines() if line.startswith("repro: iree-compile ")]
    assert len(repro_lines) == 1 and err.repro and err.repro in repro_lines[0]
    assert err.ir_path and Path(err.ir_path).read_text() == source
    assert err.ir_path in err.repro and "-o out.vmfb" in err.repro
    return message


def test_syntax_error(fresh_cache: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile_mlir(SYNTAX_ERROR)
    _check_error(info.value, SYNTAX_ERROR, "cpu", "input.mlir:1:", "error: ")
    assert info.value.diagnostics and info.value.diagnostics[0].severity == "error"
    assert cache.stats().writes == 0 and not _cache_files(fresh_cache)


def test_type_error() -> None:
    with pytest.raises(CompileError) as info:
        compile_mlir(TYPE_ERROR, "vulkan")
    _check_error(
        info.value,
        TYPE_ERROR,
        "vulkan",
        "input.mlir:2:3:",
        "type of return operand 0 ('tensor<4xf32>') doesn't match function result type ('tensor<8xf32>')",
    )


@pytest.mark.skipif(shutil.which("iree-compile") is None, reason="iree-compile is not on PATH")
def test_repro_command_reproduces() -> None:
    with pytest.raises(CompileError) as info:
        compile_mlir(TYPE_ERROR, "cpu")
    argv = info.value.repro.split()
    workdir = os.path.dirname(info.value.ir_path)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=workdir)
    assert proc.returncode != 0
    assert "doesn't match function result type" in proc.stderr


def test_unknown_flag() -> None:
    with pytest.raises(CompileError) as info:
        compile_mlir(TINY, "cpu", ["--iree-no-such-flag=1"])
    _check_error(
        info.value, TINY, "cpu", "option not found: iree-no-such-flag", "--iree-no-such-flag=1"
    )


def test_bad_flag_value_includes_llvm_detail() -> None:
    with pytest.raises(CompileError) as info:
        compile_mlir(TINY, "cpu", ["--iree-opt-data-tiling=maybe"])
    _check_error(info.value, TINY, "cpu", "'maybe' is invalid value for boolean argument")


def test_pipeline_failure_has_location_and_clipped_dump() -> None:
    # Later flags override earlier ones; sm_90 fails to compile a dispatch in IREE 3.13.
    with pytest.raises(CompileError) as info:
        compile_mlir(MODULE, "cuda", ["--iree-cuda-target=sm_90"])
    message = _check_error(info.value, MODULE, "cuda", "missing GPU target", "input.mlir:", "sm_90")
    assert "compilation failed" in message
    full = "\n".join(d.message for d in info.value.diagnostics)
    assert len(full) >= len(message) - 2000  # every diagnostic kept in full on the exception
