"""The boxing table of flow.dialect.sbp: OneFlow's rules per mesh axis, their costs, its errors."""

from __future__ import annotations

import pytest

from flow.dialect import sbp as sb
from flow.dialect.attrs import Sbp

B, P = Sbp("B"), Sbp("P")


def S(d: int) -> Sbp:
    return Sbp("S", d)


# DESIGN §5, written out independently of the table: (src, dst) -> the collectives, in order.
DESIGN = {
    (P, B): ["all_reduce"],
    (P, S(1)): ["reduce_scatter"],
    (S(0), B): ["all_gather"],
    (S(0), S(1)): ["all_to_all"],
    (B, S(1)): ["local_slice"],
    (B, P): ["local_partial"],
    (S(1), P): ["all_gather", "local_partial"],
    (B, B): [],
    (P, P): [],
    (S(1), S(1)): [],
}


@pytest.mark.parametrize("src, dst", list(DESIGN), ids=lambda x: str(x))
def test_steps_are_the_designs_collectives(src, dst):
    assert [s.collective for s in sb.boxing_steps(src, dst)] == DESIGN[src, dst]


def test_every_kind_pair_has_a_row():
    kinds = {(s.kind, d.kind) for s, d in DESIGN if s != d}
    assert kinds == set(sb.BOXING_TABLE)
    assert len(sb.BOXING_TABLE) == 7  # the 9 kind pairs less B->B and P->P (always identity)


def test_step_dims_name_the_ops_properties():
    assert sb.boxing_steps(P, S(1))[0].params == {"dim": 1}
    assert sb.boxing_steps(S(2), B)[0].params == {"dim": 2}
    assert sb.boxing_steps(S(0), S(1))[0].params == {"split_dim": 1, "concat_dim": 0}
    assert sb.boxing_steps(B, S(1))[0].params == {"dim": 1}
    assert sb.boxing_steps(B, P)[0].params == {}
    gather, keep = sb.boxing_steps(S(1), P)
    assert (gather.src, gather.dst, gather.params) == (S(1), B, {"dim": 1})
    assert (keep.src, keep.dst) == (B, P)


def test_rows_fit_their_ops():
    """Each row's dims are properties of its op; a combiner exactly where the op takes one."""
    for (src, dst), rule in sb.BOXING_TABLE.items():
        if rule.op is None:
            assert rule.via in ("B", "P"), (src, dst)
            continue
        s = S(0) if src == "S" else Sbp(src)
        d = S(1) if dst == "S" else Sbp(dst)
        props = set(rule.op.get_irdl_definition().properties)
        assert set(rule.dims(s, d)) <= props, rule
        assert (rule.reduce is not None) == ("kind" in props), rule
        assert rule.op.name == f"flow.{rule.collective}"


@pytest.mark.parametrize("src, dst, per_rank", [
    (P, B, 2 * 3 / 4),  # ring all-reduce: reduce-scatter, then all-gather
    (P, S(0), 3 / 4),
    (S(0), B, 3 / 4),
    (S(0), S(1), 3 / 16),  # each rank keeps 1/4 of its quarter, sends the rest
    (B, S(0), 0.0),
    (B, P, 0.0),
    (S(0), P, 3 / 4),  # the gather; keeping the value on one rank is free
    (S(0), S(0), 0.0),
    (P, P, 0.0),
])  # fmt: skip
def test_costs_are_the_bytes_each_rank_sends(src, dst, per_rank):
    size, k = 1024.0, 4
    assert sb.axis_cost(src, dst, size, k) == pytest.approx(per_rank * size)
    assert sb.axis_cost(src, dst, size, 1) == 0.0  # one rank: nothing to send


def test_rule_of_equal_entries_is_the_identity():
    assert sb.boxing_rule(S(1), S(1)) is sb.IDENTITY
    assert sb.boxing_rule("B", "B").collective == "identity"
    assert sb.boxing_steps(P, P) == ()


def test_rule_accepts_entry_text():
    assert sb.boxing_rule("P", "S(0)") is sb.boxing_rule(P, S(1))
    assert sb.boxing_rule("S(1)", "P").collective == "via B"


def test_unknown_entries_are_errors():
    with pytest.raises(ValueError, match=r"expected an SBP entry S\(<dim>\), B or P, got 'Q'"):
        sb.boxing_rule("Q", "B")
    with pytest.raises(TypeError, match="expected an SBP entry .* got 3"):
        sb.boxing_steps(3, B)


def test_a_pair_without_a_row_is_an_error_naming_it(monkeypatch):
    monkeypatch.delitem(sb.BOXING_TABLE, ("S", "S"))
    with pytest.raises(ValueError, match=r"no boxing rule turns S\(0\) into S\(1\).*P->B"):
        sb.boxing_rule(S(0), S(1))
    assert sb.boxing_rule(S(0), S(0)) is sb.IDENTITY
