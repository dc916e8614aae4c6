"""`bind` hands each primitive to the first registered mode that takes it; core knows a pending
(lazy) value only through `flow.core.pending.PendingValue`; and the layers below the modes
import none of them (read from the import graph, function-local imports included)."""

from __future__ import annotations

import layering
import numpy as np
import pytest

import flow
from flow import primitives as P
from flow.core.pending import PendingValue
from flow.core.tensor import Tensor
from flow.modes.lazy import LazyValue
from flow.primitives import registry
from flow.primitives.registry import bind, mode_names, register_mode, remove_mode

ORDER = ("lazy", "global_creation", "global_eager", "tracing", "eager")


def test_bind_asks_the_modes_in_order():
    assert mode_names() == ORDER


def test_a_mode_asked_first_sees_each_primitive_and_may_hand_it_on():
    seen = []

    def process(prim, args, params, trace):
        seen.append(prim.name)
        return None  # hand on: the next mode computes it

    register_mode("probe", lambda prim, args, trace: True, process, before="lazy")
    try:
        assert mode_names() == ("probe", *ORDER)
        x = flow.tensor([1.0, 2.0])
        y = (x * x + x).numpy()
    finally:
        remove_mode("probe")
    assert mode_names() == ORDER
    np.testing.assert_array_equal(y, np.array([2.0, 6.0], np.float32))
    assert seen.count("mul") == 1 and seen.count("add") == 1, seen


def test_a_mode_that_takes_a_primitive_gives_bind_its_result():
    marker = flow.tensor([42.0])

    def takes(prim, args, trace):
        return prim.name == "neg"

    register_mode("probe", takes, lambda prim, args, params, trace: marker, before="eager")
    try:
        x = flow.tensor([1.0])
        assert bind(P.neg, x) is marker
        assert bind(P.exp, x).item() == pytest.approx(np.e)  # the others: eager as before
    finally:
        remove_mode("probe")
    assert bind(P.neg, flow.tensor([1.0])).item() == -1.0


def test_mode_registry_errors_name_the_mode_and_the_registered_ones():
    with pytest.raises(ValueError, match=r"no mode 'nope' to insert 'x' before; registered: "
                                         r"lazy, global_creation"):  # fmt: skip
        register_mode("x", lambda *a: True, lambda *a: None, before="nope")
    with pytest.raises(ValueError, match=r"remove_mode: no mode 'nope'"):
        remove_mode("nope")
    assert mode_names() == ORDER


def test_bind_without_a_mode_names_the_primitive(monkeypatch):
    monkeypatch.setattr(registry, "_MODES", [])
    monkeypatch.setattr(registry, "_MODE_NAMES", [])
    with pytest.raises(RuntimeError, match=r"^neg: no execution mode took this primitive "
                                           r"\(registered: none\)"):  # fmt: skip
        bind(P.neg, Tensor._eager(np.ones(2, np.float32)))


@pytest.fixture
def doubled():
    """A composite `x + x` whose kernel counts its runs."""
    runs = []

    def kernel(x):
        runs.append(x.shape)
        return x + x

    prim = registry.composite("test_doubled", lambda x: bind(P.add, x, x))(kernel)
    yield prim, runs
    del registry.COMPOSITES["test_doubled"]


def test_eager_mode_runs_a_composite_as_its_kernel(doubled):
    prim, runs = doubled
    y = bind(prim, flow.tensor([1.0, -2.0]))
    np.testing.assert_array_equal(y.numpy(), [2.0, -4.0])
    assert runs == [(2,)] and y.dtype is flow.float32


def test_a_composite_recording_gradients_is_its_primitives(doubled):
    prim, runs = doubled
    x = flow.tensor([1.0, 3.0], requires_grad=True)
    y = bind(prim, x)
    assert y.grad_fn is not None
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 24.0])  # d (2x)^2 / dx
    assert runs == []


def test_traced_and_lazy_programs_see_a_composites_primitives(doubled):
    prim, runs = doubled
    fn = flow.jit(lambda x: bind(prim, x))
    text = fn.lower(flow.tensor([1.0, 2.0])).as_text()
    assert "flow.add" in text and "doubled" not in text
    np.testing.assert_array_equal(fn(flow.tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
    with flow.lazy(min_ops=0):
        z = bind(prim, flow.tensor([5.0]))
    np.testing.assert_array_equal(z.numpy(), [10.0])
    assert runs == []


class _Pending(PendingValue):
    """A pending value that records what core asked of it."""

    def __init__(self, value):
        self.value, self.calls = value, []

    def materialize(self, tensor):
        self.calls.append("materialize")
        tensor._buf = self.value
        return self.value

    def alias(self, tensor, copy):
        self.calls.append(("alias", copy))
        out = Tensor._eager(self.value.copy() if copy else self.value)
        return out

    def rebind(self, tensor):
        self.calls.append("rebind")
        tensor._buf = self


def test_core_reads_pending_values_through_the_protocol_only():
    value = np.array([1.0, 2.0], np.float32)
    t = Tensor._eager(np.zeros(2, np.float32))
    pending = t._buf = _Pending(value)
    d, c = t.detach(), t.clone()
    assert pending.calls == [("alias", False), ("alias", True)]
    assert d._buf is value and c._buf is not value
    assert t.tolist() == [1.0, 2.0] and pending.calls[-1] == "materialize"
    u = Tensor._eager(np.zeros(2, np.float32))
    new = Tensor._eager(np.zeros(2, np.float32))
    new._buf = _Pending(value)
    u._rebind(new, "copy_")  # an in-place update to a pending value
    assert u._buf is new._buf and new._buf.calls == ["rebind"]
    assert issubclass(LazyValue, PendingValue)


# --------------------------------------------------------------------------- the layers

_CORE_MAY_IMPORT = ("flow.core", "flow.dialect", "flow.targets")


def _inside(mod: str, packages) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in packages)


def _offenders(importers, allowed) -> list[str]:
    g = layering.scan()
    return sorted(str(i) for i in g.imports
                  if _inside(i.importer, importers) and i.imported.startswith("flow")
                  and not _inside(i.imported, allowed))  # fmt: skip


def test_core_imports_nothing_above_core():
    bad = _offenders(("flow.core",), _CORE_MAY_IMPORT)
    assert not bad, "core/ imports above core:\n" + "\n".join(bad)


def test_the_primitive_registry_imports_no_mode_and_no_distributed_code():
    bad = _offenders(("flow.primitives.registry",), _CORE_MAY_IMPORT)
    assert not bad, "primitives/registry.py imports above core:\n" + "\n".join(bad)


def test_modes_import_only_lower_layers_and_the_flush_compile_stages():
    allowed = (*_CORE_MAY_IMPORT, "flow.primitives", "flow.distributed", "flow.modes")
    bad = [b for b in _offenders(("flow.modes",), allowed)
           if "flow.modes.lazy_flush -> flow.compile.stages" not in b]  # fmt: skip
    assert not bad, "modes/ imports above its layer:\n" + "\n".join(bad)
