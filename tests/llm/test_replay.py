"""ReplayModel: recorded completions in order, cut like a server would cut them, and a clear end."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from datalyst.errors import ModelResponseError, ModelUnavailable
from datalyst.llm._base import ChatMessage, ChatModel, Completion, Role, SamplingParams, TokenLogprob
from datalyst.llm._registry import load_model
from datalyst.llm._replay import ReplayModel
from datalyst.llm._streaming import text_streamed_to

ASK = [ChatMessage(role=Role.USER, content="how many rows are there")]


def generate(model: ChatModel, params: SamplingParams | None = None) -> list[Completion]:
    return asyncio.run(model.agenerate(ASK, params or SamplingParams()))


def test_returns_outputs_in_order_n_per_call():
    model = ReplayModel(["a", "b", "c"])
    assert isinstance(model, ChatModel)
    assert [c.text for c in generate(model)] == ["a"]
    assert [c.text for c in generate(model, SamplingParams(n=2))] == ["b", "c"]
    assert model.remaining == 0
    assert [params.n for _, params in model.calls] == [1, 2]


def test_running_out_says_how_many_were_recorded():
    model = ReplayModel(["only one"])
    generate(model)
    with pytest.raises(ModelResponseError, match="1 completions were recorded"):
        generate(model)


def test_asking_for_more_than_remain_consumes_nothing():
    model = ReplayModel(["a", "b"])
    with pytest.raises(ModelResponseError, match="3 more were asked for"):
        generate(model, SamplingParams(n=3))
    assert [c.text for c in generate(model, SamplingParams(n=2))] == ["a", "b"]


def test_stop_strings_end_the_text_at_the_first_one_found_which_is_kept():
    model = ReplayModel([Completion(text="Thought: sum it\nAction: run\nObservation: 3", finish_reason="length")])
    [completion] = generate(model, SamplingParams(stop=("Observation:", "Action:")))
    assert completion.text == "Thought: sum it\nAction:"
    assert (completion.finish_reason, completion.stop) == ("stop", "Action:")
    assert completion.completion_tokens == 4


def test_recorded_tokens_are_cut_with_the_text():
    pieces = ["print", "(1", ")</", "code", ">", "<answer>"]
    recorded = Completion(
        text="".join(pieces),
        finish_reason="length",
        token_ids=[10, 11, 12, 13, 14, 15],
        offsets=[5, 7, 10, 14, 15, 23],
    )
    [completion] = generate(ReplayModel([recorded]), SamplingParams(stop=("</code>",)))
    assert (completion.text, completion.stop) == ("print(1)</code>", "</code>")
    assert (completion.token_ids, completion.offsets, completion.completion_tokens) == (
        [10, 11, 12, 13, 14],
        recorded.offsets[:5],
        5,
    )


def test_max_tokens_cuts_after_that_many_words():
    [completion] = generate(ReplayModel(["one two  three four"]), SamplingParams(max_tokens=3))
    assert (completion.text, completion.finish_reason, completion.completion_tokens) == ("one two  three", "length", 3)


def test_token_counts_are_whitespace_words():
    [completion] = generate(ReplayModel(["the answer is 42"]))
    assert (completion.prompt_tokens, completion.completion_tokens, completion.finish_reason) == (5, 4, "stop")
    assert completion.logprobs is None


def test_logprobs_are_recorded_ones_or_certainty():
    recorded = Completion(
        text="ab cd",
        finish_reason="stop",
        logprobs=[TokenLogprob(token="ab", logprob=-0.5), TokenLogprob(token=" cd", logprob=-1.0)],
    )
    model = ReplayModel(["x y", recorded, recorded])
    [plain, kept, cut] = [
        generate(model, SamplingParams(logprobs=True))[0],
        generate(model, SamplingParams(logprobs=True))[0],
        generate(model, SamplingParams(logprobs=True, stop=("ab",)))[0],
    ]
    assert plain.logprobs == [TokenLogprob(token="x", logprob=0.0), TokenLogprob(token="y", logprob=0.0)]
    assert kept.logprobs == recorded.logprobs
    assert (cut.text, cut.logprobs) == ("ab", recorded.logprobs[:1])


def test_concurrent_calls_get_outputs_in_call_order():
    model = ReplayModel([str(i) for i in range(8)], latency_s=0.01)

    async def main() -> list[str]:
        batches = await asyncio.gather(*(model.agenerate(ASK, SamplingParams()) for _ in range(8)))
        return [batch[0].text for batch in batches]

    assert asyncio.run(main()) == [str(i) for i in range(8)]


def test_replay_file_through_load_model(tmp_path):
    path = tmp_path / "answers.jsonl"
    lines = [json.dumps("first"), "", json.dumps({"text": "second", "finish_reason": "length"})]
    path.write_text("\n".join(lines) + "\n")
    model = load_model(f"replay:{path}?latency_s=0")
    assert model.spec == f"replay:{path}?latency_s=0"
    assert [(c.text, c.finish_reason) for c in generate(model, SamplingParams(n=2))] == [
        ("first", "stop"),
        ("second", "length"),
    ]


def test_bad_replay_files_are_named(tmp_path):
    with pytest.raises(ModelUnavailable, match="cannot read replay file"):
        load_model(f"replay:{tmp_path / 'missing.jsonl'}")
    path = tmp_path / "bad.jsonl"
    path.write_text('"fine"\n{not json\n')
    with pytest.raises(ModelUnavailable, match="line 2"):
        load_model(f"replay:{path}")


def test_per_turn_scripts_serve_every_conversation_from_the_start():
    model = ReplayModel(["first", "second"], per_turn=True)
    user = ChatMessage(role=Role.USER, content="q")
    assistant = ChatMessage(role=Role.ASSISTANT, content="first")
    params = SamplingParams()
    assert asyncio.run(model.agenerate([user], params))[0].text == "first"
    assert asyncio.run(model.agenerate([user], params))[0].text == "first"
    assert asyncio.run(model.agenerate([user, assistant, user], params))[0].text == "second"
    with pytest.raises(ModelResponseError, match="script of 2 turns"):
        asyncio.run(model.agenerate([user, assistant, user, assistant, user], params))


def test_a_single_completion_is_typed_out_word_by_word_over_the_latency():
    model = ReplayModel(["Thought: sum it.\nAnswer: 42", "a", "b"], latency_s=0.2)
    pieces: list[str] = []

    async def go():
        with text_streamed_to(pieces.append):
            started = time.monotonic()
            [completion] = await model.agenerate([ChatMessage(role=Role.USER, content="?")], SamplingParams())
            took = time.monotonic() - started
            await model.agenerate([ChatMessage(role=Role.USER, content="?")], SamplingParams(n=2, temperature=1))
        return completion, took

    completion, took = asyncio.run(go())
    assert pieces == ["Thought:", " sum", " it.", "\nAnswer:", " 42"] and "".join(pieces) == completion.text
    assert 0.15 < took < 1.0
