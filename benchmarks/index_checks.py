"""Cost of compiled index range checks (frontend/_index_checks.py): the same programs compiled
with and without `check_indices`, timed side by side.

    python benchmarks/index_checks.py [--quick]

Cases: an embedding lookup (ids 64x128 into a 50000x64 table), and an nn.Graph training step
of an embedding + linear classifier with cross_entropy (ids, labels: two check sites).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _bench import interleaved, machine  # noqa: E402

import flow  # noqa: E402
import flow.nn as nn  # noqa: E402
import flow.nn.functional as F  # noqa: E402
from flow import optim  # noqa: E402


def _lookup(rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    table = flow.tensor(rng.standard_normal((50000, 64)).astype(np.float32))
    ids = flow.tensor(rng.integers(0, 50000, (64, 128)))

    def lookup(t, i):
        return F.embedding(i, t).sum(dim=1)

    on, off = flow.jit(lookup), flow.jit(lookup, check_indices=False)
    return interleaved({"checked": lambda: on(table, ids), "unchecked": lambda: off(table, ids)},
                       rounds=rounds, number=20)  # fmt: skip


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5000, 64)
        self.out = nn.Linear(64, 10)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(dim=1))


def _step():
    flow.manual_seed(0)
    model = _Model()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optim.SGD(model.parameters(), lr=0.1))

        def build(self, ids, y):
            loss = F.cross_entropy(self.model(ids), y)
            loss.backward()
            return loss

    return Step()


def _train(rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    ids, y = rng.integers(0, 5000, (64, 32)), rng.integers(0, 10, 64)
    saved = os.environ.get("FLOW_CHECK_INDICES")
    steps = {}
    for name, value in (("checked", "1"), ("unchecked", "0")):
        os.environ["FLOW_CHECK_INDICES"] = value  # read when the step is traced (first call)
        steps[name] = _step()
        steps[name](ids, y)
    if saved is None:
        os.environ.pop("FLOW_CHECK_INDICES")
    else:
        os.environ["FLOW_CHECK_INDICES"] = saved
    return interleaved({n: (lambda s=s: s(ids, y)) for n, s in steps.items()}, rounds=rounds,
                       number=10)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples per measurement")
    rounds = 3 if parser.parse_args().quick else 7
    cases = (("embedding lookup 64x128 ids", _lookup), ("embedding + CE train step", _train))
    print(f"index range checks: compiled with and without [{machine()}]")
    for title, run in cases:
        t = run(rounds)
        overhead = t["checked"] / t["unchecked"] - 1
        print(f"{title:32} checked {t['checked'] * 1e6:9.1f} us  unchecked "
              f"{t['unchecked'] * 1e6:9.1f} us  overhead {overhead * 100:+.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
