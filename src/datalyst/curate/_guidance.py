"""What sampling tells the agent beyond the task: the category's workflow, and a reflection's critique.

DataMind writes a workflow for each question category and puts it in the sampling prompt; for
categories whose samples rarely agree it refines the workflow into finer steps; and a task whose
samples fail the check is sampled again with the judge's critique. All of it reaches the agent as
``Agent(guidance=...)``, so trajectories record it apart from the task (``Trajectory.guidance``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jinja2

from datalyst.errors import ConfigError, ModelResponseError
from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.prompts import prompt_templates
from datalyst.synth import Category, category
from datalyst.tasks import Task

REFINE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=512)


def _templates() -> dict[str, jinja2.Template]:
    return prompt_templates("datalyst.curate", "guidance")


def workflow_text(task: Task, workflows: Mapping[str, str] | None = None) -> str:
    """The workflow of the task's category (a refined one from ``workflows`` when given); "" without a category."""
    try:
        found = category(task.category or "")
    except ConfigError:
        return ""
    steps = (workflows or {}).get(found.name, found.workflow)
    return _templates()["workflow"].render(category=found.name, steps=steps.strip()).strip()


def reflection_text(answers: Sequence[str | None], critique: str) -> str:
    """The feedback a task gets after its attempts failed the check: their answers and the judge's critique."""
    return _templates()["reflection"].render(attempts=list(answers), critique=critique.strip()).strip()


class Guide:
    """The guidance for each task: its workflow (when ``knowledge``), then its reflection feedback, if any."""

    def __init__(
        self,
        *,
        knowledge: bool = True,
        workflows: Mapping[str, str] | None = None,
        reflections: Mapping[str, str] | None = None,
    ) -> None:
        self.knowledge, self.workflows, self.reflections = knowledge, dict(workflows or {}), dict(reflections or {})

    def __call__(self, task: Task) -> str:
        parts = [workflow_text(task, self.workflows) if self.knowledge else "", self.reflections.get(task.id, "")]
        return "\n\n".join(part for part in parts if part)


async def refine_workflow(found: Category, model: ChatModel, *, sampling: SamplingParams = REFINE_SAMPLING) -> str:
    """The category's workflow rewritten by ``model`` as finer numbered steps (DataMind's refinement)."""
    templates = _templates()
    variables = {"category": found.name, "description": found.description, "steps": found.workflow}
    messages = [
        ChatMessage(role=Role.SYSTEM, content=templates["refine_system"].render(variables).strip()),
        ChatMessage(role=Role.USER, content=templates["refine_user"].render(variables).strip()),
    ]
    completions = await model.agenerate(messages, sampling)
    steps = [line.rstrip() for line in (completions[0].text if completions else "").strip().splitlines()]
    numbered = [line for line in steps if line.lstrip()[:1].isdigit()]
    if len(numbered) < 3:
        raise ModelResponseError(
            f"{model.spec} did not write numbered steps for {found.name!r}; write them by hand under "
            "'workflows' in the run's run.json, or try a stronger model"
        )
    return "\n".join(steps)
