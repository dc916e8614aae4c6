"""The target table: one row per target, mapping a name to IREE compile flags and a runtime driver.

Everything else in ``flow.targets`` reads this table; adding a target means adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "CPU_ARCHS", "CPU_DRIVERS", "CPU_FAMILY_FLAGS", "CPU_FLAG_SETS", "DEFAULT_TARGET", "TARGETS",
    "CpuArch", "CpuFlags", "Target", "UnknownTargetError", "cpu_flag_set", "get_target",
    "host_cpu_family",
]  # fmt: skip


@dataclass(frozen=True)
class Target:
    """A compilation target: IREE compiler flags that select the device, and the
    IREE runtime driver that executes the compiled module."""

    name: str
    device_flags: tuple[str, ...]
    driver: str
    description: str
    # Flags that make code faster but that IREE rejects on some programs: a compile that
    # fails with them is retried without them (flow.targets.compiler.compile_mlir).
    optional_flags: tuple[str, ...] = ()
    # How a per-rank program's collectives run: "comm" calls the `comm` runtime module (MPI,
    # flow-lower-collectives); "native" keeps them in IREE as `flow.collective.*` ops on
    # channels (NCCL / RCCL, flow-lower-collectives-native).
    collectives: str = "comm"
    # The CPU architecture a cpu target compiles for: "host" (this machine), or a row of
    # CPU_ARCHS for a module that runs elsewhere (see `get_target`).
    arch: str = "host"


@dataclass(frozen=True)
class CpuFlags:
    """A named set of the cpu target's code-generation flags (the data-tiling path, inner-tiled
    matmuls, ukernels); `optional` ones are dropped for a program IREE rejects with them."""

    name: str
    flags: tuple[str, ...]
    optional: tuple[str, ...] = ()


_GLOBAL_DT = "--iree-global-opt-data-tiling=true"
CPU_FLAG_SETS: dict[str, CpuFlags] = {
    s.name: s
    for s in (
        CpuFlags("untiled", ()),
        CpuFlags("global-dt", (_GLOBAL_DT,)),
        CpuFlags("global-dt-inner", (_GLOBAL_DT,), ("--iree-llvmcpu-enable-inner-tiled",)),
        CpuFlags("dt", ("--iree-opt-data-tiling=true",)),
        CpuFlags("dt-ukernels", ("--iree-opt-data-tiling=true",
                                 "--iree-llvmcpu-enable-ukernels=all")),
    )
}  # fmt: skip
"""The flag sets measured per ISA family (`benchmarks/cpu_flags.py` times each)."""

# The flag set of each ISA family, from `python benchmarks/cpu_flags.py` (IREE 3.13, 2 cores,
# f32, products in IREE: FLOW_BLAS=0; GFLOP/s of flow.jit matmuls, ms of nn.Graph steps):
# * x86-avx512 (Xeon, emeraldrapids as `host`): global-dt-inner. matmul 1024^3 129 -> 166 and
#   2048^3 157 -> 185 GFLOP/s with inner-tiled over global-dt; dt + inner-tiled reached
#   209/189 but fails to compile the MLP step; ukernels=all and O3 were within noise.
#   AMD EPYC with AVX-512 (matmul 1024^3 / 256^3 GFLOP/s, MLP step, LeNet step ms): untiled
#   85/82, 19.9, 0.97; global-dt 120/81, 14.6, 0.99; global-dt-inner 121/74, 15.0, 0.96; dt
#   113/81, 14.9, 0.98; dt-ukernels 112/69, 16.9, 1.07 (numpy 176-198 GFLOP/s at 1024^3):
#   the data-tiled sets within noise of each other on those. The GPT step of
#   benchmarks/large_model.py (dim 128, 1024-row products, as `iree-benchmark-module` runs its
#   vmfb, interleaved): global-dt 23.6 ms, untiled 23.7, global-dt-inner 26.3 (its 29-row
#   tiles make every pack and unpack slower). So AMD's AVX-512 cores (Zen 4) are a family of
#   their own: global-dt; large products go to BLAS on both.
# * x86-avx2 (AMD EPYC without AVX-512): global-dt. Large products go to BLAS there
#   (OpenBLAS 170-185 GFLOP/s at 1024^3, IREE 64-90 with any set), so the flags serve what
#   stays in IREE. Three runs of `cpu_flags.py` under the default BLAS policy (matmul 256^3
#   GFLOP/s, MLP step ms, LeNet step ms): global-dt 36-62, 17.8-19.8, 0.83-1.34;
#   global-dt-inner 32-38, 19.0-22.1, 0.82-1.02; dt 55-63, 17.0-17.7, 0.83-1.15;
#   dt-ukernels 54, 21.5, 0.94 (one run). Inner-tiling picks 13-row tiles here: packing the
#   MLP's 256x1024 activation for its 10-column layer took 1.16 ms against 0.09 with
#   global-dt (`profile(iree_dispatches=True)`); the step's IREE dispatches summed to the
#   same time under dt and global-dt. dt fails to compile the GPT step of
#   examples/train_gpt.py (it cannot encode the attention mask's i1 tensor), so global-dt.
# * arm64 (NEON; SVE cores too), only cross-compiled here: global-dt, the path that compiles
#   every program; inner-tiled and ukernels are unmeasured on ARM, so they are not taken.
CPU_FAMILY_FLAGS: dict[str, str] = {
    "x86-avx512": "global-dt-inner",
    "x86-avx512-amd": "global-dt",
    "x86-avx2": "global-dt",
    "arm64": "global-dt",
    "other": "global-dt",
}
"""ISA family -> the name of its flag set in :data:`CPU_FLAG_SETS`."""


def host_cpu_family() -> str:
    """This machine's ISA family, a key of :data:`CPU_FAMILY_FLAGS` (from /proc/cpuinfo)."""
    import platform

    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return "arm64"
    if machine not in ("x86_64", "amd64"):
        return "other"
    flags: set[str] = set()
    vendor = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    if "avx512f" in flags:
        return "x86-avx512-amd" if vendor == "AuthenticAMD" else "x86-avx512"
    return "x86-avx2" if {"avx2", "fma"} <= flags else "other"


def cpu_flag_set(family: str | None = None) -> CpuFlags:
    """The flag set of `family` (default: this host's), or the one `FLOW_CPU_FLAGS` names
    (read when flow.targets is imported; for measuring the sets against each other)."""
    import os

    name = os.environ.get("FLOW_CPU_FLAGS", "").strip() if family is None else ""
    if name and name not in CPU_FLAG_SETS:
        raise ValueError(f"FLOW_CPU_FLAGS={name!r}: expected one of {', '.join(CPU_FLAG_SETS)}")
    return CPU_FLAG_SETS[name or CPU_FAMILY_FLAGS[family or host_cpu_family()]]


_host_flags = cpu_flag_set()

# Flags for IREE 3.13. Why these:
# * cpu: `target-cpu=host` compiles for this machine's ISA (generic x86-64 is 3-10x slower
#   on matmuls); data tiling is off by default in 3.13 and turning it on is worth another 2-3x.
#   We take the GlobalOptimization data-tiling path (`--iree-global-opt-data-tiling`): the
#   default path of `--iree-opt-data-tiling` fuses the unpack of a matmul result into its
#   elementwise consumers and then fails to vectorize some training steps ("large vector
#   sizes"), while this path compiles them and runs the MLP step as fast or faster.
#   `--iree-llvmcpu-enable-inner-tiled` (matmuls as iree_codegen.inner_tiled instead of mmt4d)
#   is optional: measured side by side (2 cores, medians) it takes matmul 1024^3 from 129 to
#   166 GFLOP/s and 2048^3 from 157 to 185, and the MLP step compiles with it (matmul and
#   bias-add fused) on this data-tiling path; only with `--iree-opt-data-tiling` does it fail
#   there. It does fail on batched matmuls ("failed to legalize ... materialization failed"),
#   which then compile again without it. Measured and not taken: `--iree-opt-data-tiling` +
#   inner-tiled (209/189 GFLOP/s on matmuls, but the MLP step fails to compile), the
#   dispatch-creation data-tiling path (no gain), ukernels=all, the LLVM inner_tiled ukernels
#   and `--iree-opt-level=O3` (within noise; O3 fails the MLP step: "operand #0 does not
#   dominate this use"), `target-cpu=sapphirerapids` (~5% slower than host). `host` names
#   emeraldrapids, whose AMX this VM lacks, but the host feature list IREE resolves carries
#   `-amx-tile,-amx-int8,-amx-bf16` (the OS does not enable AMX), and no AMX instruction is
#   emitted for f32 or bf16 matmuls; IREE refuses `host` with an explicit feature list, so
#   `host` stays.
#   Runtime driver: local-task; flow.jit / nn.Graph programs try local-sync on their first
#   calls and keep it when clearly faster (frontend/_jit.py: many small dispatches, e.g. the
#   LeNet step 2.7 -> 1.4 ms, a tiny call 45 -> 23 us), and the launcher picks local-sync when
#   ranks fill the cores (runtime.py).
# * cpu/cuda/rocm: IREE demotes f64 to f32 by default, which changes the function signature
#   and breaks float64 tensors; keep f64 where the hardware has it.
# * cuda: sm_80; sm_90/sm_90a/sm_100 fail to compile in 3.13 ("missing GPU target").
# * rocm: gfx942 through the `hip` device (`--iree-hip-target` does not exist in 3.13).
# * vulkan: SPIR-V; runs on a real GPU or on the CPU through Mesa lavapipe.
TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="cpu",
            device_flags=(
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host",
                *_host_flags.flags,
                "--iree-input-demote-f64-to-f32=false",
            ),
            optional_flags=_host_flags.optional,
            driver="local-task",
            description="host CPU through LLVM (multi-threaded local-task driver)",
        ),
        Target(
            name="cuda",
            device_flags=(
                "--iree-hal-target-device=cuda",
                "--iree-cuda-target=sm_80",
                "--iree-input-demote-f64-to-f32=false",
            ),
            driver="cuda",
            description="NVIDIA GPU, sm_80 code",
            collectives="native",
        ),
        Target(
            name="rocm",
            device_flags=(
                "--iree-hal-target-device=hip",
                "--iree-rocm-target=gfx942",
                "--iree-input-demote-f64-to-f32=false",
            ),
            driver="hip",
            description="AMD GPU through HIP, gfx942 code",
            collectives="native",
        ),
        Target(
            name="vulkan",
            device_flags=("--iree-hal-target-device=vulkan",),
            driver="vulkan",
            description="any Vulkan device (SPIR-V), including Mesa lavapipe on the CPU",
        ),
    )
}

DEFAULT_TARGET = "cpu"

CPU_DRIVERS = ("local-task", "local-sync")
"""The runtime drivers of the cpu target: host memory, which a call maps instead of copying."""


@dataclass(frozen=True)
class CpuArch:
    """An architecture the cpu target cross-compiles for: an LLVM target triple and a target
    CPU that every machine of the architecture runs (host features do not apply there)."""

    name: str
    triple: str
    cpu: str
    elf: str  # IREE's executable format for it: `embedded-elf-<elf>`
    family: str  # its row of CPU_FAMILY_FLAGS
    aliases: tuple[str, ...] = ()


# * arm64: `generic` is ARMv8-A with NEON, which every 64-bit ARM core has.
# * x86-64: `x86-64-v3` (AVX2, FMA: Haswell and later, Zen 1 and later) rather than the
#   baseline x86-64, whose SSE2-only code is 3-10x slower on matmuls (NOTES.md).
# Neither has bf16 instructions (nor need they: flow lowers bf16 conversions to integer
# arithmetic, lowering/_half_casts.py, so no `__truncsfbf2` call is left for IREE to link).
# Optional flags are dropped for them: they were measured on the host only.
CPU_ARCHS: dict[str, CpuArch] = {
    a.name: a
    for a in (
        CpuArch("arm64", "aarch64-unknown-linux-gnu", "generic", "arm_64", "arm64", ("aarch64",)),
        CpuArch("x86-64", "x86_64-unknown-linux-gnu", "x86-64-v3", "x86_64", "x86-avx2",
                ("x86_64", "amd64")),
    )
}


class UnknownTargetError(ValueError):
    """Raised for a target name that is not in :data:`TARGETS`."""


def get_target(name_or_target: str | Target, *, cpu_arch: str | None = None) -> Target:
    """Return the :class:`Target` for a name (a ``Target`` passes through unchanged).

    ``cpu_arch`` (a :data:`CPU_ARCHS` name or alias, or ``"host"``, the default) makes the
    cpu target cross-compile: the variant is named ``cpu-<arch>`` (which is also accepted as
    a name) and its flags set the architecture's triple and target CPU instead of ``host``.
    """
    if isinstance(name_or_target, str) and cpu_arch is None and name_or_target not in TARGETS:
        base, _, arch = name_or_target.partition("-")
        if base == "cpu" and _arch(arch) is not None:
            name_or_target, cpu_arch = base, arch
    if isinstance(name_or_target, Target):
        target: Target | None = name_or_target
    else:
        target = TARGETS.get(name_or_target) if isinstance(name_or_target, str) else None
    if target is None:
        known = ", ".join(TARGETS)
        raise UnknownTargetError(f"unknown target {name_or_target!r}; expected one of: {known}")
    if cpu_arch is None or cpu_arch == "host" or cpu_arch == target.arch:
        return target
    arch = _arch(cpu_arch)
    if arch is None:
        known = ", ".join(["host", *CPU_ARCHS])
        raise UnknownTargetError(f"unknown CPU architecture {cpu_arch!r}; expected one of: {known}")
    if target.name != "cpu":
        raise UnknownTargetError(
            f"a CPU architecture ({cpu_arch!r}) applies to the cpu target, not {target.name!r}"
        )
    ours = {f for s in CPU_FLAG_SETS.values() for f in s.flags}
    flags = [f for f in target.device_flags
             if not f.startswith("--iree-llvmcpu-target-cpu=") and f not in ours]  # fmt: skip
    flags += [*cpu_flag_set(arch.family).flags,
        f"--iree-llvmcpu-target-triple={arch.triple}",
        f"--iree-llvmcpu-target-cpu={arch.cpu}",
    ]
    return replace(
        target,
        name=f"cpu-{arch.name}",
        device_flags=tuple(flags),
        optional_flags=(),
        arch=arch.name,
        description=f"{arch.name} CPU through LLVM ({arch.triple}, target CPU {arch.cpu})",
    )


def _arch(name: str) -> CpuArch | None:
    for arch in CPU_ARCHS.values():
        if name == arch.name or name in arch.aliases:
            return arch
    return None
