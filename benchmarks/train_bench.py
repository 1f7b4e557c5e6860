"""Training speed: ``datalyst train sft`` against a plain ``transformers.Trainer`` LoRA run, same data and steps.

Both runs start from the same weights and the same LoRA initialisation (one seed), see the same
examples in the same order in steps of ``--batch`` examples, with the same schedule (warm-up 0.1, cosine) and
learning rate:

    (a) baseline  ``transformers.Trainer``, float32, one example per forward pass (no padding), gradient
                  accumulation over the step, logits over every position (what a plain LoRA script does)
    (b) datalyst  ``train_sft``: bfloat16 autocast where the CPU has it, logits only where a trained token
                  is predicted, length-grouped micro-batches

Printed: training tokens/s of each (input tokens of the examples over the time of the optimizer steps,
loading excluded), the ratio (b)/(a), and both loss curves with their largest gap.

    . .venv/bin/activate
    python benchmarks/train_bench.py --data runs/jupiter-examples --model embedded:small --examples 8 --batch 4
    python benchmarks/train_bench.py --data EXAMPLES --model embedded:tiny --examples 16 --batch 4   # quicker
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from datalyst.train import LoraOptions, SFTConfig, load_policy, read_examples, train_sft
from datalyst.train._data import step_batch, steps_per_epoch
from datalyst.train._log import read_log


def ordered_examples(config: SFTConfig) -> list[dict]:
    """The examples in the order ``train_sft`` takes them, as ``input_ids``/``labels`` rows."""
    examples = read_examples(config.data, max_length=config.max_length, limit=config.limit, seed=config.seed).examples
    steps = steps_per_epoch(len(examples), config.batch_size) * config.epochs
    batches = [step_batch(examples, step, batch_size=config.batch_size, seed=config.seed) for step in range(steps)]
    return [{"input_ids": e.input_ids, "labels": e.labels} for batch in batches for e in batch]


class StepTimes(TrainerCallback):
    """Wall time of each optimizer step (from its first forward pass to after the update) and its loss."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.losses: list[float] = []
        self._began = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self._began)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


class InOrder(Trainer):
    """A Trainer that takes the examples in the given order (the order ``train_sft`` uses)."""

    def _get_train_sampler(self, *args, **kwargs):
        return torch.utils.data.SequentialSampler(self.train_dataset)


def baseline(config: SFTConfig, out: Path) -> tuple[float, list[float], int]:
    """(a): seconds of the optimizer steps, the loss of each step, input tokens."""
    torch.manual_seed(config.seed)
    policy = load_policy(config.model, lora=config.lora)
    rows = ordered_examples(config)
    args = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=1, gradient_accumulation_steps=config.batch_size,
        learning_rate=config.lr, lr_scheduler_type="cosine", warmup_steps=config.warmup_ratio,
        num_train_epochs=1, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, bf16=False,
        max_grad_norm=config.max_grad_norm, weight_decay=config.weight_decay,
        dataloader_num_workers=0, seed=config.seed, disable_tqdm=True,
    )  # fmt: skip
    times = StepTimes()
    trainer = InOrder(model=policy.model, args=args, train_dataset=rows, callbacks=[times])
    trainer.train()
    return sum(times.seconds), times.losses, sum(len(row["input_ids"]) for row in rows)


def ours(config: SFTConfig, out: Path) -> tuple[float, list[float], int]:
    """(b): seconds of the optimizer steps, the loss of each step, input tokens."""
    train_sft(config, out, save_every=10**9, progress=False)
    log = read_log(out / "log.jsonl")
    return sum(e.seconds for e in log), [e.loss for e in log], sum(e.tokens for e in log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="examples.jsonl or its folder")
    parser.add_argument("--model", default="embedded:small")
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args()
    config = SFTConfig(
        data=options.data, model=options.model, lora=LoraOptions(dropout=0.0), lr=options.lr,
        batch_size=options.batch, limit=options.examples, max_length=options.max_length,
    )  # fmt: skip
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as work:
        base_s, base_losses, base_tokens = baseline(config.model_copy(update={"precision": "fp32"}), Path(work) / "a")
        our_s, our_losses, our_tokens = ours(config, Path(work) / "b")
    assert base_tokens == our_tokens, (base_tokens, our_tokens)
    gap = max(abs(a - b) for a, b in zip(base_losses, our_losses, strict=True))
    base_rate, our_rate = base_tokens / base_s, our_tokens / our_s
    figures = {
        "model": options.model, "examples": options.examples, "batch": options.batch, "threads": threads,
        "tokens": our_tokens, "baseline_tokens_per_s": base_rate, "datalyst_tokens_per_s": our_rate,
        "ratio": base_s / our_s, "baseline_losses": base_losses, "datalyst_losses": our_losses, "largest_loss_gap": gap,
    }  # fmt: skip
    shape = f"{options.examples} examples in steps of {options.batch}"
    print(f"model {options.model}, {shape}, {our_tokens:,} tokens, {threads} threads")
    print(f"(a) transformers.Trainer fp32 LoRA   {base_rate:8.1f} tokens/s")
    print(f"(b) datalyst train sft               {our_rate:8.1f} tokens/s   ratio {base_s / our_s:.2f}x")
    print("loss per step (a): " + " ".join(f"{v:.4f}" for v in base_losses))
    print("loss per step (b): " + " ".join(f"{v:.4f}" for v in our_losses) + f"   largest gap {gap:.4f}")
    if options.json:
        options.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
