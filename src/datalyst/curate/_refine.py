"""``curate refine``: finer workflows for the categories whose samples rarely pass (DataMind's refinement).

Self-consistency favours easy questions, whose answers coincide more often. For each category whose
tasks passed the check (round 0) less often than ``below``, a model rewrites the category's workflow
as finer steps; the run keeps them (``RunConfig.workflows``), so its reflections and any further
sampling use them. The file is plain JSON: edit the steps by hand if the model wrote poor ones.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel

from datalyst.curate._guidance import refine_workflow
from datalyst.curate._judge import read_group_verdicts
from datalyst.curate._run import RunFolder
from datalyst.errors import ConfigError
from datalyst.llm import ChatModel
from datalyst.synth import category


class CategoryRate(BaseModel):
    tasks: int
    passed: int

    @property
    def rate(self) -> float:
        return self.passed / self.tasks if self.tasks else 0.0


def category_pass_rates(run: RunFolder) -> dict[str, CategoryRate]:
    """Per category of the taxonomy: tasks judged in round 0, and how many passed."""
    categories = {t.task.id: t.task.category for t in run.trajectories()}
    counts: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for verdict in read_group_verdicts(run):
        name = categories.get(verdict.task_id)
        if verdict.round == 0 and name:
            counts[name][0] += 1
            counts[name][1] += verdict.passed
    return {name: CategoryRate(tasks=t, passed=p) for name, (t, p) in sorted(counts.items())}


async def refine_run(run: RunFolder, model: ChatModel, *, below: float = 0.5, min_tasks: int = 3) -> dict[str, str]:
    """Refine the workflow of every category passing less often than ``below`` (over ``min_tasks`` tasks or
    more) and save them in the run; returns the new workflows by category."""
    if not 0 < below <= 1:
        raise ConfigError(f"--below {below}: give a pass rate between 0 and 1")
    config = run.config()
    low = [name for name, rate in category_pass_rates(run).items() if rate.tasks >= min_tasks and rate.rate < below]
    refined = {}
    for name in low:
        try:
            refined[name] = await refine_workflow(category(name), model)
        except ConfigError:  # a category outside the taxonomy has no workflow to refine
            continue
    run.save(config.model_copy(update={"workflows": {**config.workflows, **refined}}))
    return refined
