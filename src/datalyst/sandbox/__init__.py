"""Run untrusted Python and SQL for one trajectory, isolated from the host, with limits.

Stages code against :class:`CodeExecutor`; :class:`Sandbox` makes one of its two backends (:class:`SessionSandbox`,
:class:`ReplaySandbox`). ``docs/sandbox.md`` says what is isolated and how.
"""

from datalyst.sandbox._executor import CodeExecutor
from datalyst.sandbox._forkserver import ForkServer, default_forkserver
from datalyst.sandbox._install import PREINSTALLED, AutoInstaller
from datalyst.sandbox._limits import Limits
from datalyst.sandbox._paths import open_in_workdir
from datalyst.sandbox._pool import SandboxPool
from datalyst.sandbox._result import CellError, ExecResult
from datalyst.sandbox._sandbox import Mode, ReplaySandbox, Sandbox, SessionSandbox
from datalyst.sandbox._screen import screen

__all__ = [
    "PREINSTALLED",
    "AutoInstaller",
    "CellError",
    "CodeExecutor",
    "ExecResult",
    "ForkServer",
    "Limits",
    "Mode",
    "ReplaySandbox",
    "Sandbox",
    "SandboxPool",
    "SessionSandbox",
    "default_forkserver",
    "open_in_workdir",
    "screen",
]
