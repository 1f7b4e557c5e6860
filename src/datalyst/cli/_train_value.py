"""``datalyst train value-data``, ``value`` and ``hrm``: JUPITER's value model and Datarus's reward model."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated

import typer

from datalyst.cli._options import config_command
from datalyst.cli._shared import absolute, absolute_all
from datalyst.cli._train import console, train_app
from datalyst.errors import ConfigError
from datalyst.train import (
    HRMConfig,
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


@config_command(train_app, "value", ValueConfig, arguments=["data"], convert={"data": absolute})
def value_command(config: ValueConfig, out: Out, save_every: SaveEvery = 1) -> None:
    """Train JUPITER's value model (LoRA backbone, mean-pooled head, tanh) with the squared error to the values."""
    _report(train_value(config, out, save_every=save_every))


@train_app.command("value-check")
def value_check_command(
    run: Annotated[Path, typer.Argument(help="The run folder of `datalyst train value`.")],
    data: Annotated[Path | None, typer.Option(help="Value data to score instead of the run's held-out states.")] = None,
    states: Annotated[int | None, typer.Option(min=1, help="Score this many of them, drawn by seed.")] = 60,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
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


@config_command(train_app, "hrm", HRMConfig, arguments=["trajectories"], convert={"trajectories": absolute_all})
def hrm_command(config: HRMConfig, out: Out, save_every: SaveEvery = 1) -> None:
    """Train Datarus's hierarchical reward model: step and trajectory scores plus preferences between runs."""
    if not config.trajectories:
        raise ConfigError("give the trajectories to learn from: TRAJECTORIES... (or trajectories in --config)")
    _report(train_hrm(config, out, save_every=save_every))


def _report(result: ScorerResult) -> None:
    console.print(
        f"{result.steps} steps over {result.items} items ({result.too_long} too long, left out); "
        f"final loss {result.final_loss:.4f}; model in {result.model}"
    )
