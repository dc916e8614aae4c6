"""The cpu target cross-compiles for arm64 and x86-64 (`get_target("cpu", cpu_arch=...)`,
`flow-compile --cpu-arch`): the table's cpu row with the architecture's triple and target CPU.
The modules are checked by their ELF headers; running them needs a machine of that kind."""

from __future__ import annotations

import pytest

from flow.targets import TARGETS, UnknownTargetError, cache, compile_flags, compile_mlir, get_target
from flow.targets.table import CPU_ARCHS

# A matmul and a reduction: enough for data tiling and vector code.
SOURCE = """\
func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>)
                     outs(%f : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %r = linalg.reduce ins(%m : tensor<8x4xf32>) outs(%f1 : tensor<8xf32>) dimensions = [1]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<8xf32>
}
"""

EM_X86_64, EM_AARCH64 = 62, 183


def elf_machines(vmfb: bytes) -> set[int]:
    """The `e_machine` of every ELF image embedded in a module."""
    out, at = set(), vmfb.find(b"\x7fELF")
    while at >= 0:
        if vmfb[at + 4] == 2:  # ELFCLASS64: e_machine is the half-word at offset 18
            out.add(int.from_bytes(vmfb[at + 18 : at + 20], "little"))
        at = vmfb.find(b"\x7fELF", at + 4)
    return out


def test_host_stays_the_default():
    cpu = get_target("cpu")
    assert cpu is TARGETS["cpu"] and cpu.arch == "host"
    assert get_target("cpu", cpu_arch="host") is cpu
    assert "--iree-llvmcpu-target-cpu=host" in cpu.device_flags
    assert not any(f.startswith("--iree-llvmcpu-target-triple") for f in cpu.device_flags)


@pytest.mark.parametrize("name, alias", [("arm64", "aarch64"), ("x86-64", "x86_64")])
def test_arch_variant_rewrites_the_cpu_flags(name, alias):
    arch = CPU_ARCHS[name]
    t = get_target("cpu", cpu_arch=name)
    assert t.name == f"cpu-{name}" and t.arch == name and t.driver == TARGETS["cpu"].driver
    assert f"--iree-llvmcpu-target-triple={arch.triple}" in t.device_flags
    assert f"--iree-llvmcpu-target-cpu={arch.cpu}" in t.device_flags
    assert not any(f.endswith("=host") for f in t.device_flags)
    # Everything else of the cpu row is kept (data tiling, f64); host-measured extras are not.
    rest = [f for f in TARGETS["cpu"].device_flags if "target-cpu" not in f]
    assert all(f in t.device_flags for f in rest) and t.optional_flags == ()
    assert get_target("cpu", cpu_arch=alias) == t
    assert get_target(f"cpu-{name}") == t and get_target(t) is t


def test_cache_key_includes_the_arch():
    keys = {
        cache.cache_key(SOURCE, t.name, compile_flags(t))
        for t in (get_target("cpu"), get_target("cpu-arm64"), get_target("cpu-x86-64"))
    }
    assert len(keys) == 3


def test_bad_arch_and_non_cpu_target():
    with pytest.raises(UnknownTargetError, match="unknown CPU architecture 'sparc'; expected one "
                       "of: host, arm64, x86-64"):  # fmt: skip
        get_target("cpu", cpu_arch="sparc")
    with pytest.raises(UnknownTargetError, match="applies to the cpu target, not 'cuda'"):
        get_target("cuda", cpu_arch="arm64")


@pytest.mark.parametrize("arch, machine", [("arm64", EM_AARCH64), ("x86-64", EM_X86_64)])
def test_cross_compiled_module_is_elf_for_the_arch(arch, machine):
    vmfb = compile_mlir(SOURCE, get_target("cpu", cpu_arch=arch), use_cache=False)
    assert elf_machines(vmfb) == {machine}
    assert f"embedded-elf-{CPU_ARCHS[arch].elf}".encode() in vmfb
    assert compile_mlir(SOURCE, f"cpu-{arch}") == vmfb  # by name, through the cache


# ------------------------------------------------------------------ flag sets per ISA family


def test_each_family_names_a_flag_set_and_the_host_row_carries_its_flags():
    from flow.targets.table import (CPU_FAMILY_FLAGS, CPU_FLAG_SETS, cpu_flag_set,
                                    host_cpu_family)  # fmt: skip

    assert set(CPU_FAMILY_FLAGS) == {"x86-avx512", "x86-avx512-amd", "x86-avx2", "arm64",
                                     "other"}  # fmt: skip
    assert set(CPU_FAMILY_FLAGS.values()) <= set(CPU_FLAG_SETS)
    family = host_cpu_family()
    assert family in CPU_FAMILY_FLAGS
    flags = cpu_flag_set(family)
    cpu = TARGETS["cpu"]
    assert all(f in cpu.device_flags for f in flags.flags) and cpu.optional_flags == flags.optional
    # Read from /proc/cpuinfo independently: AVX-512 machines are their own family.
    with open("/proc/cpuinfo") as f:
        lines = f.read().splitlines()
    cpu_flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("flags")), [])
    amd = any(ln.startswith("vendor_id") and "AuthenticAMD" in ln for ln in lines)
    if cpu_flags:
        assert family.startswith("x86-avx512") == ("avx512f" in cpu_flags)
        assert family.endswith("-amd") == ("avx512f" in cpu_flags and amd)
    # A cross-compiled architecture takes its family's set, not the host's extras.
    arm = get_target("cpu", cpu_arch="arm64")
    assert all(f in arm.device_flags for f in cpu_flag_set("arm64").flags)


def test_flow_cpu_flags_picks_a_set_and_names_the_known_ones():
    import subprocess
    import sys

    code = "from flow.targets import TARGETS; print(TARGETS['cpu'].device_flags)"
    env = {"FLOW_CPU_FLAGS": "dt-ukernels", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "--iree-llvmcpu-enable-ukernels=all" in run.stdout
    assert "--iree-global-opt-data-tiling=true" not in run.stdout
    env["FLOW_CPU_FLAGS"] = "fastest"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert run.returncode != 0
    assert "FLOW_CPU_FLAGS='fastest': expected one of untiled, global-dt" in run.stderr
