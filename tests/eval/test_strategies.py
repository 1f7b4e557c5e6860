"""The vote and mcts strategies: one answer per task and trial, what it cost, end to end with the real sandbox."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from datalyst.agent import AgentConfig, Termination, Trajectory, read_trajectories
from datalyst.eval import EVAL_SAMPLING, EvalConfig, run_eval
from datalyst.eval._strategies import voted
from datalyst.llm import ReplayModel, SamplingParams
from datalyst.search import MCTSConfig, Tree
from datalyst.tasks import Task, load_dabench, write_tasks

SCRIPT = [
    "<think>read it</think>\n<code>\n```python\nprint(1 + 1)\n```\n</code>",
    "<think>done</think>\n<answer>@mean_fare[34.65]</answer>",
    "<think>done</think>\n<answer>@mean_fare[34.6500]</answer>",
]


def sample(task_id: str, trial: int, answer: str | None, *, failed: bool = False) -> Trajectory:
    ending = Termination.FAILED if failed else Termination.ANSWER if answer else Termination.MAX_TURNS
    return Trajectory(id=f"{task_id}#{trial}", task=Task(id=task_id, question="?"), trial=trial, dialect="datamind",
                      model="replay", sampling=SamplingParams(), system_prompt="s", first_message="q", answer=answer,
                      termination=ending, started_at=datetime.now(UTC), duration_s=1.0)  # fmt: skip


def test_a_vote_answers_with_the_majority_along_the_first_sample_that_gave_it():
    samples = [
        sample("a", 0, "@x[1]"), sample("a", 1, "@x[2]"), sample("a", 2, "@x[2.0]"),  # trial 0
        sample("a", 3, None), sample("a", 4, "@x[7]", failed=True), sample("a", 5, "@x[3]"),  # trial 1
        sample("b", 0, None, failed=True), sample("b", 1, None, failed=True), sample("b", 2, None, failed=True),
    ]  # fmt: skip
    first, second, failed = voted(samples, 3)
    assert (first.id, first.trial, first.answer, first.duration_s) == ("a#0", 0, "@x[2]", 3.0)
    assert (second.id, second.answer) == ("a#1", "@x[3]")  # the failed sample does not vote
    assert failed.id == "b#0" and failed.failed  # run again when the run resumes


@pytest.fixture
def question_zero(tmp_path, dabench_tables):
    tasks_file = tmp_path / "zero.jsonl"
    write_tasks([t for t in load_dabench() if t.id == "0"], tasks_file)
    return tasks_file


def config(tasks_file, **changes) -> EvalConfig:
    return EvalConfig(bench="tasks", bench_path=str(tasks_file), model="replay", dialects=["datamind"], trials=1,
                      agent=AgentConfig(sampling=EVAL_SAMPLING, max_turns=4), **changes)  # fmt: skip


def test_vote_samples_each_answer_several_times_and_counts_their_cost(tmp_path, question_zero):
    out = tmp_path / "run"
    report = run_eval(config(question_zero, strategy="vote", votes=3), out, ReplayModel(SCRIPT, per_turn=True),
                      progress=False)  # fmt: skip
    assert len(read_trajectories(out / "samples" / "datamind.jsonl")) == 3
    [answer] = read_trajectories(out / "trajectories" / "datamind.jsonl")
    assert answer.id == "0#0" and answer.answer == "@mean_fare[34.65]"
    dialect = report.dialects[0]
    assert dialect.rates.pass_at_1.value == 1.0
    assert dialect.behaviour.mean_cells == 3.0 and dialect.behaviour.mean_tokens > 0
    assert "strategy vote (majority of 3)" in (out / "report.md").read_text()


def test_mcts_searches_each_answer_and_reports_the_search_cost(tmp_path, question_zero):
    out = tmp_path / "run"
    search = MCTSConfig(simulations=2, expansions=2, max_depth=4)
    report = run_eval(config(question_zero, strategy="mcts", search=search), out, ReplayModel(SCRIPT, per_turn=True),
                      progress=False)  # fmt: skip
    tree = Tree.load(out / "trees" / "datamind" / "0#0.json")
    assert tree.finished and len(tree.candidates()) == 3
    [answer] = read_trajectories(out / "trajectories" / "datamind.jsonl")
    assert answer.answer == "@mean_fare[34.65]" and answer.duration_s == tree.cost.seconds
    dialect = report.dialects[0]
    assert dialect.rates.pass_at_1.value == 1.0
    assert dialect.behaviour.mean_cells == tree.cost.cells == 1
    assert dialect.behaviour.mean_tokens == tree.cost.prompt_tokens + tree.cost.completion_tokens
    assert "strategy mcts (2 simulations of 2 turns, c_puct 0" in (out / "report.md").read_text()
