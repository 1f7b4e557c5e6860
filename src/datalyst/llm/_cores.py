"""How many cores llama.cpp should use right now: all of this process's, less what other processes keep busy.

llama.cpp's threads wait for each other by spinning, so a pool with one thread more than the free cores
runs several times slower than one with a thread less. Sandboxed cells are other processes: while one
computes, generation steps down a thread, and takes it back when the cell is done.
"""

from __future__ import annotations

import os
import time

SAMPLE_S = 0.25
"""How often the machine's load is read again."""
PROC_STAT = "/proc/stat"


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot, summed over cores (Linux's ``/proc/stat``)."""
    with open(PROC_STAT) as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class FreeCores:
    """Call it before each step: the cores not taken by other processes (at least one, at most ``cores``;
    always ``cores`` where the machine's load cannot be read)."""

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self._free = cores
        self._watch = os.path.exists(PROC_STAT)
        self._at, self._own = time.monotonic(), time.process_time()
        self._busy = machine_busy_s() if self._watch else 0.0

    def __call__(self) -> int:
        now = time.monotonic()
        if not self._watch or now - self._at < SAMPLE_S:
            return self._free
        busy, own = machine_busy_s(), time.process_time()
        others = max(0.0, (busy - self._busy) - (own - self._own)) / (now - self._at)
        self._free = min(self.cores, max(1, round(self.cores - others)))
        self._at, self._busy, self._own = now, busy, own
        return self._free
