"""The one head-and-tail clipper."""

from datalyst.text import clip_middle, cut_note


def test_short_text_is_kept_whole():
    assert clip_middle("abc", 3) == "abc"


def test_long_text_keeps_its_head_and_tail_and_says_how_much_was_cut():
    assert clip_middle("abcdefghij", 4) == "ab" + cut_note(6, "characters") + "ij"
    assert "[6 characters cut]" in clip_middle("abcdefghij", 4)
