"""Run untrusted Python and SQL for one trajectory, isolated from the host, with limits.

See :class:`Sandbox` for the modes and ``docs/sandbox.md`` for what is isolated and how.
"""

from datalyst.sandbox._forkserver import ForkServer, default_forkserver
from datalyst.sandbox._install import DEFAULT_ALLOWLIST, PREINSTALLED, AutoInstaller
from datalyst.sandbox._limits import Limits
from datalyst.sandbox._paths import open_in_workdir
from datalyst.sandbox._pool import SandboxPool
from datalyst.sandbox._result import CellError, ExecResult, SqlResult
from datalyst.sandbox._sandbox import ForkWay, Mode, Sandbox
from datalyst.sandbox._screen import screen

__all__ = [
    "DEFAULT_ALLOWLIST",
    "PREINSTALLED",
    "AutoInstaller",
    "CellError",
    "ExecResult",
    "ForkServer",
    "ForkWay",
    "Limits",
    "Mode",
    "Sandbox",
    "SandboxPool",
    "SqlResult",
    "default_forkserver",
    "open_in_workdir",
    "screen",
]
