"""The source tree's import graph, function-local imports included, and the layering figures
issue "Frontend architecture" asks for: import cycles, files over N lines, private names imported
across packages, `.py` files at the top of frontend/, frontend imports against its layer order,
imports between the top-level folders.

`python tests/layering.py` prints the figures; tests/test_layering.py asserts the rules.
Only the source is read (no module is imported), so both take well under a second.

Conventions: a module's *folder* is the directory of its file (a package's `__init__.py`
belongs to the package's directory); an import of `a.b.c` is an edge to the module `a.b.c`
only, not to the packages `a` and `a.b` that Python also initializes (otherwise every module
would sit in one cycle with `flow/__init__.py`). A *private name* is a module or symbol whose
name starts with one underscore; it is private to the folder holding it (and the folders
under the package that defines it), so importing it from elsewhere, or reaching it as an
attribute of an imported module (`from flow.ops import basic; basic._x`), is a violation.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = {"frontend": "flow", "dialect": "flow.dialect", "lowering": "flow.lowering",
           "targets": "flow.targets", "tools": "flow.tools"}  # fmt: skip


@dataclass(frozen=True)
class Import:
    """One import statement's edge `importer -> imported`, where it is written, and whether it
    sits inside a function (a function-local import)."""

    importer: str
    imported: str
    file: str  # relative to the root
    line: int
    local: bool

    def __str__(self) -> str:
        kind = " (function-local)" if self.local else ""
        return f"{self.file}:{self.line}: {self.importer} -> {self.imported}{kind}"


@dataclass(frozen=True)
class PrivateUse:
    """A private name (`name`, fully qualified) that `importer` imports or reaches from
    another folder."""

    importer: str
    name: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} <- {self.name}"


@dataclass
class Graph:
    root: str
    mods: dict[str, str]  # module name -> absolute file path
    edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    imports: list[Import] = field(default_factory=list)
    private: list[PrivateUse] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rel = {m: os.path.relpath(p, self.root) for m, p in self.mods.items()}
        self._folder = {m: os.path.dirname(r) for m, r in self._rel.items()}

    def rel(self, mod: str) -> str:
        """The module's file, relative to the root."""
        return self._rel[mod]

    def folder(self, mod: str) -> str:
        """The directory holding the module's file, relative to the root."""
        return self._folder[mod]

    def top(self, mod: str) -> str:
        """The top-level folder (frontend, dialect, lowering, targets or tools)."""
        return self.rel(mod).split(os.sep)[0]


def modules(root: str = ROOT) -> dict[str, str]:
    """Module name -> file, for every source module of the package."""
    out = {}
    for folder, pkg in FOLDERS.items():
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
            for fn in sorted(filenames):
                if fn.endswith(".py"):
                    path = os.path.join(dirpath, fn)
                    rel = os.path.relpath(path, os.path.join(root, folder))[:-3].split(os.sep)
                    rel = rel[:-1] if rel[-1] == "__init__" else rel
                    out[".".join([pkg, *rel])] = path
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _absolute(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    parts = mod.split(".")[: None if is_pkg else -1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def _foreign_private(importer: str, full: str) -> bool:
    """Whether the dotted name `full` has a private part outside the importer's own package
    path (a module may use the private names of the packages it sits in)."""
    own, parts = importer.split("."), full.split(".")
    common = 0
    while common < min(len(own), len(parts)) and own[common] == parts[common]:
        common += 1
    return any(_private(p) for p in parts[common:])


def _imports(tree: ast.Module):
    """Each import statement of the module, with whether it sits inside a function (a
    function-local import; one in an `if`, `try`, `with` or class body runs at import)."""
    stack: list[tuple[ast.AST, bool]] = [(node, False) for node in reversed(tree.body)]
    while stack:
        node, local = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, local
            continue
        local = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for name in ("cases", "handlers", "finalbody", "orelse", "body"):
            stack.extend((child, local) for child in reversed(getattr(node, name, ())))


def _owner(mods: dict[str, str], name: str) -> str | None:
    """The module that defines the dotted name (the name itself or its longest module prefix)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _scan_module(g: Graph, mod: str, source: str) -> None:
    """Add one module's imports, and its private uses of other folders' names, to `g`."""
    file, folder = g.rel(mod), g.folder(mod)
    tree = ast.parse(source, file)
    is_pkg = file.endswith("__init__.py")
    aliases: dict[str, str] = {}  # a name bound by an import -> the module of ours it names
    done: set[tuple[str, int]] = set()

    def add(node: ast.stmt, local: bool, full: str, bound: str | None) -> None:
        target = _owner(g.mods, full)
        if target is None:
            return
        if bound is not None and full in g.mods:
            aliases[bound] = full
        if target != mod and (target, node.lineno) not in done:
            done.add((target, node.lineno))
            g.edges[mod].add(target)
            g.imports.append(Import(mod, target, file, node.lineno, local))
        if g.folder(target) != folder and _foreign_private(mod, full):
            g.private.append(PrivateUse(mod, full, file, node.lineno))

    for node, local in _imports(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                # `import a.b.c as d` binds d to a.b.c; `import a.b.c` binds a to the package a.
                add(node, local, a.name, a.asname)
                first = a.name.partition(".")[0]
                if a.asname is None and first in g.mods:
                    aliases[first] = first
        else:
            base = _absolute(mod, is_pkg, node.level, node.module)
            for a in node.names:
                if a.name == "*":
                    add(node, local, base, None)
                else:
                    add(node, local, f"{base}.{a.name}", a.asname or a.name)
    _private_attributes(g, mod, tree, source, aliases)


def _private_attributes(g: Graph, mod: str, tree: ast.Module, source: str,
                        aliases: dict[str, str]) -> None:  # fmt: skip
    """`alias.x._y` where `alias` names one of our modules by an import: the private `_y` of a
    module in another folder, reached without importing it by name."""
    file, folder = g.rel(mod), g.folder(mod)
    names = [a for a in aliases if any(m.startswith(aliases[a]) and g.folder(m) != folder
                                       for m in g.mods)]  # fmt: skip
    pattern = r"\b(?:" + "|".join(map(re.escape, names)) + r")(?:\s*\.\s*\w+)*?\s*\.\s*_"
    if not names or not re.search(pattern, source):  # the walk below is the slow part
        return
    seen: set[int] = set()
    for node in ast.walk(tree):  # breadth-first: an outer attribute before its inner ones
        if not isinstance(node, ast.Attribute) or id(node) in seen:
            continue
        chain, n = [], node
        while isinstance(n, ast.Attribute):
            seen.add(id(n))
            chain.append(n.attr)
            n = n.value
        if not isinstance(n, ast.Name) or n.id not in aliases:
            continue
        target = aliases[n.id]
        for attr in reversed(chain):
            if f"{target}.{attr}" in g.mods:
                target = f"{target}.{attr}"
                continue
            if _private(attr) and g.folder(target) != folder:
                g.private.append(PrivateUse(mod, f"{target}.{attr}", file, node.lineno))
            break


def scan(root: str = ROOT) -> Graph:
    """The import graph of the tree at `root`, with every edge's place and the private uses."""
    g = Graph(root, modules(root))
    for mod, path in g.mods.items():
        with open(path, encoding="utf-8") as f:
            _scan_module(g, mod, f.read())
    return g


def graph(root: str = ROOT):
    """(modules, edges: module -> imported modules, private uses: (importer, name))."""
    g = scan(root)
    return g.mods, g.edges, [(p.importer, p.name) for p in g.private]


def package(path: str) -> str:
    return os.path.dirname(path)


def cycles(mods, edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(mods):
        if v not in index:
            visit(v)
    return out


def line_counts(mods, root: str = ROOT) -> dict[str, int]:
    """File (relative to the root) -> number of lines."""
    counts = {}
    for path in mods.values():
        with open(path, encoding="utf-8") as f:
            counts[os.path.relpath(path, root)] = sum(1 for _ in f)
    return counts


def frontend_top_level(root: str = ROOT) -> list[str]:
    """The `.py` files directly in frontend/."""
    return sorted(f for f in os.listdir(os.path.join(root, "frontend")) if f.endswith(".py"))


def folder_imports(g: Graph) -> dict[tuple[str, str], list[Import]]:
    """(importing top-level folder, imported one) -> the imports between two different ones."""
    out: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in g.imports:
        a, b = g.top(imp.importer), g.top(imp.imported)
        if a != b:
            out[a, b].append(imp)
    return out


FRONTEND_LAYERS = ("core", "primitives", "distributed", "modes", "ops", "compile")
"""frontend/'s packages, lowest first (issue "Frontend architecture"); everything else in
frontend/ (nn, optim, utils, the top-level modules) sits above them all."""


def frontend_layer(g: Graph, mod: str) -> int | None:
    """The layer of a frontend module (0 = core, ...), None outside frontend/."""
    parts = g.rel(mod).split(os.sep)
    if parts[0] != "frontend":
        return None
    return FRONTEND_LAYERS.index(parts[1]) if parts[1] in FRONTEND_LAYERS else len(FRONTEND_LAYERS)


def upward_imports(g: Graph) -> list[Import]:
    """The frontend imports from a higher layer than the importer's (function-local included)."""
    out = []
    for imp in g.imports:
        low, high = frontend_layer(g, imp.importer), frontend_layer(g, imp.imported)
        if low is not None and high is not None and high > low:
            out.append(imp)
    return sorted(out, key=lambda i: (i.file, i.line))


def main() -> None:
    g = scan()
    cyc = cycles(g.mods, g.edges)
    lines = line_counts(g.mods)
    top = frontend_top_level()
    print(f"modules: {len(g.mods)}")
    print(f"import cycles: {len(cyc)}, largest: {max(map(len, cyc), default=0)} modules")
    for c in cyc:
        folders = sorted({g.folder(m) for m in c})
        print(f"  {len(c)} modules in {', '.join(folders)}: {' '.join(c)}")
    for n in (400, 600):
        big = sorted((v, k) for k, v in lines.items() if v > n)
        print(
            f"files over {n} lines: {len(big)}"
            + "".join(f"\n  {v:5d} {k}" for v, k in big if n == 400)
        )
    print(f"private names imported across packages: {len(g.private)}")
    for p in g.private:
        print(f"  {p.importer} <- {p.name}  ({p.file}:{p.line})")
    print(f"frontend/ top-level .py files: {len(top)} ({' '.join(top)})")
    up = upward_imports(g)
    print(f"frontend imports against the layer order ({' < '.join(FRONTEND_LAYERS)} < the rest): "
          f"{len(up)}" + "".join(f"\n  {i}" for i in up))  # fmt: skip
    between = folder_imports(g)
    print("imports between top-level folders: " + ", ".join(
        f"{a} -> {b} {len(v)}" for (a, b), v in sorted(between.items())))  # fmt: skip


if __name__ == "__main__":
    main()
