"""Resource limits for one trajectory's sandbox."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """What one cell (and one trajectory) may use. Every limit is enforced by the kernel or the watchdog."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(30.0, gt=0)
    """Wall-clock seconds per cell; the watchdog kills the whole sandbox when it runs out."""
    cpu_s: float = Field(30.0, gt=0)
    """CPU seconds per cell, its threads and processes together: a catchable error in the cell first,
    then, one second past it, the host stops the jail (measured from outside, so a cell cannot lift it)."""
    cpu_cores: float = Field(1.0, gt=0)
    """Cores' worth of CPU the whole sandbox may use at once (cgroup ``cpu.max``, where the machine delegates one)."""
    session_cpu_s: float = Field(3600.0, gt=0)
    """CPU seconds for the life of one worker process (the kernel's hard limit)."""
    memory_mb: int = Field(2048, ge=64)
    """Address space each process in the sandbox may add to what the preloaded libraries hold, in MiB; with a
    cgroup, also the memory of the whole sandbox (``memory.max``: this, plus what its tmpfs folders may hold)."""
    file_size_mb: int = Field(256, ge=1)
    """Largest file a cell may write, in MiB."""
    open_files: int = Field(256, ge=32)
    """Open file descriptors per process."""
    processes: int = Field(64, ge=4)
    """Processes and threads alive at once inside the sandbox (with a cgroup, ``pids.max`` too)."""
    disk_mb: int = Field(1024, ge=1)
    """What cells may write to the work folder, in MiB, on top of the staged data files (a private
    memory-backed filesystem, so a trajectory cannot fill the host's disk)."""
    tmp_mb: int = Field(64, ge=1)
    """Size of the private ``/tmp`` and, separately, ``/dev/shm`` (memory-backed) inside the sandbox, in MiB."""
    max_output_chars: int = Field(20_000, ge=200)
    """Characters of stdout (and, separately, stderr) kept per cell: the head and the tail, half each."""
    sql_timeout_s: float = Field(30.0, gt=0)
    """Seconds one SQL query may run before it is interrupted."""
