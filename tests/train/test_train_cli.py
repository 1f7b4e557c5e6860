"""``datalyst train``: the commands a user runs, as a subprocess, on the tiny random model."""

from __future__ import annotations

from train_helpers import write_examples

from datalyst.tasks import Task, write_tasks


def test_sft_trains_and_a_changed_setting_stops_the_resume(datalyst, tiny_model, tmp_path) -> None:
    data = write_examples(tmp_path / "e.jsonl", 4)
    command = ["train", "sft", str(data), "--out", str(tmp_path / "run"), "--model", f"hf:{tiny_model}",
               "--batch-size", "2", "--lora-r", "4", "--precision", "fp32"]  # fmt: skip
    done = datalyst(*command)
    assert done.returncode == 0, done.stderr
    assert "2 steps over 4 examples" in done.stderr and (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    again = datalyst(*command, "--lr", "1e-3")
    assert again.returncode == 2 and "other settings (lr)" in again.stderr


def test_sft_caps_a_source_of_the_mix(datalyst, tiny_model, tmp_path) -> None:
    expert, sampled = write_examples(tmp_path / "expert.jsonl", 6, seed=1), write_examples(tmp_path / "s.jsonl", 2)
    command = ["train", "sft", str(expert), str(sampled), "--out", str(tmp_path / "run"), "--model",
               f"hf:{tiny_model}", "--batch-size", "4", "--lora-r", "4", "--precision", "fp32"]  # fmt: skip
    wrong = datalyst(*command, "--cap", "200")
    assert wrong.returncode == 2 and "--cap 200: write KEY=VALUE" in wrong.stderr
    done = datalyst(*command, "--cap", f"{expert}=2")
    assert done.returncode == 0, done.stderr
    assert "1 step over 4 examples" in done.stderr


def test_rl_runs_a_step_with_the_policy_sampling(datalyst, tiny_model, examples_dir, tmp_path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    sales = str(examples_dir / "sales.csv")
    write_tasks([Task(id="r", question="How many regions?", format="@regions[n]", answer={"regions": "4"},
                      judge="dabench", files=[sales])], tasks)  # fmt: skip
    done = datalyst("train", "rl", str(tasks), "--out", str(tmp_path / "rl"), "--model", f"hf:{tiny_model}",
                    "--algo", "grpo", "--steps", "1", "--prompts", "1", "--group-size", "2", "--max-turns", "1",
                    "--max-tokens", "8", "--precision", "fp32")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 step, mean reward" in done.stderr and (tmp_path / "rl" / "reward.png").is_file()
