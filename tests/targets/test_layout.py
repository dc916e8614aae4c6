"""The shape of flow.targets: no import cycle among its modules (function-local imports
included); the modules the lowering and the rank supervisor load need neither IREE's runtime
nor MPI; every public name is where it was."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TARGETS = Path(__file__).resolve().parents[2] / "targets"


def _imports(path: Path) -> set[str]:
    """The modules of flow.targets that `path` imports, function-local imports included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                out |= {mod} if mod else {a.name for a in node.names}
            elif mod.startswith("flow.targets."):
                out.add(mod.split(".")[2])
    return {m for m in out if (TARGETS / f"{m}.py").exists()}


def test_no_import_cycle_in_targets():
    graph = {p.stem: _imports(p) for p in TARGETS.glob("*.py") if p.stem != "__init__"}
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                pytest.fail(f"import cycle: {' -> '.join(path[path.index(nxt):] + [nxt])}")
            if nxt not in done:
                visit(nxt, [*path, nxt])
        done.add(node)

    for node in sorted(graph):
        visit(node, [node])


@pytest.mark.parametrize("module", ["comm_abi", "mpi", "faults", "table"])
def test_light_modules_load_without_iree_runtime_or_mpi(module):
    code = (
        f"import sys, flow.targets.{module}; "
        "heavy = [m for m in ('iree.runtime', 'mpi4py') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_public_names_stay_where_they_were():
    from flow import targets
    from flow.targets import collectives, runtime

    for name in targets.__all__:
        assert getattr(targets, name) is not None, name
    for module in (collectives, runtime):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
    assert collectives.all_reduce.__module__ == "flow.targets.array_collectives"
