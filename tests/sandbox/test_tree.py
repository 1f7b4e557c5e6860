"""The host's view of a jail's processes: CPU time of the whole tree, and stopping it, on real processes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from datalyst.sandbox._tree import JailProcesses

# A parent that spins in a thread and has a child that spins too: CPU is used by two processes.
SPINNER = """
import subprocess, sys, threading
child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
print(child.pid, flush=True)
child.wait()
"""


@pytest.fixture
def spinner():
    proc = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    yield proc, child
    subprocess.run(["kill", "-CONT", str(proc.pid), str(child)], check=False)
    for pid in (child, proc.pid):
        subprocess.run(["kill", "-KILL", str(pid)], check=False)
    proc.wait()
    proc.stdout.close()


def _used_during(tree: JailProcesses, seconds: float) -> float:
    before = tree.cpu_s()
    time.sleep(seconds)
    return tree.cpu_s() - before


def _own_ticks(pid: int) -> int:
    """The CPU clock ticks of one process itself (utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        return sum(int(v) for v in f.read().rsplit(")", 1)[1].split()[11:13])


def _uses(tree: JailProcesses, cpu_s: float, within_s: float = 30.0) -> bool:
    """Whether the tree uses ``cpu_s`` more CPU seconds within ``within_s`` (however busy the machine is)."""
    target, deadline = tree.cpu_s() + cpu_s, time.monotonic() + within_s
    while tree.cpu_s() < target:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_cpu_of_every_process_of_the_tree_is_counted_and_stopping_stops_it(spinner):
    proc, child = spinner
    tree = JailProcesses(proc.pid, namespaced=False)
    assert sorted(tree._members()) == sorted([proc.pid, child])
    assert _uses(tree, 0.5)
    assert min(_own_ticks(pid) for pid in (proc.pid, child)) > 0  # both spun, and both are members
    tree.stop()
    time.sleep(0.1)  # a stop takes effect at the next scheduling point
    assert _used_during(tree, 1.0) < 0.05
    for pid in (proc.pid, child):
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "T"  # stopped
    tree.resume()
    assert _uses(tree, 0.5)


def test_processes_outside_the_namespace_are_never_touched(spinner):
    proc, _ = spinner
    tree = JailProcesses(proc.pid, namespaced=True)
    tree._namespace = "pid:[0]"  # as if the worker led a namespace these processes are not in
    assert list(tree._members()) == [] and tree.cpu_s() == 0.0
    tree.stop()
    with open(f"/proc/{proc.pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] != "T"
