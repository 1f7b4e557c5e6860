"""A trajectory's model calls rebuilt from its record: the same requests the agent made, so a completion cache
seeded from a run answers a later run that starts the same way, and only what differs reaches the model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from datalyst.agent import Agent, AgentConfig, Trajectory, recorded_calls
from datalyst.llm import CachedModel, ChatMessage, Completion, ReplayModel, SamplingParams
from datalyst.tasks import Task

SPEC = "replay:scripted"


def cell(source: str) -> str:
    return f"<think>Next step.</think>\n<code>\n```python\nimport pandas as pd\n{source}\n```\n</code>"


FAILS = cell("print(pd.read_csv('sales.csv')['Revenue'].sum())")
WORKS = cell("print(len(pd.read_csv('sales.csv')))")
ANSWER = "<think>Done.</think>\n<answer>60</answer>"


@pytest.fixture
def task(examples_dir):
    return Task(id="rows", question="How many rows?", files=[str(examples_dir / "sales.csv")])


class TokenModel(ReplayModel):
    """A replay whose completions come in 5-character tokens, as a real backend reports them: a cut at an
    action's end keeps the whole token it falls in, so the kept text runs a little past the action."""

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        [completion] = await super().agenerate(messages, params)
        ends = [*range(5, len(completion.text), 5), len(completion.text)]
        return [completion.model_copy(update={"token_ids": list(range(len(ends))), "offsets": ends})]


def run(model, task: Task, **config) -> Trajectory:
    return asyncio.run(Agent(model, AgentConfig(**config)).arun(task, trial=1))


def entries(cache: Path) -> set[str]:
    return {path.name for path in cache.glob("*/*.json")}


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=0.0), SamplingParams(temperature=0.7, seed=5)])
def test_the_calls_rebuilt_from_a_trajectory_are_the_ones_the_agent_made(task, tmp_path, sampling):
    live = CachedModel(ReplayModel([FAILS, WORKS, ANSWER], spec=SPEC), tmp_path / "live")
    trajectory = run(live, task, sampling=sampling)
    assert [t.kind.value for t in trajectory.turns] == ["code", "code", "answer"] and live.misses == 3

    seeded = CachedModel(ReplayModel([], spec=SPEC), tmp_path / "seeded")
    calls = recorded_calls(trajectory)
    assert [seeded.store(*call[:2], [call[2]]) for call in calls] == [True] * 3
    assert not seeded.store(*calls[0][:2], [calls[0][2]], replace=False)  # an answer kept already is not replaced
    assert entries(tmp_path / "seeded") == entries(tmp_path / "live")  # the same conversations and sampling

    again = CachedModel(ReplayModel([], spec=SPEC), tmp_path / "seeded")  # a model asked anything would raise
    replayed = run(again, task, sampling=sampling)
    assert again.hits == 3 and [t.text for t in replayed.turns] == [t.text for t in trajectory.turns]


def test_a_turn_cut_inside_a_token_is_cut_there_again_when_replayed(task, tmp_path):
    cell = "Thought: Count them.\nAction:\n```python\nimport pandas as pd\nprint(len(pd.read_csv('sales.csv')))\n```"
    script = [f"{cell}\nThat is all for now.", "Thought: Done.\nFormatted answer: 60"]
    live = CachedModel(TokenModel(script, spec=SPEC), tmp_path / "live")
    trajectory = run(live, task, dialect="jupiter")
    kept = trajectory.turns[0].text
    assert kept.startswith(cell) and cell != kept != trajectory.turns[0].raw  # past the action, inside a token
    seeded = CachedModel(ReplayModel([], spec=SPEC), tmp_path / "seeded")
    for messages, params, completion in recorded_calls(trajectory):
        seeded.store(messages, params, [completion])
    assert entries(tmp_path / "seeded") == entries(tmp_path / "live")
    replayed = run(CachedModel(ReplayModel([], spec=SPEC), tmp_path / "seeded"), task, dialect="jupiter")
    assert [(t.text, t.token_ids) for t in replayed.turns] == [(t.text, t.token_ids) for t in trajectory.turns]


def test_a_changed_scaffold_reads_the_shared_start_and_asks_the_model_only_from_where_it_differs(task, tmp_path):
    before = run(CachedModel(ReplayModel([FAILS, WORKS, ANSWER], spec=SPEC), tmp_path / "cache"), task)
    # column hints change only what follows the failing cell (KeyError 'Revenue': "revenue" is named under it):
    # its first call is read from the cache, the rest asked
    after = CachedModel(ReplayModel([WORKS, ANSWER], spec=SPEC), tmp_path / "cache")
    changed = run(after, task, column_hints=True)
    assert (after.hits, after.misses) == (1, 2)
    assert changed.turns[0].text == before.turns[0].text and changed.turns[0].observation != before.turns[0].observation


def test_calls_the_record_cannot_tell_end_the_rebuilt_list(task, tmp_path):
    # the first turn fails, its repeat is drawn again twice (the drawings set aside are not recorded), then answers
    model = ReplayModel([FAILS, FAILS, FAILS, WORKS, ANSWER], spec=SPEC)
    redrawn = run(model, task, repeat_guard=True)
    assert [t.redraws for t in redrawn.turns] == [0, 2, 0]
    assert len(recorded_calls(redrawn)) == 1

    # with one turn left after a failing cell, the last call asks for an answer: that turn's call is not kept
    last = run(ReplayModel([FAILS, "60</answer>"], spec=SPEC), task, max_turns=1, last_call=True)
    assert last.turns[0].last_call and len(last.turns) == 2
    assert len(recorded_calls(last)) == 1

    # an answer that misses a part of the format is asked for again, the turn begun for the model: not kept either
    formatted = task.model_copy(update={"format": "@rows[n] where n is the number of rows"})
    checked = run(ReplayModel([ANSWER, "60]</answer>"], spec=SPEC), formatted, format_check=True)
    assert checked.turns[0].format_check and checked.answer == "@rows[60]"
    assert len(recorded_calls(checked)) == 1
