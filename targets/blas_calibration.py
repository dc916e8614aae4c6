"""Which matrix products a cpu program hands to the host's BLAS: a one-time calibration per
CPU model, cached on disk.

IREE's code generation against the OpenBLAS numpy links differs by CPU: on a 2-core AVX2 EPYC
IREE reached 0.4-0.9x of OpenBLAS on large f32 GEMMs and 0.3x on the skinny ones of an MLP
step, while a small product runs best in IREE, fused with its epilogue and without the
~20 us of a Python import call. So the decision is measured on the machine: the calibration
compiles one module holding chains of f32 cube products of a few sizes both ways (IREE's
``linalg.matmul``, and calls of the ``blas`` module, :mod:`.blas_module`), times them
back to back, and takes the smallest size from which BLAS wins, or stays even, at every
larger size (`_threshold`). Products with at least that many flops (and f32 or f64
operands, static shapes) go to BLAS. A calibration that other work disturbed (times spread
well above their best) keeps default thresholds for a while and is measured again later.

The result is stored as JSON under flow's cache folder (``$XDG_CACHE_HOME/flow`` or
``~/.cache/flow``, whatever ``FLOW_CACHE_DIR`` says, so that every compile cache of one machine
shares it), keyed by the CPU, the IREE and numpy versions and the BLAS thread count; with
caching off (``FLOW_NO_CACHE=1`` or ``FLOW_CACHE_DIR=off``) it is kept for the process only.
Processes calibrate one at a time (a file lock), so the ranks of a run share one result.
Calibrating takes a few seconds, once per machine.

``FLOW_BLAS`` overrides the decision: ``0`` / ``off`` / ``none`` keeps every product in IREE,
``1`` / ``all`` sends every eligible one to BLAS (tests use it), ``auto`` (the default)
calibrates. Only the cpu target compiled for this host calls BLAS.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from .blas_abi import ELEMENT_TYPES, declare, import_name

__all__ = ["FAMILIES", "POLICIES", "calibration", "measure", "policy", "prefers_blas",
           "threshold_flops"]  # fmt: skip

POLICIES = ("none", "auto", "all")
_OFF = ("0", "off", "none", "false", "no")
_ALL = ("1", "all", "on", "true", "yes")

FAMILIES: dict[str, tuple[int, ...]] = {
    "square": (64, 128, 256, 512, 1024),
    "thin": (128, 256, 512, 1024, 2048),
}
"""The shapes the calibration times both ways, f32: `square` products `[s, s] @ [s, s]`, and
`thin` ones `[s, s] @ [s, THIN]` (an MLP's last layer and its gradients: IREE's tiles fit
them worse). A product is thin when one of its dims is at most `2 * THIN`."""

THIN = 16

MIN_FLOPS = 2 * 512**3
"""Under `auto`, matrix products below this many flops (per matrix of a batch) stay in IREE
without calibrating. An import call is a host synchronisation: the VM waits for every
dispatch before it, so IREE's workers drain and start again around each call, which the
calibration's back-to-back chains do not see. In the GPT step of benchmarks/large_model.py
(hundreds of dispatches, 1024-row products of 33-134 MFLOP) its ~32 calls cost ~0.35 ms
each beyond the products: 37-47 ms a step with BLAS against 24 ms without (AMD EPYC with
AVX-512, where IREE's data-tiled products reach ~210 GFLOP/s and numpy's sgemm 175-195 on
those shapes). A batched product runs as numpy's loop of small products (83-103 GFLOP/s
on attention's 64x64x32), no faster than IREE's. The MLP step's 400-540 MFLOP products stay
large enough to gain."""

_FORMAT = 2  # of the stored result and of the rule that derived its thresholds
_lock = threading.Lock()
_result: dict[str, Any] | None = None


def policy(target: Any) -> str:
    """The BLAS policy of a compile for `target` (a :class:`~flow.targets.table.Target`):
    ``none`` unless it is the cpu target for this host, else ``FLOW_BLAS`` (default ``auto``)."""
    if getattr(target, "name", target) != "cpu" or getattr(target, "arch", "host") != "host":
        return "none"
    value = os.environ.get("FLOW_BLAS", "").strip().lower()
    if not value or value == "auto":
        return "auto"
    if value in _OFF:
        return "none"
    if value in _ALL:
        return "all"
    raise ValueError(f"FLOW_BLAS={value!r}: expected auto, 0/off/none or 1/all")


def prefers_blas(policy_name: str, batch: int, m: int, n: int, k: int, element_type: str) -> bool:
    """Whether a product `[batch] x [m, k] @ [k, n]` of `element_type` (``f32`` ...) goes to
    BLAS under `policy_name` (see :data:`POLICIES`)."""
    if policy_name not in POLICIES:
        raise ValueError(f"blas policy {policy_name!r}: expected one of {', '.join(POLICIES)}")
    if policy_name == "none" or element_type not in ELEMENT_TYPES or min(m, n, k) <= 0:
        return False
    if policy_name == "all":
        return True
    if 2 * m * n * k < MIN_FLOPS:
        return False  # decided without calibrating: most programs have only such products
    return 2 * batch * m * n * k >= threshold_flops("thin" if min(m, n, k) <= 2 * THIN
                                                    else "square")  # fmt: skip


def threshold_flops(family: str = "square") -> float:
    """The calibrated flop count from which BLAS wins on products of `family` (see
    :data:`FAMILIES`; ``inf``: it never does here)."""
    return float(calibration()["families"][family]["threshold_flops"])


def calibration() -> dict[str, Any]:
    """This machine's calibration (loaded, or measured now and stored)."""
    global _result
    with _lock:
        if _result is None:
            _result = _load_or_measure()
        return _result


def _blas_threads() -> int:
    env = os.environ.get("OPENBLAS_NUM_THREADS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else os.cpu_count() or 1


def _key() -> str:
    from importlib import metadata

    import numpy as np

    from .cache import _host_fingerprint

    try:
        iree = metadata.version("iree-base-compiler")
    except metadata.PackageNotFoundError:
        iree = "absent"
    text = (f"format {_FORMAT}|{_host_fingerprint()}|iree {iree}|numpy {np.__version__}|"
            f"threads {_blas_threads()}")  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _folder() -> Path | None:
    from .cache import cache_dir

    if cache_dir() is None:  # caching off (FLOW_NO_CACHE=1, FLOW_CACHE_DIR=off)
        return None
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "flow"


def _measure_or_default() -> dict[str, Any]:
    """:func:`measure`, or the default thresholds when it cannot run (e.g. stopped at exit):
    a calibration never fails the compile that asked for it."""
    try:
        return measure()
    except Exception as err:  # noqa: BLE001
        families = {f: {"threshold_flops": t} for f, t in DEFAULT_THRESHOLDS.items()}
        return {"families": families, "failed": f"{type(err).__name__}: {err}"}


def _load_or_measure() -> dict[str, Any]:
    folder = _folder()
    if folder is None:
        return _measure_or_default()
    path = folder / f"blas-calibration-{_key()}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / f"{path.name}.lock", "w")  # noqa: SIM115 -- held while measuring
    except OSError:
        return _measure_or_default()
    import fcntl

    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process measures; the others read its result
        try:
            found = json.loads(path.read_text())
            fresh = time.time() - path.stat().st_mtime < RETRY_NOISY_AFTER_S
            if set(found.get("families", ())) == set(FAMILIES) and (
                not found.get("noisy") or fresh
            ):
                return found
        except (OSError, ValueError):
            pass
        result = _measure_or_default()
        if "failed" in result:
            return result  # not stored: the next process measures
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(result, indent=1))
            os.replace(tmp, path)
        except OSError:
            pass
        return result


NOISY_SPREAD = 1.5
"""A size whose median time is this many times its best was measured while other work ran;
with more than two such sizes the calibration is *noisy*: it keeps the default thresholds, and
is measured again by the first process that needs it after RETRY_NOISY_AFTER_S seconds."""

RETRY_NOISY_AFTER_S = 600

DEFAULT_THRESHOLDS = {"square": 2.0 * 256**3, "thin": 2.0 * 1024 * 1024 * THIN}
"""Thresholds while no quiet calibration is at hand: on the 2-core AVX2 and AVX-512 machines
measured, BLAS was ahead from ~2e7 flops on square products; on thin ones the crossing varied
more, so a larger product is asked for."""

CHAIN = 8
"""Products per timed call, each on the previous one's result: the call's own overhead (its
arguments and results) is spread over them, as it is over a program's many operations."""


def _types(family: str, s: int) -> tuple[str, str]:
    """The types of a product's fixed operand and of the value the chain carries."""
    sq = f"tensor<{s}x{s}xf32>"
    return sq, (sq if family == "square" else f"tensor<{s}x{THIN}xf32>")


def _module_text() -> str:
    """One module: per family and size, `iree_F_N` (linalg.matmul) and `blas_F_N` (`blas`
    calls), each a chain of CHAIN products: `c = c @ w` (square), `c = w @ c` (thin)."""
    lines = []
    for family, sizes in FAMILIES.items():
        for s in sizes:
            w, c = _types(family, s)
            lhs, rhs = (c, w) if family == "square" else (w, c)
            call = import_name(False, False, lhs, rhs)
            lines.append(declare(False, False, lhs, rhs, c))
            iree = [f"func.func @iree_{family}_{s}(%c0: {c}, %w: {w}) -> {c} {{",
                    "  %z = arith.constant 0.0 : f32", f"  %e = tensor.empty() : {c}",
                    f"  %f = linalg.fill ins(%z : f32) outs(%e : {c}) -> {c}"]  # fmt: skip
            blas = [f"func.func @blas_{family}_{s}(%c0: {c}, %w: {w}) -> {c} {{"]
            for i in range(CHAIN):
                a, b = (f"%c{i}", "%w") if family == "square" else ("%w", f"%c{i}")
                iree.append(f"  %c{i + 1} = linalg.matmul ins({a}, {b} : {lhs}, {rhs}) "
                            f"outs(%f : {c}) -> {c}")  # fmt: skip
                blas.append(f"  %c{i + 1} = func.call @{call}({a}, {b}) : ({lhs}, {rhs}) -> {c}")
            for body in (iree, blas):
                lines += [*body, f"  return %c{CHAIN} : {c}", "}"]
    return "module {\n" + "\n".join(lines) + "\n}\n"


def _threshold(flops: list[float], ratios: list[float]) -> float:
    """Where BLAS takes over, from IREE's time over BLAS's per size (ascending): the smallest
    size at which BLAS is faster and stays within TIE of IREE at every larger size (a product
    that is wrongly kept in IREE can cost 2-3x, one wrongly given to BLAS a few percent). The
    threshold is the geometric mean of its flops and the flops of the size below (0 when it
    is the smallest size, ``inf`` when there is none)."""
    first = None
    for i in range(len(ratios) - 1, -1, -1):
        if ratios[i] < TIE:
            break
        if ratios[i] >= 1.0:
            first = i
    if first is None:
        return float("inf")
    return 0.0 if first == 0 else (flops[first - 1] * flops[first]) ** 0.5


TIE = 0.95
"""IREE's time over BLAS's above which the two count as even."""


def measure() -> dict[str, Any]:
    """Time each family and size both ways (interleaved, best of several rounds; seconds per
    product) and derive each family's threshold (:func:`_threshold`)."""
    import numpy as np

    from .compiler import compile_mlir
    from .runtime import load

    t0 = time.perf_counter()
    # in a child process: at exit, flow stops a compile that runs in the background
    module = load(compile_mlir(_module_text(), "cpu", use_cache=False, in_child=True), "cpu")
    rng = np.random.default_rng(0)
    families = {}
    noisy_sizes = 0
    for family, sizes in FAMILIES.items():
        best: dict[str, list[float]] = {"iree": [], "blas": []}
        ratios: list[float] = []
        for s in sizes:
            w_type, c_type = _types(family, s)
            w = (rng.standard_normal((s, s)) / np.sqrt(s)).astype(np.float32)  # keeps |c|
            c = rng.standard_normal((s, s if family == "square" else THIN)).astype(np.float32)
            fns = {way: module[f"{way}_{family}_{s}"] for way in best}
            for fn in fns.values():
                fn(c, w)  # warm up (first-touch allocations, BLAS threads)
            flops = 2.0 * s * s * c.shape[1]
            rounds = max(5, min(40, int(1.2e8 / flops)))
            times: dict[str, list[float]] = {way: [] for way in best}
            for _ in range(rounds):
                for way, fn in fns.items():
                    start = time.perf_counter()
                    fn(c, w)
                    times[way].append((time.perf_counter() - start) / CHAIN)
            for way in best:
                best[way].append(min(times[way]))
            # back-to-back pairs see the same load from other processes: their ratio is steadier
            ratios.append(statistics.median(i / b for i, b in zip(times["iree"], times["blas"])))
            spread = max(statistics.median(t) / min(t) for t in times.values())
            noisy_sizes += spread > NOISY_SPREAD
        flops = [2.0 * s * s * (s if family == "square" else THIN) for s in sizes]
        families[family] = {"sizes": list(sizes), "iree_s": best["iree"], "blas_s": best["blas"],
                            "iree_over_blas": ratios,
                            "threshold_flops": _threshold(flops, ratios)}  # fmt: skip
    noisy = noisy_sizes > 2
    if noisy:  # other work shared the cores: the measurement says little, take the defaults
        for family, entry in families.items():
            entry["threshold_flops"] = DEFAULT_THRESHOLDS[family]
    return {"families": families, "blas_threads": _blas_threads(), "noisy": noisy,
            "seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip
