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
