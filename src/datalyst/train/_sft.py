"""Supervised fine-tuning on exported training examples: the loss on the agent's own tokens only.

One optimizer step takes ``batch_size`` examples (the seeded order of ``_data``), groups them by
length into padded micro-batches of at most ``max_batch_tokens`` (0, the default: one example per
forward pass, no padding) and accumulates their gradients. The
loss is the mean over every trained token of the step (token-level, so a long trajectory weighs by
its tokens, and micro-batching never changes it). Logits are computed only where a trained token is
predicted: the vocabulary projection and its float32 softmax are a large share of a small model's
work, and the trajectory's prompt and observations need none. On a CPU with native bfloat16 the
forward and backward passes run under bfloat16 autocast (the weights stay float32).

A run folder holds ``config.json``, ``examples.txt`` (the ids trained on, which RL can hold out),
``log.jsonl`` (one line per step), ``checkpoints/step-NNNNNN`` (trainable weights, optimizer, scheduler
and random states: a resumed run continues exactly) and, at the end, ``adapter/`` (peft) or ``model/``
(full fine-tuning), ``loss.png`` and ``train.manifest.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from datalyst.files import write_atomic
from datalyst.train._checkpoints import finish_run, start_run
from datalyst.train._data import IGNORE, Example, micro_batches, read_examples
from datalyst.train._log import plot_curve, read_log
from datalyst.train._logprobs import token_logprobs
from datalyst.train._loop import train_epochs
from datalyst.train._policy import LoraOptions, load_policy, pad_id, save_weights
from datalyst.train._runtime import Runtime, release_memory, start_runtime

Precision = Literal["auto", "bf16", "fp32"]


class SFTConfig(BaseModel):
    """Everything that decides an SFT run (saved as ``config.json``; a resumed run must match it)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    data: list[str]
    """examples.jsonl files, or folders of `curate export --format examples`: read as one set."""
    model: str = "embedded:small"
    """Model spec to train (embedded:, gguf: or hf:)."""
    lora: LoraOptions | None = LoraOptions()
    """None trains every weight (full fine-tuning)."""
    lr: float = 2e-4
    """Peak learning rate (after warm-up; cosine decay to 0). DataMind fine-tunes all weights of 7B-14B models at
    1e-5; LoRA on a small model needs a larger rate."""
    warmup_ratio: float = 0.1
    """Share of the steps spent warming up."""
    weight_decay: float = 0.0
    """AdamW's weight decay."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this norm."""
    epochs: int = 1
    """Passes over the examples."""
    batch_size: int = 16
    """Examples per optimizer step (over all processes)."""
    max_length: int = 4096
    """Longer examples are left out, not cut."""
    max_batch_tokens: int = 0
    """Padded tokens per forward pass; 0 puts each example in a pass of its own. On a CPU that is faster and
    lighter: a padded batch of two 2,235-token examples of the small model took 80 s and 13.9 GB for its
    forward and backward passes, each alone 30 s and 7.8 GB. Larger budgets pay off on GPUs."""
    limit: int | None = None
    """Train on this many examples, drawn by seed."""
    caps: dict[str, int] = Field(default={}, json_schema_extra={"flag": "--cap"})
    """PATH=N: at most N examples of that data path, drawn by seed (a source's share in a mix); repeat."""
    seed: int = 0
    """Seed of the example order, the draws and the new LoRA layers."""
    precision: Precision = "auto"
    """auto (bf16 where the hardware has it), bf16 or fp32."""
    recompute: bool = False
    """Gradient checkpointing: about a third more compute for a fraction of the activations' memory. The medium
    model (1.5B) on a 3,072-token example needs it within 24 GB: without it the process grew past 21 GB and was
    killed."""

    @field_validator("data", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value  # configs saved before mixes took one path

    @field_validator("lora", mode="before")
    @classmethod
    def _rank_zero_trains_every_weight(cls, value: object) -> object:
        return None if isinstance(value, dict) and value.get("r") == 0 else value


class SFTResult(BaseModel):
    """Where a finished run put its weights and what it measured."""

    out: Path
    weights: Path
    steps: int
    examples: int
    tokens: int
    seconds: float
    final_loss: float


def train_sft(config: SFTConfig, out: str | Path, *, save_every: int = 1, progress: bool = True) -> SFTResult:
    """Run (or resume) SFT as ``config`` says, writing into ``out``; see the module docstring for the folder."""
    out = Path(out)
    start_run(out, config)
    runtime = start_runtime(config.precision, seed=config.seed)
    policy = load_policy(config.model, lora=config.lora, recompute=config.recompute)
    selection = read_examples(
        config.data, max_length=config.max_length, limit=config.limit, caps=config.caps, seed=config.seed,
        vocab_size=policy.model.get_input_embeddings().num_embeddings,
    )  # fmt: skip
    examples = selection.examples
    if runtime.is_main:
        write_atomic(out / "examples.txt", "".join(f"{example.id}\n" for example in examples))
    padding = pad_id(policy.tokenizer)

    def step(model: Any, batch: list[Example]) -> tuple[float, int]:
        return sft_step(model, batch, runtime, max_batch_tokens=config.max_batch_tokens, pad_id=padding)

    train_epochs(out, config, policy.model, examples, step, runtime, save_every=save_every, progress=progress)
    return _finish(config, out, policy, runtime, examples, selection_counts=selection.model_dump(exclude={"examples"}))


def sft_step(
    model: Any, batch: Sequence[Example], runtime: Runtime, *, max_batch_tokens: int, pad_id: int
) -> tuple[float, int]:
    """Accumulate the gradients of this process's share of ``batch``; the step's mean loss and input tokens."""
    mine = list(batch[runtime.rank :: runtime.world_size])
    counts = runtime.sum(float(sum(example.trained_tokens for example in mine)))
    loss_sum, tokens = 0.0, 0
    groups = micro_batches(mine, max_tokens=max_batch_tokens)
    for index, group in enumerate(groups):
        input_ids, attention_mask, labels = collate(group, pad_id=pad_id, torch=runtime.torch)
        with runtime.accumulating(model, last=index == len(groups) - 1), runtime.autocast():
            summed = -token_logprobs(
                model, input_ids.to(runtime.device), attention_mask.to(runtime.device), labels.to(runtime.device)
            ).sum()
            runtime.backward(summed * runtime.world_size / counts)  # DDP averages gradients over processes
        loss_sum += summed.item()
        tokens += int(attention_mask.sum())
        release_memory()
    return runtime.sum(loss_sum) / counts, int(runtime.sum(float(tokens)))


def collate(group: Sequence[Example], *, pad_id: int, torch: Any) -> tuple[Any, Any, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` tensors of one micro-batch."""
    width = max(len(example.input_ids) for example in group)
    ids, mask, labels = [], [], []
    for example in group:
        padding = width - len(example.input_ids)
        ids.append(example.input_ids + [pad_id] * padding)
        mask.append([1] * len(example.input_ids) + [0] * padding)
        labels.append(example.labels + [IGNORE] * padding)
    return torch.tensor(ids), torch.tensor(mask), torch.tensor(labels)


def _finish(
    config: SFTConfig, out: Path, policy: Any, runtime: Runtime, examples: list[Example], selection_counts: dict
) -> SFTResult:
    """Save the trained weights, the loss curve and the run's manifest."""
    log = read_log(out / "log.jsonl")
    weights = out / ("adapter" if config.lora is not None else "model")
    if runtime.is_main:
        save_weights(runtime.unwrap(policy.model), policy.tokenizer, weights, base=config.model)
        plot_curve(log, out / "loss.png", key="loss", title=f"SFT of {config.model}")
    result = SFTResult(
        out=out,
        weights=weights,
        steps=len(log),
        examples=len(examples),
        tokens=sum(entry.tokens for entry in log),
        seconds=sum(entry.seconds for entry in log),
        final_loss=log[-1].loss,
    )
    if runtime.is_main:
        finish_run(out, config, result, data=selection_counts)
    return result
