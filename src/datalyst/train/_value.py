"""JUPITER's value model: how good is the state an agent's conversation is in, from -1 (lost) to +1 (solved).

A state is the conversation after the agent's ``k``-th turn and its observation (the sampling guidance left
out). Its target is a Q-value: what search (issue 15) will back up, and until then the Monte Carlo return of
sampled trajectories (:func:`monte_carlo_values`): the mean outcome (+1 right, -1 wrong or no answer, from the
trajectory's :class:`~datalyst.agent.Outcome`) of the trajectories of the same task that share that exact state.
Usually one trajectory does, and the state takes its outcome; states shared by several (the same first cells)
take their mean.
Trajectories whose task has no answer a program can check, and runs that failed on our side, are left out.

Value data is JSONL of :class:`ValueExample`. ``train_value`` fits the scorer of ``_scorer`` (LoRA backbone,
mean pooling, dropout, linear, tanh) to it with the mean squared error; ``load_value_model`` loads the result
for search. Torch is imported only when a model is trained or loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from datalyst.agent import Outcome, Trajectory, ajudge_trajectory, read_trajectories, to_messages
from datalyst.curate import RunFolder, read_group_verdicts
from datalyst.errors import DataFileError
from datalyst.files import write_atomic
from datalyst.jsonl import read_appended
from datalyst.llm import ChatMessage, ChatTokenizer
from datalyst.train._data import data_file
from datalyst.train._policy import LoraOptions
from datalyst.train._sft import Precision

if TYPE_CHECKING:
    from datalyst.train._scorer import Item, LoadedScorer

VALUES = "values.jsonl"


class ValueExample(BaseModel):
    """One state (the conversation so far, as ``{role, content}`` messages) and its value in [-1, 1]."""

    id: str
    messages: list[ChatMessage]
    value: float = Field(ge=-1.0, le=1.0)


class ValueData(BaseModel):
    """The states valued by Monte Carlo returns, and what was left out."""

    examples: list[ValueExample]
    trajectories: int
    """Trajectories whose states were valued."""
    unchecked: int = 0
    """Left out: their task has no answer a program can check (no gold answer, or a judge model grades it)."""
    failed: int = 0
    """Left out: the run failed on our side (model server, sandbox)."""


class ScorerConfig(BaseModel):
    """What the value model and the HRM train alike (saved as ``config.json``; a resumed run must match it)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    model: str = "embedded:small"
    """Backbone model spec (embedded:, gguf: or hf:)."""
    lora: LoraOptions = LoraOptions()
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    """Dropout before the head's linear layer (on the pooled hidden state)."""
    lr: float = 1e-4
    """Peak learning rate (after warm-up; cosine decay to 0)."""
    warmup_ratio: float = 0.1
    """Share of the steps spent warming up."""
    weight_decay: float = 0.0
    """AdamW's weight decay."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this norm."""
    epochs: int = 1
    """Passes over the items."""
    batch_size: int = 8
    """Items per optimizer step; each item is one forward pass."""
    max_length: int = 4096
    """Items with a longer conversation are left out (counted), not cut."""
    limit: int | None = None
    """Train on this many items, drawn by seed."""
    seed: int = 0
    """Seed of the item order, the draws and the new layers."""
    precision: Precision = "auto"
    """auto (bf16 where the hardware has it), bf16 or fp32."""


class ValueConfig(ScorerConfig):
    data: str
    """Value data: a JSONL file of `train value-data`, or its folder."""


class ScorerResult(BaseModel):
    """Where a finished value or reward model run put its model and what it measured."""

    out: Path
    model: Path
    """The model folder: ``adapter/``, ``head.safetensors`` and the model's card."""
    steps: int
    items: int
    too_long: int
    seconds: float
    final_loss: float


def state_messages(trajectory: Trajectory, turns: int) -> list[ChatMessage]:
    """The conversation after the agent's first ``turns`` turns and their observations, without the guidance."""
    cut = trajectory.model_copy(update={"turns": trajectory.turns[:turns]})
    return [ChatMessage(role=message.role, content=message.content) for message in to_messages(cut, guidance=False)]


Judged = tuple[Trajectory, Outcome | None]
"""A trajectory and its outcome; None for a run that failed on our side or whose task is not ``checkable``."""


def read_sources(paths: Sequence[str | Path]) -> list[Judged]:
    """The trajectories of each path (a trajectories file, ``samples.jsonl``, or a curation run folder) with their
    outcomes: those a run folder's judge wrote (``curate judge``), the others judged here.

    Each source is read on its own, so runs whose trajectory ids coincide all count."""
    judged: list[Judged] = []
    for path in map(Path, paths):
        run = RunFolder(path)
        file = data_file(path, run.samples.name, "give a trajectories file or a curation run folder")
        written = {}
        if path.is_dir() and run.verdicts.is_file():
            written = {o.trajectory_id: o for verdict in read_group_verdicts(run) for o in verdict.outcomes}
        judged += with_outcomes(read_trajectories(file), written)
    return judged


def with_outcomes(trajectories: Sequence[Trajectory], written: Mapping[str, Outcome] | None = None) -> list[Judged]:
    """Each trajectory with its outcome: the one ``written`` holds for its id, or judged here."""
    written = written or {}

    async def judge_all() -> list[Judged]:
        judged: list[Judged] = []
        for trajectory in trajectories:
            if trajectory.failed or not trajectory.task.checkable():
                judged.append((trajectory, None))
            else:
                judged.append((trajectory, written.get(trajectory.id) or await ajudge_trajectory(trajectory)))
        return judged

    return asyncio.run(judge_all())


def monte_carlo_values(judged: Sequence[Judged]) -> ValueData:
    """Every state of the checkable trajectories valued by the mean return of the trajectories of its task that
    pass through it (see the module docstring); a state shared by several is written once, with the id
    ``<trajectory id>@<k>`` of the first that reaches it."""
    returns: dict[tuple[str, tuple[ChatMessage, ...]], list[float]] = {}
    ids: dict[tuple[str, tuple[ChatMessage, ...]], str] = {}
    data = ValueData(examples=[], trajectories=0)
    for trajectory, outcome in judged:
        if outcome is None:
            if trajectory.failed:
                data.failed += 1
            else:
                data.unchecked += 1
            continue
        data.trajectories += 1
        for k in range(1, len(trajectory.turns) + 1):
            key = (trajectory.task.id, tuple(state_messages(trajectory, k)))
            returns.setdefault(key, []).append(1.0 if outcome.correct else -1.0)
            ids.setdefault(key, f"{trajectory.id}@{k}")
    data.examples = [
        ValueExample(id=ids[key], messages=list(key[1]), value=sum(values) / len(values))
        for key, values in returns.items()
    ]
    return data


def write_value_examples(path: str | Path, examples: Sequence[ValueExample]) -> None:
    write_atomic(path, "".join(example.model_dump_json() + "\n" for example in examples))


def read_value_examples(path: str | Path) -> list[ValueExample]:
    """The value examples of ``path`` (a JSONL file, or a folder holding ``values.jsonl``); at least one."""
    fix = "write value data with: datalyst train value-data TRAJECTORIES --out FILE"
    file = data_file(Path(path), VALUES, fix)
    examples = read_appended(file, ValueExample, what="a value example", fix=fix)
    if not examples:
        raise DataFileError(f"{file} holds no value example; {fix}")
    return examples


def train_value(config: ValueConfig, out: str | Path, *, save_every: int = 1, progress: bool = True) -> ScorerResult:
    """Train (or resume) a value model on ``config.data``, writing the run folder ``out`` and the model in
    ``out/value/`` (see ``_scorer``)."""
    from datalyst.train._scorer import fit

    examples = read_value_examples(config.data)
    return fit(config, Path(out), lambda tokenizer: _items(examples, tokenizer), name="value", outputs=["value"],
               title=f"value model on {config.model}", save_every=save_every, progress=progress)  # fmt: skip


def _items(examples: Sequence[ValueExample], tokenizer: ChatTokenizer) -> list[Item]:
    from datalyst.train._scorer import Item, encode

    return [Item(id=e.id, inputs=[encode(e.messages, tokenizer)], target=e.value) for e in examples]


class ValueModel:
    """A trained value model; ``score(messages)`` is the value of the state the conversation is in, in [-1, 1]."""

    def __init__(self, loaded: LoadedScorer) -> None:
        self.loaded = loaded

    def score(self, messages: Sequence[ChatMessage]) -> float:
        return self.loaded.predict(messages)["value"]


def load_value_model(path: str | Path, *, device: str = "cpu") -> ValueModel:
    """The value model saved in ``path`` (its folder, or the run folder of ``train_value``)."""
    from datalyst.train._scorer import LoadedScorer

    return ValueModel(LoadedScorer(path, name="value", device=device))


class ValueCheck(BaseModel):
    """How a value model's scores of states follow their values. Search compares states, so the order counts
    more than the scale: a model whose scores all sit near the mean can still rank states well."""

    states: int
    positives: int
    """States worth more than 0."""
    pearson: float | None
    """Correlation of scores and values (None when either is constant)."""
    auc: float | None
    """The chance that a state worth more than 0 scores above one worth 0 or less (0.5: no better than chance;
    None without both kinds)."""
    low: float
    high: float
    """The lowest and highest score."""


def held_out_examples(run: str | Path, model: ValueModel) -> list[ValueExample]:
    """The value examples of a ``train_value`` run folder that its model did not train on: its data less the
    items it drew (``limit``) and kept (``max_length``)."""
    from datalyst.train._scorer import select_items

    file = Path(run) / "config.json"
    if not file.is_file():
        fix = "give the run folder of `datalyst train value`, or states to check (--data)"
        raise DataFileError(f"{file} does not exist: {fix}")
    config = ValueConfig.model_validate_json(file.read_text(encoding="utf-8"))
    examples = read_value_examples(config.data)
    trained = {item.id for item in select_items(_items(examples, model.loaded.tokenizer), config)[0]}
    return [example for example in examples if example.id not in trained]


def check_value(model: ValueModel, examples: Sequence[ValueExample], *, progress: bool = True) -> ValueCheck:
    """Score ``examples`` with ``model`` and measure how the scores follow the values."""
    import numpy as np
    from rich.progress import track
    from sklearn.metrics import roc_auc_score

    if not examples:
        raise DataFileError("no value example to check the model on")
    scores = np.array([model.score(e.messages) for e in track(examples, "scoring", disable=not progress)])
    values = np.array([e.value for e in examples])
    positive = values > 0
    return ValueCheck(
        states=len(examples),
        positives=int(positive.sum()),
        pearson=float(np.corrcoef(scores, values)[0, 1]) if scores.std() > 0 and values.std() > 0 else None,
        auc=float(roc_auc_score(positive, scores)) if 0 < positive.sum() < len(examples) else None,
        low=float(scores.min()),
        high=float(scores.max()),
    )
