"""flow.nn.parallel.DistributedDataParallel: data-parallel training on 2 and 4 ranks against a
single-process run on the whole batch (rank_ddp.py), the OneFlow doc page's DDP example under
2 ranks, and the wrap in a world of one (no MPI: a no-op)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from conftest import HERE, launch, run_command

import flow
import flow.nn as nn
from flow.nn.parallel import DistributedDataParallel

SCRIPT = HERE / "rank_ddp.py"

# The code of OneFlow's "Data parallelism training" page (parallelism/05_ddp.md, "Run Data
# Parallel Training With DistributedDataParallel"), with `import oneflow as flow` -> `import flow`
# and `from oneflow.nn.parallel` -> `from flow.nn.parallel`.
DOC_PAGE = '''
import flow
from flow.nn.parallel import DistributedDataParallel as ddp

train_x = [
    flow.tensor([[1, 2], [2, 3]], dtype=flow.float32),
    flow.tensor([[4, 6], [3, 1]], dtype=flow.float32),
]
train_y = [
    flow.tensor([[8], [13]], dtype=flow.float32),
    flow.tensor([[26], [9]], dtype=flow.float32),
]


class Model(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.lr = 0.01
        self.iter_count = 500
        self.w = flow.nn.Parameter(flow.tensor([[0], [0]], dtype=flow.float32))

    def forward(self, x):
        x = flow.matmul(x, self.w)
        return x


m = Model().to("cuda")
m = ddp(m)
loss = flow.nn.MSELoss(reduction="sum")
optimizer = flow.optim.SGD(m.parameters(), m.lr)

for i in range(0, m.iter_count):
    rank = flow.env.get_rank()
    x = train_x[rank].to("cuda")
    y = train_y[rank].to("cuda")

    y_pred = m(x)
    l = loss(y_pred, y)
    if (i + 1) % 50 == 0:
        print(f"{i+1}/{m.iter_count} loss:{l}")

    optimizer.zero_grad()
    l.backward()
    optimizer.step()

print(f"\\nw:{m.w}")
'''


@pytest.mark.parametrize("nproc", [2, 4])
def test_ddp_training_on_ranks(nproc):
    run = launch(nproc, SCRIPT, timeout=120, env={"FLOW_COLLECTIVE_TIMEOUT": "40"})
    assert run.checks_passed(nproc) > 150, run.describe()
    assert not run.left_behind, run.describe()


def test_doc_page_example_on_two_ranks(tmp_path):
    code = DOC_PAGE
    if not flow.cuda.is_available():  # the page trains on cuda; the cpu is what is here
        code = code.replace('.to("cuda")', '.to("cpu")')
    script = tmp_path / "ddp_train.py"
    script.write_text(code)
    run = launch(2, script, timeout=120, env={"FLOW_COLLECTIVE_TIMEOUT": "40"})
    assert run.returncode == 0, run.describe()
    # The last losses the page shows: 4.547473508864641e-12 on one rank, 6.18456e-11 on the other.
    last = re.findall(r"500/500 loss:tensor\(([-\d.e+]+)", run.stdout)
    assert len(last) == 2, run.describe()
    np.testing.assert_allclose(sorted(map(float, last)), [4.547473e-12, 6.184564e-11], rtol=0.05)
    # Both ranks end with the page's w = [[2], [3]] (y = 2 x0 + 3 x1 fits all four rows).
    number = r"\s*([-\d.e+]+)\]"
    ws = re.findall(r"w:Parameter containing:\s*tensor\(\[\[" + number + r",\s*\[" + number,
                    run.stdout)  # fmt: skip
    assert len(ws) == 2, run.describe()
    for w in ws:
        np.testing.assert_allclose([float(v) for v in w], [2.0, 3.0], atol=1e-3)


def test_world_of_one_wrap_is_a_no_op():
    code = (
        "import flow, numpy as np\n"
        "from flow.nn.parallel import DistributedDataParallel as ddp\n"
        "m = flow.nn.Linear(3, 2); ref = flow.nn.Linear(3, 2)\n"
        "ref.load_state_dict(m.state_dict())\n"
        "assert ddp(m) is m and list(m.state_dict()) == ['weight', 'bias']\n"
        "x = flow.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))\n"
        "for net in (m, ref):\n"
        "    (net(x) ** 2).sum().backward()\n"
        "np.testing.assert_array_equal(m.weight.grad.numpy(), ref.weight.grad.numpy())\n"
        "import sys; assert 'mpi4py' not in sys.modules\n"
        "print('ok')\n"
    )
    run = run_command([sys.executable, "-c", code], timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.describe()


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a flow.nn.Module, got Tensor"):
        DistributedDataParallel(flow.ones(2))
    with pytest.raises(ValueError, match="bucket_size is the number of parameters per "
                                         "all-reduce, a positive int; got 0"):  # fmt: skip
        DistributedDataParallel(nn.Linear(2, 2), bucket_size=0)
    m = DistributedDataParallel(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="wrapped already"):
        DistributedDataParallel(m)
    g = nn.Linear(2, 2).to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    with pytest.raises(ValueError, match="'weight' is a global tensor; it works over local"):
        DistributedDataParallel(g)
