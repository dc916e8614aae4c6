"""docs/ops.md is generated from the registries and must be current and complete."""

from __future__ import annotations

import os

from flow.tools.opdocs import render

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "ops.md")


def test_op_coverage_doc_is_current():
    with open(DOC) as f:
        assert f.read() == render(), (
            "docs/ops.md is stale: python -m flow.tools.opdocs > docs/ops.md"
        )


def test_every_public_op_runs_eagerly_and_traces():
    rows = [line for line in render().splitlines() if line.startswith("| `")]
    problems = [r for r in rows if "not sampled" in r or "| no" in r]
    assert not problems, "\n".join(problems)


def _primitive_rows() -> dict[str, list[str]]:
    text = render()
    table = text[text.index("## Primitives") : text.index("## Public ops")]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| `")]
    return {cells[0].strip(" `"): [c.strip() for c in cells[1:]] for cells in rows}


def test_sbp_column_lists_each_primitives_signatures():
    rows = _primitive_rows()
    sbp = {name: cells[-1] for name, cells in rows.items()}
    # DESIGN §5's matmul signatures, for a 2-D matmul.
    assert sbp["matmul"] == "S(0) B → S(0); B S(1) → S(1); S(1) S(0) → P; B B → B; P B → P; B P → P"
    assert sbp["add"] == "S(0) S(0) → S(0); S(1) S(1) → S(1); B B → B; P P → P"
    assert sbp["reduce"] == "S(0) → S(0); S(1) → P; B → B; P → P"  # a sum over dim 1
    replicated = {name for name, cell in sbp.items() if cell == "replicate only"}
    assert replicated == {"constant", "full", "iota", "random_bits"}
    assert all("→" in cell for name, cell in sbp.items() if name not in replicated)
