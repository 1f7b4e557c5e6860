"""RL over the real agent and sandbox with a scripted sampler and a tiny random policy: groups, rewards,
dynamic sampling, void runs left out, and a resumed run that matches an uninterrupted one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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
