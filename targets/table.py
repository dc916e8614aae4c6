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


# Flags for IREE 3.13. Why these:
# * cpu: `target-cpu=host` compiles for this machine's ISA (generic x86-64 is 3-10x slower
#   on matmuls); data tiling is off by default in 3.13 and turning it on is worth another 2-3x.
#   We take the GlobalOptimization data-tiling path (`--iree-global-opt-data-tiling`): the
#   default path of `--iree-opt-data-tiling` fuses the unpack of a matmul result into its
#   elementwise consumers and then fails to vectorize some training steps ("large vector
#   sizes"), while this path compiles them and runs the MLP step as fast or faster.
#   (`--iree-llvmcpu-enable-inner-tiled` is faster still but fails on matmul + bias-add fusion.)
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
