"""RL over the real agent and sandbox with a scripted sampler and a tiny random policy: groups, rewards,
dynamic sampling, void runs left out, and a resumed run that matches an uninterrupted one."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from train_helpers import write_examples

from datalyst.errors import ConfigError
from datalyst.llm import ReplayModel
from datalyst.tasks import Task
from datalyst.train._log import read_log
from datalyst.train._rl import RLConfig, train_rl

torch = pytest.importorskip("torch")

RIGHT = "Thought: There are four regions.\nFormatted answer: @regions[4]"
WRONG = "Thought: I guess three.\nFormatted answer: @regions[3]"


def write_tasks(path: Path, examples_dir: Path, count: int) -> Path:
    files = [str(examples_dir / "sales.csv")]
    tasks = [
        Task(id=f"t{i}", question="How many regions are there?", format="@regions[n] where n is a count.",
             files=files, answer={"regions": "4"}, judge="dabench")
        for i in range(count)
    ]  # fmt: skip
    path.write_text("".join(task.model_dump_json() + "\n" for task in tasks))
    return path


def scripted(script: list[str]):
    """A sampler that answers every call from ``script`` in order, whatever the step."""

    def sampler(_policy, _step):
        return ReplayModel(script)

    return sampler


def config(tiny_model: Path, tasks: Path, **changes) -> RLConfig:
    fields = dict(tasks=[str(tasks)], model=f"hf:{tiny_model}", algo="dapo", steps=2, prompts=2, group_size=2,
                  oversample=2, mini_batches=2, lr=1e-2, concurrency=1, precision="fp32", max_turns=1)  # fmt: skip
    return RLConfig(**(fields | changes))


def test_dapo_keeps_informative_groups_and_rolls_out_more_to_fill_the_step(tiny_model, examples_dir, tmp_path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", examples_dir, 4)
    # each step: the first task's two runs agree (dropped), so two more tasks are drawn, both mixed
    script = [RIGHT, RIGHT, RIGHT, WRONG, WRONG, RIGHT]
    result = train_rl(config(tiny_model, tasks), tmp_path / "run", rollout_model=scripted(script), progress=False)
    first, second = read_log(tmp_path / "run" / "log.jsonl")
    assert first.figures["tasks/drawn"] == 3 and first.figures["groups/dropped"] == pytest.approx(1 / 3)
    rollouts = ("tasks/drawn", "groups/dropped", "correct/mean", "reward/mean", "void/share")
    assert [second.figures[k] for k in rollouts] == [first.figures[k] for k in rollouts]
    assert first.figures["correct/mean"] == pytest.approx(4 / 6)
    # Eq. 8: a right one-turn answer is short (reward 1), a wrong well-formed one earns 0
    assert first.figures["reward/mean"] == pytest.approx(4 / 6)
    assert first.loss != 0.0
    # every run of each step is on disk with its group and reward, the dropped group's too
    runs = [json.loads(line) for line in (tmp_path / "run" / "rollouts" / "step-0001.jsonl").read_text().splitlines()]
    assert [(r["group"], r["reward"], r["outcome"]["status"] == "right") for r in runs] == [
        (0, 1.0, True), (0, 0.0, False), (1, 0.0, False), (1, 1.0, True), (2, 1.0, True), (2, 1.0, True)
    ]  # fmt: skip
    assert runs[0]["trajectory"]["answer"] == "@regions[4]"
    assert result.steps == 2 and (result.adapter / "adapter_config.json").is_file()
    assert (tmp_path / "run" / "reward.png").is_file()


def test_grpo_keeps_every_group(tiny_model, examples_dir, tmp_path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", examples_dir, 4)
    script = [RIGHT, RIGHT, RIGHT, WRONG] * 2
    train_rl(config(tiny_model, tasks, algo="grpo"), tmp_path / "run", rollout_model=scripted(script), progress=False)
    first, _ = read_log(tmp_path / "run" / "log.jsonl")
    assert first.figures["tasks/drawn"] == 2 and first.figures["groups/dropped"] == 0


def test_a_resumed_run_matches_an_uninterrupted_one(tiny_model, examples_dir, tmp_path) -> None:
    from safetensors.torch import load_file

    tasks = write_tasks(tmp_path / "tasks.jsonl", examples_dir, 4)
    script = [RIGHT, WRONG, WRONG, RIGHT]
    settings = config(tiny_model, tasks)
    train_rl(settings, tmp_path / "whole", rollout_model=scripted(script), progress=False)
    train_rl(settings, tmp_path / "resumed", rollout_model=scripted(script), progress=False)
    shutil.rmtree(tmp_path / "resumed" / "checkpoints" / "step-000002")
    shutil.rmtree(tmp_path / "resumed" / "adapter")
    train_rl(settings, tmp_path / "resumed", rollout_model=scripted(script), progress=False)
    a = load_file(tmp_path / "whole" / "adapter" / "adapter_model.safetensors")
    b = load_file(tmp_path / "resumed" / "adapter" / "adapter_model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((tmp_path / "resumed" / "config.json").read_text())["algo"] == "dapo"


@pytest.mark.parametrize("algo, gamma", [("dapo", 0.3), ("grpo", 0.0)])
def test_sequence_by_sequence_gradients_equal_the_batch_formula(tiny_model, tmp_path, algo, gamma) -> None:
    from transformers import AutoModelForCausalLM

    from datalyst.train._data import read_examples
    from datalyst.train._losses import mixed_loss, policy_loss
    from datalyst.train._rl import _logprobs, accumulate
    from datalyst.train._runtime import start_runtime

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    runtime = start_runtime("fp32", seed=0)
    examples = read_examples(write_examples(tmp_path / "e.jsonl", 6), max_length=100).examples
    runs, sft = examples[:4], examples[4:] if gamma else []
    advantages = [1.0, -1.0, 0.5, -0.5]
    with torch.no_grad():  # old log-probabilities off by +-0.3, so both clip bounds bind on some tokens
        olds = [_logprobs(model, e, runtime) + (0.3 if i % 2 else -0.3) for i, e in enumerate(runs)]
    accumulate(model, list(zip(runs, advantages, olds, strict=True)), sft, runtime, algo=algo, gamma=gamma,
               epsilon=0.2, epsilon_high=0.28)  # fmt: skip
    ours = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()

    def padded(rows):
        width = max(len(row) for row in rows)
        values = torch.stack([torch.nn.functional.pad(row, (0, width - len(row)), value=-1e4) for row in rows])
        mask = torch.stack([torch.arange(width) < len(row) for row in rows])
        return values, mask

    logprobs, mask = padded([_logprobs(model, e, runtime) for e in runs])
    old, _ = padded(olds)
    if algo == "dapo":
        sft_logprobs, sft_mask = padded([_logprobs(model, e, runtime) for e in sft])
        loss, stats = mixed_loss(logprobs, old, torch.tensor(advantages), mask, informative=torch.tensor([True, True]),
                                 sft_logprobs=sft_logprobs, sft_mask=sft_mask, gamma=gamma)  # fmt: skip
    else:
        loss, stats = policy_loss(logprobs, old, torch.tensor(advantages), mask, algo="grpo")
    assert stats["clip_ratio/low"] > 0 and stats["clip_ratio/high"] > 0
    loss.backward()
    for name, parameter in model.named_parameters():
        assert torch.allclose(ours[name], parameter.grad, atol=1e-6, rtol=1e-4), name


@pytest.mark.model
def test_a_real_step_samples_through_llama_cpp_with_the_policys_adapter(examples_dir, tmp_path) -> None:
    from datalyst.llm import model_path

    if not model_path("tiny").is_file():
        pytest.skip("the tiny GGUF is not cached (datalyst models fetch tiny)")
    tasks = write_tasks(tmp_path / "tasks.jsonl", examples_dir, 2)
    settings = RLConfig(tasks=[str(tasks)], model="embedded:tiny", algo="grpo", steps=1, prompts=1, group_size=2,
                        mini_batches=1, max_turns=2, max_tokens=48, concurrency=2, precision="fp32")  # fmt: skip
    result = train_rl(settings, tmp_path / "run", progress=False)
    (entry,) = read_log(tmp_path / "run" / "log.jsonl")
    assert entry.figures["tasks/drawn"] == 1 and 0 <= entry.figures["correct/mean"] <= 1
    assert (tmp_path / "run" / "rollout-adapter" / "adapter_model.gguf").is_file()  # what llama.cpp sampled with
    assert (result.adapter / "adapter_model.gguf").is_file()


def test_the_reward_adds_the_reward_models_score_and_follows_the_tag_curriculum(examples_dir, tmp_path) -> None:
    from datalyst.agent import Agent, AgentConfig
    from datalyst.train._rl import reward
    from datalyst.train._rollouts import score

    class Half:
        def score(self, trajectory) -> float:
            return 0.5

    tasks = write_tasks(tmp_path / "tasks.jsonl", examples_dir, 1)
    task = Task.model_validate_json(tasks.read_text())
    trajectory = asyncio.run(Agent(ReplayModel([RIGHT]), AgentConfig(dialect="jupiter", max_turns=1)).arun(task))
    run = asyncio.run(score(trajectory))
    settings = RLConfig(tasks=[str(tasks)], hrm_weight=0.4)
    assert reward(run, settings, 0) == 1.0  # right, well formed, far under 256 tokens
    assert reward(run, settings, 0, Half()) == pytest.approx(1.0 + 0.4 * 0.5)
    datarus = settings.model_copy(update={"structure": True, "dialect": "datarus", "steps": 3})
    # jupiter turns carry no datarus tags: the structural reward is 0, weighted 1 at the first step, 0.1 at the last
    assert reward(run, datarus, 0) == pytest.approx(0.0)
    assert reward(run, datarus, 2) == pytest.approx(0.9 * 1.0)


def test_dapo_sft_also_learns_from_the_expert_trajectories_of_dropped_groups(
    tiny_model, examples_dir, tmp_path
) -> None:
    from datalyst.agent import Agent, AgentConfig
    from datalyst.curate import Curated, Stratum

    tasks = write_tasks(tmp_path / "tasks.jsonl", examples_dir, 2)
    expert_run = tmp_path / "expert"
    expert_run.mkdir()
    with (expert_run / "kept.jsonl").open("w") as kept:
        for line in tasks.read_text().splitlines():
            task = Task.model_validate_json(line)
            agent = Agent(ReplayModel([RIGHT]), AgentConfig(dialect="jupiter", max_turns=1))
            trajectory = asyncio.run(agent.arun(task))
            record = Curated(id=trajectory.id, trajectory=trajectory, selected_by="expert",
                             stratum=Stratum.SUCCESS, overthinking=0.0)  # fmt: skip
            kept.write(record.model_dump_json() + "\n")
    settings = config(tiny_model, tasks, algo="dapo+sft", expert=str(expert_run), steps=2, prompts=1, oversample=2)
    # every group agrees (all right): both tasks are drawn and dropped, so only the SFT term trains
    train_rl(settings, tmp_path / "run", rollout_model=scripted([RIGHT] * 4), progress=False)
    first, last = read_log(tmp_path / "run" / "log.jsonl")
    assert first.figures["groups/dropped"] == 1.0 and first.figures["tasks/drawn"] == 2
    assert first.figures["gamma"] == pytest.approx(0.9) and last.figures["gamma"] == pytest.approx(0.05)
    assert first.loss > 0 and first.figures["clip_ratio/high"] == 0.0  # the loss is the SFT term alone


def test_a_task_file_with_nothing_to_learn_from_ends_before_the_model_loads(examples_dir, tmp_path) -> None:
    unverified = Task(id="u", question="How many regions are there?", files=[str(examples_dir / "sales.csv")])
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(unverified.model_dump_json() + "\n")
    with pytest.raises(ConfigError, match="none of the 1 tasks has a verified answer"):
        train_rl(config(tmp_path / "no-such-model", tasks), tmp_path / "rl", progress=False)
    assert not (tmp_path / "rl").exists()  # nothing started
