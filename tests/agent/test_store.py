"""Trajectory files: one rule per id, failed attempts retried, old records migrated, bad lines reported."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from datalyst.agent import SCHEMA_VERSION, Agent, Termination, Trajectory, finished_ids, read_trajectories, rollout
from datalyst.errors import DataFileError
from datalyst.llm import ReplayModel, SamplingParams
from datalyst.tasks import Task

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TURNS = ["<code>\n```python\nprint(6 * 7)\n```\n</code>", "<answer>@value[42]</answer>"]


def record(task_id: str, trial: int, *, termination=Termination.ANSWER, answer="1", minutes=0) -> Trajectory:
    return Trajectory(
        id=f"{task_id}#{trial}",
        task=Task(id=task_id, question="q?"),
        trial=trial,
        dialect="datamind",
        model="replay",
        sampling=SamplingParams(),
        system_prompt="s",
        first_message="u",
        answer=answer,
        termination=termination,
        started_at=T0 + timedelta(minutes=minutes),
    )


def write(path, *trajectories: Trajectory) -> None:
    with path.open("a") as f:
        for trajectory in trajectories:
            f.write(trajectory.model_dump_json() + "\n")


def test_the_attempt_that_started_last_wins_within_and_across_files(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(a, record("x", 0, answer="old", minutes=1), record("x", 0, answer="new", minutes=2))
    write(a, record("y", 0, answer="late", minutes=5))
    write(b, record("y", 0, answer="early", minutes=3), record("x", 0, answer="older", minutes=0))
    for order in ([a, b], [b, a]):
        answers = {t.id: t.answer for t in read_trajectories(order)}
        assert answers == {"x#0": "new", "y#0": "late"}


def test_failed_attempts_are_not_finished_and_their_retry_counts(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path, record("x", 0, termination=Termination.FAILED, answer=None), record("y", 0))
    assert finished_ids(path) == {"y#0"}
    write(path, record("x", 0, answer="retried", minutes=1))
    assert finished_ids(path) == {"x#0", "y#0"}
    assert {t.id: t.answer for t in read_trajectories(path)}["x#0"] == "retried"


def test_a_resumed_rollout_retries_failed_trajectories(tmp_path, examples_dir):
    out = tmp_path / "rollout.jsonl"
    tasks = [Task(id=f"t{i}", question="q?", files=[str(examples_dir / "sales.csv")]) for i in range(2)]
    write(out, record("t0", 0, termination=Termination.FAILED, answer=None))
    summary = asyncio.run(rollout(tasks, Agent(ReplayModel(TURNS, per_turn=True)), out, progress=False))
    assert summary.written == 2 and summary.skipped == 0
    latest = {t.id: t for t in read_trajectories(out)}
    assert latest["t0#0"].answer == "@value[42]" and not latest["t0#0"].failed
    assert len(out.read_text().splitlines()) == 3, "the failed attempt stays on disk for the record"


def test_a_line_that_is_not_a_trajectory_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path, record("x", 0))
    with path.open("a") as f:
        f.write('{"id": "y#0", "answer": "no other field"}\n')
    write(path, record("z", 0))
    with pytest.raises(DataFileError, match=r"t\.jsonl line 2 is not a trajectory"):
        read_trajectories(path)
    with pytest.raises(DataFileError, match="line 2"):
        finished_ids(path)


def test_only_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path, record("x", 0))
    with path.open("a") as f:
        f.write(record("y", 0).model_dump_json()[:50])
    assert finished_ids(path) == {"x#0"}


def test_older_records_are_migrated_and_newer_ones_refused(tmp_path):
    old = json.loads(record("x", 2).model_dump_json())
    old.pop("trial")
    old |= {"schema_version": 1, "sample": 2}
    turn = {"index": 0, "raw": "<answer>1</answer>", "kind": "answer", "answer": "1"}
    old["turns"] = [turn]
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    [migrated] = read_trajectories(path)
    assert migrated.trial == 2 and migrated.schema_version == SCHEMA_VERSION
    assert migrated.turns[0].text == "<answer>1</answer>"
    schema_2 = json.loads(record("x", 0).model_dump_json()) | {"schema_version": 2}  # before Turn.first_token_s
    path.write_text(json.dumps(schema_2) + "\n")
    assert read_trajectories(path)[0].schema_version == SCHEMA_VERSION
    newer = json.loads(record("x", 0).model_dump_json()) | {"schema_version": 99}
    path.write_text(json.dumps(newer) + "\n")
    with pytest.raises(DataFileError, match=r"old\.jsonl line 1 .*schema 99 is newer.*upgrade datalyst"):
        read_trajectories(path)


def test_a_file_may_be_named_by_a_string(tmp_path):
    path = tmp_path / "a.jsonl"
    write(path, record("x", 0, answer="one", minutes=1))
    assert [t.answer for t in read_trajectories(str(path))] == ["one"]
    assert [t.answer for t in read_trajectories([str(path)])] == ["one"]


def test_text_with_unicode_line_separators_stays_one_record(tmp_path):
    path = tmp_path / "t.jsonl"
    odd = "a\u2028b\u2029c\x85d"  # JSON leaves these unescaped; str.splitlines would cut the record there
    write(path, record("x", 0, answer=odd), record("y", 0))
    assert {t.id: t.answer for t in read_trajectories(path)} == {"x#0": odd, "y#0": "1"}
