"""The llama.cpp backend, run on a real small GGUF (SmolLM2-135M-Instruct, the embedded ``tiny`` model).

The model is ``$DATALYST_TEST_GGUF``, else the smallest ``*.gguf`` under the datalyst cache's ``models``
folder; tests marked ``model`` skip when there is none or when llama-cpp-python is not installed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from datalyst.errors import ModelUnavailable
from datalyst.llm import _cpu
from datalyst.llm._base import ChatMessage, Role, SamplingParams, ScoringModel
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._llamacpp import LlamaCppModel
from datalyst.llm._spec import ModelSpec

N_CTX_TOKENS = 512
QUESTION = [
    ChatMessage(role=Role.SYSTEM, content="You are a helpful assistant."),
    ChatMessage(role=Role.USER, content="What is the capital of France?"),
]


@pytest.fixture(scope="module")
def model(test_gguf: Path) -> LlamaCppModel:
    loaded = LlamaCppModel(test_gguf, n_ctx_tokens=N_CTX_TOKENS)
    yield loaded
    loaded.close()


def ask(model: LlamaCppModel, messages=QUESTION, **params) -> list:
    return asyncio.run(model.agenerate(messages, SamplingParams(**params)))


@pytest.mark.model
def test_greedy_answer_has_text_reason_and_counts(model):
    [completion] = ask(model, temperature=0, max_tokens=16)
    assert completion.text.strip()
    assert completion.finish_reason in ("stop", "length")
    assert completion.prompt_tokens > 0
    assert 0 < completion.completion_tokens <= 16
    assert completion.logprobs is None
    assert completion.first_token_s is not None and completion.first_token_s > 0


@pytest.mark.model
def test_the_chat_template_of_the_file_is_used(model):
    # SmolLM2 and Qwen2.5 templates are ChatML: each turn opens with <|im_start|>ROLE.
    hi = [ChatMessage(role=Role.USER, content="hi")]
    prompt = model.chat_tokenizer.render(hi, add_generation_prompt=True)
    assert "<|im_start|>user\nhi<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


@pytest.mark.model
def test_a_turn_begun_for_the_model_is_continued_not_repeated(model):
    begun = ChatMessage(role=Role.ASSISTANT, content="The capital of France is")
    [completion] = ask(model, [*QUESTION, begun], temperature=0, max_tokens=4)
    assert "Paris" in completion.text and not completion.text.lstrip().startswith("The capital")
    asked = model.chat_tokenizer.render(QUESTION, add_generation_prompt=True) + begun.content
    assert completion.prompt_tokens == len(model.chat_tokenizer.encode(asked))


@pytest.mark.model
def test_completions_carry_their_token_ids_offsets_and_logprobs(model):
    [completion] = ask(model, temperature=0.8, seed=3, max_tokens=24, logprobs=True)
    ids, offsets = completion.token_ids, completion.offsets
    assert ids and len(ids) == len(offsets) == len(completion.logprobs) == completion.completion_tokens
    assert model.chat_tokenizer.decode(ids) == completion.text
    assert offsets == model.chat_tokenizer.offsets(ids) and offsets[-1] == len(completion.text)
    assert [entry.token for entry in completion.logprobs] == [model.chat_tokenizer.decode([token]) for token in ids]


@pytest.mark.model
def test_max_tokens_ends_with_length(model):
    [completion] = ask(model, temperature=0, max_tokens=3)
    assert (completion.finish_reason, completion.completion_tokens) == ("length", 3)


@pytest.mark.model
def test_a_stop_string_ends_the_text_with_the_token_that_completes_it(model):
    [free] = ask(model, temperature=0, max_tokens=16)
    words = free.text.split()
    assert len(words) >= 3, free.text
    stop = words[2][1:]  # starts inside a token, so the token that completes it may hold more
    [stopped] = ask(model, temperature=0, max_tokens=16, stop=("never appears ~~~", stop))
    assert (stopped.finish_reason, stopped.stop) == ("stop", stop)
    end = free.text.index(stop) + len(stop)
    assert free.text.startswith(stopped.text) and stopped.offsets[-2] < end <= len(stopped.text)
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert model.chat_tokenizer.decode(stopped.token_ids) == stopped.text


@pytest.mark.model
def test_n_samples_at_temperature_use_successive_seeds(model):
    completions = ask(model, n=3, temperature=0.8, max_tokens=12, seed=11)
    assert len(completions) == 3
    assert all(completion.completion_tokens > 0 for completion in completions)
    again = ask(model, n=2, temperature=0.8, max_tokens=12, seed=12)  # seeds 12 and 13
    assert [completion.text for completion in again] == [completion.text for completion in completions[1:]]


@pytest.mark.model
def test_greedy_n_returns_copies(model):
    completions = ask(model, n=2, temperature=0, max_tokens=8)
    assert completions[0] == completions[1]
    assert completions[0] is not completions[1]


@pytest.mark.model
def test_concurrent_calls_queue_on_the_model(model):
    async def three_at_once() -> list:
        params = SamplingParams(temperature=0, max_tokens=6)
        return await asyncio.gather(*(model.agenerate(QUESTION, params) for _ in range(3)))

    results = asyncio.run(three_at_once())
    assert [result[0].text for result in results] == [results[0][0].text] * 3


@pytest.mark.model
def test_a_cancelled_call_stops_its_generation(model):
    decodes = model.engine.stats.decodes

    async def cancel_then_ask() -> list:
        counting = [ChatMessage(role=Role.USER, content="Count from 1 to 300, separated by commas.")]
        with pytest.raises(TimeoutError):  # greedy decoding would run all 400 tokens here
            await asyncio.wait_for(model.agenerate(counting, SamplingParams(temperature=0, max_tokens=400)), 0.3)
        return await model.agenerate(QUESTION, SamplingParams(temperature=0, max_tokens=2))

    [answer] = asyncio.run(cancel_then_ask())
    assert answer.completion_tokens == 2
    assert model.engine.stats.decodes - decodes < 400  # the abandoned generation stopped at a token, not at 400


@pytest.mark.model
def test_logprobs_cover_each_token(model):
    [completion] = ask(model, temperature=0, max_tokens=10, logprobs=True)
    assert completion.logprobs is not None
    assert len(completion.logprobs) == completion.completion_tokens > 0
    assert all(entry.logprob <= 0 for entry in completion.logprobs)
    assert "".join(entry.token for entry in completion.logprobs).startswith(completion.text)


def score(model: LlamaCppModel, continuation, messages=QUESTION):
    return asyncio.run(model.ascore(messages, continuation))


@pytest.mark.model
def test_scoring_a_greedy_completion_gives_its_ids_and_logprobs(model):
    assert isinstance(model, ScoringModel)
    [greedy] = ask(model, temperature=0, max_tokens=12, logprobs=True)
    scored = score(model, greedy.text)
    assert (scored.text, scored.finish_reason, scored.token_ids) == (greedy.text, "scored", greedy.token_ids)
    assert scored.offsets == greedy.offsets and scored.prompt_tokens == greedy.prompt_tokens
    for generated, rescored in zip(greedy.logprobs, scored.logprobs, strict=True):
        assert rescored.token == generated.token
        assert rescored.logprob == pytest.approx(generated.logprob, abs=1e-3)


@pytest.mark.model
def test_scoring_sampled_token_ids_gives_the_sampling_logprobs(model):
    [sampled] = ask(model, temperature=1.0, seed=5, max_tokens=12, logprobs=True)
    scored = score(model, sampled.token_ids)
    assert (scored.text, scored.token_ids) == (sampled.text, sampled.token_ids)
    assert [entry.logprob for entry in scored.logprobs] == pytest.approx(
        [entry.logprob for entry in sampled.logprobs], abs=1e-3
    )


@pytest.mark.model
def test_a_continuation_past_the_context_overflows(model):
    with pytest.raises(ContextOverflow, match="plus the continuation"):
        score(model, "data " * N_CTX_TOKENS)


@pytest.mark.model
def test_a_prompt_longer_than_the_context_overflows(model):
    long_question = [ChatMessage(role=Role.USER, content="data " * (2 * N_CTX_TOKENS))]
    with pytest.raises(ContextOverflow, match=r"exceed the \d+-token context"):
        ask(model, long_question, max_tokens=8)


@pytest.mark.model
def test_max_tokens_past_the_context_overflows(model):
    with pytest.raises(ContextOverflow, match="lower max_tokens"):
        ask(model, max_tokens=N_CTX_TOKENS)


@pytest.mark.model
def test_spec_options_reach_the_model(model):
    spec = ModelSpec.parse(f"gguf:{model.path}?n_ctx=256&n_threads=1")
    other = LlamaCppModel.from_spec(spec)
    try:
        assert (other.spec, other.n_ctx_tokens) == (str(spec), 256)
    finally:
        asyncio.run(other.aclose())
    with pytest.raises(ModelUnavailable, match="closed"):
        ask(other, max_tokens=4)


def test_missing_file_is_unavailable(tmp_path):
    with pytest.raises(ModelUnavailable, match=r"does not exist; give the path of a \.gguf file"):
        LlamaCppModel(tmp_path / "absent.gguf")


def test_a_file_that_is_not_gguf_is_unavailable(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelUnavailable, match="is not a GGUF file"):
        LlamaCppModel(fake)


def test_missing_llama_cpp_names_the_extra(tmp_path, monkeypatch):
    header_only = tmp_path / "model.gguf"
    header_only.write_bytes(b"GGUF" + bytes(20))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(ModelUnavailable, match=r"pip install 'datalyst\[llamacpp\]'"):
        LlamaCppModel(header_only)


def _package(root: Path, variants_in: str | None) -> Path:
    """A llama_cpp package folder laid out like an installed wheel, with CPU variant libraries or not."""
    package = root / "site-packages" / "llama_cpp"
    (package / "lib").mkdir(parents=True)
    if variants_in is not None:
        where = package / variants_in
        where.mkdir(parents=True, exist_ok=True)
        (where / "libggml-cpu-haswell.so").touch()
    return package


@pytest.mark.parametrize("variants_in", ["../bin", "lib"])
def test_the_cpu_libraries_of_a_build_are_found_where_they_lie(tmp_path, variants_in):
    package = _package(tmp_path, variants_in)
    assert _cpu.library_folder(package).resolve() == (package / variants_in).resolve()


def test_a_build_with_its_cpu_code_linked_in_has_no_library_folder(tmp_path):
    assert _cpu.library_folder(_package(tmp_path, None)) is None
