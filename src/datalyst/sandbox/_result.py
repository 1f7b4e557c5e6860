"""What running a cell or a query gives back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CellError(BaseModel):
    """A Python exception raised by a cell (or a notice from the sandbox about the cell)."""

    model_config = ConfigDict(frozen=True)

    ename: str
    evalue: str
    traceback: str = ""
    missing_module: str | None = None
    """For ``ModuleNotFoundError``: the top-level module that could not be imported."""


class ExecResult(BaseModel):
    """The observation of one Python cell."""

    stdout: str = ""
    stderr: str = ""
    error: CellError | None = None
    timed_out: bool = False
    memory_exceeded: bool = False
    crashed: bool = False
    """The worker process died (signal, ``os._exit``, killed by a limit): its state is gone."""
    state_lost: bool = False
    """Variables from earlier cells are gone because the previous worker died."""
    truncated: bool = False
    """stdout or stderr was longer than ``Limits.max_output_chars`` and was cut in the middle."""
    duration_s: float = 0.0
    files_created: list[str] = []
    """Files created or modified by the cell, relative to the work folder (figures included)."""
    replay_mismatch: str = ""
    """Replay mode: why re-running the earlier cells did not reproduce them (empty when it did)."""

    @property
    def ok(self) -> bool:
        return self.error is None and not (self.timed_out or self.crashed)

    def render(self) -> str:
        """The observation as plain text, the way an agent reads it."""
        parts = []
        if self.state_lost:
            parts.append("[note] The previous worker died; variables from earlier cells are lost.")
        if self.replay_mismatch:
            parts.append(f"[note] {self.replay_mismatch}")
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append(self.stderr.rstrip("\n"))
        if self.error is not None:
            parts.append(self.error.traceback.rstrip("\n") or f"{self.error.ename}: {self.error.evalue}")
        if self.files_created:
            parts.append("[files] " + ", ".join(self.files_created))
        return "\n".join(parts) if parts else "[no output]"


class SqlResult(BaseModel):
    """The observation of one SQL query."""

    columns: list[str] = []
    n_rows: int = 0
    preview: str = ""
    output_path: str | None = None
    error: CellError | None = None
    timed_out: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out

    def render(self) -> str:
        if self.error is not None:
            return f"{self.error.ename}: {self.error.evalue}"
        saved = f", saved to {self.output_path}" if self.output_path else ""
        return f"{self.n_rows} rows{saved}\n{self.preview}".rstrip("\n")
