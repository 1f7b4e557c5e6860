"""Chat tokenizers on the real templates of the embedded models (Qwen2.5 in ``small``, SmolLM2 in ``tiny``).

Only the vocabulary and template are read (a fraction of a second); tests skip when the GGUF is not
cached (``datalyst models fetch tiny small``) or llama-cpp-python is not installed.
"""

from __future__ import annotations

import pytest

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm import (
    ChatMessage,
    ChatTokenizer,
    GGUFTokenizer,
    Role,
    common_prefix,
    is_cached,
    load_tokenizer,
    model_path,
)
from datalyst.llm._tokenizer import TemplateRenderer

CHAT = [
    ChatMessage(role=Role.SYSTEM, content="You analyse data files."),
    ChatMessage(role=Role.USER, content="Which region sells most? Ünïcode 日本語 🙂"),
    ChatMessage(role=Role.ASSISTANT, content="<code>\nprint(df.groupby('region').revenue.sum())\n</code>"),
    ChatMessage(role=Role.USER, content="Observation:\n  West    1200\n\n  North    900\n"),
]
SYSTEM_HEADERS = {"small": "<|im_start|>system\n", "tiny": "<|im_start|>system\n"}


def embedded_tokenizer(name: str) -> GGUFTokenizer:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'datalyst[llamacpp]')")
    if not is_cached(name):
        pytest.skip(f"embedded model {name!r} is not cached (datalyst models fetch {name})")
    return GGUFTokenizer(model_path(name))


@pytest.fixture(scope="module", params=["small", "tiny"])
def named(request) -> tuple[str, GGUFTokenizer]:
    return request.param, embedded_tokenizer(request.param)


def test_render_uses_the_template_and_round_trips_through_ids(named):
    name, tokenizer = named
    assert isinstance(tokenizer, ChatTokenizer)
    rendered = tokenizer.render(CHAT, add_generation_prompt=True)
    assert rendered.startswith(SYSTEM_HEADERS[name] + "You analyse data files.<|im_end|>\n")
    assert rendered.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.render(CHAT, add_generation_prompt=False) + "<|im_start|>assistant\n" == rendered
    ids = tokenizer.encode(rendered)
    assert tokenizer.decode(ids) == rendered
    assert ids[0] == tokenizer.encode("<|im_start|>")[0]  # a special token, not its characters
    assert len(tokenizer.encode("<|im_end|>")) == 1


def test_end_of_turn_and_no_bos(named):
    _, tokenizer = named
    assert tokenizer.end_of_turn == "<|im_end|>"
    assert tokenizer.decode(tokenizer.encode("Hi")) == "Hi"


def test_a_template_default_system_message_is_written(named):
    name, tokenizer = named
    rendered = tokenizer.render(CHAT[1:], add_generation_prompt=True)
    assert rendered.startswith(SYSTEM_HEADERS[name]) and "You analyse data files." not in rendered


def test_offsets_follow_characters_split_over_tokens(named):
    _, tokenizer = named
    ids = tokenizer.encode("naïve 日本語 ꙮ𓀀 done")
    text, offsets = tokenizer.decode(ids), tokenizer.offsets(ids)
    assert len(offsets) == len(ids) and offsets[-1] == len(text) and offsets == sorted(offsets)
    for end, covered in enumerate(offsets, start=1):
        assert tokenizer.decode(ids[:end]).startswith(text[:covered])
    assert len(set(offsets)) < len(offsets)  # the rare characters' bytes come in several tokens


def test_load_tokenizer_reads_embedded_and_gguf_specs():
    small = embedded_tokenizer("small")
    loaded = load_tokenizer("embedded:small?n_ctx=4096")
    assert isinstance(loaded, GGUFTokenizer) and loaded.path == small.path
    assert load_tokenizer(f"gguf:{small.path}").render(CHAT, add_generation_prompt=False) == small.render(
        CHAT, add_generation_prompt=False
    )


@pytest.mark.parametrize("spec", ["openai:qwen@http://127.0.0.1:8000/v1", "replay:answers.jsonl"])
def test_specs_without_local_files_have_no_tokenizer(spec):
    with pytest.raises(ConfigError, match="no local files to read a tokenizer from"):
        load_tokenizer(spec)


def test_a_file_that_is_not_gguf_is_unavailable(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelUnavailable, match="is not a GGUF file"):
        load_tokenizer(f"gguf:{fake}")


def test_a_template_that_refuses_the_messages_is_one_config_error():
    template = (
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversations must start with a user') }}{% endif %}"
    )
    render = TemplateRenderer(template, name="strict.gguf", bos_token="", eos_token="</s>")
    with pytest.raises(ConfigError, match=r"strict.gguf rejects these messages \(Conversations must start"):
        render(CHAT, add_generation_prompt=True)


def test_templates_render_like_transformers(tmp_path):
    """tojson keeps non-ASCII and HTML characters, and blocks are trimmed, as transformers renders them."""
    template = (
        "{% for message in messages %}\n  {{ message['content'] | tojson }}\n{% endfor %}"
        "{% if add_generation_prompt %}{{ eos_token }}{% endif %}"
    )
    render = TemplateRenderer(template, name="t", bos_token="<s>", eos_token="</s>")
    assert render(CHAT[1:2], add_generation_prompt=True) == '  "Which region sells most? Ünïcode 日本語 🙂"\n</s>'


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small", "tiny"])
def test_the_gguf_tokenizer_agrees_with_the_transformers_one(name):
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'datalyst[hf]')")
    gguf = embedded_tokenizer(name)
    hf = load_tokenizer(f"hf:{gguf.path}")
    for add in (True, False):
        rendered = gguf.render(CHAT, add_generation_prompt=add)
        assert hf.render(CHAT, add_generation_prompt=add) == rendered
        # Same vocabulary; llama.cpp may split some text differently (SmolLM2: spaces before digits).
        assert hf.decode(gguf.encode(rendered)) == gguf.decode(hf.encode(rendered)) == rendered
    assert hf.end_of_turn == gguf.end_of_turn
    ids = gguf.encode("naïve 日本語 ꙮ𓀀 done")
    assert hf.offsets(ids) == gguf.offsets(ids)


def test_common_prefix_counts_the_leading_ids_two_sequences_share() -> None:
    assert common_prefix([1, 2, 3], (1, 2, 4, 5)) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2 == common_prefix((1, 2), (1, 2))
    assert common_prefix([], [1]) == 0 == common_prefix([2], [1])
