"""Chat models run in this process by Hugging Face ``transformers`` (PyTorch), the ``hf:`` backend.

``hf:PATH`` names a local model folder (``config.json``, weights, tokenizer files) or a local GGUF
file; transformers reads GGUF through the ``gguf`` package and unpacks the weights into a dense model
(float32 unless ``dtype`` says otherwise), so a 4-bit GGUF takes as much memory as the full-precision
model, and loading one is slow (about 30 s for a 135M model on two cores, most of it spent parsing the
GGUF metadata). Nothing is downloaded: every load
passes ``local_files_only=True`` (as if ``HF_HUB_OFFLINE=1``), so a repo id only works when it is
already in the Hugging Face cache.

The prompt is rendered with the tokenizer's chat template (:class:`HFTokenizer`). The ``n`` completions
of one call are the rows of one ``generate`` call: the prompt's KV cache is computed once and repeated
for every row. Sampling is plain temperature and top-p (the model's own generation defaults, such as
top-k or a repetition penalty, are overridden), each row drawing from a generator of its own seed, so a
completion is the same whatever ``n``; temperature 0 is greedy decoding. The completion's text is the
decoding of its token ids (special tokens included), ended at the token that completes a stop string.
Log-probabilities are those of the model's raw distribution (from the unprocessed logits, before
temperature and top-p), like the llama.cpp backend's; scoring a given continuation takes them from one
forward pass.

``adapter`` (a peft LoRA adapter folder) is loaded with peft and merged into the weights, so the model
runs as fast as its base.

This class is also the policy that training uses: :attr:`TransformersModel.model` is the loaded
``PreTrainedModel`` and :attr:`TransformersModel.tokenizer` its tokenizer, both public, so a trainer
can update the weights in place and the next ``agenerate`` samples from the updated policy.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Any

from datalyst.errors import ConfigError, ModelResponseError, ModelUnavailable
from datalyst.llm._base import Completion, SamplingParams
from datalyst.llm._local import GGUF_MAGIC, LocalModel, file_signature
from datalyst.llm._spec import ModelKind, ModelSpec
from datalyst.llm._tokenizer import HFTokenizer, token_completion

__all__ = ["TransformersModel", "load_hf_tokenizer"]

DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "auto")
INSTALL_FIX = "pip install 'datalyst[hf]'"


class TransformersModel(LocalModel):
    """A Hugging Face chat model loaded in process; ``await model.agenerate(messages, params)`` like any ChatModel.

    ``target`` is a model folder, a ``.gguf`` file or a repo id already in the local Hugging Face cache.
    ``dtype`` is ``float32`` (the default), ``bfloat16`` or ``float16``; ``device`` is ``cpu``, ``cuda`` or
    ``auto`` (cuda when available, the default). ``n_ctx_tokens`` caps prompt plus ``max_tokens``; None
    means the model's maximum positions. ``adapter`` is a peft adapter folder merged into the weights.
    Loading happens in the constructor.

    Public attributes for training: ``model`` (the ``PreTrainedModel``, in eval mode) and ``tokenizer``.
    Generation runs under ``torch.inference_mode()`` and a lock, so a trainer that changes the weights
    should not do so while an ``agenerate`` call is running.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        dtype: str | None = None,
        device: str | None = None,
        n_ctx_tokens: int | None = None,
        adapter: str | os.PathLike[str] | None = None,
        spec: str | None = None,
    ) -> None:
        super().__init__(n_ctx_tokens)
        self.target = str(target)
        self.spec = spec or str(ModelSpec(kind=ModelKind.HF, target=self.target))
        for name, value, supported in (("dtype", dtype, DTYPES), ("device", device, DEVICES)):
            if value is not None and value not in supported:
                raise ConfigError(f"{name}={value} is not supported; use one of {', '.join(supported)}")
        torch, transformers = _import_libraries()
        adapter_folder = _check_adapter(Path(adapter).expanduser()) if adapter is not None else None
        self._torch = torch
        self.device: str = _pick_device(torch, device or "auto")
        """Where the weights live and generation runs (``cpu`` or ``cuda``)."""
        folder, load_options = _locate(self.target)
        self.name = Path(self.target).name or self.target
        self.chat_tokenizer: HFTokenizer = HFTokenizer(
            _pretrained(transformers.AutoTokenizer, folder, load_options, self.target), name=f"model {self.target}"
        )
        """The tokenizer's chat template and vocabulary (kept after ``close``)."""
        self.tokenizer: Any = self.chat_tokenizer.tokenizer
        """The model's tokenizer (a ``PreTrainedTokenizerBase``), with its chat template."""
        self.model: Any = _load_model(transformers, torch, folder, load_options, self.target, dtype, self.device)
        """The loaded ``PreTrainedModel`` (eval mode): the policy a trainer updates in place."""
        if adapter_folder is not None:
            self.model = _merge_adapter(self.model, adapter_folder)
        self._eos_ids = _eos_ids(self.model, self.tokenizer)
        if not self._eos_ids:
            raise ModelUnavailable(f"model {self.target} defines no end-of-sequence token; it cannot end an answer")
        positions = _max_positions(self.model)
        self.n_ctx_tokens: int = min(n_ctx_tokens or positions or 2**31, positions or 2**31)
        """Prompt plus completion tokens that fit; more raises :class:`ContextOverflow`."""

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> TransformersModel:
        """Build from ``hf:PATH_OR_REPO``; options: dtype, device (str), n_ctx (tokens) and adapter (a folder)."""
        options = spec.check_options({"dtype": str, "device": str, "n_ctx": int, "adapter": str})
        return cls(
            spec.target,
            dtype=options.get("dtype"),
            device=options.get("device"),
            n_ctx_tokens=options.get("n_ctx"),
            adapter=options.get("adapter"),
            spec=str(spec),
        )

    def _is_loaded(self) -> bool:
        return self.model is not None

    def _release(self) -> None:
        self.model = None
        self.tokenizer = None

    def _generate(
        self, prompt: list[int], params: SamplingParams, seeds: list[int | None], cancelled: threading.Event
    ) -> list[Completion]:
        torch = self._torch
        prompt_ids = torch.tensor([prompt], dtype=torch.long, device=self.device)
        input_ids = prompt_ids.expand(len(seeds), -1)
        options: dict[str, Any] = {
            "attention_mask": torch.ones_like(input_ids),
            "max_new_tokens": params.max_tokens,
            "eos_token_id": self._eos_ids,
            # Rows that end early are padded with an end token, so each completion is cut where its row ended.
            "pad_token_id": self._eos_ids[0],
            "return_dict_in_generate": True,
            "output_scores": params.logprobs,
            "output_logits": params.logprobs,
            "stopping_criteria": _cancel_criteria(cancelled),
            # Greedy over what _seeded_sampler leaves; override whatever the model's generation_config adds.
            "do_sample": False,
            "temperature": 1.0,
            "top_p": 1.0,
            "repetition_penalty": 1.0,
        }
        if seeds != [None]:
            options["logits_processor"] = _seeded_sampler(torch, seeds, params, self.device)
        if params.stop:
            options |= {"stop_strings": list(params.stop), "tokenizer": self.tokenizer}
        try:
            with torch.inference_mode():
                cache = self._prefill(prompt_ids, len(seeds))
                result = self.model.generate(input_ids, past_key_values=cache, **options)
        except (RuntimeError, ValueError) as exc:
            raise ModelResponseError(
                f"transformers failed while generating with {self.name} ({exc}); retry, or lower max_tokens"
            ) from exc
        return [self._completion(result, row, prompt, params, cancelled) for row in range(len(seeds))]

    def _prefill(self, prompt_ids: Any, n: int) -> Any:
        """The KV cache of all prompt tokens but the last, computed once and repeated for ``n`` rows."""
        if prompt_ids.shape[1] < 2:
            return None
        cache = self.model(prompt_ids[:, :-1], use_cache=True).past_key_values
        if n > 1:
            cache.batch_repeat_interleave(n)
        return cache

    def _completion(
        self, result: Any, row: int, prompt: list[int], params: SamplingParams, cancelled: threading.Event
    ) -> Completion:
        new_tokens = result.sequences[row, len(prompt) :].tolist()
        finish_reason = "cancelled" if cancelled.is_set() else "length"
        for index, token in enumerate(new_tokens):
            if token in self._eos_ids:
                new_tokens, finish_reason = new_tokens[:index], "stop"
                break
        logprobs = self._logprobs(result, row, len(new_tokens)) if params.logprobs else None
        completion = token_completion(
            self.chat_tokenizer, new_tokens, logprobs, finish_reason=finish_reason, prompt_tokens=len(prompt)
        )
        return completion.ended_at_stop(params.stop)

    def _score_tokens(self, prompt: list[int], tokens: list[int], cancelled: threading.Event) -> list[float]:
        if not tokens:
            return []
        torch = self._torch
        input_ids = torch.tensor([prompt + tokens[:-1]], dtype=torch.long, device=self.device)
        try:
            with torch.inference_mode():
                # The logits after the prompt's last token and after each continuation token but the last.
                logits = self.model(input_ids, logits_to_keep=len(tokens)).logits[0].float()
        except (RuntimeError, ValueError) as exc:
            raise ModelResponseError(f"transformers failed while scoring with {self.name} ({exc}); retry") from exc
        chosen = torch.tensor(tokens, dtype=torch.long, device=logits.device)
        values = torch.log_softmax(logits, dim=-1).gather(-1, chosen[:, None])[:, 0]
        return [min(0.0, value) for value in values.tolist()]

    def _logprobs(self, result: Any, row: int, count: int) -> list[float]:
        """log p(token) for the first ``count`` tokens of ``row`` under the model's raw (unprocessed) distribution."""
        # output_logits holds the raw logits; scores are after sampling, used only as a fallback.
        steps = getattr(result, "logits", None) or result.scores
        scores = self.model.compute_transition_scores(result.sequences, steps, normalize_logits=True)
        return [min(0.0, float(value)) for value in scores[row, :count].float().tolist()]


def load_hf_tokenizer(target: str) -> HFTokenizer:
    """The chat tokenizer of ``hf:TARGET`` (a model folder, a GGUF file or a cached repo id), without the weights."""
    _, transformers = _import_libraries()
    folder, load_options = _locate(target)
    return HFTokenizer(_pretrained(transformers.AutoTokenizer, folder, load_options, target), name=f"model {target}")


def _import_libraries() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ModelUnavailable(
            f"hf: models need the Python packages 'torch' and 'transformers' ({exc}); {INSTALL_FIX}"
        ) from exc
    return torch, transformers


def _pick_device(torch: Any, device: str) -> str:
    available = torch.cuda.is_available()
    if device == "cuda" and not available:
        raise ModelUnavailable("device=cuda was asked for but torch sees no CUDA GPU; use device=cpu or auto")
    if device == "auto":
        return "cuda" if available else "cpu"
    return device


def _locate(target: str) -> tuple[str, dict[str, Any]]:
    """The folder or repo id for ``from_pretrained`` and the options that go with it."""
    path = Path(target).expanduser()
    options: dict[str, Any] = {"local_files_only": True}
    if path.is_file():
        _check_gguf(path)
        return str(path.parent), options | {"gguf_file": path.name}
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelUnavailable(
                f"model folder {path} has no config.json; give a Hugging Face model folder or a .gguf file"
            )
        return str(path), options
    looks_like_path = target.startswith(("/", ".", "~")) or target.endswith(".gguf") or target.count("/") != 1
    if looks_like_path:
        raise ModelUnavailable(f"model {path} does not exist; give the path of a model folder or a .gguf file")
    return target, options  # a repo id: found only if already in the local Hugging Face cache


def _check_gguf(path: Path) -> None:
    if (magic := file_signature(path)) != GGUF_MAGIC:
        raise ModelUnavailable(
            f"{path} is neither a GGUF file (it starts with {magic!r}) nor a folder; give a Hugging Face "
            "model folder or a .gguf file"
        )


def _not_found(target: str, exc: Exception) -> ModelUnavailable:
    if Path(target).expanduser().exists():
        return ModelUnavailable(f"transformers cannot load {target} ({exc}); check that the files are complete")
    return ModelUnavailable(
        f"model {target!r} is not on this machine and the Hugging Face hub is not reachable from datalyst "
        f"(it loads with local_files_only=True); download the model elsewhere and give its local path ({exc})"
    )


def _pretrained(auto: Any, folder: str, options: dict[str, Any], target: str) -> Any:
    """``auto.from_pretrained`` (a tokenizer's or a model's) of ``folder``, or ModelUnavailable naming ``target``."""
    try:
        return auto.from_pretrained(folder, **options)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise _not_found(target, exc) from exc


def _load_model(
    transformers: Any, torch: Any, folder: str, options: dict[str, Any], target: str, dtype: str | None, device: str
) -> Any:
    # transformers before 4.56 names the argument torch_dtype (and would take dtype= for a config field).
    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    dtype_argument = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    extra: dict[str, Any] = {dtype_argument: getattr(torch, dtype or "float32")}
    gguf_config = getattr(transformers, "GgufConfig", None)
    if "gguf_file" in options and gguf_config is not None:
        # Newer transformers may keep GGUF weights packed (not trainable); the policy needs dense weights.
        extra["quantization_config"] = gguf_config(dequantize=True)
    return _pretrained(transformers.AutoModelForCausalLM, folder, extra | options, target).to(device).eval()


def _check_adapter(folder: Path) -> Path:
    """``folder`` when it is a peft adapter folder and peft can be imported (checked before the slow load)."""
    if not (folder / "adapter_config.json").is_file():
        raise ConfigError(f"adapter {folder} is not a peft adapter folder (it has no adapter_config.json)")
    try:
        import peft  # noqa: F401
    except ImportError as exc:
        raise ModelUnavailable(
            f"hf: adapters need the Python package 'peft' ({exc}); pip install 'datalyst[hf,train]'"
        ) from exc
    return folder


def _merge_adapter(model: Any, folder: Path) -> Any:
    """``model`` with the peft adapter in ``folder`` merged into its weights."""
    from peft import PeftModel

    try:
        with warnings.catch_warnings():  # peft 0.21 reads a transformers alias deprecated in 5.x (FutureWarning)
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            return PeftModel.from_pretrained(model, str(folder)).merge_and_unload().eval()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ConfigError(f"peft cannot apply the adapter {folder} to this model ({exc})") from exc


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """Tokens that end an answer: the generation config's EOS ids plus the tokenizer's EOS."""
    configured = model.generation_config.eos_token_id
    ids = configured if isinstance(configured, list) else [configured]
    ids = [token for token in ids if token is not None]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def _max_positions(model: Any) -> int | None:
    config = model.config
    getter = getattr(config, "get_text_config", None)
    config = getter() if getter else config
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _seeded_sampler(torch: Any, seeds: list[int | None], params: SamplingParams, device: str) -> Any:
    """A logits processor that samples each row's next token (temperature, then top-p) with a generator of
    the row's own seed and leaves only that token, for greedy decoding to pick: completion ``k`` depends on
    its seed alone, not on how many rows share the batch."""
    from transformers import LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

    warpers = [TemperatureLogitsWarper(params.temperature)]
    if params.top_p < 1:
        warpers.append(TopPLogitsWarper(params.top_p))
    generators = [torch.Generator(device).manual_seed(seed) for seed in seeds]

    class _SeededSampler(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            for warper in warpers:
                scores = warper(input_ids, scores)
            probs = torch.softmax(scores.float(), dim=-1)
            chosen = torch.stack([torch.multinomial(p, 1, generator=g) for p, g in zip(probs, generators, strict=True)])
            return torch.full_like(scores, float("-inf")).scatter(1, chosen, 0.0)

    return LogitsProcessorList([_SeededSampler()])


def _cancel_criteria(cancelled: threading.Event) -> Any:
    """A stopping criterion that ends generation once ``cancelled`` is set."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Cancelled(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            import torch

            return torch.full((input_ids.shape[0],), cancelled.is_set(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_Cancelled()])
