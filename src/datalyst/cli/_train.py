"""``datalyst train``: fine-tune a model on curated trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.cli._app import app
from datalyst.cli._synth import parse_options
from datalyst.train import LoraOptions, SFTConfig, train_sft

train_app = typer.Typer(help="Fine-tune models on curated trajectories (SFT).", no_args_is_help=True)
app.add_typer(train_app, name="train")
console = Console(stderr=True, highlight=False)


@train_app.command("sft")
def sft_command(
    data: Annotated[Path, typer.Argument(help="examples.jsonl, or the folder of `curate export --format examples`.")],
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes from the last checkpoint.")],
    model: Annotated[str, typer.Option(help="Model spec to train (embedded:, gguf: or hf:).")] = "embedded:small",
    lora_r: Annotated[int, typer.Option(help="LoRA rank; 0 fine-tunes every weight.")] = 16,
    lora_alpha: Annotated[int, typer.Option(help="LoRA scale numerator (the update is scaled by alpha / r).")] = 32,
    lora_dropout: Annotated[float, typer.Option()] = 0.05,
    lr: Annotated[float, typer.Option(help="Peak learning rate (after warm-up; cosine decay to 0).")] = 2e-4,
    warmup_ratio: Annotated[float, typer.Option(help="Share of the steps spent warming up.")] = 0.1,
    epochs: Annotated[int, typer.Option()] = 1,
    batch_size: Annotated[int, typer.Option(help="Examples per optimizer step (over all processes).")] = 16,
    max_length: Annotated[int, typer.Option(help="Longer examples are left out, not cut.")] = 4096,
    max_batch_tokens: Annotated[int, typer.Option(help="Padded tokens per forward pass.")] = 4096,
    limit: Annotated[int | None, typer.Option(help="Train on this many examples, drawn by seed.")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    precision: Annotated[str, typer.Option(help="auto (bf16 where the hardware has it), bf16 or fp32.")] = "auto",
    save_every: Annotated[int, typer.Option(help="Checkpoint every this many steps.")] = 1,
) -> None:
    """Supervised fine-tuning on the agent's own tokens (LoRA by default); resumable at any step."""
    lora = parse_options(LoraOptions, r=lora_r, alpha=lora_alpha, dropout=lora_dropout) if lora_r else None
    config = parse_options(
        SFTConfig, data=str(data.resolve()), model=model, lora=lora, lr=lr, warmup_ratio=warmup_ratio, epochs=epochs,
        batch_size=batch_size, max_length=max_length, max_batch_tokens=max_batch_tokens, limit=limit, seed=seed,
        precision=precision,
    )  # fmt: skip
    result = train_sft(config, out, save_every=save_every)
    rate = result.tokens / result.seconds if result.seconds else 0.0
    console.print(
        f"{result.steps} steps over {result.examples} examples, {result.tokens:,} tokens at {rate:.1f} tokens/s; "
        f"final loss {result.final_loss:.4f}; weights in {result.weights}"
    )
