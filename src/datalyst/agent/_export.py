"""Views of a trajectory: chat messages for training, a Jupyter notebook, a standalone HTML page."""

from __future__ import annotations

import importlib.resources
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import jinja2
from pydantic import BaseModel

from datalyst.agent._dialect import ActionKind, Dialect
from datalyst.agent._dialects import get_dialect
from datalyst.agent._trajectory import Trajectory, Turn
from datalyst.llm import Role

if TYPE_CHECKING:
    from nbformat import NotebookNode


class TrainingMessage(BaseModel):
    """A chat message plus who wrote it, for loss masks: environment text is never trained on."""

    role: Role
    content: str
    is_environment: bool
    failed: bool = False
    """An agent turn that went wrong: its cell failed (an error, a timeout or a crash), or its answer missed the
    task's format and the format check sent it back."""
    closed: bool = False
    """An agent turn the model ended itself, so the end-of-turn token after it is the model's too: an answer
    written to its end. A code turn ends where a stop string cut it (before the observation), never so."""


def observation_message(dialect: Dialect, turn: Turn) -> str | None:
    """The message the environment sends after ``turn`` (None after an answer taken as final)."""
    if turn.format_check is not None:
        return turn.format_check
    if turn.observation is None:
        return None
    reply = turn.observation if turn.kind == ActionKind.VOID else dialect.observation(turn.observation)
    return f"{reply}\n\n{turn.last_call}" if turn.last_call else reply


def to_messages(trajectory: Trajectory, *, guidance: bool = True) -> list[TrainingMessage]:
    """The conversation exactly as the model saw and wrote it; ``guidance=False`` leaves out what sampling
    added to the first message (training data: the model must learn to do without it). A follow-up's earlier
    conversation counts as environment: the trajectories that wrote it train on it."""
    dialect = get_dialect(trajectory.dialect)
    first = trajectory.first_message if guidance else trajectory.task_message
    messages = [
        TrainingMessage(role=Role.SYSTEM, content=trajectory.system_prompt, is_environment=True),
        *(TrainingMessage(role=m.role, content=m.content, is_environment=True) for m in trajectory.earlier),
        TrainingMessage(role=Role.USER, content=first, is_environment=True),
    ]
    for turn in trajectory.turns:
        failed = turn.cell_failed or turn.format_check is not None
        closed = (
            turn.kind == ActionKind.ANSWER and turn.finish_reason == "stop" and turn.raw.rstrip() == turn.text.rstrip()
        )
        messages.append(
            TrainingMessage(role=Role.ASSISTANT, content=turn.text, is_environment=False, failed=failed, closed=closed)
        )
        if (reply := observation_message(dialect, turn)) is not None:
            messages.append(TrainingMessage(role=Role.USER, content=reply, is_environment=True))
    return messages


def to_notebook(trajectory: Trajectory, *follow_ups: Trajectory) -> NotebookNode:
    """A notebook: the task, then each thought as markdown and each cell with its outputs and figures; then the
    same for each follow-up question asked after it in the conversation."""
    import nbformat  # imported here: it is slow to import and only exports need it
    from nbformat.v4 import new_notebook

    task = trajectory.task
    counter = itertools.count(1)  # one count over the follow-ups too, as the page numbers the cells
    cells = [cell for part in (trajectory, *follow_ups) for cell in _cells(part, counter)]
    notebook = new_notebook(cells=cells)
    notebook.metadata["datalyst"] = {
        "trajectory_id": trajectory.id,
        "task_id": task.id,
        "model": trajectory.model,
        "dialect": trajectory.dialect,
    }
    if follow_ups:
        notebook.metadata["datalyst"]["follow_ups"] = [part.task.question for part in follow_ups]
    nbformat.validate(notebook)
    return notebook


def _cells(trajectory: Trajectory, counter: Iterator[int]) -> list[NotebookNode]:
    from nbformat.v4 import new_code_cell, new_markdown_cell

    cells = [new_markdown_cell(_task_markdown(trajectory))]
    if trajectory.setup_code:  # ran before the first turn: the notebook runs it first too
        cells.append(new_code_cell(trajectory.setup_code))
    for turn in trajectory.turns:
        if turn.thought:
            cells.append(new_markdown_cell(turn.thought))
        if turn.kind == ActionKind.CODE:
            cells.append(new_code_cell(turn.code or "", execution_count=next(counter), outputs=_outputs(turn)))
        elif turn.kind == ActionKind.ANSWER:
            cells.append(new_markdown_cell(f"**Answer:** {turn.answer}"))
        else:
            cells.append(new_markdown_cell(f"*Turn {turn.index + 1} had neither code nor an answer.*"))
    cells.append(new_markdown_cell(f"*Ended by {trajectory.termination.value} after {len(trajectory.turns)} turns.*"))
    return cells


def _task_markdown(trajectory: Trajectory) -> str:
    task = trajectory.task
    parts = [f"# {task.question}"]
    if task.constraints:
        parts.append(f"**Constraints:** {task.constraints}")
    if task.format:
        parts.append(f"**Format:** {task.format}")
    if task.files:
        parts.append("**Files:** " + ", ".join(f"`{name}`" for name in _base_names(task.files)))
    parts.append(f"*Model `{trajectory.model}`, dialect `{trajectory.dialect}`.*")
    return "\n\n".join(parts)


def _outputs(turn: Turn) -> list[Any]:
    from nbformat.v4 import new_output

    result = turn.result
    if result is None:
        return []
    outputs = []
    if result.stdout:
        outputs.append(new_output("stream", name="stdout", text=result.stdout))
    if result.stderr:
        outputs.append(new_output("stream", name="stderr", text=result.stderr))
    if result.error is not None:
        lines = result.error.traceback.splitlines() or [f"{result.error.ename}: {result.error.evalue}"]
        outputs.append(new_output("error", ename=result.error.ename, evalue=result.error.evalue, traceback=lines))
    for png in turn.figures.values():
        outputs.append(new_output("display_data", data={"image/png": png}))
    return outputs


def _base_names(paths: list[str]) -> list[str]:
    return [path.rsplit("/", 1)[-1] for path in paths]


def to_html(trajectory: Trajectory, *follow_ups: Trajectory) -> str:
    """A standalone page (no external assets) showing the task, every turn and the answer, then the same for each
    follow-up question of the conversation."""
    source = importlib.resources.files("datalyst.agent") / "templates" / "trajectory.html.j2"
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(source.read_text())
    return template.render(
        parts=[trajectory, *follow_ups], files=_base_names(trajectory.task.files), ActionKind=ActionKind
    )
