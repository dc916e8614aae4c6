"""The target table: one row per target, mapping a name to IREE compile flags and a runtime driver.

Everything else in ``flow.targets`` reads this table; adding a target means adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_TARGET", "TARGETS", "Target", "UnknownTargetError", "get_target"]


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
                "--iree-global-opt-data-tiling=true",
                "--iree-input-demote-f64-to-f32=false",
            ),
            optional_flags=("--iree-llvmcpu-enable-inner-tiled",),
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


class UnknownTargetError(ValueError):
    """Raised for a target name that is not in :data:`TARGETS`."""


def get_target(name_or_target: str | Target) -> Target:
    """Return the :class:`Target` for a name (a ``Target`` passes through unchanged)."""
    if isinstance(name_or_target, Target):
        return name_or_target
    target = TARGETS.get(name_or_target) if isinstance(name_or_target, str) else None
    if target is None:
        known = ", ".join(TARGETS)
        raise UnknownTargetError(f"unknown target {name_or_target!r}; expected one of: {known}")
    return target
