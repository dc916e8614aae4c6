"""Every comm collective from a compiled program on 2 and 4 ranks, groups of a 2x2 mesh, and the
pieces that need no launcher (ABI names, driver choice)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from conftest import HERE, launch, run_command

from flow.targets import collectives, resolve_driver


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective_matches_numpy(nproc, collective_vmfb):
    run = launch(nproc, HERE / "rank_collectives.py", str(collective_vmfb(nproc)))
    assert run.checks_passed(nproc) > 60, run.describe()


def test_all_reduce_over_rows_and_columns_of_a_2x2_mesh():
    run = launch(4, HERE / "rank_mesh.py")
    assert run.returncode == 0, run.describe()
    assert sorted(
        re.findall(r"rank (\d): mesh ok column=(\[\d, \d\]) row=(\[\d, \d\])", run.stdout)
    ) == [
        ("0", "[0, 2]", "[0, 1]"),
        ("1", "[1, 3]", "[0, 1]"),
        ("2", "[0, 2]", "[2, 3]"),
        ("3", "[1, 3]", "[2, 3]"),
    ], run.describe()


def test_collectives_without_launcher_are_a_world_of_one(collective_vmfb):
    code = (
        "import sys, numpy as np\n"
        "from flow.targets import load\n"
        "m = load(open(sys.argv[1], 'rb').read(), 'cpu')\n"
        "x = np.arange(12, dtype=np.float32).reshape(4, 3)\n"
        "(y,) = m['all_reduce_sum_f32'](x, 0)\n"
        "np.testing.assert_array_equal(y, x)\n"
        "print('ok', flush=True)\n"
    )
    # The module was compiled for 2 ranks; all_reduce keeps its shape on any number.
    run = run_command([sys.executable, "-c", code, str(collective_vmfb(2))])
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.describe()
    assert "leaked" not in run.stderr, run.describe()


def test_import_names_are_unique_per_type():
    assert (
        collectives.import_name("all_reduce_sum", "tensor<4x3xf32>")
        == "comm.all_reduce_sum.4x3xf32"
    )
    assert (
        collectives.import_name("all_gather", "tensor<2x?xbf16>", "tensor<4x?xbf16>")
        == "comm.all_gather.2xDxbf16.4xDxbf16"
    )
    assert collectives.declare("broadcast", "tensor<8xi32>") == (
        "func.func private @comm.broadcast.8xi32(tensor<8xi32>, i32, i32, i32) "
        "-> (tensor<8xi32>, i32)"
    )
    assert collectives.declare("send", "tensor<8xi32>") == (
        "func.func private @comm.send.8xi32(tensor<8xi32>, i32, i32, i32, i32) -> i32"
    )
    assert collectives.declare("recv", "tensor<8xi32>") == (
        "func.func private @comm.recv.8xi32(tensor<8xi32>, i32, i32, i32, i32) "
        "-> (tensor<8xi32>, i32)"
    )
    assert collectives.declare("barrier") == "func.func private @comm.barrier(i32, i32) -> i32"
    with pytest.raises(KeyError, match="all_reduce_sum"):
        collectives.import_name("allreduce")


def test_imported_collectives_are_found_in_a_module(collective_vmfb):
    names = collectives.imported_collectives(collective_vmfb(2).read_bytes())
    assert "all_reduce_sum.4x3xf32" in names and "barrier" in names
    assert all(n.split(".")[0] in collectives.COLLECTIVES for n in names)


def test_flow_cpu_driver_selects_the_cpu_driver(monkeypatch):
    monkeypatch.delenv("FLOW_CPU_DRIVER", raising=False)
    assert resolve_driver("cpu") == "local-task"
    monkeypatch.setenv("FLOW_CPU_DRIVER", "local-sync")
    assert resolve_driver("cpu") == "local-sync"
    assert resolve_driver("cpu", "local-task") == "local-task"
    assert resolve_driver("vulkan") == "vulkan"
    monkeypatch.setenv("FLOW_CPU_DRIVER", "cuda")
    with pytest.raises(ValueError, match="FLOW_CPU_DRIVER"):
        resolve_driver("cpu")


def test_device_buffers_are_staged_through_host_memory():
    """On a GPU or Vulkan device the comm module copies an operand the host cannot map out
    through a staging buffer, and makes results in host memory the device reads."""
    from flow.targets import available
    from flow.targets.collectives import _Buffers
    from flow.targets.runtime import device_config

    if "vulkan" not in available():
        pytest.skip("no Vulkan device here (Mesa lavapipe: apt-get install mesa-vulkan-drivers)")
    import iree.runtime as rt

    device = device_config("vulkan").device
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    local = device.allocator.allocate_buffer_copy(
        memory_type=int(rt.MemoryType.DEVICE_LOCAL),
        allowed_usage=int(rt.BufferUsage.DEFAULT),
        device=device,
        buffer=want,
        element_type=rt.HalElementType.FLOAT_32,
    )
    buffers = _Buffers(device, host_memory=False)
    assert not buffers.writable(local)
    np.testing.assert_array_equal(buffers.array(local, np.dtype(np.float32)), want)
    out = buffers.new([3, 4], int(rt.HalElementType.FLOAT_32), want.nbytes)
    assert buffers.writable(out)
    buffers.array(out, np.dtype(np.float32))[...] = want * 2
    np.testing.assert_array_equal(buffers.array(out, np.dtype(np.float32)), want * 2)
