"""The layering rules of issue "Frontend architecture" and DESIGN.md §1, read from the source
tree's import graph (tests/layering.py; function-local imports included). Each failure lists
its offenders with their files and lines. The analyzer itself is checked too, on a small
tree whose cycles, private imports and folder imports are known by construction."""

from __future__ import annotations

import functools
import os

import layering

MAX_CYCLE_FILES = 3
MAX_FILE_LINES = 600
MAX_FRONTEND_TOP_LEVEL = 12


@functools.cache
def tree() -> layering.Graph:
    return layering.scan()


def _describe_cycle(g: layering.Graph, cycle: list[str]) -> str:
    """The cycle's modules and the imports that hold it: those between its folders when it
    spans several (where the layering is crossed), else all of them."""
    members = set(cycle)
    folders = sorted({g.folder(m) for m in cycle})
    inside = [i for i in g.imports if i.importer in members and i.imported in members]
    if len(folders) > 1:
        inside = [i for i in inside if g.folder(i.importer) != g.folder(i.imported)]
    inside.sort(key=lambda i: (i.file, i.line))
    what = "imports between its folders" if len(folders) > 1 else "its imports"
    return (f"{len(cycle)} modules in {', '.join(folders)}: {' '.join(cycle)}\n"
            f"  {what}:\n" + "".join(f"    {i}\n" for i in inside))  # fmt: skip


# --------------------------------------------------------------------------- the rules


def test_no_import_cycle_spans_folders_or_more_than_3_files():
    g = tree()
    bad = [c for c in layering.cycles(g.mods, g.edges)
           if len(c) > MAX_CYCLE_FILES or len({g.folder(m) for m in c}) > 1]  # fmt: skip
    assert not bad, (
        f"{len(bad)} import cycle(s) span more than one folder or more than {MAX_CYCLE_FILES} "
        f"files:\n" + "\n".join(_describe_cycle(g, c) for c in bad)
    )


def test_no_source_file_over_600_lines():
    g = tree()
    big = sorted((n, f) for f, n in layering.line_counts(g.mods, g.root).items()
                 if n > MAX_FILE_LINES)  # fmt: skip
    assert not big, f"{len(big)} source file(s) over {MAX_FILE_LINES} lines:\n" + "".join(
        f"  {f}: {n} lines\n" for n, f in big
    )


def test_frontend_top_level_holds_at_most_12_py_files():
    files = layering.frontend_top_level(tree().root)
    assert len(files) <= MAX_FRONTEND_TOP_LEVEL, (
        f"frontend/ holds {len(files)} .py files at its top level, expected at most "
        f"{MAX_FRONTEND_TOP_LEVEL}: {' '.join(files)}"
    )


def test_no_private_name_imported_across_packages():
    private = sorted(tree().private, key=lambda p: (p.file, p.line))
    assert not private, (
        f"{len(private)} private name(s) (`_x` modules or symbols) imported from another "
        f"package:\n" + "".join(f"  {p}\n" for p in private)
    )


def _imports_out_of(folder: str) -> list[layering.Import]:
    g = tree()
    between = layering.folder_imports(g)
    return sorted((i for (a, _), imps in between.items() if a == folder for i in imps),
                  key=lambda i: (i.file, i.line))  # fmt: skip


def test_dialect_imports_nothing_of_ours():
    out = _imports_out_of("dialect")
    assert not out, (
        f"dialect/ must import nothing of ours beyond itself (DESIGN §1); {len(out)} import(s):\n"
        + "".join(f"  {i}\n" for i in out)
    )


def test_targets_import_nothing_of_ours_beyond_itself():
    out = _imports_out_of("targets")
    assert not out, (
        f"targets/ must import nothing of ours beyond itself; {len(out)} import(s):\n"
        + "".join(f"  {i}\n" for i in out)
    )


# --------------------------------------------------------------------------- the analyzer

_SAMPLE = {
    "frontend/__init__.py": "from .core import a\n",
    "frontend/core/__init__.py": "",
    "frontend/core/a.py": "import os\n\n\ndef f():\n    from flow.ops import b\n    return b, os\n",
    "frontend/core/_hidden.py": "x = 1\n",
    "frontend/ops/__init__.py": "",
    "frontend/ops/b.py": "from flow.core.a import f\nfrom flow.core import _hidden\n",
    "frontend/ops/_d.py": "q = 1\n",
    "frontend/ops/c.py": (
        "import flow.core.a as A\nfrom . import _d\nfrom ._d import q\n\n"
        "print(A._secret, A.f, _d.q, q)\n"
    ),
    "frontend/nn/__init__.py": "",
    "frontend/nn/_impl/__init__.py": "",
    "frontend/nn/_impl/k.py": "k = 1\n",
    "frontend/nn/_impl/sub/__init__.py": "from flow.nn._impl.k import k\n",
    "dialect/__init__.py": "from flow.core import a\n",
    "targets/__init__.py": "from .x import y\n",
    "targets/x.py": "import flow.dialect\n\ny = 1\n",
}


def _sample(tmp_path) -> layering.Graph:
    for rel, text in _SAMPLE.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return layering.scan(str(tmp_path))


def test_analyzer_finds_a_cycle_held_by_a_function_local_import(tmp_path):
    g = _sample(tmp_path)
    assert layering.cycles(g.mods, g.edges) == [["flow.core.a", "flow.ops.b"]]
    local = [(i.importer, i.imported, i.file, i.line) for i in g.imports if i.local]
    assert local == [("flow.core.a", "flow.ops.b", os.path.join("frontend", "core", "a.py"), 5)]


def test_analyzer_finds_private_names_from_other_folders_only(tmp_path):
    g = _sample(tmp_path)
    found = sorted((p.importer, p.name, p.line) for p in g.private)
    # ops.c's own `_d` and nn._impl.sub's use of its parent package's private `_impl` are fine
    assert found == [("flow.ops.b", "flow.core._hidden", 2),
                     ("flow.ops.c", "flow.core.a._secret", 5)]  # fmt: skip


def test_analyzer_finds_imports_between_top_level_folders(tmp_path):
    g = _sample(tmp_path)
    between = {k: [(i.importer, i.imported) for i in v]
               for k, v in layering.folder_imports(g).items()}  # fmt: skip
    assert between == {
        ("dialect", "frontend"): [("flow.dialect", "flow.core.a")],
        ("targets", "dialect"): [("flow.targets.x", "flow.dialect")],
    }
    assert layering.frontend_top_level(str(tmp_path)) == ["__init__.py"]
    assert (
        layering.line_counts(g.mods, str(tmp_path))[os.path.join("frontend", "core", "a.py")] == 6
    )


def test_test_files_have_unique_basenames():
    """pytest imports test modules by basename (rootdir-relative packages are not used), so
    two test files of one name in different folders stop the whole collection."""
    seen: dict[str, list[str]] = {}
    tests = os.path.dirname(os.path.abspath(__file__))
    for folder, _, files in os.walk(tests):
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                seen.setdefault(name, []).append(os.path.relpath(os.path.join(folder, name)))
    clashes = {n: paths for n, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"test files sharing a basename: {clashes}"


def test_pyproject_lists_every_package():
    """A package missing from pyproject's explicit list works in an editable install but is
    absent from a built wheel; every folder with an __init__.py is listed, and nothing else."""
    import pytest

    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads pyproject")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        cfg = tomllib.load(f)["tool"]["setuptools"]
    found = set()
    for name, folder in cfg["package-dir"].items():
        base = os.path.join(root, folder)
        for here, _, files in os.walk(base):
            if "__init__.py" in files:
                rel = os.path.relpath(here, base)
                found.add(name if rel == "." else f"{name}.{rel.replace(os.sep, '.')}")
    listed = set(cfg["packages"])
    assert found == listed, f"unlisted: {sorted(found - listed)}, stale: {sorted(listed - found)}"
