"""``datalyst train``: fine-tune a model on curated trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.cli._app import app
from datalyst.cli._synth import parse_options
from datalyst.errors import ConfigError
from datalyst.train import LoraOptions, RLConfig, SFTConfig, adapter_to_gguf, package_adapter, train_rl, train_sft

train_app = typer.Typer(
    help="Train agents: SFT on curated trajectories, RL over the agent and sandbox.", no_args_is_help=True
)
app.add_typer(train_app, name="train")
console = Console(stderr=True, highlight=False)


@train_app.command("sft")
def sft_command(
    data: Annotated[
        list[Path],
        typer.Argument(help="examples.jsonl files, or folders of `curate export --format examples`: read as one set."),
    ],
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
    max_batch_tokens: Annotated[
        int, typer.Option(help="Padded tokens per forward pass; 0 = one example per pass (best on a CPU).")
    ] = 0,
    limit: Annotated[int | None, typer.Option(help="Train on this many examples, drawn by seed.")] = None,
    cap: Annotated[
        list[str] | None,
        typer.Option(help="PATH=N: at most N examples of that data path, drawn by seed (a source's share); repeat."),
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
    precision: Annotated[str, typer.Option(help="auto (bf16 where the hardware has it), bf16 or fp32.")] = "auto",
    save_every: Annotated[int, typer.Option(help="Checkpoint every this many steps.")] = 1,
    recompute: Annotated[
        bool, typer.Option(help="Gradient checkpointing: less memory for about a third more compute (large models).")
    ] = False,
) -> None:
    """Supervised fine-tuning on the agent's own tokens (LoRA by default); resumable at any step."""
    lora = parse_options(LoraOptions, r=lora_r, alpha=lora_alpha, dropout=lora_dropout) if lora_r else None
    caps = {}
    for item in cap or []:
        path, sep, count = item.rpartition("=")
        if not sep or not path or not count.isdigit():
            raise ConfigError(f"--cap {item}: write PATH=N, e.g. --cap runs/rounds/r1/expert/exports=200")
        caps[str(Path(path).resolve())] = int(count)
    config = parse_options(
        SFTConfig, data=[str(path.resolve()) for path in data], model=model, lora=lora, lr=lr,
        warmup_ratio=warmup_ratio, epochs=epochs, batch_size=batch_size, max_length=max_length,
        max_batch_tokens=max_batch_tokens, limit=limit, caps=caps, seed=seed, precision=precision, recompute=recompute,
    )  # fmt: skip
    result = train_sft(config, out, save_every=save_every)
    rate = result.tokens / result.seconds if result.seconds else 0.0
    console.print(
        f"{_steps(result.steps)} over {result.examples} examples, {result.tokens:,} tokens at {rate:.1f} tokens/s; "
        f"final loss {result.final_loss:.4f}; weights in {result.weights}"
    )


@train_app.command("rl")
def rl_command(
    tasks: Annotated[list[Path], typer.Argument(help="Task files (JSONL); tasks with a verified answer are used.")],
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes from the last checkpoint.")],
    model: Annotated[str, typer.Option(help="Base model spec (embedded:, gguf: or hf:).")] = "embedded:small",
    adapter: Annotated[
        Path | None, typer.Option(help="Adapter to start from: an SFT run's adapter/ or a GGUF adapter file.")
    ] = None,
    algo: Annotated[str, typer.Option(help="grpo, dapo or dapo+sft (DataMind's mix).")] = "dapo+sft",
    expert: Annotated[Path | None, typer.Option(help="Curation run whose kept trajectories feed the SFT term.")] = None,
    exclude: Annotated[
        list[Path] | None, typer.Option(help="Files of ids whose tasks are held out (repeatable).")
    ] = None,
    dialect: Annotated[str, typer.Option()] = "jupiter",
    steps: Annotated[int, typer.Option()] = 8,
    prompts: Annotated[int, typer.Option(help="Task groups per step.")] = 4,
    group_size: Annotated[int, typer.Option(help="Runs per task (G).")] = 4,
    oversample: Annotated[int, typer.Option(help="DAPO draws up to prompts x this many tasks to fill a step.")] = 2,
    mini_batches: Annotated[int, typer.Option(help="Optimizer steps per RL step.")] = 2,
    lr: Annotated[float, typer.Option()] = 1e-5,
    temperature: Annotated[float, typer.Option()] = 0.7,
    max_turns: Annotated[int, typer.Option()] = 6,
    max_tokens: Annotated[int, typer.Option(help="Tokens per model turn.")] = 768,
    hrm: Annotated[
        Path | None, typer.Option(help="A reward model (train hrm) whose score joins the answer reward.")
    ] = None,
    hrm_weight: Annotated[float, typer.Option(help="Weight of the reward model's score.")] = 0.5,
    structure: Annotated[bool, typer.Option(help="Add Datarus's tag reward on a cosine curriculum.")] = False,
    engine: Annotated[str, typer.Option(help="What samples the runs: auto, llamacpp or transformers.")] = "auto",
    concurrency: Annotated[int, typer.Option(help="Runs at once.")] = 4,
    seed: Annotated[int, typer.Option()] = 0,
    precision: Annotated[str, typer.Option(help="auto, bf16 or fp32.")] = "auto",
) -> None:
    """Reinforcement learning over the agent's own runs in the sandbox, rewarded by each task's judge."""
    config = parse_options(
        RLConfig, tasks=[str(path.resolve()) for path in tasks], model=model, adapter=str(adapter) if adapter else None,
        algo=algo, expert=str(expert) if expert else None, exclude=[str(path) for path in exclude or []],
        dialect=dialect, steps=steps, prompts=prompts, group_size=group_size, oversample=oversample,
        mini_batches=mini_batches, lr=lr, temperature=temperature, max_turns=max_turns, max_tokens=max_tokens,
        hrm=str(hrm) if hrm else None, hrm_weight=hrm_weight, structure=structure, engine=engine,
        concurrency=concurrency, seed=seed, precision=precision,
    )  # fmt: skip
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
