"""flow.env, the launcher and flow-run -n: ranks know who they are; exit codes and errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import HERE, launch, run_command

import flow.distributed.launch as launch_module
from flow.distributed.launch import find_mpiexec, launch_env


def test_world_of_one_without_launcher():
    import flow.env

    assert (flow.env.get_rank(), flow.env.get_world_size()) == (0, 1)
    assert (flow.env.get_local_rank(), flow.env.get_node_size()) == (0, 1)
    assert not flow.env.is_distributed()
    flow.env.barrier()  # nothing to wait for


def test_env_without_launcher_does_not_import_mpi():
    code = "import sys, flow.env; print(flow.env.get_world_size(), 'mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["1", "False"], out.stderr


@pytest.mark.parametrize("nproc", [2, 4])
def test_ranks_see_rank_and_size(nproc):
    run = launch(nproc, HERE / "rank_env.py")
    assert run.returncode == 0, run.describe()
    found = re.findall(
        r"rank=(\d) size=(\d) local_rank=(\d) nodes=(\d) distributed=True", run.stdout
    )
    assert sorted(found) == [(str(r), str(nproc), str(r), "1") for r in range(nproc)], (
        run.describe()
    )
    assert run.stdout.count("pmi_size_hidden=True") == nproc, run.describe()
    assert not run.left_behind, run.describe()


def test_flow_run_n_launches_ranks():
    run = run_command(
        [sys.executable, "-m", "flow.tools.run", "-n", "2", str(HERE / "rank_env.py")]
    )
    assert run.returncode == 0, run.describe()
    assert sorted(re.findall(r"rank=(\d) size=2", run.stdout)) == ["0", "1"], run.describe()


def test_flow_run_n1_runs_in_process():
    run = run_command(
        [sys.executable, "-m", "flow.tools.run", "-n", "1", str(HERE / "rank_env.py")]
    )
    assert run.returncode == 0, run.describe()
    assert "rank=0 size=1" in run.stdout and "distributed=False" in run.stdout, run.describe()


def test_exit_code_is_the_failing_ranks(tmp_path):
    script = tmp_path / "exit3.py"
    script.write_text(
        "import sys, flow.env\n"
        "if flow.env.get_rank() == 1:\n    sys.exit(3)\n"
        "flow.env.barrier()  # never passed: rank 1 is gone\n"
    )
    run = launch(2, script, timeout=30)
    assert run.returncode == 3, run.describe()


def test_script_arguments_reach_every_rank(tmp_path):
    script = tmp_path / "args.py"
    script.write_text(
        "import sys, flow.env\nprint(flow.env.get_rank(), sys.argv[1:], flush=True)\n"
    )
    run = launch(2, script, "--lr", "0.1")
    assert run.returncode == 0, run.describe()
    assert run.stdout.count("['--lr', '0.1']") == 2, run.describe()


def test_missing_script_is_a_clear_error():
    run = launch(2, HERE / "no_such_script.py")
    assert run.returncode == 2 and "script not found" in run.stderr, run.describe()


def test_mpiexec_of_the_mpich_package_is_found():
    assert find_mpiexec().endswith("mpiexec")


def test_ranks_at_least_cores_run_local_sync(monkeypatch):
    monkeypatch.setattr(launch_module, "_cpu_count", lambda: 8)
    assert "FLOW_CPU_DRIVER" not in launch_env(4, {})
    assert launch_env(8, {})["FLOW_CPU_DRIVER"] == "local-sync"
    assert launch_env(8, {"FLOW_CPU_DRIVER": "local-task"})["FLOW_CPU_DRIVER"] == "local-task"


def test_enclosing_launch_variables_are_not_passed_on():
    env = launch_env(2, {"PMI_RANK": "0", "PMI_SIZE": "2", "PMI_FD": "9", "HOME": "/root",
                         "FLOW_RUN_DIR": "/tmp/flow-run-x"})  # fmt: skip
    assert set(env) - {"FLOW_CPU_DRIVER", "OPENBLAS_NUM_THREADS"} == {"HOME"}


def test_ranks_share_the_cores_between_their_blas_threads(monkeypatch):
    monkeypatch.setattr(launch_module, "_cpu_count", lambda: 8)
    assert launch_env(2, {})["OPENBLAS_NUM_THREADS"] == "4"
    assert launch_env(3, {})["OPENBLAS_NUM_THREADS"] == "2"
    assert launch_env(16, {})["OPENBLAS_NUM_THREADS"] == "1"
    assert launch_env(2, {"OPENBLAS_NUM_THREADS": "8"})["OPENBLAS_NUM_THREADS"] == "8"


def test_env_and_targets_agree_on_launcher_variables():
    import flow.distributed.env
    from flow.targets import collectives

    assert flow.distributed.env._LAUNCHER_VARS == collectives._LAUNCHER_VARS


@pytest.mark.parametrize("how", ["launch_env", "inherit"])
def test_a_run_launched_inside_a_rank_keeps_its_own_record(how):
    # Rank 0 launches a 2-rank run while rank 1 waits; the inner run's endings once went to
    # the outer run's record, so rank 0 then aborted a healthy run ("rank 1 finished").
    run = launch(2, HERE / "rank_nested.py", how, timeout=120)
    assert run.returncode == 0, run.describe()
    for r in range(2):
        assert f"inner rank {r} sum [3.0, 3.0, 3.0] own board True" in run.stdout, run.describe()
        assert f"outer rank {r} sum [20.0, 20.0]" in run.stdout, run.describe()
    assert "inner run exit 0" in run.stdout, run.describe()
