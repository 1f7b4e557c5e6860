"""``datalyst train value-data``, ``value`` and ``hrm``: JUPITER's value model and Datarus's reward model."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated, Any

import typer

from datalyst.cli._synth import parse_options
from datalyst.cli._train import console, train_app
from datalyst.train import (
    HRMConfig,
    LoraOptions,
    ScorerResult,
    ValueConfig,
    check_value,
    held_out_examples,
    load_value_model,
    monte_carlo_values,
    read_sources,
    read_value_examples,
    train_hrm,
    train_value,
    write_value_examples,
)

Sources = Annotated[list[Path], typer.Argument(help="Trajectories files (samples.jsonl) or curation run folders.")]
Out = Annotated[Path, typer.Option(help="Run folder; running again resumes from the last checkpoint.")]
Model = Annotated[str, typer.Option(help="Backbone model spec (embedded:, gguf: or hf:).")]
LoraR = Annotated[int, typer.Option(help="LoRA rank of the backbone.")]
LoraAlpha = Annotated[int, typer.Option(help="LoRA scale numerator (the update is scaled by alpha / r).")]
Dropout = Annotated[float, typer.Option(help="Dropout before the head's linear layer.")]
Lr = Annotated[float, typer.Option(help="Peak learning rate (after warm-up; cosine decay to 0).")]
Epochs = Annotated[int, typer.Option()]
BatchSize = Annotated[int, typer.Option(help="Items per optimizer step (one forward pass each).")]
MaxLength = Annotated[int, typer.Option(help="Longer conversations are left out, not cut.")]
Limit = Annotated[int | None, typer.Option(help="Train on this many items, drawn by seed.")]
Seed = Annotated[int, typer.Option()]
Precision = Annotated[str, typer.Option(help="auto (bf16 where the hardware has it), bf16 or fp32.")]
SaveEvery = Annotated[int, typer.Option(help="Checkpoint every this many steps.")]


@train_app.command("value-data")
def value_data_command(
    sources: Sources,
    out: Annotated[Path, typer.Option(help="The value data file to write (JSONL).")],
) -> None:
    """Value every state of sampled trajectories by its Monte Carlo return (+1 right, -1 wrong), until search
    gives Q-values."""
    data = monte_carlo_values(read_sources(sources))
    write_value_examples(out, data.examples)
    console.print(
        f"{len(data.examples)} states from {data.trajectories} trajectories written to {out}; left out "
        f"{data.unchecked} whose task has no checkable answer and {data.failed} that failed on our side"
    )


@train_app.command("value")
def value_command(
    data: Annotated[Path, typer.Argument(help="Value data: a JSONL file of `train value-data`, or its folder.")],
    out: Out,
    model: Model = "embedded:small",
    lora_r: LoraR = 16,
    lora_alpha: LoraAlpha = 32,
    dropout: Dropout = 0.1,
    lr: Lr = 1e-4,
    epochs: Epochs = 1,
    batch_size: BatchSize = 8,
    max_length: MaxLength = 4096,
    limit: Limit = None,
    seed: Seed = 0,
    precision: Precision = "auto",
    save_every: SaveEvery = 1,
) -> None:
    """Train JUPITER's value model (LoRA backbone, mean-pooled head, tanh) with the squared error to the values."""
    common = _common(model, lora_r, lora_alpha, dropout, lr, epochs, batch_size, max_length, limit, seed, precision)
    config = parse_options(ValueConfig, data=str(data.resolve()), **common)
    _report(train_value(config, out, save_every=save_every))


@train_app.command("value-check")
def value_check_command(
    run: Annotated[Path, typer.Argument(help="The run folder of `datalyst train value`.")],
    data: Annotated[Path | None, typer.Option(help="Value data to score instead of the run's held-out states.")] = None,
    states: Annotated[int | None, typer.Option(min=1, help="Score this many of them, drawn by seed.")] = 60,
    seed: Seed = 0,
) -> None:
    """How well a value model ranks states it did not train on: the run's data less what it trained on, or DATA."""
    model = load_value_model(run)
    examples = read_value_examples(data) if data is not None else held_out_examples(run, model)
    if states is not None and states < len(examples):
        examples = random.Random(seed).sample(examples, states)
    check = check_value(model, examples)
    console.print(
        f"{check.states} states ({check.positives} worth more than 0): correlation with their values "
        f"{_figure(check.pearson)}, AUC {_figure(check.auc)} (0.5 is chance); scores from {check.low:.3f} "
        f"to {check.high:.3f}"
    )


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


@train_app.command("hrm")
def hrm_command(
    sources: Sources,
    out: Out,
    model: Model = "embedded:small",
    lora_r: LoraR = 16,
    lora_alpha: LoraAlpha = 32,
    dropout: Dropout = 0.1,
    lr: Lr = 1e-4,
    epochs: Epochs = 1,
    batch_size: BatchSize = 8,
    max_length: MaxLength = 4096,
    limit: Limit = None,
    seed: Seed = 0,
    precision: Precision = "auto",
    save_every: SaveEvery = 1,
    step_weight: Annotated[float, typer.Option(help="Weight of the step-level items in the loss.")] = 1.0,
    trajectory_weight: Annotated[float, typer.Option(help="Weight of the trajectory-level items.")] = 1.0,
    preference_weight: Annotated[float, typer.Option(help="Weight of the preference pairs.")] = 1.0,
) -> None:
    """Train Datarus's hierarchical reward model: step and trajectory scores plus preferences between runs."""
    common = _common(model, lora_r, lora_alpha, dropout, lr, epochs, batch_size, max_length, limit, seed, precision)
    config = parse_options(
        HRMConfig, trajectories=[str(path.resolve()) for path in sources], step_weight=step_weight,
        trajectory_weight=trajectory_weight, preference_weight=preference_weight, **common,
    )  # fmt: skip
    _report(train_hrm(config, out, save_every=save_every))


def _common(
    model: str, lora_r: int, lora_alpha: int, dropout: float, lr: float, epochs: int, batch_size: int,
    max_length: int, limit: int | None, seed: int, precision: str,
) -> dict[str, Any]:  # fmt: skip
    lora = parse_options(LoraOptions, r=lora_r, alpha=lora_alpha)
    return dict(model=model, lora=lora, dropout=dropout, lr=lr, epochs=epochs, batch_size=batch_size,
                max_length=max_length, limit=limit, seed=seed, precision=precision)  # fmt: skip


def _report(result: ScorerResult) -> None:
    console.print(
        f"{result.steps} steps over {result.items} items ({result.too_long} too long, left out); "
        f"final loss {result.final_loss:.4f}; model in {result.model}"
    )
