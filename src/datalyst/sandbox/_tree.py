"""The processes of one jail, seen from the host: the CPU time they use, and stopping them between cells.

Everything here reads the host's ``/proc`` (or the jail's cgroup), so nothing the jail says is trusted.
A process counts as the jail's when it is the worker or descends from it
(``/proc/PID/task/TID/children``); with a PID namespace it must also be in the worker's, so a PID the
host reused for something else is never touched. Signals go through pidfds, so a process that exits
meanwhile cannot be mistaken for another.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from datalyst.sandbox import _cgroup as cgroup

_TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                found.extend(int(child) for child in f.read().split())
    return found


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


class JailProcesses:
    """The worker ``pid`` and everything it started (``namespaced``: the worker leads a PID namespace;
    ``cgroup``: the sandbox's own cgroup, where it has one)."""

    def __init__(self, pid: int, *, namespaced: bool, cgroup: str | None = None, limit: int = 4096) -> None:
        self.pid = pid
        self.cgroup = cgroup
        self.limit = limit
        self._namespace = _pid_namespace(pid) if namespaced else None

    def _members(self) -> Iterator[int]:
        """The worker first, then each process after its parent (at most ``limit``)."""
        queue, seen = [self.pid], 0
        while queue and seen < self.limit:
            pid = queue.pop(0)
            if self._namespace is not None and _pid_namespace(pid) != self._namespace:
                continue
            seen += 1
            yield pid
            queue.extend(_children(pid))

    def cpu_s(self) -> float:
        """CPU seconds the jail's processes have used: in a cgroup, all of them; otherwise those alive and
        those that exited and were waited for."""
        if self.cgroup is not None:
            return cgroup.cpu_usage_s(self.cgroup)
        ticks = 0
        for pid in self._members():
            with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
                ticks += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        return ticks / _TICKS

    def stop(self) -> None:
        """Stop every process of the jail (parents before children, so none can start another unseen)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        for pid in self._members():
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if self._namespace is None or _pid_namespace(pid) == self._namespace:  # still the one we saw
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(fd, signum)
            finally:
                os.close(fd)
