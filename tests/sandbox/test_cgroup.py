"""Cgroup v2 per sandbox: the limits written, taking over a delegated cgroup, and real sandboxes in cgroups.

The real-sandbox tests name the cgroup this process runs in as ``DATALYST_CGROUP`` where this user
may write to it (here: root, on the hierarchy's root, where no controller is delegated, so they check
placement, accounting, clean-up and the kill of escaped processes; the limits themselves are checked
as the values written).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from datalyst.sandbox import ForkServer, Limits, Sandbox
from datalyst.sandbox import _cgroup as cgroup

LIMITS = Limits(wall_s=20, cpu_s=15, tmp_mb=8)
WAIT_S = 10.0
"""Bound on waiting for the kernel to end a process (a failure bound, not a timing check)."""


OWN = cgroup.own_cgroup()
needs_cgroups = pytest.mark.skipif(
    OWN is None or not isinstance(cgroup.find_parent(set(), OWN), cgroup.Parent),
    reason="no writable cgroup v2 tree on this machine",
)


@pytest.fixture(scope="module")
def server():
    """A fork server told to make sandbox cgroups below this process's own cgroup."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(cgroup.ENV, str(OWN))
        fs = ForkServer()
        fs.ensure_run_root()
    yield fs
    fs.close()


# ---------------------------------------------------------------- the values written


def test_limits_become_whole_sandbox_cgroup_limits():
    limits = Limits().model_dump()  # memory 2048 MiB, disk 1024 MiB, /tmp and /dev/shm 64 MiB each
    assert cgroup.limit_values(limits, ("memory", "pids", "cpu")) == {
        "memory.max": str((2048 + 1024 + 64 + 64) * 1024 * 1024),
        "memory.swap.max": "0",
        "pids.max": "65",  # 64 processes and the monitor
        "cpu.max": "100000 100000",  # one core
    }
    half = Limits(cpu_cores=0.5, processes=10).model_dump()
    assert cgroup.limit_values(half, ("pids", "cpu")) == {"pids.max": "11", "cpu.max": "50000 100000"}
    assert cgroup.limit_values(half, ()) == {}


# ---------------------------------------------------------------- taking over a delegated cgroup


def _fake_cgroup(tmp_path: Path, procs: str, controllers: str = "cpuset cpu io memory pids") -> Path:
    """A folder shaped like a non-root cgroup v2 (the kernel's rules themselves are not emulated)."""
    for name, text in {
        "cgroup.type": "domain\n",
        "cgroup.controllers": controllers + "\n",
        "cgroup.procs": procs,
        "cgroup.subtree_control": "",
    }.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_delegated_cgroup_holding_only_ours_is_taken_over(tmp_path):
    path = _fake_cgroup(tmp_path, "10\n11\n")
    parent = cgroup.adopt(str(path), {10, 11, 12})
    assert isinstance(parent, cgroup.Parent) and parent.path == str(path)
    assert (path / cgroup.HOST_LEAF / "cgroup.procs").read_text() == "12"  # each PID written in turn
    assert (path / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"


def test_a_cgroup_shared_with_other_programs_or_without_controllers_is_left_alone(tmp_path):
    shared = _fake_cgroup(tmp_path, "10\n99\n")
    assert "1 other program" in cgroup.adopt(str(shared), {10})
    bare = _fake_cgroup(tmp_path, "10\n", controllers="cpuset io")
    assert "none of the memory, pids, cpu controllers" in cgroup.adopt(str(bare), {10})
    assert not (tmp_path / cgroup.HOST_LEAF).exists()
    assert (tmp_path / "cgroup.subtree_control").read_text() == ""


def test_a_host_already_in_its_leaf_reuses_the_parent(tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    leaf = tmp_path / cgroup.HOST_LEAF
    leaf.mkdir()
    assert cgroup.adopt(str(leaf), {1}) == cgroup.Parent(str(tmp_path), ("memory", "pids"))


def test_an_unusable_explicit_cgroup_is_explained(tmp_path):
    assert "not writable" in cgroup.find_parent(set(), str(tmp_path / "missing"))


def test_a_parent_without_controllers_is_used_only_when_named(tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("io\n")
    (tmp_path / "cgroup.procs").write_text("")
    assert cgroup.find_parent(set(), str(tmp_path)) == cgroup.Parent(str(tmp_path), ())
    leaf = tmp_path / cgroup.HOST_LEAF
    leaf.mkdir()
    assert "hands its children none of the memory, pids, cpu controllers" in cgroup.adopt(str(leaf), {1})


# ---------------------------------------------------------------- real sandboxes


def _cgroup_of(pid: int) -> str:
    return next(line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@needs_cgroups
def test_each_sandbox_has_a_cgroup_that_counts_all_its_cpu_and_goes_with_it(server):
    with (
        Sandbox(limits=LIMITS, screen_code=False, forkserver=server) as first,
        Sandbox(limits=LIMITS, forkserver=server) as second,
    ):
        assert "a cgroup of its own" in first.isolation and "a cgroup of its own" in second.isolation
        worker = first._worker
        assert worker is not None and worker.cgroup is not None and os.path.isdir(worker.cgroup)
        assert second._worker is not None and second._worker.cgroup != worker.cgroup
        assert _cgroup_of(worker.pid).endswith("/" + os.path.basename(worker.cgroup))
        inside = first.run_python("print(open('/proc/self/cgroup').read().splitlines()[-1])")
        assert inside.stdout == "0::/\n", inside.render()  # its own cgroup namespace: the host's tree is hidden
        before = worker.processes.cpu_s()
        # A child that burns CPU and is never waited for: per-process accounting would lose it.
        spun = first.run_python(
            "import os, time\n"
            "if os.fork() == 0:\n"
            "    end = time.process_time() + 0.5\n"
            "    while time.process_time() < end: pass\n"
            "    os._exit(0)\n"
            "time.sleep(1.5)\n"
        )
        assert spun.error is None, spun.render()
        assert worker.processes.cpu_s() - before >= 0.4
        path = worker.cgroup
    deadline = time.monotonic() + WAIT_S
    while os.path.isdir(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.isdir(path), "the sandbox's cgroup outlived it"


@needs_cgroups
def test_without_namespaces_the_cgroup_still_ends_processes_that_left_the_session(server):
    options = {"screen_code": False, "use_namespaces": False, "require_isolation": False, "forkserver": server}
    with Sandbox(limits=LIMITS, **options) as sb:
        assert "a cgroup of its own" in sb.isolation
        result = sb.run_python(
            "import subprocess\nprint(subprocess.Popen(['sleep', '600'], start_new_session=True).pid)"
        )
        escaped = int(result.stdout)
        assert os.path.exists(f"/proc/{escaped}")
    assert _gone(escaped), "a process that left the worker's session outlived the sandbox"
