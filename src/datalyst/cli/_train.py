"""``datalyst train``: fine-tune a model on curated trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.cli._app import app
from datalyst.cli._options import config_command
from datalyst.cli._shared import absolute, absolute_all
from datalyst.errors import ConfigError
from datalyst.train import RLConfig, SFTConfig, adapter_to_gguf, package_adapter, train_rl, train_sft

train_app = typer.Typer(
    help="Train agents: SFT on curated trajectories, RL over the agent and sandbox.", no_args_is_help=True
)
app.add_typer(train_app, name="train")
console = Console(stderr=True, highlight=False)


@config_command(train_app, "sft", SFTConfig, arguments=["data"], convert={"data": absolute_all})
def sft_command(
    config: SFTConfig,
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes from the last checkpoint.")],
    save_every: Annotated[int, typer.Option(help="Checkpoint every this many steps.")] = 1,
) -> None:
    """Supervised fine-tuning on the agent's own tokens (LoRA by default); resumable at any step."""
    if not config.data:
        raise ConfigError("give the examples to train on: DATA... (or data in --config)")
    caps = {absolute(path): count for path, count in config.caps.items()}  # as the data paths are
    result = train_sft(config.model_copy(update={"caps": caps}), out, save_every=save_every)
    rate = result.tokens / result.seconds if result.seconds else 0.0
    console.print(
        f"{_steps(result.steps)} over {result.examples} examples, {result.tokens:,} tokens at {rate:.1f} tokens/s; "
        f"final loss {result.final_loss:.4f}; weights in {result.weights}"
    )


@config_command(train_app, "rl", RLConfig, arguments=["tasks"], convert={"tasks": absolute_all})
def rl_command(
    config: RLConfig,
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes from the last checkpoint.")],
) -> None:
    """Reinforcement learning over the agent's own runs in the sandbox, rewarded by each task's judge."""
    if not config.tasks:
        raise ConfigError("give the task files to learn from: TASKS... (or tasks in --config)")
    result = train_rl(config, out)
    console.print(f"{_steps(result.steps)}, mean reward {result.mean_reward:.3f}; adapter in {result.adapter}")


@train_app.command("convert")
def convert_command(
    adapter: Annotated[Path, typer.Argument(help="A peft LoRA adapter folder.", show_default=False)],
    base: Annotated[str, typer.Option(help="The model spec the adapter was trained on.")] = "embedded:small",
    outtype: Annotated[str, typer.Option(help="Tensor type: f32 (exact), f16, bf16 or q8_0.")] = "f32",
) -> None:
    """Convert a LoRA adapter for llama.cpp (train sft and rl do it themselves for GGUF bases)."""
    path = adapter_to_gguf(adapter, base=base, outtype=outtype)  # type: ignore[arg-type]
    console.print(f"wrote {path}; run it with --model '{base}?adapter={adapter}'")


@train_app.command("package")
def package_command(
    run: Annotated[Path, typer.Argument(help="A finished sft or rl run folder.", show_default=False)],
    out: Annotated[Path, typer.Option(help="The GGUF adapter to write; its manifest goes beside it as .json.")],
    outtype: Annotated[str, typer.Option(help="Tensor type: f16 (half the size), f32, bf16 or q8_0.")] = "f16",
) -> None:
    """Convert a run's adapter for llama.cpp and write, beside it, the manifest of how it was trained."""
    manifest = package_adapter(run, out, outtype=outtype)  # type: ignore[arg-type]
    console.print(f"wrote {out} and {manifest}")


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"
