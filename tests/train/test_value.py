"""The value model on a tiny random backbone: Monte Carlo returns worked out by hand, a head whose scores stay in
[-1, 1] and ignore padding, training that moves predictions toward their targets, save and load, exact resume."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from value_helpers import answer, cell, trajectory

from datalyst.agent import Trajectory
from datalyst.errors import ConfigError, DataFileError
from datalyst.llm import ChatMessage, Role, common_prefix
from datalyst.tasks import Task
from datalyst.train import LoraOptions, load_policy
from datalyst.train._log import read_log
from datalyst.train._value import (
    ValueConfig,
    ValueExample,
    check_value,
    held_out_examples,
    load_value_model,
    monte_carlo_values,
    read_sources,
    read_value_examples,
    train_value,
    with_outcomes,
    write_value_examples,
)

torch = pytest.importorskip("torch")
# peft 0.21 reads transformers' deprecated is_gradient_checkpointing when it loads a saved adapter

SUMS = Task(id="sums", question="What is the total?", answer=4, judge="rule")
OPEN = Task(id="open", question="What stands out?")


def sampled() -> list[Trajectory]:
    """Four checkable runs of ``sums`` (two right), one unchecked run and one that failed on our side."""
    return [
        trajectory(SUMS, 0, [cell(0, "load()"), answer(1, "4")]),  # right
        trajectory(SUMS, 1, [cell(0, "load()"), answer(1, "5")], guidance="\nHint: sum it."),  # wrong
        trajectory(SUMS, 2, [cell(0, "other()"), answer(1, "4.01")]),  # right (within 3%)
        trajectory(SUMS, 3, [cell(0, "load()"), cell(1, "oops()", ok=False)]),  # no answer: wrong
        trajectory(OPEN, 0, [cell(0, "load()"), answer(1, "nothing")]),
        trajectory(SUMS, 4, [cell(0, "load()")], failed=True),
    ]


def test_monte_carlo_returns_average_the_runs_through_each_state() -> None:
    data = monte_carlo_values(with_outcomes(sampled()))
    assert (data.trajectories, data.unchecked, data.failed) == (4, 1, 1)
    values = {example.id: example.value for example in data.examples}
    # After load(): runs 0 (+1), 1 (-1, its guidance is not part of the state) and 3 (-1) share it: -1/3.
    # Each final state is one run's own outcome; other() is run 2's alone.
    assert values == pytest.approx(
        {"sums#0@1": -1 / 3, "sums#0@2": 1.0, "sums#1@2": -1.0, "sums#2@1": 1.0, "sums#2@2": 1.0, "sums#3@2": -1.0}
    )
    state = next(example for example in data.examples if example.id == "sums#0@1")
    assert [m.role for m in state.messages] == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER]
    assert state.messages[1].content == "Question: What is the total?"
    assert state.messages[2].content == "Action: load()" and "1" in state.messages[3].content


def test_value_data_round_trips_and_sources_are_read_one_by_one(tmp_path: Path) -> None:
    runs = sampled()
    for name in ("a", "b"):  # two runs with the same trajectory ids both count
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in runs))
    assert len(read_sources([tmp_path / "a", tmp_path / "b" / "samples.jsonl"])) == 2 * len(runs)
    with pytest.raises(DataFileError, match="does not exist"):
        read_sources([tmp_path / "c"])
    examples = monte_carlo_values(with_outcomes(runs)).examples
    write_value_examples(tmp_path / "values.jsonl", examples)
    assert read_value_examples(tmp_path) == examples
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataFileError, match="no value example"):
        read_value_examples(tmp_path / "empty.jsonl")


def states(count: int) -> list[ValueExample]:
    """Distinct short states with targets spread over [-1, 1]."""
    targets = [0.9, -0.9, 0.5, -0.5, 0.2, -0.2][:count]
    return [
        ValueExample(
            id=f"s{i}",
            value=value,
            messages=[
                ChatMessage(role=Role.USER, content=f"Observation: {i} rows"),
                ChatMessage(role=Role.ASSISTANT, content="Thought: " * (i + 1)),
            ],
        )
        for i, value in enumerate(targets)
    ]


def config(tiny_model: Path, data: Path, **changes) -> ValueConfig:
    fields = dict(data=str(data), model=f"hf:{tiny_model}", batch_size=4, lr=2e-2, precision="fp32", warmup_ratio=0.0,
                  lora=LoraOptions(r=4, alpha=8, dropout=0.1), dropout=0.1)  # fmt: skip
    return ValueConfig(**(fields | changes))


def test_the_head_stays_in_range_and_ignores_padding(tiny_model: Path) -> None:
    from datalyst.train._scorer import Scorer

    policy = load_policy(f"hf:{tiny_model}", lora=None)
    scorer = Scorer(policy.model, outputs=2, dropout=0.0).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    with torch.no_grad():
        assert torch.equal(scorer(ids, mask), torch.zeros(2, 2))  # the head starts at zero
        scorer.head[1].weight.normal_(0, 100.0)
        both = scorer(ids, mask)
        alone = scorer(ids[1:, :3], mask[1:, :3])
    assert both.shape == (2, 2) and both.abs().max() <= 1.0 and both.abs().max() > 0.99  # tanh saturates, no more
    assert torch.allclose(both[1], alone[0], atol=1e-6)  # padding is left out of the mean


def test_training_moves_predictions_toward_their_targets(tiny_model: Path, tmp_path: Path) -> None:
    examples = states(4)
    write_value_examples(tmp_path / "values.jsonl", examples)
    result = train_value(config(tiny_model, tmp_path, epochs=12), tmp_path / "run", progress=False)
    log = read_log(tmp_path / "run" / "log.jsonl")
    assert result.steps == 12 and result.items == 4 and result.too_long == 0
    # the head starts at 0, so the first step's loss is the mean squared target: (0.81 * 2 + 0.25 * 2) / 4 = 0.53
    assert log[0].loss == pytest.approx(0.53, rel=1e-5)
    assert log[-1].loss < 0.5 * log[0].loss
    model = load_value_model(tmp_path / "run")
    predicted = [model.score(example.messages) for example in examples]
    assert all(-1.0 <= p <= 1.0 for p in predicted)
    error = sum((p - e.value) ** 2 for p, e in zip(predicted, examples, strict=True)) / len(examples)
    assert error < 0.5 * 0.53
    assert predicted[0] > predicted[2] > 0 > predicted[3] > predicted[1]
    for name in ("adapter/adapter_config.json", "head.safetensors", "value.json"):
        assert (result.model / name).is_file()
    assert (tmp_path / "run" / "loss.png").is_file() and (tmp_path / "run" / "train.manifest.json").is_file()


def saved_scorer(tiny_model: Path, folder: Path, *, seed: int, dropout: float) -> tuple[Any, Any]:
    """A value model of the tiny model with LoRA layers and head drawn at random, as if trained, saved in ``folder``."""
    from datalyst.train._scorer import Scorer, ScoringCard, save_scorer

    torch.manual_seed(seed)
    scorer = Scorer(load_policy(f"hf:{tiny_model}", lora=LoraOptions(r=4, alpha=8)).model, outputs=1, dropout=dropout)
    with torch.no_grad():
        for name, parameter in scorer.named_parameters():
            if "lora_B" in name or name.startswith("head"):
                parameter.normal_(0, 0.5)  # LoRA B starts at zero
    card = ScoringCard(model=f"hf:{tiny_model}", outputs=["value"], dropout=dropout)
    save_scorer(scorer.eval(), folder, card, name="value")
    return scorer, card


def test_a_saved_value_model_loads_with_identical_scores(tiny_model: Path, tmp_path: Path) -> None:
    from datalyst.train._scorer import LoadedScorer, encode

    scorer, card = saved_scorer(tiny_model, tmp_path / "value", seed=1, dropout=0.5)
    loaded = load_value_model(tmp_path / "value")
    messages = states(1)[0].messages
    ids = torch.tensor([encode(messages, loaded.loaded.tokenizer)])
    with torch.no_grad():
        before = scorer(ids, torch.ones_like(ids))[0, 0].item()
    assert loaded.score(messages) == pytest.approx(before, abs=1e-6) and before != 0.0
    assert isinstance(loaded.loaded, LoadedScorer) and loaded.loaded.card == card
    with pytest.raises(DataFileError, match="holds no value model"):
        load_value_model(tiny_model)


def test_scoring_runs_only_what_a_cached_conversation_does_not_share(tiny_model: Path, tmp_path: Path) -> None:
    from datalyst.train._scorer import LoadedScorer, encode

    saved_scorer(tiny_model, tmp_path / "value", seed=2, dropout=0.0)
    loaded = LoadedScorer(tmp_path / "value", name="value")
    ran = []
    loaded.scorer.backbone.register_forward_pre_hook(lambda _, args, kwargs: ran.append(kwargs["input_ids"].shape[1]),
                                                    with_kwargs=True)  # fmt: skip

    def turn(text: str) -> list[ChatMessage]:
        return [ChatMessage(role=Role.ASSISTANT, content=text), ChatMessage(role=Role.USER, content="Observation: ok")]

    root = [ChatMessage(role=Role.USER, content="Count the rows of the file.")]
    child, sibling = root + turn("Thought: load it."), root + turn("Thought: count them.")
    grandchild = child + turn("Formatted answer: @rows[3]")
    for messages in (root, child, sibling, grandchild, child, [ChatMessage(role=Role.USER, content="Other.")]):
        ids = encode(messages, loaded.tokenizer)
        with torch.no_grad():
            whole = loaded.scorer(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))[0, 0].item()
        shared = max((common_prefix(ids, key) for key in loaded._prefixes), default=0)
        ran.clear()
        assert loaded.predict(messages)["value"] == pytest.approx(whole, abs=1e-5)
        assert ran == [max(len(ids) - shared, 1)]
    child_ids = encode(child, loaded.tokenizer)
    shared_by = [common_prefix(child_ids, encode(m, loaded.tokenizer)) for m in (sibling, grandchild)]
    assert 0 < shared_by[0] < len(child_ids) == shared_by[1]  # a sibling crops, a child extends
    other = tuple(encode([ChatMessage(role=Role.USER, content="Other.")], loaded.tokenizer))
    assert list(loaded._prefixes)[-2:] == [tuple(child_ids), other]  # kept in the order last scored
    # a budget of what the last two hold keeps those two: the oldest go first
    loaded.cache_bytes = loaded.token_bytes * (len(child_ids) + len(other))
    loaded.predict(child)
    assert list(loaded._prefixes) == [other, tuple(child_ids)]


def test_a_cached_token_costs_what_its_keys_values_and_sum_take(tiny_model: Path, tmp_path: Path) -> None:
    from datalyst.train._scorer import LoadedScorer

    saved_scorer(tiny_model, tmp_path / "value", seed=2, dropout=0.0)
    loaded = LoadedScorer(tmp_path / "value", name="value")
    loaded.predict([ChatMessage(role=Role.USER, content="Count the rows of the file.")])
    [(ids, prefix)] = loaded._prefixes.items()
    tensors = [t for layer in prefix.cache.layers for t in (layer.keys, layer.values)] + [prefix.sums]
    assert loaded.token_bytes * len(ids) == sum(t.nbytes for t in tensors)


def test_long_states_are_left_out_and_counted(tiny_model: Path, tmp_path: Path) -> None:
    examples = states(3)
    examples[0].messages.append(ChatMessage(role=Role.USER, content="Observation: " + "many rows " * 200))
    write_value_examples(tmp_path / "values.jsonl", examples)
    result = train_value(config(tiny_model, tmp_path, max_length=200), tmp_path / "run", progress=False)
    assert (result.items, result.too_long) == (2, 1)
    with pytest.raises(DataFileError, match="fits in 5 tokens"):
        train_value(config(tiny_model, tmp_path, max_length=5), tmp_path / "other", progress=False)


def test_a_resumed_run_matches_an_uninterrupted_one(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    write_value_examples(tmp_path / "values.jsonl", states(6))
    settings = config(tiny_model, tmp_path, epochs=2)  # 4 steps (4 + 2 per epoch), dropout on: the RNG must resume
    train_value(settings, tmp_path / "whole", progress=False)
    resumed = tmp_path / "resumed"
    train_value(settings, resumed, save_every=2, progress=False)
    shutil.rmtree(resumed / "checkpoints" / "step-000004")  # as if it had stopped after step 3
    shutil.rmtree(resumed / "value")
    train_value(settings, resumed, progress=False)
    for name in ("adapter/adapter_model.safetensors", "head.safetensors"):
        a, b = load_file(tmp_path / "whole" / "value" / name), load_file(resumed / "value" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert load_file(resumed / "value" / "head.safetensors")["1.weight"].abs().sum() > 0
    losses = [[e.loss for e in read_log(run / "log.jsonl")] for run in (resumed, tmp_path / "whole")]
    assert losses[0] == losses[1]
    with pytest.raises(ConfigError, match="other settings \\(lr\\)"):
        train_value(config(tiny_model, tmp_path, epochs=2, lr=1e-3), resumed, progress=False)


def test_the_value_commands(tiny_model: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from datalyst.cli._app import app
    from datalyst.cli._train_value import value_command  # noqa: F401  (registers the commands)

    (tmp_path / "samples.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in sampled()))
    runner = CliRunner()
    values = tmp_path / "v.jsonl"
    done = runner.invoke(app, ["train", "value-data", str(tmp_path / "samples.jsonl"), "--out", str(values)])
    assert done.exit_code == 0, done.output
    assert "6 states from 4 trajectories" in done.output and len(read_value_examples(tmp_path / "v.jsonl")) == 6
    done = runner.invoke(app, ["train", "value", str(tmp_path / "v.jsonl"), "--out", str(tmp_path / "run"),
                               "--model", f"hf:{tiny_model}", "--lora-r", "2", "--batch-size", "4", "--limit", "4",
                               "--precision", "fp32"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "1 steps over 4 items" in done.output and (tmp_path / "run" / "value" / "value.json").is_file()
    done = runner.invoke(app, ["train", "value-check", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    assert "2 states (" in done.output and "AUC" in done.output  # the two it did not draw
    done = runner.invoke(app, ["train", "value-check", str(tmp_path / "run"), "--data", str(values), "--states", "5"])
    assert done.exit_code == 0 and "5 states (" in done.output, done.output
    done = runner.invoke(app, ["train", "value-check", str(tmp_path / "run" / "value")])
    assert isinstance(done.exception, DataFileError) and "give the run folder" in str(done.exception)


class Fixed:
    """A value model that gives each state the score written in its first message."""

    def score(self, messages: list[ChatMessage]) -> float:
        return float(messages[0].content)


def test_a_value_check_measures_how_scores_follow_values() -> None:
    def example(value: float, score: float) -> ValueExample:
        return ValueExample(id=f"{value}", value=value, messages=[ChatMessage(role=Role.USER, content=str(score))])

    check = check_value(Fixed(), [example(1.0, 0.3), example(0.5, 0.1), example(-0.5, 0.2), example(-1.0, 0.0)],
                        progress=False)  # fmt: skip
    # by hand: 3 of the 4 (positive, other) pairs are ordered right; r = 0.25 / sqrt(0.05 * 2.5)
    assert (check.states, check.positives, check.low, check.high) == (4, 2, 0.0, 0.3)
    assert check.auc == pytest.approx(0.75) and check.pearson == pytest.approx(0.5**0.5)
    constant = check_value(Fixed(), [example(1.0, 0.2), example(-1.0, 0.2)], progress=False)
    assert (constant.pearson, constant.auc) == (None, 0.5)  # one score for all: chance, and no correlation
    assert check_value(Fixed(), [example(1.0, 0.2), example(0.5, 0.1)], progress=False).auc is None
    with pytest.raises(DataFileError, match="no value example"):
        check_value(Fixed(), [], progress=False)


def test_the_held_out_states_are_those_a_run_did_not_train_on(tiny_model: Path, tmp_path: Path) -> None:
    examples = states(3)
    examples[0].messages.append(ChatMessage(role=Role.USER, content="Observation: " + "many rows " * 200))
    write_value_examples(tmp_path / "values.jsonl", examples)
    train_value(config(tiny_model, tmp_path, max_length=200), tmp_path / "run", progress=False)
    held = held_out_examples(tmp_path / "run", load_value_model(tmp_path / "run"))
    assert [e.id for e in held] == ["s0"]  # too long to train on
