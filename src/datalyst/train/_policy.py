"""The model being trained: a local model loaded by transformers with dense weights, plus LoRA (peft) or not.

``embedded:NAME`` and ``gguf:PATH`` load from their GGUF file, which transformers unpacks into dense
float32 weights (``hf:`` loading, see ``datalyst.llm``); ``hf:PATH`` loads a model folder. The same
GGUF then runs the trained adapter through llama.cpp, so training and serving share one base.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm import ModelKind, base_weights, load_model, resolve_spec

INSTALL_FIX = "pip install 'datalyst[hf,train]'"


class LoraOptions(BaseModel):
    """LoRA's rank, scale, dropout and target modules (peft names; ``all-linear`` is every linear but the head)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    r: int = 16
    """LoRA rank (for SFT, 0 fine-tunes every weight instead)."""
    alpha: int = 32
    """LoRA scale numerator (the update is scaled by alpha / r)."""
    dropout: float = 0.05
    """Dropout on LoRA's input."""
    target_modules: str | list[str] = "all-linear"
    """The modules LoRA adapts (peft names; all-linear is every linear layer but the head)."""


def hf_spec(spec: str) -> str:
    """The ``hf:`` spec that loads ``spec``'s weights in transformers (an embedded model is fetched if missing)."""
    parsed = resolve_spec(spec)
    if parsed.options:
        raise ConfigError(
            f"model spec '{spec}' has options ({', '.join(parsed.options)}); training takes the bare base model "
            "(start from a trained adapter with --adapter)"
        )
    if parsed.kind == ModelKind.EMBEDDED:
        return f"hf:{base_weights(parsed.target)}"
    if parsed.kind in (ModelKind.GGUF, ModelKind.HF):
        return f"hf:{parsed.target}"
    raise ConfigError(f"model spec '{spec}' names no local weights to train; give an embedded:, gguf: or hf: spec")


def load_policy(spec: str, *, lora: LoraOptions | None, adapter: str | None = None, recompute: bool = False) -> Any:
    """``spec`` loaded in float32 for training (a ``TransformersModel``): with a trained ``adapter`` (a peft
    folder or a GGUF adapter file) it continues (trainable), else it gets fresh LoRA layers, or none when
    ``lora`` is None (full fine-tuning). It loads on the CPU (``Runtime.prepare`` moves it to this process's
    device) and is left in train mode. ``recompute`` turns on gradient checkpointing: each layer's activations
    are computed again in the backward pass instead of kept."""
    loaded = load_model(hf_spec(spec), dtype="float32", device="cpu")
    if recompute:  # non-reentrant, so the frozen embeddings' output needs no requires_grad for LoRA to learn
        model = loaded.model  # transformers 5.2x renamed gradient checkpointing to activation checkpointing
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable({"use_reentrant": False})
        model.config.use_cache = False  # training keeps no key/value cache (said here, transformers warns)
    if adapter is not None and Path(adapter).is_file():  # a GGUF adapter, as datalyst ships one
        from datalyst.train._convert import lora_from_gguf

        loaded.model = lora_from_gguf(loaded.model, adapter, dropout=(lora or LoraOptions()).dropout)
    elif adapter is not None:
        with _quiet_peft():
            loaded.model = _import_peft().PeftModel.from_pretrained(loaded.model, adapter, is_trainable=True)
    elif lora is not None:
        loaded.model = add_lora(loaded.model, lora)
    loaded.model.train()
    return loaded


def add_lora(model: Any, options: LoraOptions) -> Any:
    """``model`` wrapped by peft with fresh LoRA layers (only they are trainable)."""
    peft = _import_peft()
    config = peft.LoraConfig(
        r=options.r,
        lora_alpha=options.alpha,
        lora_dropout=options.dropout,
        target_modules=options.target_modules,
        task_type="CAUSAL_LM",
    )
    with _quiet_peft():
        return peft.get_peft_model(model, config)


def pad_id(tokenizer: Any) -> int:
    """The id that pads a batch: the tokenizer's pad token, else its end-of-sequence token."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def trainable_parameters(model: Any) -> dict[str, Any]:
    """The parameters the optimizer updates, by name (what a checkpoint must keep)."""
    return {name: parameter for name, parameter in model.named_parameters() if parameter.requires_grad}


def _import_peft() -> Any:
    try:
        import peft
    except ModuleNotFoundError:
        raise ModelUnavailable(f"LoRA training needs the peft package; {INSTALL_FIX}") from None
    return peft


def save_weights(model: Any, tokenizer: Any, folder: Path, *, base: str) -> None:
    """Save the trained weights: a LoRA model as a peft adapter, converted for llama.cpp too when ``base`` is a
    GGUF (``embedded:``, ``gguf:``), so ``BASE?adapter=FOLDER`` runs it; a fully trained one as a model folder."""
    from datalyst.train._convert import adapter_to_gguf

    if not hasattr(model, "peft_config"):
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return
    model.save_pretrained(folder, save_embedding_layers=False)  # LoRA never trains the embeddings here
    if resolve_spec(base).kind in (ModelKind.EMBEDDED, ModelKind.GGUF):
        adapter_to_gguf(folder, base=base)


@contextlib.contextmanager
def _quiet_peft() -> Iterator[None]:
    """peft 0.21 still reads transformers' deprecated ``is_gradient_checkpointing`` alias (a FutureWarning)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
