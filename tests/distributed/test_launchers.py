"""Worlds formed from OneFlow's launcher variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
LOCAL_RANK) by processes started one by one, OneFlow's launcher module, and flow-run --hosts:
data-parallel training equals numpy's and one process's. Two network namespaces joined by a veth
pair stand in for two machines, MPI over TCP between them."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest
from conftest import HERE, run_command

SCRIPT = HERE / "rank_launchers.py"
TCP = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}  # MPI over TCP between namespaces


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _clean_env(**extra: str) -> dict[str, str]:
    names = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.setdefault("FLOW_COLLECTIVE_TIMEOUT", "60")
    return {**env, **extra}


def _start_ranks(size: int, addr: str, port: int, argv: list[str], prefix=None, envs=None,
                 timeout: float = 120.0) -> list[tuple[int, str, str]]:  # fmt: skip
    """Start ``size`` processes of ``argv`` one by one, as another launcher would; (exit code,
    stdout, stderr) of each. ``prefix(rank)``: a command to run each under; ``envs[rank]``:
    variables that replace the launcher's."""
    procs = []
    for rank in range(size):
        env = _clean_env(MASTER_ADDR=addr, MASTER_PORT=str(port), WORLD_SIZE=str(size),
                         RANK=str(rank), LOCAL_RANK=str(rank), **TCP)  # fmt: skip
        env.update((envs or {}).get(rank, {}))
        cmd = [*(prefix(rank) if prefix else []), *argv]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, start_new_session=True))  # fmt: skip
    out = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            o, e = p.communicate(timeout=max(deadline - time.monotonic(), 1.0))
            out.append((p.returncode, o, e))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    return out


def _losses(text: str) -> dict[int, tuple[int, str, str]]:
    """rank -> (world, host, losses) from rank_launchers.py's lines."""
    found = re.findall(r"rank (\d+): world=(\d+) host=(\S+) losses=([\d. ]+)\n", text)
    return {int(r): (int(w), h, loss.strip()) for r, w, h, loss in found}


@pytest.fixture(scope="module")
def one_process():
    """The losses of the same training in one process (no launcher)."""
    run = run_command([sys.executable, str(SCRIPT)], timeout=120, env=_clean_env())
    assert run.returncode == 0 and "rank 0: " in run.stdout, run.describe()
    return _losses(run.stdout)[0][2]


def test_env_world_of_two_processes_trains_like_one(one_process):
    """Two processes started separately with OneFlow's variables form one world: each rank's
    part of the batch, gradients all-reduced, the losses and parameters of numpy and of one
    process (they failed before with 'ranks [1] of [0, 1] are outside the world of 1')."""
    results = _start_ranks(2, "127.0.0.1", _free_port(), [sys.executable, str(SCRIPT)])
    text = "".join(o for _, o, _ in results)
    for rc, o, e in results:
        assert rc == 0, f"{o}\n{e}"
    assert sorted(re.findall(r"rank (\d): 10 checks passed", text)) == ["0", "1"], text
    ranks = _losses(text)
    assert sorted(ranks) == [0, 1] and all(w == 2 for w, _, _ in ranks.values()), text
    assert all(loss == one_process for _, _, loss in ranks.values()), (text, one_process)


def test_env_world_rank_env_and_world_of_one():
    port = _free_port()
    results = _start_ranks(2, "127.0.0.1", port, [sys.executable, str(HERE / "rank_env.py")])
    text = "".join(o for _, o, _ in results)
    assert sorted(re.findall(r"rank=(\d) size=2 local_rank=(\d) nodes=1 distributed=True", text)
                  ) == [("0", "0"), ("1", "1")], text  # fmt: skip
    assert text.count("pmi_size_hidden=True") == 2, text
    # WORLD_SIZE=1: as without a launcher, MPI never imported
    code = "import sys, flow.env; print(flow.env.get_world_size(), 'mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_clean_env(WORLD_SIZE="1", RANK="0", MASTER_ADDR="127.0.0.1",
                                        MASTER_PORT=str(port)), timeout=60)  # fmt: skip
    assert out.stdout.split() == ["1", "False"], out.stderr


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
     "RANK=2 is outside the world of WORLD_SIZE=2"),
    ({"WORLD_SIZE": "2", "RANK": "1"}, "MASTER_ADDR, MASTER_PORT are not set"),
    ({"WORLD_SIZE": "two", "RANK": "0"}, "WORLD_SIZE='two': expected an integer"),
    ({"RANK": "1"}, "RANK=1 is set but WORLD_SIZE is not"),
])  # fmt: skip
def test_inconsistent_variables_are_clear_errors(env, message):
    out = subprocess.run([sys.executable, "-c", "import flow.env"], capture_output=True,
                         text=True, env=_clean_env(**env), timeout=60)  # fmt: skip
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def test_ranks_disagreeing_on_world_size_fail_clearly():
    bound = {"FLOW_COLLECTIVE_TIMEOUT": "30"}  # a wait that went wrong ends, and says so
    results = _start_ranks(2, "127.0.0.1", _free_port(), [sys.executable, "-c", "import flow"],
                           envs={0: bound, 1: {**bound, "WORLD_SIZE": "3"}}, timeout=90)  # fmt: skip
    for rc, _, err in results:
        assert rc == 1, err
        assert "rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2" in err, err


@pytest.mark.parametrize("missing", [0, 1])
def test_missing_peer_is_a_bounded_clear_error(missing):
    port = _free_port()
    env = _clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                     RANK=str(1 - missing), FLOW_COLLECTIVE_TIMEOUT="3")  # fmt: skip
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", "import flow.env"], capture_output=True,
                         text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 1, out.stderr
    want = "ranks [1] of WORLD_SIZE=2, which never connected" if missing else "found no rank 0"
    assert want in out.stderr and "FLOW_COLLECTIVE_TIMEOUT" in out.stderr, out.stderr
    assert time.monotonic() - start < 50, "the wait was not bounded"


def test_oneflow_launcher_module_starts_an_env_world(one_process):
    """python -m flow.distributed.launch with OneFlow's options sets the variables and starts
    the processes itself (no mpiexec): they form their world from the variables."""
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc_per_node", "2",
           "--master_port", str(_free_port()), str(SCRIPT)]  # fmt: skip
    run = run_command(cmd, timeout=120, env=_clean_env())
    assert run.checks_passed(2) == 10, run.describe()
    assert all(loss == one_process for _, _, loss in _losses(run.stdout).values()), run.stdout
    assert not run.left_behind, run.describe()


def test_oneflow_launcher_module_stops_the_others_when_one_fails(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys, flow.env\nif flow.env.get_rank() == 1:\n    sys.exit(4)\n"
                      "flow.env.barrier()\n")  # fmt: skip
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc_per_node", "2",
           "--master_port", str(_free_port()), str(script)]  # fmt: skip
    run = run_command(cmd, timeout=60, env=_clean_env())
    # Either the launcher sees rank 1's exit first and stops rank 0, or rank 1's MPI_Finalize
    # waits for rank 0 (connected processes finalise together) and rank 0 sees rank 1 gone
    # and ends the run: both name rank 1 and stop the others.
    assert run.returncode != 0, run.describe()
    assert ("rank 1 exited with code 4" in run.stderr
            or "ranks not arrived: [1], and they never will" in run.stderr), run.describe()
    assert "stopping the other ranks" in run.stderr and not run.left_behind, run.describe()


# --------------------------------------------------------------------------- two "machines"


@pytest.fixture(scope="module")
def two_hosts():
    """Two network namespaces joined by a veth pair: (address, namespace) of each."""
    tag = f"{os.getpid() % 100000}"
    net = f"10.213.{os.getpid() % 250}"
    names = [f"flowt{tag}a", f"flowt{tag}b"]
    veth = [f"fv{tag}a", f"fv{tag}b"]
    hosts = [(f"{net}.1", names[0]), (f"{net}.2", names[1])]
    ip = shutil.which("ip")
    steps = [["netns", "add", names[0]], ["netns", "add", names[1]],
             ["link", "add", veth[0], "type", "veth", "peer", "name", veth[1]]]  # fmt: skip
    for (addr, ns), dev in zip(hosts, veth):
        steps += [["link", "set", dev, "netns", ns], ["-n", ns, "addr", "add", f"{addr}/24",
                  "dev", dev], ["-n", ns, "link", "set", dev, "up"],
                  ["-n", ns, "link", "set", "lo", "up"]]  # fmt: skip
    try:
        if ip is None:
            raise OSError("no `ip` command")
        for step in steps:
            done = subprocess.run([ip, *step], capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise OSError(f"ip {' '.join(step)}: {done.stderr.strip()}")
    except OSError as err:
        for ns in names:
            subprocess.run([ip or "ip", "netns", "del", ns], capture_output=True)
        reason = f"network namespaces unavailable here ({err})"
        print(reason)
        pytest.skip(reason)
    try:
        yield hosts
    finally:
        for ns in names:
            subprocess.run([ip, "netns", "del", ns], capture_output=True, timeout=30)


def test_env_world_across_two_hosts(two_hosts, one_process):
    (addr0, ns0), (addr1, ns1) = two_hosts
    probe = addr0.rsplit(".", 1)[0] + ".9"
    results = _start_ranks(2, addr0, _free_port(), [sys.executable, str(SCRIPT), probe],
                           prefix=lambda r: ["ip", "netns", "exec", (ns0, ns1)[r]],
                           envs={1: {"LOCAL_RANK": "0"}})  # fmt: skip
    text = "".join(o for _, o, _ in results)
    for rc, o, e in results:
        assert rc == 0, f"{o}\n{e}"
    ranks = _losses(text)
    assert {r: h for r, (_, h, _) in ranks.items()} == {0: addr0, 1: addr1}, text
    assert all(loss == one_process for _, _, loss in ranks.values()), (text, one_process)


def test_flow_run_hosts_across_two_hosts(two_hosts, one_process):
    (addr0, ns0), (addr1, ns1) = two_hosts
    probe = addr0.rsplit(".", 1)[0] + ".9"
    flow_run = [sys.executable, "-m", "flow.tools.run", "--hosts", f"{addr0},{addr1}",
                "--launcher-exec", str(HERE / "netns_ssh.sh"), str(SCRIPT), probe]  # fmt: skip
    env = _clean_env(FLOW_TEST_NETNS=f"{addr0}={ns0},{addr1}={ns1}", **TCP)
    run = run_command(["ip", "netns", "exec", ns0, *flow_run], timeout=120, env=env)
    assert run.checks_passed(2) == 10, run.describe()
    ranks = _losses(run.stdout)
    assert {r: h for r, (_, h, _) in ranks.items()} == {0: addr0, 1: addr1}, run.describe()
    assert all(loss == one_process for _, _, loss in ranks.values()), run.describe()
