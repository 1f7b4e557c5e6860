"""Trajectory files: JSONL appended as trajectories finish, read back with one rule for every reader.

The rule: a file may hold several attempts of one id (a failed attempt and its retry, say); the
attempt that started last is the trajectory, in one file or across several (the shards of a run).
Only a torn last line (an interrupted write) is skipped; any other line that is not a trajectory
stops the reader with a message naming the file and line, so nothing vanishes silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from datalyst.agent._trajectory import Trajectory
from datalyst.jsonl import read_appended

_FIX = "restore the file or move the line out"


def read_trajectories(paths: str | Path | Iterable[str | Path]) -> list[Trajectory]:
    """The latest attempt of every trajectory id in ``paths`` (missing files hold none), in first-seen order."""
    chosen: dict[str, Trajectory] = {}
    for path in [paths] if isinstance(paths, str | Path) else paths:
        for trajectory in read_appended(Path(path), Trajectory, what="a trajectory", fix=_FIX):
            current = chosen.get(trajectory.id)
            if current is None or trajectory.started_at >= current.started_at:
                chosen[trajectory.id] = trajectory
    return list(chosen.values())


def finished_ids(paths: str | Path | Iterable[str | Path]) -> set[str]:
    """Ids whose latest attempt did not fail on our side: a resumed run skips these and retries the rest."""
    return {t.id for t in read_trajectories(paths) if not t.failed}
