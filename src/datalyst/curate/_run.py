"""A curation run folder: how its trajectories were made, and where every stage writes.

``RUN/run.json`` records how the trajectories of ``RUN/samples.jsonl`` are made (a model sampling, or
the offline expert), so later stages (reflection, exports) need no repeated options. Each stage
appends to its own file and records its settings and counts beside it (``<file>.manifest.json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from datalyst.agent import AgentConfig, Trajectory, finished_ids, read_trajectories
from datalyst.curate._expert import ExpertOptions
from datalyst.errors import ConfigError, DataFileError
from datalyst.files import write_atomic
from datalyst.jsonl import drop_torn_tail


class RunConfig(BaseModel):
    """How a run's trajectories are made."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    source: Literal["sample", "expert", "corrections", "search"]
    tasks: list[str]
    """The task files (JSONL) the trajectories answer."""
    model: str
    """The model spec that samples (``expert`` for the offline expert)."""
    agent: AgentConfig
    n: int | None = Field(1, ge=1)
    """Trajectories per task and round (DataMind samples 3). None when a task has as many as were found (the
    answered paths of search trees, ``source="search"``), all of them one group."""
    knowledge: bool = False
    """Put the category's workflow in the prompt (DataMind's sampling). The exports leave it out, so a kept run is
    then not exactly what the model read."""
    workflows: dict[str, str] = {}
    """Refined workflows by category name, used instead of the taxonomy's."""
    expert: ExpertOptions | None = None
    """How the offline expert plays (``source="expert"``)."""
    guide: str | None = None
    """The model that explains failing programs (``source="corrections"``, ``curate sequences``)."""
    rounds: int | None = None
    """Corrections a chain may make (``source="corrections"``)."""
    seed: int = 0
    """Seed of sampling and of the drawn tasks."""


class RunFolder:
    """The files of one run, under ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config_path = self.path / "run.json"
        self.samples = self.path / "samples.jsonl"
        self.verdicts = self.path / "verdicts.jsonl"
        self.kept = self.path / "kept.jsonl"
        self.dropped = self.path / "dropped.jsonl"
        self.exports = self.path / "exports"
        self.report = self.path / "report"

    def start(self, config: RunConfig) -> RunConfig:
        """Create the folder for ``config``, or resume it: a folder made with other settings is refused, and
        workflows refined in it (``curate refine``) are kept. Returns the run's configuration."""
        if self.config_path.exists():
            old = self.config()
            if old.model_dump(exclude={"workflows"}) != config.model_dump(exclude={"workflows"}):
                raise ConfigError(
                    f"{self.path} holds a run with other settings ({self.config_path}); resume it with the same "
                    "options or choose a new --out folder"
                )
            config = config.model_copy(update={"workflows": {**old.workflows, **config.workflows}})
        self.path.mkdir(parents=True, exist_ok=True)
        self.save(config)
        return config

    def save(self, config: RunConfig) -> None:
        write_atomic(self.config_path, config.model_dump_json(indent=2))

    def config(self) -> RunConfig:
        if not self.config_path.exists():
            raise DataFileError(
                f"{self.path} is not a curation run (no run.json); make one with `datalyst curate sample` or "
                "`datalyst curate expert`"
            )
        try:
            return RunConfig.model_validate(json.loads(self.config_path.read_text(encoding="utf-8")))
        except (ValueError, ValidationError) as exc:
            raise DataFileError(f"{self.config_path} is not a run configuration ({exc}); restore it") from None

    def trajectories(self) -> list[Trajectory]:
        """Every trajectory of the run (the latest attempt of each id), in the order they were first written."""
        return read_trajectories(self.samples)

    def add(self, trajectories: Iterable[Trajectory]) -> int:
        """Append the ``trajectories`` whose ids the run does not hold yet; returns how many were new."""
        drop_torn_tail(self.samples)
        have = finished_ids(self.samples)
        new = [trajectory for trajectory in trajectories if trajectory.id not in have]
        with self.samples.open("a", encoding="utf-8") as sink:
            sink.writelines(trajectory.model_dump_json() + "\n" for trajectory in new)
        return len(new)
