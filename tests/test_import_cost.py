"""`import flow` loads none of its heavy dependencies (xDSL's IR, ml_dtypes, IREE, MPI, the
lowering passes): each loads with the first use that needs it. Checked in a fresh process,
by the modules it holds, not by a timing (benchmarks/first_step.py times the import)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("xdsl.ir", "xdsl.dialects.builtin", "ml_dtypes", "iree.runtime", "iree.compiler",
         "mpi4py", "flow.lowering", "flow.targets", "flow.dialect.definition")  # fmt: skip


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return set(json.loads(run.stdout.splitlines()[-1]))


def test_import_flow_loads_no_heavy_dependency():
    loaded = _loaded_after("import flow, flow.nn, flow.optim, flow.nn.functional")
    assert not [m for m in HEAVY if m in loaded]


@pytest.mark.parametrize(
    ("code", "needs"),
    [
        # the first eager op checks its operands with the dialect's type inference
        ("x = flow.tensor([1.0, 2.0]); print((x + 1).numpy())", {"xdsl.dialects.builtin"}),
        ("print(flow.tensor([1.0], dtype=flow.bfloat16).numpy())", {"ml_dtypes"}),
        # (from the compile cache, a compiled program loads without lowering)
        ("print(flow.jit(lambda a: a * 2)(flow.ones(2)).numpy())", {"flow.targets", "iree.runtime"}),
    ],
)
def test_a_dependency_loads_with_its_first_use(code, needs):
    loaded = _loaded_after(f"import flow\n{code}")
    assert needs <= loaded
