"""The task record every stage shares: synthesis writes it, agents solve it, evaluation scores it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 1


class Task(BaseModel):
    """A question about one or more data files."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    question: str
    constraints: str = ""
    """How to compute the answer (methods, rounding, filters), when the question leaves it open."""
    format: str = ""
    """How to write the answer, e.g. ``@mean_fare[value] where value is rounded to 2 decimals``."""
    files: list[str] = []
    """Paths of the data files; the agent sees them under their base names."""
    category: str | None = None
    level: str | None = None
    concepts: list[str] = []
    source: str | None = None
    """Where the task comes from (a benchmark name, a synthesis run)."""
