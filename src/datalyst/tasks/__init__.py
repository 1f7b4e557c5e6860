"""Tasks: the shared record of a question about data files."""

from datalyst.tasks._task import SCHEMA_VERSION, Task

__all__ = ["SCHEMA_VERSION", "Task"]
