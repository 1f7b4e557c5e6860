"""The settings of an evaluation run, stored as its ``config.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from datalyst.agent import AgentConfig
from datalyst.llm import SamplingParams
from datalyst.search import INFER, MCTSConfig
from datalyst.tasks import Split, StratifyBy

EVAL_SAMPLING = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=1024, seed=0)
"""DataMind's test-time sampling (temperature 0.7, top-p 0.95), seeded so a run can be replayed."""


FREE_TO_CHANGE = {"concurrency", "reformat_model", "completion_cache"}
"""Settings a resumed run may change."""


class EvalConfig(BaseModel):
    """What an evaluation run is: the benchmark slice, the model, the dialects and the agent settings."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    bench: str
    """Benchmark: dabench, tablebench, bird, humaneval or tasks (a task file of ours)."""
    bench_path: str | None = None
    """Benchmark file or folder (DABench defaults to the shared copy)."""
    split: Split | None = None
    """``dev``: the benchmark's development subset, on which every choice is made; ``test``: the rest, run only
    to record a result (``datalyst.tasks.DEV_SUBSETS``). None: the whole benchmark, or ``subset``."""
    subset: int | None = Field(None, ge=1)
    """Evaluate a stratified subset of this many tasks."""
    seed: int = 0
    """Seed of the subset and of sampling (``agent.sampling.seed``)."""
    stratify_by: StratifyBy = "level"
    """Strata of the subset: level or category."""
    model: str
    """Model spec, e.g. embedded:small, openai:NAME@URL."""
    dialects: list[str] = Field(default=["datamind"], json_schema_extra={"flag": "--dialect"})
    """Turn format (datamind, jupiter, datarus; program for programming tasks such as humaneval); repeat for
    several."""
    strategy: Literal["react", "vote", "mcts"] = "react"
    """How each trial answers: react (one trajectory), vote (the majority of ``votes``) or mcts (a tree search)."""
    votes: int = Field(5, ge=1)
    """vote: trajectories sampled per answer."""
    search: MCTSConfig = Field(INFER, json_schema_extra={"label": "mcts"})
    value_model: str | None = None
    """mcts: a value model (``datalyst train value``) that values the search's states."""
    trials: int = Field(3, ge=1)
    """Runs per task (pass@1 averages them, pass@k takes the best)."""
    agent: AgentConfig = AgentConfig(sampling=EVAL_SAMPLING)
    concurrency: int = Field(1, ge=1)
    """Trajectories at once (1 suits one in-process model: its prompt cache follows one conversation)."""
    completion_cache: str | None = None
    """A folder of completions (``datalyst.llm.CachedModel``): a greedy or seeded call the model answered before,
    on the same conversation, is answered from it. Runs that differ from an earlier one only after some turns
    (a scaffold change) then share its start, and only their differences are computed; their time figures count
    only the calls not found there."""
    judge_model: str | None = None
    """Model spec of the judge for tasks judged by a model."""
    reformat_model: str | None = None
    """DABench: the model that rewrites each answer into the question's ``@name[value]`` format before the
    official scorer reads it (the official protocol; reports give raw and reformatted figures). None: raw only."""

    @model_validator(mode="after")
    def _one_slice(self) -> EvalConfig:
        if self.split is not None and self.subset is not None:
            raise ValueError("a split is a fixed set of tasks; give --split or --subset, not both")
        return self

    def changed_settings(self, other: EvalConfig) -> list[str]:
        """The settings in which ``other`` makes different trajectories or outcomes (not how fast it runs, nor
        the reformat model, whose reformatted answers are kept apart by model)."""
        mine, theirs = self.model_dump(exclude=FREE_TO_CHANGE), other.model_dump(exclude=FREE_TO_CHANGE)
        return [name for name, value in mine.items() if theirs[name] != value]
