"""What curation writes about a trajectory: a check's verdict, its stratum, and the kept record with its scores."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Trajectory
from datalyst.curate._overthinking import OVERTHINKING_VERSION

SCHEMA_VERSION = 1


class Decision(BaseModel):
    """A check's decision on one trajectory: kept, or dropped for a named reason."""

    model_config = ConfigDict(frozen=True)

    reason: str | None = None
    """The stable name of why it is dropped (one of its check's ``reasons``); None keeps it."""
    detail: str = ""
    """What the check saw, for people reading the dropped trajectories."""

    @property
    def kept(self) -> bool:
        return self.reason is None


KEEP = Decision()


class Check(Protocol):
    """A rule filter: ``check`` keeps a trajectory or names why it drops it."""

    name: str
    reasons: tuple[str, ...]
    """Every reason ``check`` can drop with, in the order funnels list them."""

    def check(self, trajectory: Trajectory) -> Decision: ...


class Stratum(StrEnum):
    """How a trajectory reached its end (Datarus's four kinds of training signal)."""

    SUCCESS = "success"
    """Right at the first attempt: no cell failed and nothing was corrected."""
    ERROR_CORRECTION = "error_correction"
    """A cell raised an error, and a later cell fixed it on the way to a right answer."""
    SELF_CORRECTION = "self_correction"
    """No cell failed, but the agent noticed a wrong intermediate result and corrected it."""
    PERSISTENT_FAILURE = "persistent_failure"
    """No right answer in the end."""


class Curated(BaseModel):
    """A trajectory kept by curation, with what was decided about it (read by exports and training)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    """The trajectory's id."""
    trajectory: Trajectory
    """Its task carries the answer it was judged against (for an unverified task, the agreed answer)."""
    selected_by: str
    """``ground_truth``, ``consistency``, ``expert`` or ``unfiltered`` (the ``non-con`` strategy)."""
    stratum: Stratum
    overthinking: float
    """Datarus's overthinking score, from 0 (concise) up; see ``curate.overthinking_score``."""
    overthinking_version: int = OVERTHINKING_VERSION
    """The version of the scorer that gave ``overthinking``."""
