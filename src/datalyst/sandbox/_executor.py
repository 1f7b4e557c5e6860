"""What every stage codes against to run model-written code: the async protocol of one trajectory's sandbox."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from datalyst.sandbox._result import ExecResult, SqlResult


@runtime_checkable
class CodeExecutor(Protocol):
    """Runs the cells and queries of one trajectory, each within its limits, and never raises for what they do.

    ``isolation`` says what is enforced (namespaces, a private disk, seccomp, limits) or, where the sandbox runs
    degraded, what is not. Files the cells write are read by the host under ``host_workdir``. ``afork`` gives an
    independent executor in the same state (variables and files); ``aclose`` ends the worker and deletes the folder.
    :class:`~datalyst.sandbox.Sandbox`'s two backends, session and replay, implement it.
    """

    @property
    def isolation(self) -> str: ...

    @property
    def host_workdir(self) -> str: ...

    async def arun_python(self, code: str) -> ExecResult: ...

    async def arun_sql(self, sql: str, output_path: str | None = None, *, db: str | None = None) -> SqlResult: ...

    async def afork(self) -> CodeExecutor: ...

    async def aclose(self) -> None: ...
