"""Cgroup v2 bounds on whole sandboxes, where the machine lets datalyst manage a cgroup tree.

Each sandbox gets a cgroup of its own that holds its monitor, and so its worker and everything the
worker starts: ``memory.max``, ``pids.max`` and ``cpu.max`` bound the trajectory as a whole (pages of
its tmpfs folders count as its memory), ``cpu.stat`` counts the CPU time of all its processes, exited
ones included, and what is left in it when the sandbox ends is killed.

The parent is ``$DATALYST_CGROUP`` when set (a cgroup prepared for datalyst, with the controllers
enabled in its ``cgroup.subtree_control``; used even with none). Otherwise it is the cgroup the host
runs in, if this process may write to it, it hands children at least one of the controllers (moving
a process into a cgroup costs an RCU grace period, 6-20 ms, so it is paid only where it bounds
something), and it is the hierarchy's root or a delegated cgroup that holds nothing but the host and
its fork server (``systemd-run --user -p Delegate=yes ...``, or a container whose only program is
datalyst): those then move into a leaf, ``datalyst-host``, because cgroup v2 lets a cgroup hand
controllers to its children only while it holds no process itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass

ENV = "DATALYST_CGROUP"
CONTROLLERS = ("memory", "pids", "cpu")
HOST_LEAF = "datalyst-host"
_PERIOD_US = 100_000


@dataclass(frozen=True)
class Parent:
    """Where sandbox cgroups are made, and which of ``CONTROLLERS`` they get."""

    path: str
    controllers: tuple[str, ...]


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def own_cgroup(pid: int | str = "self") -> str | None:
    """The folder of ``pid``'s cgroup v2 (None where no cgroup2 hierarchy is mounted)."""
    relative = next((line[3:] for line in _read(f"/proc/{pid}/cgroup").splitlines() if line.startswith("0::")), None)
    if relative is None:
        return None
    for line in _read("/proc/self/mountinfo").splitlines():
        before, _, after = line.partition(" - ")
        fields = before.split()
        if after.split()[:1] == ["cgroup2"] and (relative + "/").startswith(fields[3].rstrip("/") + "/"):
            return os.path.join(fields[4], relative[len(fields[3].rstrip("/")) :].lstrip("/")).rstrip("/")
    return None


def _controllers_in(path: str, listing: str) -> tuple[str, ...]:
    """Which of ``CONTROLLERS`` the cgroup at ``path`` names in its file ``listing``."""
    named = _read(os.path.join(path, listing)).split()
    return tuple(c for c in CONTROLLERS if c in named)


def _enabled(path: str) -> tuple[str, ...]:
    """The controllers the cgroup at ``path`` hands its children."""
    return _controllers_in(path, "cgroup.subtree_control")


def find_parent(ours: set[int], explicit: str | None = None) -> Parent | str:
    """The parent for sandbox cgroups, or why there is none. ``ours``: the PIDs that may share the
    host's cgroup (the host, the fork server and its helpers); ``explicit``: ``$DATALYST_CGROUP``."""
    try:
        path = explicit or own_cgroup()
        if path is None:
            return "no cgroup v2 hierarchy is mounted"
        if not os.access(os.path.join(path, "cgroup.procs"), os.W_OK) or not os.access(path, os.W_OK):
            return f"the cgroup {path} is not writable by this user" + ("" if explicit else f"; set {ENV}")
        if explicit:
            return Parent(path, _enabled(path))
        if os.path.exists(os.path.join(path, "cgroup.type")):  # not the root
            return adopt(path, ours)
        return _with_controllers(Parent(path, _enabled(path)))
    except OSError as exc:
        return f"cgroup set-up failed ({exc.strerror or exc})"


def adopt(path: str, ours: set[int]) -> Parent | str:
    """Make the host's own delegated cgroup at ``path`` the parent, moving ``ours`` into a leaf below it; or
    say why it cannot be (it holds other programs, or has none of the controllers). OSError on a failed write."""
    if os.path.basename(path) == HOST_LEAF:  # an earlier fork server of this host set the parent up
        return _with_controllers(Parent(os.path.dirname(path), _enabled(os.path.dirname(path))))
    available = _controllers_in(path, "cgroup.controllers")
    if not available:
        return f"the cgroup {path} was given none of the {', '.join(CONTROLLERS)} controllers"
    others = {int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()} - ours
    if others:
        return f"the cgroup {path} holds {len(others)} other program(s); give datalyst one of its own ({ENV})"
    leaf = os.path.join(path, HOST_LEAF)
    os.makedirs(leaf, exist_ok=True)
    for pid in sorted(ours):
        with contextlib.suppress(ProcessLookupError):
            _write(os.path.join(leaf, "cgroup.procs"), str(pid))
    _write(os.path.join(path, "cgroup.subtree_control"), " ".join(f"+{c}" for c in available))
    return Parent(path, _enabled(path))


def _with_controllers(parent: Parent) -> Parent | str:
    if parent.controllers:
        return parent
    return f"the cgroup {parent.path} hands its children none of the {', '.join(CONTROLLERS)} controllers"


def limit_values(limits: dict[str, float], controllers: tuple[str, ...]) -> dict[str, str]:
    """The files to write in a sandbox's cgroup for ``Limits`` (as a dict), given the controllers it has."""
    values: dict[str, str] = {}
    if "memory" in controllers:  # the cells' own memory plus what they may write to the tmpfs folders
        megabytes = limits["memory_mb"] + limits["disk_mb"] + 2 * limits["tmp_mb"]
        values |= {"memory.max": str(int(megabytes) << 20), "memory.swap.max": "0"}
    if "pids" in controllers:
        values["pids.max"] = str(int(limits["processes"]) + 1)  # and the monitor
    if "cpu" in controllers:
        values["cpu.max"] = f"{round(limits['cpu_cores'] * _PERIOD_US)} {_PERIOD_US}"
    return values


def create(parent: Parent, name: str, limits: dict[str, float]) -> str:
    """Make a sandbox's cgroup below ``parent`` with its limits written; its path."""
    path = os.path.join(parent.path, name)
    os.mkdir(path)
    try:
        for key, value in limit_values(limits, parent.controllers).items():
            if os.path.exists(os.path.join(path, key)):  # memory.swap.max is absent where swap is not accounted
                _write(os.path.join(path, key), value)
    except OSError:
        remove(path)
        raise
    return path


def enter(path: str) -> None:
    """Move the calling process into the cgroup at ``path``."""
    _write(os.path.join(path, "cgroup.procs"), "0")


def remove(path: str) -> bool:
    """Kill what is left in the cgroup and delete it; False while it cannot be deleted yet."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return False
        with contextlib.suppress(OSError):
            _write(os.path.join(path, "cgroup.kill"), "1")
        time.sleep(0.002)
    return False


def cpu_usage_s(path: str) -> float:
    """CPU seconds used by every process that was ever in the cgroup."""
    for line in _read(os.path.join(path, "cpu.stat")).splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise OSError(f"{path}/cpu.stat has no usage_usec")


def describe(path: str) -> str:
    """What the cgroup at ``path`` bounds, read back from the kernel."""
    shown: list[str] = []
    for key in ("memory.max", "pids.max", "cpu.max"):
        with contextlib.suppress(OSError):
            value = _read(os.path.join(path, key)).split()
            if value[0] == "max":
                continue
            if key == "memory.max":
                shown.append(f"memory.max {int(value[0]) >> 20} MiB")
            elif key == "cpu.max":
                shown.append(f"cpu.max {int(value[0]) / int(value[1]):g} core(s)")
            else:
                shown.append(f"{key} {value[0]}")
    return f"a cgroup of its own ({', '.join(shown) or 'CPU accounting only: no controllers delegated'})"
