"""The verl agent loop: an exported row solved by the agent and the sandbox, its turns written by a scripted server.

The server plays verl's server manager: it returns the ids of scripted turns (tokenized with the tiny model's
tokenizer) and records the ids it was given. Everything but the last test runs without verl.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from datalyst.agent import Agent, AgentConfig, Outcome, Status, to_messages
from datalyst.curate import Curated, Stratum, export_verl
from datalyst.errors import ConfigError
from datalyst.llm import ChatMessage, HFTokenizer, ReplayModel
from datalyst.tasks import Task
from datalyst.train._rewards import length_reward
from datalyst.train._rollouts import score as score_run
from datalyst.train._verl import RowRollout, agent_config, compute_score, rollout_row, task_from_row

CODE = "import pandas as pd\nprint(pd.read_csv('sales.csv')['region'].nunique())"
CODE_TURN = f"Thought: Count the regions.\nAction:\n```python\n{CODE}\n```\nObservation:"
ANSWER_TURN = "Thought: Four.\nFormatted answer: @regions[4]"
CONSTRAINTS = "Count the distinct values of the region column."
VERL_SAMPLING = {"temperature": 0.9, "top_p": 0.95, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


class ScriptedServer:
    """verl's server manager, played from a script: call k returns turn k's ids (the end-of-turn token after the
    turns given in ``closed``), at most ``max_tokens`` of them, with made-up logprobs."""

    def __init__(self, tokenizer: HFTokenizer, turns: list[str], *, closed: tuple[int, ...] = ()) -> None:
        end = tokenizer.encode(tokenizer.end_of_turn)
        self.turns = [tokenizer.encode(text) + (end if index in closed else []) for index, text in enumerate(turns)]
        self.calls: list[dict[str, Any]] = []
        self.logprobs: list[list[float]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling": sampling_params})
        ids = self.turns[len(self.calls) - 1][: sampling_params["max_tokens"]]
        self.logprobs.append([-0.01 * (index + 1) for index in range(len(ids))])
        logprobs = self.logprobs[-1] if sampling_params["logprobs"] else None
        return SimpleNamespace(token_ids=ids, log_probs=logprobs, extra_fields={"global_steps": 3})


@pytest.fixture(scope="module")
def tokenizer(tiny_model) -> HFTokenizer:
    from transformers import AutoTokenizer

    return HFTokenizer(AutoTokenizer.from_pretrained(tiny_model))


@pytest.fixture(scope="module")
def row(examples_dir, tmp_path_factory) -> dict[str, Any]:
    """The verl export's row of a DABench-style task (solved once by a replayed model), as verl's dataset reads it."""
    task = Task(id="regions", question="How many regions are there?", constraints=CONSTRAINTS, format="@regions[n]",
                files=[str(examples_dir / "sales.csv")], answer={"regions": 4}, judge="dabench")  # fmt: skip
    agent = Agent(ReplayModel([CODE_TURN, ANSWER_TURN], per_turn=True), AgentConfig(dialect="jupiter"))
    trajectory = asyncio.run(agent.arun(task))
    record = Curated(id=trajectory.id, trajectory=trajectory, selected_by="ground_truth", stratum=Stratum.SUCCESS,
                     overthinking=0.0)  # fmt: skip
    (row,) = pq.read_table(export_verl([record], tmp_path_factory.mktemp("verl")).paths[0]).to_pylist()
    return row


def run(row, server, tokenizer, *, sampling=VERL_SAMPLING, prompt_length=4096, response_length=2048, **options):
    return asyncio.run(
        rollout_row(server, tokenizer, sampling, prompt=row["prompt"], extra_info=row["extra_info"],
                    ground_truth=row["reward_model"]["ground_truth"], config=AgentConfig(),
                    prompt_length=prompt_length, response_length=response_length, **options)
    )  # fmt: skip


@pytest.fixture(scope="module")
def solved(row, tokenizer) -> tuple[RowRollout, ScriptedServer]:
    server = ScriptedServer(tokenizer, [CODE_TURN, ANSWER_TURN], closed=(1,))
    return run(row, server, tokenizer), server


def runs(rollout: RowRollout, tokenizer: HFTokenizer) -> list[tuple[int, str]]:
    """The response as (mask, text) runs."""
    pairs = zip(rollout.response_ids, rollout.response_mask, strict=True)
    return [(m, tokenizer.decode([t for t, _ in run])) for m, run in itertools.groupby(pairs, lambda pair: pair[1])]


def test_the_mask_is_zero_exactly_on_the_observation(solved, tokenizer):
    rollout, _ = solved
    first, second = rollout.trajectory.turns
    chat = [ChatMessage(role=m.role, content=m.content) for m in to_messages(rollout.trajectory)]
    opening = tokenizer.render(chat[:2], add_generation_prompt=True)
    between = tokenizer.render(chat[:4], add_generation_prompt=True)[len(opening) :]
    assert first.text.endswith("```") and second.answer == "@regions[4]"  # the agent kept the code turn to its fence
    assert runs(rollout, tokenizer) == [
        (1, first.text),
        (0, between[len(first.text) :]),
        (1, second.text + tokenizer.end_of_turn),  # the model closed its last turn itself
    ]
    assert first.observation and first.observation.strip() in between  # the sandbox ran the code: "4"
    assert rollout.num_turns == 4 and rollout.trajectory.termination == "answer"


def test_prompt_and_response_decode_to_the_conversation_from_the_rows_prompt(solved, row, tokenizer):
    rollout, _ = solved
    chat = [ChatMessage(role=m.role, content=m.content) for m in to_messages(rollout.trajectory)]
    assert [(m.role.value, m.content) for m in chat[:2]] == [(m["role"], m["content"]) for m in row["prompt"]]
    assert CONSTRAINTS in tokenizer.decode(rollout.prompt_ids)  # the exported prompt, not one rebuilt without them
    assert tokenizer.decode(rollout.prompt_ids) == tokenizer.render(chat[:2], add_generation_prompt=True)
    rendered = tokenizer.render(chat, add_generation_prompt=False)
    assert rendered == tokenizer.decode(rollout.prompt_ids + rollout.response_ids) + "\n"  # ChatML's last newline


def test_each_turn_is_generated_from_the_sequence_so_far_and_kept_as_generated(solved, tokenizer):
    rollout, server = solved
    sequence = rollout.prompt_ids + rollout.response_ids
    assert len(server.calls) == 2 and len({call["request_id"] for call in server.calls}) == 1
    for call, turn in zip(server.calls, rollout.trajectory.turns, strict=True):
        seen = call["prompt_ids"]
        assert sequence[: len(seen)] == seen and sequence[len(seen) : len(seen) + len(turn.token_ids)] == turn.token_ids
        assert call["sampling"] == VERL_SAMPLING | {"max_tokens": 1024, "stop": ["Observation:"]}
    assert server.calls[0]["prompt_ids"] == rollout.prompt_ids
    first_ids = server.turns[0]
    assert len(rollout.trajectory.turns[0].token_ids) < len(first_ids)  # "\nObservation:" was generated, then cut


def test_logprobs_are_the_servers_on_model_tokens_and_zero_elsewhere(solved, row, tokenizer):
    rollout, server = solved
    first = rollout.trajectory.turns[0]
    kept = server.logprobs[0][: len(first.token_ids)]
    expected = [lp if m else 0.0 for lp, m in zip(rollout.response_logprobs, rollout.response_mask, strict=True)]
    assert rollout.response_logprobs == expected
    assert [lp for lp, m in zip(rollout.response_logprobs, rollout.response_mask, strict=True) if m] == (
        kept + server.logprobs[1]
    )  # the closing token's logprob included
    silent = run(row, ScriptedServer(tokenizer, [CODE_TURN, ANSWER_TURN]), tokenizer,
                 sampling=VERL_SAMPLING | {"logprobs": False})  # fmt: skip
    assert silent.response_logprobs is None


def test_the_run_carries_what_the_reward_needs(solved):
    rollout, _ = solved
    outcome = Outcome.model_validate_json(rollout.extra_fields["outcome"])
    assert outcome.status is Status.RIGHT and outcome.well_formed  # judged where the rollout ends
    assert rollout.extra_fields == {
        "global_steps": 3, "final_answer": "@regions[4]", "outcome": outcome.model_dump_json(),
        "agent_tokens": rollout.trajectory.agent_tokens, "void_turns": 0, "termination": "answer",
    }  # fmt: skip
    assert rollout.trajectory.agent_tokens == sum(turn.completion_tokens for turn in rollout.trajectory.turns) > 0
    assert asyncio.run(score_run(rollout.trajectory)).length == rollout.extra_fields["agent_tokens"]  # train rl
    assert rollout.metrics["tool_calls"] > 0


def score(row: dict[str, Any], **run: Any) -> dict[str, float]:
    """compute_score as verl calls it: the row's extra_info with the run's extra fields merged in."""
    options = {name: run.pop(name) for name in ("l_min", "l_max") if name in run}
    return asyncio.run(compute_score(data_source=row["data_source"], solution_str="(not read)",
                                     ground_truth=row["reward_model"]["ground_truth"],
                                     extra_info=row["extra_info"] | run, **options))  # fmt: skip


def judged(status: Status, form: str | None = None) -> str:
    """A rollout's outcome, as rollout_row writes it into the run's extra fields."""
    return Outcome(trajectory_id="t#0", task_id="t", dialect="jupiter", trial=0, status=status, form=form,
                   score=float(status is Status.RIGHT)).model_dump_json()  # fmt: skip


def test_compute_score_is_datamind_eq_8_on_the_rollouts_outcome(solved, row):
    rollout, _ = solved
    tokens = rollout.extra_fields["agent_tokens"]
    assert score(row, **rollout.extra_fields) == {"score": 1.0, "acc": 1.0}  # right and short
    shaped = score(row, **rollout.extra_fields, l_min=tokens - 10, l_max=tokens + 30)
    assert shaped == {"score": 0.5 + 0.5 * 30 / 40, "acc": 1.0} == {"score": 0.875, "acc": 1.0}
    assert shaped["score"] == length_reward(tokens, l_min=tokens - 10, l_max=tokens + 30)
    right_but_malformed = score(row, outcome=judged(Status.RIGHT, form="void_turn"), agent_tokens=2000)
    assert right_but_malformed == {"score": 0.5, "acc": 1.0}  # past l_max: half the reward, whatever the format
    assert score(row, outcome=judged(Status.WRONG), agent_tokens=10) == {"score": 0.0, "acc": 0.0}
    assert score(row, outcome=judged(Status.MALFORMED, form="void_turn"), agent_tokens=10) == {
        "score": -0.1,
        "acc": 0.0,
    }
    assert score(row, outcome=judged(Status.UNANSWERED, form="no_answer"), agent_tokens=10) == {
        "score": -0.1,
        "acc": 0.0,
    }


def test_compute_score_refuses_rows_another_agent_loop_ran(row):
    with pytest.raises(ConfigError, match="set the rows' agent_name to datalyst_agent"):
        score(row)


def test_a_run_with_a_void_turn_trains_nothing_unless_asked(row, tokenizer):
    script = ["I am not sure yet.", ANSWER_TURN]
    masked = run(row, ScriptedServer(tokenizer, script), tokenizer)
    assert masked.trajectory.turns[0].is_void and set(masked.response_mask) == {0}
    assert Outcome.model_validate_json(masked.extra_fields["outcome"]).form == "void_turn"
    assert masked.extra_fields["agent_tokens"] > 0
    kept = run(row, ScriptedServer(tokenizer, script), tokenizer, mask_void_runs=False)
    assert kept.response_ids == masked.response_ids
    assert kept.extra_fields["agent_tokens"] == masked.extra_fields["agent_tokens"]


def test_verls_response_length_ends_the_run_on_the_models_last_token(row, tokenizer):
    first = len(tokenizer.encode(CODE_TURN))
    server = ScriptedServer(tokenizer, [CODE_TURN, ANSWER_TURN])
    rollout = run(row, server, tokenizer, response_length=first + 5)  # no room for the observation and a turn
    assert server.calls[0]["sampling"]["max_tokens"] == first + 5 and len(server.calls) == 1
    assert rollout.trajectory.termination == "context_overflow"
    assert rollout.response_ids == rollout.trajectory.turns[0].token_ids and set(rollout.response_mask) == {1}
    assert Outcome.model_validate_json(rollout.extra_fields["outcome"]).status is Status.UNANSWERED


def test_an_opening_longer_than_verls_prompt_length_is_refused(row, tokenizer):
    with pytest.raises(ConfigError, match=r"prompt_length of 10; raise data\.max_prompt_length"):
        run(row, ScriptedServer(tokenizer, [ANSWER_TURN]), tokenizer, prompt_length=10)


@pytest.mark.parametrize(
    ("ground_truth", "answer"),
    [("4", 4), ('{"regions": 4}', {"regions": 4}), ("Paris", "Paris"), ("[1, 2]", [1, 2]), (None, None)],
)
def test_the_rows_task_takes_its_answer_from_the_ground_truth(row, ground_truth, answer):
    task = task_from_row(row["extra_info"] | {"answer_sql": "SELECT 1"}, ground_truth)
    assert task.id == "regions" and task.answer == answer and task.judge == "dabench"
    assert task.answer_sql == "SELECT 1"  # every task field the row carries is read


def test_wrong_settings_and_rows_are_refused_in_one_line(row):
    with pytest.raises(ConfigError, match="agent settings: max_turns: Input should be greater than or equal to 1"):
        agent_config({"max_turns": 0})
    with pytest.raises(ConfigError, match=r"a verl row's task \(extra_info\): question: Field required"):
        task_from_row({key: value for key, value in row["extra_info"].items() if key != "question"}, "4")
    assert agent_config({"sampling": {"max_tokens": 768}}).sampling.max_tokens == 768


def test_without_verl_the_loop_module_says_what_to_install():
    if importlib.util.find_spec("verl") is not None:
        pytest.skip("verl is installed")
    with pytest.raises(ConfigError, match=r"runs inside verl, which does not import here \(No module named 'verl'\)"):
        importlib.import_module("datalyst.train.verl_agent_loop")


def test_verl_instantiates_and_runs_the_registered_loop(row, tokenizer, tiny_model):
    """Runs only where verl imports (it needs ray and its own pins): verl's registry, hydra and AgentLoopOutput."""
    pytest.importorskip("verl.experimental.agent_loop")
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import datalyst.train.verl_agent_loop  # noqa: F401 (registers datalyst_agent)

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 2048}},
                               "data": {}})  # fmt: skip
    entries = OmegaConf.load(Path(__file__).parents[2] / "configs" / "verl" / "datalyst_agent_loop.yaml")
    assert _agent_loop_registry["datalyst_agent"]["_target_"] == entries[0]["_target_"]
    server = ScriptedServer(tokenizer, [CODE_TURN, ANSWER_TURN], closed=(1,))

    async def instantiate_and_run() -> Any:  # as verl's worker does, inside its event loop
        loop = hydra.utils.instantiate(
            entries[0], trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer.tokenizer,
            processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), hf_model_type="qwen2",
        )  # fmt: skip
        return await loop.run(VERL_SAMPLING, raw_prompt=row["prompt"], extra_info=row["extra_info"],
                              reward_model=row["reward_model"], data_source=row["data_source"])  # fmt: skip

    output = asyncio.run(instantiate_and_run())
    expected = run(row, ScriptedServer(tokenizer, [CODE_TURN, ANSWER_TURN], closed=(1,)), tokenizer)
    assert output.response_ids == expected.response_ids and output.response_mask == expected.response_mask
    assert output.prompt_ids == expected.prompt_ids and output.num_turns == 4
    assert output.extra_fields["final_answer"] == "@regions[4]"
    assert server.calls[0]["sampling"]["max_tokens"] == 768  # the YAML's agent settings
