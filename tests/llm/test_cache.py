"""CachedModel: reproducible requests are answered from disk, keyed on everything that shapes the answer."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.errors import ModelResponseError
from datalyst.llm._base import ChatMessage, Completion, Role, SamplingParams
from datalyst.llm._cache import CachedModel, model_identity
from datalyst.llm._embedded import get_model
from datalyst.llm._replay import ReplayModel

ASK = [ChatMessage(role=Role.USER, content="mean of price?")]


def run(model: CachedModel, params: SamplingParams, messages: list[ChatMessage] = ASK) -> list[str]:
    return [completion.text for completion in asyncio.run(model.agenerate(messages, params))]


def entries(cache_dir) -> list:
    return sorted(cache_dir.rglob("*.json"))


def test_second_identical_request_is_a_hit(tmp_path):
    model = CachedModel(ReplayModel(["41.5"]), tmp_path)  # a second call to the replay would raise
    assert run(model, SamplingParams()) == ["41.5"]
    assert run(model, SamplingParams()) == ["41.5"]
    assert (model.hits, model.misses) == (1, 1)
    assert len(entries(tmp_path)) == 1
    assert not list(tmp_path.rglob("*.tmp"))


def test_entries_outlive_the_instance(tmp_path):
    run(CachedModel(ReplayModel(["a", "b"], spec="replay:x"), tmp_path), SamplingParams(n=2))
    later = CachedModel(ReplayModel([], spec="replay:x"), tmp_path)
    assert run(later, SamplingParams(n=2)) == ["a", "b"]


@pytest.mark.parametrize(
    "changed",
    [
        {"n": 2},
        {"temperature": 0.7, "seed": 0},
        {"top_p": 0.9},
        {"max_tokens": 7},
        {"stop": ("\n",)},
        {"seed": 1},
        {"logprobs": True},
    ],
    ids=lambda changed: ",".join(changed),
)
def test_every_sampling_field_is_part_of_the_key(tmp_path, changed):
    base = SamplingParams(seed=0)
    model = CachedModel(ReplayModel(["first", "second", "third"]), tmp_path)
    assert run(model, base) == ["first"]
    assert run(model, base.model_copy(update=changed))[0] == "second"
    assert model.misses == 2


def test_messages_and_spec_are_part_of_the_key(tmp_path):
    run(CachedModel(ReplayModel(["x"], spec="replay:one"), tmp_path), SamplingParams())
    assert run(CachedModel(ReplayModel(["y"], spec="replay:two"), tmp_path), SamplingParams()) == ["y"]
    other_question = [ChatMessage(role=Role.USER, content="median of price?")]
    assert run(CachedModel(ReplayModel(["z"], spec="replay:one"), tmp_path), SamplingParams(), other_question) == ["z"]
    assert len(entries(tmp_path)) == 3


def test_unseeded_sampling_is_never_cached(tmp_path):
    model = CachedModel(ReplayModel(["random 1", "random 2"]), tmp_path)
    hot = SamplingParams(temperature=0.8)
    assert run(model, hot) == ["random 1"]
    assert run(model, hot) == ["random 2"]
    assert (model.hits, model.misses, entries(tmp_path)) == (0, 0, [])
    with pytest.raises(ModelResponseError, match="ran out"):
        run(model, hot)


def test_seeded_sampling_is_cached(tmp_path):
    model = CachedModel(ReplayModel(["sample"]), tmp_path)
    seeded = SamplingParams(temperature=0.8, seed=7)
    assert run(model, seeded) == run(model, seeded) == ["sample"]


def test_concurrent_identical_requests_ask_the_model_once(tmp_path):
    model = CachedModel(ReplayModel(["only"], latency_s=0.01), tmp_path)

    async def main() -> list[list[Completion]]:
        return await asyncio.gather(*(model.agenerate(ASK, SamplingParams()) for _ in range(10)))

    assert [batch[0].text for batch in asyncio.run(main())] == ["only"] * 10
    assert (model.hits, model.misses) == (9, 1)


def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path):
    model = CachedModel(ReplayModel(["good", "again"]), tmp_path)
    run(model, SamplingParams())
    [entry] = entries(tmp_path)
    entry.write_text("{truncated")
    assert run(model, SamplingParams()) == ["again"]
    assert run(model, SamplingParams()) == ["again"]
    assert (model.hits, model.misses) == (1, 2)


def test_spec_and_close_pass_through(tmp_path):
    inner = ReplayModel([], spec="replay:inner")

    async def main() -> str:
        async with CachedModel(inner, tmp_path) as model:
            return model.spec

    assert asyncio.run(main()) == "replay:inner"


def replace_file(path, content: bytes) -> None:
    """Write ``content`` to a new file and move it over ``path``, the way a re-download replaces weights."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(content)
    fresh.replace(path)


def test_a_gguf_file_replaced_at_the_same_path_misses(tmp_path):
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF old weights")
    spec = f"gguf:{weights}"
    assert run(CachedModel(ReplayModel(["old"], spec=spec), tmp_path / "cache"), SamplingParams()) == ["old"]
    replace_file(weights, b"GGUF new weights!")
    later = CachedModel(ReplayModel(["new"], spec=spec), tmp_path / "cache")
    assert run(later, SamplingParams()) == ["new"]
    assert (later.hits, later.misses) == (0, 1)


def test_a_file_changed_inside_an_hf_folder_misses(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    spec = f"hf:{folder}?dtype=float32"
    run(CachedModel(ReplayModel(["before"], spec=spec), tmp_path / "cache"), SamplingParams())
    same = CachedModel(ReplayModel([], spec=spec), tmp_path / "cache")
    assert run(same, SamplingParams()) == ["before"]
    (folder / "model.safetensors").write_bytes(b"trained weights")
    assert run(CachedModel(ReplayModel(["after"], spec=spec), tmp_path / "cache"), SamplingParams()) == ["after"]


def test_an_embedded_model_is_named_by_its_pinned_digest_so_a_cache_serves_other_machines(tmp_path, monkeypatch):
    monkeypatch.setenv("DATALYST_CACHE", str(tmp_path / "home"))
    weights = tmp_path / "home" / "models" / "smollm2-135m-instruct-q4_1.gguf"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"GGUF one")
    run(CachedModel(ReplayModel(["one"], spec="embedded:tiny"), tmp_path / "cache"), SamplingParams())
    replace_file(weights, b"GGUF one")  # fetched again elsewhere: a new file, a new mtime, the same pinned weights
    assert run(CachedModel(ReplayModel([], spec="embedded:tiny"), tmp_path / "cache"), SamplingParams()) == ["one"]
    assert model_identity("embedded:tiny")["files"] == [("", get_model("tiny").size_bytes, get_model("tiny").sha256)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "openai:qwen@http://localhost:8000/v1?max_concurrency=2",
            "openai:qwen@http://localhost:8000/v1?max_concurrency=16&timeout_s=30.0&max_retries=0",
        ),
        ("gguf:/models/m.gguf?n_ctx=4096&n_threads=1", "gguf:/models/m.gguf?n_threads=4&n_batch=64&n_ctx=4096"),
    ],
)
def test_options_that_do_not_change_outputs_still_hit(tmp_path, first, second):
    run(CachedModel(ReplayModel(["answer"], spec=first), tmp_path), SamplingParams())
    again = CachedModel(ReplayModel([], spec=second), tmp_path)
    assert run(again, SamplingParams()) == ["answer"]
    assert again.hits == 1


def test_options_that_change_outputs_miss(tmp_path):
    run(CachedModel(ReplayModel(["short"], spec="gguf:/models/m.gguf?n_ctx=512"), tmp_path), SamplingParams())
    longer = CachedModel(ReplayModel(["long"], spec="gguf:/models/m.gguf?n_ctx=8192"), tmp_path)
    assert run(longer, SamplingParams()) == ["long"]
