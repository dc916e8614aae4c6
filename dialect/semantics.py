"""Plain-Python facts of the dialect's semantics that the eager kernels share with the ops
(no xDSL here, so that the frontend can import them without loading the dialect): an SBP
entry, the hash behind `flow.random_bits` and the output size of a window op."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SPLITMIX64_GAMMA = 0x9E3779B97F4A7C15
"""The Weyl increment of SplitMix64 (2**64 / golden ratio, odd)."""

SPLITMIX64_ROUNDS = ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB))
"""SplitMix64's finalizer: `z = (z ^ (z >> shift)) * multiplier` per round, then `z ^ (z >> 31)`."""

SPLITMIX64_FINAL_SHIFT = 31

RANDOM_BITS_WIDTHS = (32, 64)
"""Element widths `flow.random_bits` produces."""


def splitmix64(key: int, index: int) -> int:
    """The 64-bit hash behind `flow.random_bits`, on Python ints (the executable spec)."""
    mask = (1 << 64) - 1
    z = (key + (index + 1) * SPLITMIX64_GAMMA) & mask
    for shift, mul in SPLITMIX64_ROUNDS:
        z = ((z ^ (z >> shift)) * mul) & mask
    return z ^ (z >> SPLITMIX64_FINAL_SHIFT)


def window_output_size(
    size: int, window: int, stride: int, dilation: int, pad: Sequence[int]
) -> int:
    """How many windows fit along one dim: `(padded - dilated_window) // stride + 1`."""
    return (size + pad[0] + pad[1] - dilation * (window - 1) - 1) // stride + 1


@dataclass(frozen=True)
class Sbp:
    """One SBP entry: split along `dim` (kind "S"), broadcast ("B") or partial sum ("P")."""

    kind: str
    dim: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("S", "B", "P"):
            raise ValueError(f"SBP kind must be S, B or P, got {self.kind!r}")
        if (self.kind == "S") != (self.dim is not None):
            raise ValueError("an SBP split needs a dim; broadcast and partial_sum take none")

    def __str__(self) -> str:
        return f"S({self.dim})" if self.kind == "S" else self.kind

    @staticmethod
    def parse(text: str) -> Sbp:
        text = text.strip()
        if text in ("B", "P"):
            return Sbp(text)
        if text.startswith("S(") and text.endswith(")") and text[2:-1].strip().isdigit():
            return Sbp("S", int(text[2:-1]))
        raise ValueError(f"expected an SBP entry S(<dim>), B or P, got {text!r}")
