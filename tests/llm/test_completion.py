"""Completion.cut: text, token ids, offsets and logprobs stay in step."""

from datalyst.llm import Completion, TokenLogprob

PIECES = ["<code>", "print", "(1)", "</code>", "\n<answer>"]


def completion(**extra) -> Completion:
    ends = [sum(len(piece) for piece in PIECES[: i + 1]) for i in range(len(PIECES))]
    logprobs = [TokenLogprob(token=piece, logprob=-float(i)) for i, piece in enumerate(PIECES)]
    fields = {"token_ids": [1, 2, 3, 4, 5], "offsets": ends, "logprobs": logprobs, "completion_tokens": 5}
    return Completion(text="".join(PIECES), finish_reason="length", **(fields | extra))


def test_cut_keeps_the_fewest_whole_tokens_covering_the_characters():
    whole = completion()
    cut = whole.cut(len("<code>print(1)</co"))
    assert cut.text == "<code>print(1)</code>"
    assert (cut.token_ids, cut.offsets, cut.completion_tokens) == ([1, 2, 3, 4], whole.offsets[:4], 4)
    assert cut.logprobs == whole.logprobs[:4]


def test_cut_at_a_token_boundary_takes_no_extra_token():
    assert completion().cut(len("<code>print")).token_ids == [1, 2]


def test_cut_past_the_end_or_to_nothing():
    whole = completion()
    assert whole.cut(10_000) is whole
    assert (whole.cut(0).text, whole.cut(0).token_ids) == ("", [])


def test_without_offsets_only_the_text_can_be_cut():
    cut = completion(offsets=None).cut(3)
    assert (cut.text, cut.token_ids, cut.logprobs) == ("<co", None, None)
