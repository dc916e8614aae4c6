"""Compile-cache entries that are valid but wrong for their slot: one stored under another key
(a copied or renamed file), one that passes its checksum but that IREE cannot load, and one in
the previous layout. Each must be a counted miss that recompiles the right program, never a
wrong answer or an error on every run."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

import flow
from flow.targets import cache, compile_mlir, load

EXP = """\
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %two = arith.constant dense<2.0> : tensor<4xf32>
  %one = arith.constant dense<1.0> : tensor<4xf32>
  %e = math.exp %a : tensor<4xf32>
  %m = arith.mulf %e, %two : tensor<4xf32>
  %r = arith.addf %m, %one : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""

TANH = """\
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %three = arith.constant dense<3.0> : tensor<4xf32>
  %t = math.tanh %a : tensor<4xf32>
  %r = arith.subf %t, %three : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""

X = np.array([-1.0, 0.0, 0.5, 2.0], np.float32)


@pytest.fixture(scope="module")
def exp_vmfb() -> bytes:
    """EXP compiled once, outside the cache."""
    return compile_mlir(EXP, use_cache=False)


def _slot(directory: Path, source: str) -> tuple[str, Path]:
    key = cache.cache_key(source, "cpu", flow.targets.compile_flags("cpu"))
    return key, directory / key[:2] / f"{key}.vmfb"


def _run(vmfb: bytes) -> np.ndarray:
    (out,) = load(vmfb, "cpu")["main"](X)
    return out


def _recompiles_then_hits(source: str) -> bytes:
    """Compile `source` with an empty memo (the slot holds a bad entry): a miss and a write;
    then once more from disk: a hit."""
    cache.clear_memory()
    vmfb = compile_mlir(source)
    after_miss = cache.stats()
    assert after_miss.misses == 1 and after_miss.writes == 1 and after_miss.hits == 0
    cache.clear_memory()
    assert compile_mlir(source) == vmfb
    assert cache.stats().disk_hits == 1 and cache.stats().misses == 1
    return vmfb


def test_entry_in_another_keys_slot_is_a_miss(fresh_cache: Path) -> None:
    exp_key, exp_path = _slot(fresh_cache, EXP)
    _, tanh_path = _slot(fresh_cache, TANH)
    np.testing.assert_allclose(_run(compile_mlir(TANH)), np.tanh(X) - 3, rtol=1e-5)
    exp_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tanh_path, exp_path)  # a valid entry, of another program
    cache.reset_stats()
    vmfb = _recompiles_then_hits(EXP)
    assert cache.stats().mismatched == 1 and cache.stats().corrupt == 0
    np.testing.assert_allclose(_run(vmfb), np.exp(X) * 2 + 1, rtol=1e-5)
    assert cache.lookup(exp_key) == vmfb


@pytest.mark.parametrize("payload", ["garbage", "truncated"])
def test_unloadable_entry_is_recompiled_once(
    fresh_cache: Path, exp_vmfb: bytes, payload: str
) -> None:
    key, _ = _slot(fresh_cache, EXP)
    bad = b"not a vm module " * 8 if payload == "garbage" else exp_vmfb[: len(exp_vmfb) // 2]
    cache.store(key, bad)  # right key, valid checksum: only IREE can tell
    cache.reset_stats()
    vmfb = _recompiles_then_hits(EXP)
    assert cache.stats().unloadable == 1 and cache.stats().corrupt == 0
    np.testing.assert_allclose(_run(vmfb), np.exp(X) * 2 + 1, rtol=1e-5)


def test_old_format_entry_is_a_miss(fresh_cache: Path, exp_vmfb: bytes) -> None:
    _, path = _slot(fresh_cache, EXP)
    path.parent.mkdir(parents=True)
    # the previous layout: magic, sha256 of the payload, payload (no key)
    path.write_bytes(b"flow-vmfb-cache\x01" + hashlib.sha256(exp_vmfb).digest() + exp_vmfb)
    cache.reset_stats()
    vmfb = _recompiles_then_hits(EXP)
    assert cache.stats().stale == 1 and cache.stats().corrupt == 0
    np.testing.assert_allclose(_run(vmfb), np.exp(X) * 2 + 1, rtol=1e-5)


def test_jit_program_with_unloadable_entries_recompiles(fresh_cache: Path) -> None:
    """flow.jit's own cache key (before lowering) goes through the same checks."""

    def f(x):
        return flow.exp(x) * 2.0 + 1.0

    arg = flow.tensor(X)
    want = np.exp(X) * 2 + 1
    np.testing.assert_allclose(flow.jit(f)(arg).numpy(), want, rtol=1e-5)
    entries = sorted(fresh_cache.rglob("*.vmfb"))
    assert entries  # the traced program's entry and the lowered program's
    for entry in entries:
        cache.store(entry.stem, b"\x00" * 64)  # each key's entry: valid checksum, no module
    cache.clear_memory()
    cache.reset_stats()
    np.testing.assert_allclose(flow.jit(f)(arg).numpy(), want, rtol=1e-5)
    assert cache.stats().unloadable >= 1 and cache.stats().writes >= 1
