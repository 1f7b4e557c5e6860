"""The network of the value model and the reward model, its training loop, and the folder it is saved in.

The network is a causal LM that scores a conversation in [-1, 1]: the backbone's last hidden states are
averaged over the attention mask (padding left out), then go through dropout, one linear layer and tanh
(JUPITER's value head). The linear layer has one output per score the model gives (the value model one; the
HRM a step score and a trajectory score), so every forward pass reaches all of its weights, as a multi-process
run needs. It starts at zero: every state scores 0, the midpoint, and tanh starts in its linear range. Only
the last position goes through the vocabulary projection (``logits_to_keep=1``): scores need hidden states only.

Training takes :class:`Item` s, each a micro-batch of its own: one conversation regressed onto a target
(``value_loss``), or a preferred and a rejected conversation (``preference_loss``, padded into one forward
pass). A step's loss is the weighted mean over its items. The run folder is SFT's (``config.json``,
``log.jsonl``, resumable checkpoints whose trainable weights are the LoRA layers and the head, ``loss.png``,
``train.manifest.json``); the model lands in ``RUN/NAME/``: ``adapter/`` (peft), ``head.safetensors`` and
``NAME.json`` (a :class:`ScoringCard`, written last).
"""

from __future__ import annotations

import copy
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel
from torch import Tensor, nn

from datalyst.errors import DataFileError
from datalyst.files import write_atomic
from datalyst.llm import ChatMessage, ChatTokenizer, common_prefix
from datalyst.train._checkpoints import finish_run, start_run
from datalyst.train._data import Example
from datalyst.train._log import plot_curve, read_log
from datalyst.train._loop import train_epochs
from datalyst.train._model_losses import preference_loss, value_loss
from datalyst.train._policy import load_policy, pad_id
from datalyst.train._runtime import Runtime, release_memory, start_runtime
from datalyst.train._sft import collate
from datalyst.train._value import ScorerConfig, ScorerResult


class Scorer(nn.Module):
    """``backbone`` (a causal LM, with LoRA or not) plus the scoring head; ``forward`` gives ``(B, outputs)``."""

    def __init__(self, backbone: Any, *, outputs: int, dropout: float) -> None:
        super().__init__()
        self.backbone = backbone
        linear = nn.Linear(backbone.get_input_embeddings().embedding_dim, outputs)
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)
        self.head = nn.Sequential(nn.Dropout(dropout), linear, nn.Tanh())

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        output = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, logits_to_keep=1
        )
        return self.head(mean_pool(output.hidden_states[-1].float(), attention_mask))


def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """The mean of ``hidden`` ``(B, T, H)`` over the positions where ``attention_mask`` ``(B, T)`` is 1: ``(B, H)``."""
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


class Item(BaseModel):
    """One training item: a conversation and its ``target``, or (``target`` None) a preferred conversation and
    a rejected one; ``output`` is the head's output it trains, ``weight`` its share in the step's loss."""

    id: str
    inputs: list[list[int]]
    output: int = 0
    target: float | None = None
    weight: float = 1.0


class ScoringCard(BaseModel):
    """What a saved scorer is: its base model, the names of its outputs, and the head's pooling and dropout."""

    model: str
    outputs: list[str]
    pooling: Literal["mean"] = "mean"
    dropout: float


def encode(messages: Sequence[ChatMessage], tokenizer: ChatTokenizer) -> list[int]:
    """The token ids of a conversation as the chat template writes it (no generation prompt)."""
    return tokenizer.encode(tokenizer.render(messages, add_generation_prompt=False))


def fit(
    config: ScorerConfig,
    out: Path,
    make_items: Callable[[ChatTokenizer], list[Item]],
    *,
    name: str,
    outputs: list[str],
    title: str,
    save_every: int,
    progress: bool,
) -> ScorerResult:
    """Train (or resume) a scorer with ``outputs`` on the items ``make_items`` builds with the model's tokenizer,
    in run folder ``out``; the model is saved in ``out / name``."""
    start_run(out, config)
    runtime = start_runtime(config.precision, seed=config.seed)
    policy = load_policy(config.model, lora=config.lora)
    items, too_long = select_items(make_items(policy.chat_tokenizer), config)
    scorer = Scorer(policy.model, outputs=len(outputs), dropout=config.dropout)
    padding = pad_id(policy.tokenizer)

    def step(model: Any, batch: list[Item]) -> tuple[float, int]:
        return scorer_step(model, batch, runtime, pad_id=padding)

    # The trainable parameters: the LoRA layers and the head.
    model = train_epochs(out, config, scorer, items, step, runtime, save_every=save_every, progress=progress)
    return _finish(config, out, runtime.unwrap(model), runtime, name=name, outputs=outputs, title=title,
                   items=len(items), too_long=too_long)  # fmt: skip


def _finish(
    config: ScorerConfig, out: Path, scorer: Scorer, runtime: Runtime, *, name: str, outputs: list[str], title: str,
    items: int, too_long: int,
) -> ScorerResult:  # fmt: skip
    """Save the trained model in ``out / name``, the loss curve and the run's manifest."""
    log = read_log(out / "log.jsonl")
    folder = out / name
    if runtime.is_main:
        save_scorer(scorer, folder, ScoringCard(model=config.model, outputs=outputs, dropout=config.dropout), name=name)
        plot_curve(log, out / "loss.png", key="loss", title=title)
    result = ScorerResult(out=out, model=folder, steps=len(log), items=items, too_long=too_long,
                          seconds=sum(e.seconds for e in log), final_loss=log[-1].loss)  # fmt: skip
    if runtime.is_main:
        finish_run(out, config, result)
    return result


def scorer_step(model: Any, batch: Sequence[Item], runtime: Runtime, *, pad_id: int) -> tuple[float, int]:
    """Accumulate the gradients of this process's share of ``batch``; the step's loss and input tokens."""
    mine = list(batch[runtime.rank :: runtime.world_size])
    count = runtime.sum(float(len(mine)))
    total, tokens = 0.0, 0
    for index, item in enumerate(mine):
        rows = [Example(id=item.id, input_ids=ids, labels=ids) for ids in item.inputs]
        input_ids, attention_mask, _ = collate(rows, pad_id=pad_id, torch=torch)
        with runtime.accumulating(model, last=index == len(mine) - 1), runtime.autocast():
            scores = model(input_ids.to(runtime.device), attention_mask.to(runtime.device))[:, item.output].float()
            loss = item_loss(scores, item)
            runtime.backward(loss * item.weight * runtime.world_size / count)  # DDP averages over processes
        total += item.weight * loss.item()
        tokens += int(attention_mask.sum())
        release_memory()
    return runtime.sum(total) / count, int(runtime.sum(float(tokens)))


def item_loss(scores: Tensor, item: Item) -> Tensor:
    """The loss of one item from its scores (one row per input)."""
    if item.target is None:
        return preference_loss(scores[:1], scores[1:])
    return value_loss(scores, torch.full_like(scores, item.target))


def save_scorer(scorer: Scorer, folder: Path, card: ScoringCard, *, name: str) -> None:
    """Write ``scorer``'s peft adapter, its head and ``card`` (as ``NAME.json``, last) into ``folder``."""
    from safetensors.torch import save_file

    scorer.backbone.save_pretrained(folder / "adapter")
    save_file({key: value.detach().cpu().contiguous() for key, value in scorer.head.state_dict().items()},
              folder / "head.safetensors")  # fmt: skip
    write_atomic(folder / f"{name}.json", card.model_dump_json(indent=2))


class LoadedScorer:
    """A saved scorer ready to score conversations: LoRA merged into the weights, eval mode, no gradients.

    Search and the reward model score conversations that extend ones scored before (a child state, the next
    step of a trajectory), so the last conversations scored keep the backbone's key/value cache and the
    running sum of its last hidden states, as many as ``cache_mb`` holds: a conversation sharing a prefix with
    one of them runs only its new tokens. The budget is in memory, not conversations, so that concurrent
    searches, whose states interleave, still find their parents. The causal backbone gives the prefix the same
    states either way, so the score is the one a whole forward pass gives, up to float rounding. Thread-safe:
    one conversation is scored at a time.
    """

    def __init__(self, path: str | Path, *, name: str, device: str = "cpu", cache_mb: float = 2048) -> None:
        from safetensors.torch import load_file

        folder = _model_folder(Path(path), name)
        self.card = ScoringCard.model_validate_json((folder / f"{name}.json").read_text(encoding="utf-8"))
        policy = load_policy(self.card.model, lora=None, adapter=str(folder / "adapter"))
        self.tokenizer: ChatTokenizer = policy.chat_tokenizer
        self.device = device
        self.scorer = Scorer(policy.model.merge_and_unload(), outputs=len(self.card.outputs), dropout=self.card.dropout)
        self.scorer.head.load_state_dict(load_file(folder / "head.safetensors"))
        self.scorer.to(device).eval()
        self.cache_bytes = cache_mb * 2**20
        self.token_bytes = _token_bytes(self.scorer.backbone)
        self._prefixes: OrderedDict[tuple[int, ...], _Prefix] = OrderedDict()
        self._lock = threading.Lock()

    def predict(self, messages: Sequence[ChatMessage]) -> dict[str, float]:
        """Every output's score of the conversation ``messages``, by output name."""
        ids = tuple(encode(messages, self.tokenizer))
        with self._lock, torch.no_grad():
            scores = self.scorer.head(self._extend(ids).sums[-1:] / len(ids))[0].tolist()
        return dict(zip(self.card.outputs, scores, strict=True))

    def _extend(self, ids: tuple[int, ...]) -> _Prefix:
        """``ids``' cache and running sums: a cached conversation's, cut to what it shares and run on from there."""
        shared, base = max(((common_prefix(ids, key), prefix) for key, prefix in self._prefixes.items()),
                           key=lambda pair: pair[0], default=(0, None))  # fmt: skip
        shared = min(shared, len(ids) - 1)  # at least one token runs: a cache holds no hidden state to reuse
        cache = None
        if base is not None and shared > 0:
            cache = copy.deepcopy(base.cache)
            cache.crop(shared - cache.get_seq_length())  # a negative count: the tokens to drop
        new = torch.tensor([ids[shared:]], device=self.device)
        output = self.scorer.backbone(input_ids=new, past_key_values=cache, use_cache=True,
                                      output_hidden_states=True, logits_to_keep=1)  # fmt: skip
        sums = output.hidden_states[-1][0].float().cumsum(0)
        if cache is not None:
            sums = torch.cat([base.sums[:shared], sums + base.sums[shared - 1]])
        prefix = _Prefix(output.past_key_values, sums)
        self._prefixes[ids] = prefix
        self._prefixes.move_to_end(ids)
        kept = sum(map(len, self._prefixes)) * self.token_bytes
        while kept > self.cache_bytes:
            kept -= len(self._prefixes.popitem(last=False)[0]) * self.token_bytes
        return prefix


def _token_bytes(backbone: nn.Module) -> int:
    """What one cached token costs: its keys and values in every layer, and its running hidden-state sum."""
    config = backbone.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    element = next(backbone.parameters()).element_size()
    return 2 * config.num_hidden_layers * heads * head_dim * element + 4 * config.hidden_size


@dataclass
class _Prefix:
    cache: Any
    """The backbone's key/value cache of a scored conversation."""
    sums: Tensor
    """``(T, H)``: row ``t`` is the sum of the last hidden states of tokens ``0..t``."""


def _model_folder(path: Path, name: str) -> Path:
    """The saved model in ``path``: the folder itself, or its ``name`` subfolder when ``path`` is a run folder."""
    for folder in (path, path / name):
        if (folder / f"{name}.json").is_file():
            return folder
    raise DataFileError(f"{path} holds no {name} model ({name}.json); train one with: datalyst train {name}")


def select_items(items: list[Item], config: ScorerConfig) -> tuple[list[Item], int]:
    """The items that fit in ``config.max_length`` tokens (a seeded sample of ``config.limit`` of them), and how
    many were too long."""
    kept = [item for item in items if max(len(ids) for ids in item.inputs) <= config.max_length]
    if not kept:
        raise DataFileError(f"none of the {len(items)} training items fits in {config.max_length} tokens; "
                            "raise --max-length")  # fmt: skip
    too_long = len(items) - len(kept)
    if config.limit is not None and config.limit < len(kept):
        kept = random.Random(config.seed).sample(kept, config.limit)
    return kept, too_long
