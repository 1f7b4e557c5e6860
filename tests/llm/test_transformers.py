"""The transformers backend (``hf:``), run on the GGUF of the embedded ``tiny`` model (SmolLM2-135M-Instruct).

transformers dequantizes the GGUF to float32 when loading it, which takes about half a minute on two
cores, so the model-backed tests share one model loaded through ``load_model`` (the registry path).
Tests marked ``model`` skip when the GGUF is not in the datalyst cache (``datalyst models fetch tiny``).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'datalyst[hf]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install 'datalyst[hf]')")

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm import load_model, model_path
from datalyst.llm._base import ChatMessage, ChatModel, Role, SamplingParams, ScoringModel
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._spec import ModelSpec
from datalyst.llm._transformers import TransformersModel

N_CTX_TOKENS = 512
QUESTION = [
    ChatMessage(role=Role.SYSTEM, content="You are a helpful assistant."),
    ChatMessage(role=Role.USER, content="What is the capital of France?"),
]


@pytest.fixture(scope="module")
def model() -> TransformersModel:
    path = model_path("tiny")
    if not path.is_file():
        pytest.skip(f"the tiny GGUF is not cached at {path} (datalyst models fetch tiny)")
    loaded = load_model(f"hf:{path}?n_ctx={N_CTX_TOKENS}")
    assert isinstance(loaded, TransformersModel)
    return loaded


def generate(model: TransformersModel, params: SamplingParams) -> list:
    return asyncio.run(model.agenerate(QUESTION, params))


@pytest.mark.model
def test_loads_through_the_registry_and_exposes_the_policy(model: TransformersModel) -> None:
    assert isinstance(model, ChatModel)
    assert model.spec == f"hf:{model_path('tiny')}?n_ctx={N_CTX_TOKENS}"
    assert model.n_ctx_tokens == N_CTX_TOKENS
    assert model.model.training is False
    assert all(parameter.is_floating_point() for parameter in model.model.parameters())  # dense, trainable
    assert model.tokenizer.chat_template


@pytest.mark.model
def test_greedy_generation_answers_and_counts_tokens(model: TransformersModel) -> None:
    first, second = generate(model, SamplingParams(n=2, max_tokens=32))
    assert "Paris" in first.text
    assert first.finish_reason == "stop"
    assert first.prompt_tokens > 10
    assert 0 < first.completion_tokens < 32
    assert first.logprobs is None
    assert second == first


@pytest.mark.model
def test_max_tokens_ends_with_length(model: TransformersModel) -> None:
    (completion,) = generate(model, SamplingParams(max_tokens=3))
    assert completion.finish_reason == "length"
    assert completion.completion_tokens == 3


@pytest.mark.model
def test_stop_string_ends_the_text_with_the_token_that_completes_it(model: TransformersModel) -> None:
    (completion,) = generate(model, SamplingParams(max_tokens=32, stop=("Par",)))
    assert (completion.finish_reason, completion.stop) == ("stop", "Par")
    assert completion.text.startswith("The capital") and completion.text.endswith(("Par", "Paris"))
    assert model.chat_tokenizer.decode(completion.token_ids) == completion.text
    assert completion.offsets[-1] == len(completion.text) and len(completion.offsets) == completion.completion_tokens


@pytest.mark.model
def test_sampling_is_reproducible_with_a_seed(model: TransformersModel) -> None:
    params = SamplingParams(n=2, temperature=0.8, seed=7, max_tokens=12)
    first = generate(model, params)
    assert len(first) == 2
    assert all(completion.text for completion in first)
    assert [c.text for c in generate(model, params)] == [c.text for c in first]


@pytest.mark.model
def test_logprobs_cover_every_generated_token(model: TransformersModel) -> None:
    (completion,) = generate(model, SamplingParams(max_tokens=16, temperature=0.8, seed=1, logprobs=True))
    assert completion.logprobs is not None
    assert len(completion.logprobs) == completion.completion_tokens > 0
    assert all(item.logprob <= 0 for item in completion.logprobs)
    assert "".join(item.token for item in completion.logprobs).startswith(completion.text[:5])


@pytest.mark.model
def test_scoring_a_greedy_completion_gives_its_ids_and_logprobs(model: TransformersModel) -> None:
    assert isinstance(model, ScoringModel)
    (greedy,) = generate(model, SamplingParams(max_tokens=12, logprobs=True))
    assert model.chat_tokenizer.decode(greedy.token_ids) == greedy.text
    scored = asyncio.run(model.ascore(QUESTION, greedy.text))
    assert (scored.text, scored.finish_reason, scored.token_ids) == (greedy.text, "scored", greedy.token_ids)
    assert [entry.logprob for entry in scored.logprobs] == pytest.approx(
        [entry.logprob for entry in greedy.logprobs], abs=1e-3
    )


@pytest.mark.model
def test_context_overflow(model: TransformersModel) -> None:
    with pytest.raises(ContextOverflow, match="exceed"):
        generate(model, SamplingParams(max_tokens=N_CTX_TOKENS))


def test_missing_path_is_unavailable(tmp_path) -> None:
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_model(f"hf:{tmp_path / 'nothing.gguf'}")


def test_repo_not_on_disk_says_the_hub_is_unreachable(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="hub is not reachable"):
        TransformersModel("datalyst-tests/no-such-model")


def test_folder_without_config_is_unavailable(tmp_path) -> None:
    with pytest.raises(ModelUnavailable, match=r"config\.json"):
        TransformersModel(tmp_path)


@pytest.mark.parametrize("options", ["?dtype=int4", "?device=tpu", "?n_ctx=8", "?threads=2"])
def test_bad_options_are_config_errors(tmp_path, options: str) -> None:
    with pytest.raises(ConfigError):
        TransformersModel.from_spec(ModelSpec.parse(f"hf:{tmp_path}{options}"))


def count_forward_tokens(model: TransformersModel) -> tuple[list[tuple[int, int]], object]:
    """(rows, tokens) of every forward pass of the model's decoder, and the hook's handle."""
    shapes: list[tuple[int, int]] = []

    def record(module: object, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
        shapes.append(tuple(ids.shape))

    return shapes, model.model.model.register_forward_pre_hook(record, with_kwargs=True)


@pytest.mark.model
def test_n_samples_are_one_generate_call_over_one_prompt_evaluation(model: TransformersModel, monkeypatch) -> None:
    calls = []
    generate_once = model.model.generate
    monkeypatch.setattr(model.model, "generate", lambda *args, **kw: calls.append(1) or generate_once(*args, **kw))
    shapes, hook = count_forward_tokens(model)
    try:
        completions = generate(model, SamplingParams(n=3, temperature=1.0, seed=3, max_tokens=8))
    finally:
        hook.remove()
    prompt_tokens = completions[0].prompt_tokens
    assert len(calls) == 1
    assert shapes[0] == (1, prompt_tokens - 1)  # the prompt, once, for every row
    assert all(shape == (3, 1) for shape in shapes[1:])  # then one token per row and step
    assert len(shapes) - 1 <= 8  # a step per generated token at most


@pytest.mark.model
def test_each_sample_depends_on_its_seed_not_on_n(model: TransformersModel) -> None:
    """Row k of a batch samples with seed + k from its own generator, so it matches the call that asks for it
    alone (batched and single float32 matmuls differ in the last bits; no draw here falls that close to a tie)."""
    params = SamplingParams(n=4, temperature=1.0, top_p=0.95, seed=11, max_tokens=24, stop=("\n",))
    together = generate(model, params)
    alone = [generate(model, params.model_copy(update={"n": 1, "seed": 11 + k}))[0] for k in range(4)]
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]
    assert [(c.text, c.finish_reason, c.stop) for c in together] == [(c.text, c.finish_reason, c.stop) for c in alone]
    assert len({c.completion_tokens for c in together}) > 1  # rows ended at different steps; no padding leaked
    for completion in together:
        assert model.chat_tokenizer.decode(completion.token_ids) == completion.text
        assert len(completion.offsets) == completion.completion_tokens == len(completion.token_ids)


@pytest.mark.model
def test_greedy_from_the_reused_prompt_cache_matches_plain_generation(model: TransformersModel) -> None:
    import torch

    (completion,) = generate(model, SamplingParams(max_tokens=16))
    prompt = model.chat_tokenizer.encode(model.chat_tokenizer.render(QUESTION, add_generation_prompt=True))
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        plain = model.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
    assert completion.token_ids == plain[0, len(prompt) : len(prompt) + completion.completion_tokens].tolist()
