"""Batched generation and prefix reuse in the llama.cpp backend, counted by the engine itself.

Runs on the smallest cached GGUF (the embedded ``tiny`` model), like ``test_llamacpp.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from datalyst.llm._base import ChatMessage, Role, SamplingParams
from datalyst.llm._llamacpp import LlamaCppModel
from datalyst.llm._streaming import text_streamed_to

pytestmark = pytest.mark.model
GREEDY = SamplingParams(temperature=0, max_tokens=24)
SYSTEM = ChatMessage(role=Role.SYSTEM, content="You are a careful data analyst. " * 20)


def user(text: str) -> list[ChatMessage]:
    return [SYSTEM, ChatMessage(role=Role.USER, content=text)]


@pytest.fixture
def model(test_gguf) -> LlamaCppModel:
    loaded = LlamaCppModel(test_gguf, n_ctx_tokens=1024, parallel=4)
    yield loaded
    loaded.close()


def run(coroutine):
    return asyncio.run(coroutine)


def prompt_ids(model: LlamaCppModel, messages: list[ChatMessage]) -> list[int]:
    return model._prompt(messages, 0, "nothing")


def test_the_next_turn_reads_only_what_it_adds(model):
    first = user("What is the mean of 3, 5 and 10?")
    [reply] = run(model.agenerate(first, GREEDY))
    second = [*first, ChatMessage(role=Role.ASSISTANT, content=reply.text), ChatMessage(role=Role.USER, content="Why?")]
    before = model.engine.stats.evaluated_tokens
    run(model.agenerate(second, GREEDY))
    cached = prompt_ids(model, first) + reply.token_ids[:-1]  # the last sampled token never went in
    new = prompt_ids(model, second)
    common = next((i for i, (a, b) in enumerate(zip(cached, new, strict=False)) if a != b), len(cached))
    assert model.engine.stats.evaluated_tokens - before == len(new) - common
    assert len(new) - common < len(new) // 3  # most of the prompt came from the cache


def test_interleaved_trajectories_each_keep_their_cache(model):
    a, b = user("Name a prime number."), user("Name an even number.")
    [reply_a], [reply_b] = run(_both(model.agenerate(a, GREEDY), model.agenerate(b, GREEDY)))
    followups = [
        [*a, ChatMessage(role=Role.ASSISTANT, content=reply_a.text), ChatMessage(role=Role.USER, content="Another?")],
        [*b, ChatMessage(role=Role.ASSISTANT, content=reply_b.text), ChatMessage(role=Role.USER, content="Another?")],
    ]
    before = model.engine.stats.evaluated_tokens
    for messages in followups:  # one after the other, so each must find its own slot again
        run(model.agenerate(messages, GREEDY))
    total = sum(len(prompt_ids(model, messages)) for messages in followups)
    assert model.engine.stats.evaluated_tokens - before < total // 3


async def _both(*calls):
    return await asyncio.gather(*calls)


def test_different_prompts_decode_together_and_each_gets_its_own_completion(model, test_gguf):
    """Four prompts decoded in the same forward passes each get a completion of their own prompt, and at
    temperature 0 the same tokens as one at a time (one sequence) within llama.cpp's tolerance: its logits
    move slightly with how a prompt was split between cached and new tokens and with how full the cache is
    (up to 0.09 in log-probability here), so the two agree within 0.15 until a near-tie, where they may
    take different tokens."""
    numbers = (3, 7, 12, 40)
    prompts = [user(f"Spell the number {n} in words.") for n in numbers]
    params = GREEDY.model_copy(update={"logprobs": True})
    one_at_a_time = LlamaCppModel(test_gguf, n_ctx_tokens=1024, parallel=1)
    try:
        alone = [run(one_at_a_time.agenerate(messages, params))[0] for messages in prompts]
    finally:
        one_at_a_time.close()
    together = [result[0] for result in run(_both(*(model.agenerate(messages, params) for messages in prompts)))]
    assert model.engine.stats.most_sequences_in_one_decode == 4  # several sequences in one forward pass
    for number, batched, single in zip(numbers, together, alone, strict=True):
        assert str(number) in batched.text[:40]  # its own prompt's answer, not a neighbour's
        same = next(
            (i for i, (a, b) in enumerate(zip(batched.token_ids, single.token_ids, strict=False)) if a != b), None
        )
        agreed = len(batched.token_ids) if same is None else same
        assert agreed >= 4, (batched.text, single.text)
        for a, b in zip(batched.logprobs[:agreed], single.logprobs[:agreed], strict=True):
            assert a.logprob == pytest.approx(b.logprob, abs=0.15)
        if same is not None:  # where they part, the single stream's choice was nearly a tie in the batch
            assert abs(batched.logprobs[same].logprob - single.logprobs[same].logprob) < 0.7


def test_n_samples_read_their_shared_prompt_once(model):
    messages = user("Give one word that describes a dataset.")
    length = len(prompt_ids(model, messages))
    before = model.engine.stats
    evaluated, copied = before.evaluated_tokens, before.copied_tokens
    samples = run(model.agenerate(messages, SamplingParams(temperature=0.9, seed=3, n=4, max_tokens=12)))
    assert len(samples) == 4 and len({tuple(s.token_ids) for s in samples}) > 1
    assert model.engine.stats.evaluated_tokens - evaluated <= length + 3  # once, plus each sample's last token
    assert model.engine.stats.copied_tokens - copied >= 3 * (length - 1)


def test_trials_started_together_share_their_prefix(model):
    messages = user("How many rows does a table with 3 columns and 4 records have?")
    length = len(prompt_ids(model, messages))
    evaluated = model.engine.stats.evaluated_tokens
    run(_both(*(model.agenerate(messages, GREEDY) for _ in range(4))))
    assert model.engine.stats.evaluated_tokens - evaluated <= length + 3


def test_a_call_waiting_for_a_slot_can_be_cancelled(model):
    one_slot = LlamaCppModel(model.path, n_ctx_tokens=512, parallel=1)

    async def scenario():
        counting = SamplingParams(temperature=0, max_tokens=60)
        long = asyncio.create_task(one_slot.agenerate(user("Count to 50."), counting))
        queued = asyncio.create_task(one_slot.agenerate(user("Hi"), GREEDY))
        await asyncio.sleep(0.05)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        return await long

    try:
        [completion] = run(scenario())
        assert completion.completion_tokens > 0
    finally:
        one_slot.close()


def test_the_text_streams_as_it_is_sampled_and_adds_up_to_the_completion(model):
    pieces: list[str] = []

    async def go():
        with text_streamed_to(pieces.append):
            [one] = await model.agenerate(user("Count from 1 to 20."), GREEDY)
            await model.agenerate(user("Count from 1 to 20."), GREEDY.model_copy(update={"n": 2, "temperature": 1}))
        return one

    one = run(go())
    assert len(pieces) > 3 and "".join(pieces) == one.text  # piece by piece, and only the single completion
