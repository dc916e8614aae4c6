"""A seeded fuzzer for flow's IR front door: parse, verify, lower to IREE input, re-parse.

Cases are mutations of the `.mlir` files of a corpus (the lit tests): byte flips, token
deletions, duplications and swaps, truncation, number blow-ups, retyping, one number or
type changed everywhere, moved lines, splices between files, deep nesting.
Case `i` of seed `s` depends on `(s, i)` only, so a failing case is reproduced by its
number. Each case runs in-process under a time bound and ends in one `Outcome`:

* `clean`: a `file:line:col: error:` diagnostic from the parser or verifier;
* `lowering`: a diagnostic of a lowering pass (it names the op and the pass);
* `accepted`: lowered, and IREE's parser takes the hand-off text;
* `internal`: any other exception (a bug); `hang`: over the time bound;
* `iree-rejected`: lowered, but IREE's parser refuses the text (a bug);
* `crash` (set by the subprocess runner of `benchmarks/fuzz_ir.py`): the process died.
"""

from __future__ import annotations

import random
import re
import signal
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

KINDS = ("clean", "lowering", "accepted", "internal", "crash", "hang", "iree-rejected")
"""Every outcome; all but the first three are bugs."""

BUGS = ("internal", "crash", "hang", "iree-rejected")

_TOKEN = re.compile(
    rb'\s+|"(?:[^"\\\n]|\\.)*"|[%@#!^][\w.$-]*|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\w[\w.$]*|.',
    re.S,
)
_NUMBER = re.compile(rb"-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")
_BIG = [b"0", b"-1", b"-2", b"99999999999999999999", b"9223372036854775807",
        b"9223372036854775808", b"-9223372036854775809", b"4294967296", b"65536", b"1e400",
        b"1.0e-400", b"0x7fffffff", b"100000000", b"nan", b"inf", b"1048577"]  # fmt: skip
_BYTES = b'"<>{}()[]%@#!^:,=x0123456789?-.\\\n\x00\xff\xc3 '


@dataclass
class Outcome:
    """What one case did: its kind and, for bugs, the message or traceback."""

    kind: str
    detail: str = ""


class Hang(BaseException):
    """Raised by the per-case timer (a BaseException, so `except Exception` lets it through)."""


def load_corpus(root: str | Path) -> list[bytes]:
    """Every `.mlir` file under `root`, split at `// -----` into its test cases."""
    chunks: list[bytes] = []
    for path in sorted(Path(root).rglob("*.mlir")):
        for chunk in path.read_bytes().split(b"// -----"):
            if chunk.strip():
                chunks.append(chunk)
    if not chunks:
        raise ValueError(f"no .mlir files under {root}")
    return chunks


def _tokens(data: bytes) -> list[bytes]:
    return _TOKEN.findall(data)


def _flip(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + bytes([rng.choice(_BYTES)]) + data[i + 1 :]


def _delete(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    toks = _tokens(data)
    del toks[rng.randrange(len(toks))]
    return b"".join(toks)


def _duplicate(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    toks = _tokens(data)
    i = rng.randrange(len(toks))
    toks.insert(i, toks[i] * rng.choice((1, 1, 2, 50)))
    return b"".join(toks)


def _swap(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    toks, other = _tokens(data), _tokens(rng.choice(corpus))
    toks[rng.randrange(len(toks))] = rng.choice(other)
    return b"".join(toks)


def _truncate(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    return data[: rng.randrange(len(data))]


def _number(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return _flip(rng, data, _)
    a, b = rng.choice(spans)
    return data[:a] + rng.choice(_BIG) + data[b:]


def _splice(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    other = rng.choice(corpus)
    return data[: rng.randrange(len(data))] + other[rng.randrange(len(other)) :]


def _nest(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    i = rng.randrange(len(data))
    depth = rng.choice((10, 200, 5000))
    opener = rng.choice((b"[", b"(", b"<", b"{", b"tensor<"))
    return data[:i] + opener * depth + data[i:]


_TYPES = [b"i1", b"i32", b"f32", b"index", b"none", b"tensor<f32>", b"tensor<?xf32>",
          b"tensor<0xf32>", b"tensor<4xi64>", b"tensor<2x3xf16>", b"tensor<tensor<f32>>",
          b"memref<4xf32>", b"vector<4xf32>", b"complex<f32>", b"tensor<4xcomplex<f32>>",
          b"(f32) -> f32", b"!flow.nope", b"tensor<4x!flow.nope>", b"tuple<f32>",
          b"tensor<8x4xf32, #flow.sbp<[B]>>", b"tensor<4xf32, 3 : i32>", b"i99999999", b"i65",
          b"si8", b"ui32", b"f8E4M3FN", b"bf16", b"f64", b"i0"]  # fmt: skip
_TYPE = re.compile(rb"(?:tensor|memref|vector)<[^<>]*(?:<[^<>]*>[^<>]*)*>|\b[if]\d+\b|\bindex\b")


def _retype(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    spans = [m.span() for m in _TYPE.finditer(data)]
    if not spans:
        return _flip(rng, data, _)
    a, b = rng.choice(spans)
    return data[:a] + rng.choice(_TYPES) + data[b:]


def _replace_all(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    """One number or type changed everywhere it occurs, so the input stays consistent."""
    found = sorted({m.group() for pattern in (_NUMBER, _TYPE) for m in pattern.finditer(data)})
    if not found:
        return _flip(rng, data, _)
    old = rng.choice(found)
    new = rng.choice(_BIG if _NUMBER.fullmatch(old) else _TYPES)
    return data.replace(old, new)


def _move_line(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A line of this or another input inserted elsewhere: uses before definitions, stray ops."""
    lines = data.split(b"\n")
    donor = rng.choice((lines, rng.choice(corpus).split(b"\n")))
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(donor))
    return b"\n".join(lines)


MUTATORS = (_flip, _delete, _duplicate, _swap, _truncate, _number, _splice, _nest, _retype,
            _replace_all, _move_line)  # fmt: skip


def make_case(corpus: list[bytes], seed: int, index: int) -> bytes:
    """Case `index` of `seed`: one to three mutations of a corpus chunk."""
    rng = random.Random(f"{seed}:{index}")
    data = rng.choice(corpus)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not data:
            break
        data = rng.choice(MUTATORS)(rng, data, corpus)
    return data


def cases(corpus: list[bytes], seed: int, start: int, count: int) -> Iterator[tuple[int, bytes]]:
    """Cases `start` to `start + count - 1` of `seed`, with their numbers."""
    for i in range(start, start + count):
        yield i, make_case(corpus, seed, i)


_iree_context = None


def warm_up() -> None:
    """Import what a case uses and make IREE's context once, outside any case's time bound."""
    global _iree_context
    if _iree_context is None:
        from iree.compiler import ir

        import flow.compile.per_rank  # noqa: F401
        import flow.lowering  # noqa: F401

        _iree_context = ir.Context()
        warm = (
            b"func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
            b"  %0 = flow.add %a, %a : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n"
        )
        run_case(warm, "warm-up.mlir", time_limit=60.0)


def _iree_parses(text: str) -> str | None:
    """None if IREE's MLIR parser takes `text`, else its message."""
    from iree.compiler import ir

    try:
        ir.Module.parse(text, _iree_context)
    except Exception as err:  # noqa: BLE001 - any refusal is the finding
        return str(err)
    return None


def _is_global(module) -> bool:
    from flow.dialect import dist_of

    for op in module.walk():
        if op.name.startswith("flow.") and any(
            dist_of(v.type) is not None for v in (*op.operands, *op.results)
        ):
            return True
        for region in op.regions:
            for block in region.blocks:
                if any(dist_of(a.type) is not None for a in block.args):
                    return True
    return False


def _lowering_diagnostic(err: BaseException) -> bool:
    """Whether a pipeline error is a pass's own diagnostic rather than a bug in it."""
    from xdsl.utils.exceptions import DiagnosticException

    from flow.lowering import HandoffError, PipelineError

    cause = err.__cause__ if isinstance(err, PipelineError) else err
    return isinstance(cause, DiagnosticException | HandoffError)


def run_case(data: bytes, name: str = "case.mlir", time_limit: float = 2.0) -> Outcome:
    """Parse, verify, lower and re-parse one input in this process, within `time_limit` s."""
    from xdsl.utils.exceptions import ParseError

    from flow.dialect.parsing import LocatedVerifyException, parse_module
    from flow.tools._driver import format_parse_error

    def alarm(signum, frame):
        raise Hang()

    warm_up()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        try:
            module = parse_module(data, name)
        except (ParseError, LocatedVerifyException) as err:
            text = format_parse_error(err) if isinstance(err, ParseError) else str(err)
            if re.match(rf"{re.escape(name)}:\d+:\d+: error: \S", text):
                return Outcome("clean")
            return Outcome("internal", f"unlocated parse error: {text}")
        try:
            text = _lower(module)
        except Exception as err:  # noqa: BLE001 - sorted into diagnostics and bugs
            if _lowering_diagnostic(err):
                return Outcome("lowering")
            return Outcome("internal", "".join(traceback.format_exception(err))[-3000:])
        signal.setitimer(signal.ITIMER_REAL, 0)
        refusal = _iree_parses(text)
        if refusal is not None:
            return Outcome("iree-rejected", refusal[-3000:])
        return Outcome("accepted")
    except Hang:
        return Outcome("hang", f"over {time_limit} s")
    except Exception as err:  # noqa: BLE001
        return Outcome("internal", "".join(traceback.format_exception(err))[-3000:])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _lower(module) -> str:
    from flow.lowering import run_pipeline, to_iree_text

    if _is_global(module):
        from flow.compile.per_rank import lower_for_rank

        return lower_for_rank(module, 0, "cpu")[0]
    return to_iree_text(run_pipeline(module, "flow-to-iree-input"))
