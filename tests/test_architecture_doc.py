"""docs/architecture.md names real files and real definitions, so the map cannot rot silently.

Every inline code span of the document (fenced blocks aside) that is a path
(`frontend/core/tensor.py`, `dialect/`) must exist, relative to the repository root, and every
span `file.py: name` (or `file.py: a, b`) must name, in that file, a class, a function or a
module-level assignment; `Class.method` names one inside a class. The checker is tried on a
small made-up tree first, so a checker that finds nothing cannot pass for a true document.
Only source text is read (nothing is imported): well under a second.
"""

from __future__ import annotations

import ast
import difflib
import functools
import os
import re
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join("docs", "architecture.md")

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_REF = re.compile(r"^(?P<path>[\w./-]+\.py): (?P<names>[\w.]+(?:, [\w.]+)*)$")
_PATH = re.compile(r"^[\w.-]+(?:/[\w.-]+)*/?$")
_PATH_SUFFIXES = (".py", ".md", ".toml", ".mlir", ".cfg", ".txt")


@dataclass(frozen=True)
class Span:
    line: int
    text: str


def spans(text: str) -> list[Span]:
    """The inline code spans of markdown `text` outside fenced blocks, with their line."""
    blanked = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [Span(blanked.count("\n", 0, m.start()) + 1, m.group(1))
            for m in _SPAN.finditer(blanked)]  # fmt: skip


def is_path(text: str) -> bool:
    """Whether a code span names a file or folder: a slash, and a folder's trailing `/` or a
    file suffix (so `S(0)`, `flow.env` or `x / groups` are not paths)."""
    return ("/" in text and _PATH.match(text) is not None
            and (text.endswith("/") or text.endswith(_PATH_SUFFIXES)))  # fmt: skip


def _top_level(body: list[ast.stmt]):
    """The statements of a module or class body, looking inside `if` / `try` blocks."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_level(part)
        else:
            yield node


def _assigned(node: ast.stmt) -> list[str]:
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    names = []
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                names.append(n.id)
    return names


def definitions(body: list[ast.stmt], prefix: str = "") -> set[str]:
    """The names a module (or class) body defines: classes, functions, assignments, and
    `Class.member` for what a class defines."""
    out: set[str] = set()
    for node in _top_level(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(prefix + node.name)
            if isinstance(node, ast.ClassDef):
                out |= definitions(node.body, f"{prefix}{node.name}.")
        else:
            out.update(prefix + n for n in _assigned(node))
    return out


@functools.cache
def _definitions_of(path: str) -> frozenset[str]:
    with open(path, encoding="utf-8") as f:
        return frozenset(definitions(ast.parse(f.read(), path).body))


def problems(text: str, root: str, where: str = DOC) -> list[str]:
    """What in markdown `text` names a path or a definition that does not exist under `root`."""
    out = []
    for span in spans(text):
        at = f"{where}:{span.line}: `{span.text}`"
        ref = _REF.match(span.text)
        if ref is not None:
            path = os.path.join(root, ref["path"])
            if not os.path.isfile(path):
                out.append(f"{at}: no file {ref['path']} (paths are relative to the repository "
                           "root)")  # fmt: skip
                continue
            defined = _definitions_of(path)
            for name in ref["names"].split(", "):
                if name not in defined:
                    near = difflib.get_close_matches(name, sorted(defined), n=3)
                    hint = f"; did you mean {', '.join(near)}?" if near else ""
                    out.append(f"{at}: {ref['path']} defines no class, function or module-level "
                               f"assignment {name!r}{hint}")  # fmt: skip
        elif is_path(span.text) and not os.path.exists(os.path.join(root, span.text)):
            out.append(f"{at}: no such file or folder (paths are relative to the repository "
                       "root)")  # fmt: skip
    return out


def _read_doc() -> str:
    with open(os.path.join(ROOT, DOC), encoding="utf-8") as f:
        return f.read()


# --------------------------------------------------------------------------- the checker itself


def test_checker_finds_missing_paths_and_names(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text(
        "X = 1\nA, B = 2, 3\nif True:\n    def guarded(): pass\n"
        "class C:\n    y: int = 0\n    def m(self): pass\n    class Inner: pass\n"
        "def f():\n    def local(): pass\n"
    )
    doc = "\n".join([
        "`pkg/mod.py` and `pkg/` exist; `pkg/gone.py` and `nowhere/` do not.",
        "`pkg/mod.py: X, A, B, guarded, C, C.y, C.m, C.Inner, f` all exist.",
        "`pkg/mod.py: local` is inside a function; `pkg/mod.py: C.z` is not in C;",
        "`pkg/mod.py: g` is nowhere; `pkg/none.py: f` has no file.",
        "Not paths: `S(0)`, `flow.env`, `x / groups`, `a/b` (no suffix).",
        "```", "`pkg/fenced.py` is in a fenced block: not checked", "```",
        "`pkg/after.py` comes after the fence.",
    ])  # fmt: skip
    found = problems(doc, str(tmp_path), "doc.md")
    assert found == [
        "doc.md:1: `pkg/gone.py`: no such file or folder (paths are relative to the repository "
        "root)",
        "doc.md:1: `nowhere/`: no such file or folder (paths are relative to the repository "
        "root)",
        "doc.md:3: `pkg/mod.py: local`: pkg/mod.py defines no class, function or module-level "
        "assignment 'local'",
        "doc.md:3: `pkg/mod.py: C.z`: pkg/mod.py defines no class, function or module-level "
        "assignment 'C.z'; did you mean C.y, C.m?",
        "doc.md:4: `pkg/mod.py: g`: pkg/mod.py defines no class, function or module-level "
        "assignment 'g'",
        "doc.md:4: `pkg/none.py: f`: no file pkg/none.py (paths are relative to the repository "
        "root)",
        "doc.md:9: `pkg/after.py`: no such file or folder (paths are relative to the repository "
        "root)",
    ]  # fmt: skip


# --------------------------------------------------------------------------- the document


def test_architecture_doc_names_only_what_exists():
    found = problems(_read_doc(), ROOT)
    assert not found, "docs/architecture.md is out of date:\n" + "\n".join(found)


def test_architecture_doc_is_checked_at_all():
    """The document names many paths and definitions: a checker that stopped recognizing them
    would otherwise pass silently."""
    all_spans = spans(_read_doc())
    refs = [s for s in all_spans if _REF.match(s.text)]
    paths = [s for s in all_spans if not _REF.match(s.text) and is_path(s.text)]
    assert len(refs) >= 60, f"only {len(refs)} `file.py: name` references found"
    assert len(paths) >= 60, f"only {len(paths)} paths found"
