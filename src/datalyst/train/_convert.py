"""A peft LoRA adapter converted to a GGUF adapter, which llama.cpp applies to the quantized base at run time.

:func:`adapter_to_gguf` runs llama.cpp's own ``convert_lora_to_gguf.py`` from the source of the installed
llama-cpp-python release (:func:`datalyst.llm.llama_cpp_source`, downloaded once), so the file is
written by the llama.cpp that reads it; the script imports the ``gguf-py`` carried in the same tree.
The script needs the base model's config only (architecture, layer count), no weights: for a GGUF base
transformers reads it from the file's metadata into a temporary ``config.json``. The result goes to
``ADAPTER_GGUF`` in the adapter folder unless told otherwise, where ``embedded:NAME?adapter=FOLDER``
finds it. :func:`lora_from_gguf` goes the other way, so a GGUF adapter can be trained further.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from datalyst.errors import ConfigError, ModelError, ModelUnavailable
from datalyst.llm import ADAPTER_GGUF, ModelKind, ModelSpec, base_weights, llama_cpp_source

__all__ = ["adapter_to_gguf", "lora_from_gguf"]

SCRIPT = "convert_lora_to_gguf.py"
PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")
INSTALL_FIX = "pip install 'datalyst[hf]'"
_TIMEOUT_S = 1800.0

OutType = Literal["f32", "f16", "bf16", "q8_0"]


def adapter_to_gguf(
    adapter_dir: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    *,
    base: str,
    outtype: OutType = "f32",
) -> Path:
    """Convert the peft LoRA adapter in ``adapter_dir`` for the base model ``base``; the GGUF written.

    ``base`` is the model spec the adapter was trained on: ``embedded:NAME``, ``gguf:PATH`` or ``hf:PATH``
    (a GGUF file or a model folder with ``config.json``). ``out_path`` defaults to ``ADAPTER_GGUF`` in
    ``adapter_dir``. ``outtype`` is the adapter's tensor type: ``f32`` keeps peft's values exactly (and
    runs a little faster in llama.cpp), ``f16`` takes half the space.
    ConfigError for a folder that is not a peft adapter, ModelUnavailable when llama.cpp's source or
    transformers is missing, ModelError when the script fails (its reason in the message).
    """
    adapter = Path(adapter_dir).expanduser()
    missing = [name for name in PEFT_FILES if not (adapter / name).is_file()]
    if missing:
        raise ConfigError(
            f"{adapter} is not a peft LoRA adapter folder (it lacks {', '.join(missing)}); give the folder that "
            "peft's save_pretrained wrote"
        )
    target = Path(out_path).expanduser() if out_path is not None else adapter / ADAPTER_GGUF
    base_path = _base_path(base)
    script = llama_cpp_source() / SCRIPT
    with tempfile.TemporaryDirectory(prefix="datalyst-lora-") as work:
        config = _config_folder(base_path, Path(work))
        partial = target.with_name(f".{target.name}.partial")
        command = [sys.executable, str(script), "--base", str(config), "--outfile", str(partial)]
        command += ["--outtype", outtype, str(adapter)]
        environment = {key: value for key, value in os.environ.items() if key != "NO_LOCAL_GGUF"}
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ModelError(f"converting {adapter} took over {_TIMEOUT_S:.0f} s; run {script} by hand") from None
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            raise ModelError(f"llama.cpp's {SCRIPT} could not convert {adapter}: {_reason(done.stderr)}")
        partial.replace(target)
    return target


def _base_path(base: str) -> Path:
    """The GGUF file or model folder (with ``config.json``) that the spec ``base`` names."""
    spec = ModelSpec.parse(base)
    if spec.kind == ModelKind.EMBEDDED:
        return base_weights(spec.target)
    if spec.kind not in (ModelKind.GGUF, ModelKind.HF):
        raise ConfigError(f"base model '{base}' names no local model; give the embedded:, gguf: or hf: spec trained on")
    path = Path(spec.target).expanduser()
    if not (path.is_file() or (path / "config.json").is_file()):
        raise ConfigError(f"base model {path} is neither a GGUF file nor a folder with config.json")
    return path


def _config_folder(path: Path, work: Path) -> Path:
    """A folder with the base model's ``config.json``: a model folder as it is, else ``work`` with one written
    from the GGUF's metadata."""
    if path.is_dir():
        return path
    (work / "config.json").write_text(json.dumps(_gguf_config(path)), encoding="utf-8")
    return work


def _gguf_config(path: Path) -> dict[str, object]:
    """The transformers config of a GGUF file, naming its causal-LM class as a checkpoint's config does."""
    try:
        from transformers import AutoConfig
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError as exc:
        raise ModelUnavailable(f"converting an adapter needs transformers ({exc}); {INSTALL_FIX}") from exc
    try:
        config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True).to_dict()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelUnavailable(f"transformers cannot read the config of {path} ({exc}); check the file") from exc
    architecture = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type", ""))
    if architecture is None:
        raise ConfigError(f"{path} holds a {config.get('model_type')!r} model, which has no causal-LM class here")
    return config | {"architectures": [architecture]}


def _reason(stderr: str) -> str:
    """The script's own error lines (or its last line), joined into one."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:lora-to-gguf:") for line in lines if line.startswith("ERROR:")]
    return " ".join(errors or lines[-1:]) or "it failed without a message"


def lora_from_gguf(model: Any, path: str | os.PathLike[str], *, dropout: float = 0.0) -> Any:
    """``model`` (a transformers causal LM) wrapped by peft with the LoRA weights of the GGUF adapter ``path``.

    The reverse of :func:`adapter_to_gguf`, so an adapter shipped for llama.cpp can be trained further: each
    ``blk.N.<tensor>.lora_a``/``lora_b`` pair goes back to the module that llama.cpp's tensor map names, with
    the rank and alpha the file records. llama.cpp reorders the rows of llama-family query and key weights
    for its rope; that order is undone here. ConfigError for a file that is not a LoRA adapter of this model.
    """
    import gguf
    import torch

    from datalyst.train._policy import LoraOptions, add_lora

    adapter = Path(path).expanduser()
    reader = gguf.GGUFReader(adapter)
    fields = {name: reader.get_field(name) for name in ("general.type", "general.architecture", "adapter.lora.alpha")}
    if any(field is None for field in fields.values()) or fields["general.type"].contents() != "adapter":
        raise ConfigError(f"{adapter} is not a GGUF LoRA adapter (it lacks general.type = adapter and its alpha)")
    architecture, alpha = fields["general.architecture"].contents(), fields["adapter.lora.alpha"].contents()
    if architecture != model.config.model_type:
        raise ConfigError(f"{adapter} adapts a {architecture!r} model, not this {model.config.model_type!r} one")
    if architecture not in _ROPE_ORDER:
        raise ConfigError(f"reading {architecture!r} adapters back is not supported (only {', '.join(_ROPE_ORDER)})")
    tensors = {tensor.name: torch.from_numpy(tensor.data.astype("float32")) for tensor in reader.tensors}
    names = gguf.get_tensor_name_map(_arch(gguf, architecture), model.config.num_hidden_layers)
    targets = {}
    for module, _ in model.named_modules():
        name = names.get_name(f"{module}.weight", try_suffixes=(".weight",))
        if name is not None and f"{name}.lora_a" in tensors:
            targets[module] = name
    used = {f"{name}.lora_{side}" for name in targets.values() for side in "ab"}
    if not targets or used != set(tensors):
        raise ConfigError(f"{adapter} holds tensors no module of this model matches: {sorted(set(tensors) - used)[:3]}")
    rank = tensors[f"{next(iter(targets.values()))}.lora_a"].shape[0]
    wrapped = add_lora(model, LoraOptions(r=rank, alpha=alpha, dropout=dropout, target_modules=sorted(targets)))
    heads = (model.config.num_attention_heads, getattr(model.config, "num_key_value_heads", None))
    with torch.no_grad():
        for module, name in targets.items():
            layer = wrapped.get_submodule(f"base_model.model.{module}")
            layer.lora_A["default"].weight.copy_(tensors[f"{name}.lora_a"])
            lora_b = tensors[f"{name}.lora_b"]
            kind = module.rsplit(".", 1)[-1]
            if kind in _ROPE_ORDER[architecture]:
                lora_b = _rope_order_undone(lora_b, heads[0] if kind == "q_proj" else heads[1] or heads[0])
            layer.lora_B["default"].weight.copy_(lora_b)
    return wrapped


_ROPE_ORDER = {"qwen2": (), "llama": ("q_proj", "k_proj")}
"""Per architecture, the projections whose output rows llama.cpp's converter reorders for its rope."""


def _rope_order_undone(weight: Any, heads: int) -> Any:
    """The inverse of the converter's reorder: per head, its two interleaved halves of rows back in place."""
    rows = weight.shape[0]
    return weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _arch(gguf: Any, name: str) -> Any:
    return next(arch for arch, arch_name in gguf.MODEL_ARCH_NAMES.items() if arch_name == name)
