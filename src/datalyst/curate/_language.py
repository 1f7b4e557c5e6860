"""Linguistic integrity: what the agent wrote in words is readable text in the task's language.

Checked are each turn's thought and the final answer, with code left out (fenced blocks and inline
backtick spans); observations are never checked. Text the agent quotes from the data does not count
against it: a span found verbatim in the task's first message or in an observation the agent had
already seen is taken as copied.

Garbled text is any of: a replacement, control, private-use or unassigned character; mojibake (UTF-8
read as Latin-1 or Windows-1252, as in ``cafÃ©``); the text of a chat template's special token
(``<|im_end|>``); a run of symbols (markdown rules and tables aside); a word repeated many times in a
row. Mixed languages are letters of a script other than Latin and the question's own, beyond
``max_foreign_letters`` in the whole trajectory. A lone Greek letter is notation (sigma, beta 1), and
so are letters named as symbols (the micro sign, the script small l, ordinal indicators).
"""

from __future__ import annotations

import contextlib
import functools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence

from datalyst.agent import Trajectory, Turn
from datalyst.curate._records import KEEP, Decision

GARBLED_TEXT = "garbled_text"
MIXED_LANGUAGES = "mixed_languages"

MAX_FOREIGN_LETTERS = 1
"""Letters of other scripts a trajectory may hold (a stray one is tolerated)."""
SYMBOL_RUN = 12
"""Symbols in a row (no letter, digit or space between) that make a run garbled."""
REPEATED_WORD = 8
"""Times in a row the same word may not appear."""

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
_NOT_PLAIN = re.compile(r"[^\t\n\r\x20-\x7e]")
_SPECIAL_TOKEN = re.compile(r"<[|\uff5c][^<>\s]{1,40}[|\uff5c]>")
"""A chat template's special token (some templates draw its bars full-width)."""
_ODD_CATEGORIES = {"Cc": "control", "Cn": "unassigned", "Co": "private-use", "Cs": "surrogate"}
_SYMBOLS = re.compile(rf"[^\w\s]{{{SYMBOL_RUN},}}")
_RULE_CHARS = frozenset("-=*#~|:+.")
"""What markdown rules and table borders are drawn with."""
_LETTERS = re.compile(r"[^\W\d_]+")
_EDGES = string.punctuation + "\u201c\u201d\u2018\u2019\u00ab\u00bb"
"""Punctuation around a quoted word (typographic quotes and guillemets included)."""

_NOTATION = frozenset(
    {
        "MATHEMATICAL", "MODIFIER", "SUPERSCRIPT", "SUBSCRIPT", "MICRO", "OHM", "KELVIN", "ANGSTROM", "SCRIPT",
        "DOUBLE-STRUCK", "BLACK-LETTER", "PLANCK", "FEMININE", "MASCULINE", "INFORMATION", "TURNED",
    }
)  # fmt: skip
"""First words of the names of letters that are symbols rather than writing (``MICRO SIGN``)."""
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "BOPOMOFO": "CJK", "IDEOGRAPHIC": "CJK"}
"""Scripts written together (Japanese mixes kana and Han characters)."""
_NO_SPACES = frozenset({"CJK", "THAI", "LAO", "KHMER", "MYANMAR"})
"""Scripts written without spaces: each character is weighed on its own."""


def _byte_of() -> dict[str, int]:
    """The byte each character stands for when UTF-8 was read as Latin-1 or Windows-1252 (0x80 and up)."""
    table = {chr(byte): byte for byte in range(0x80, 0x100)}
    for byte in range(0x80, 0xC0):
        with contextlib.suppress(UnicodeDecodeError):  # undefined in Windows-1252: its Latin-1 character stands
            table[bytes([byte]).decode("cp1252")] = byte
    return table


_BYTE_OF = _byte_of()
_CONTINUATIONS = re.escape("".join(char for char, byte in _BYTE_OF.items() if byte < 0xC0))
_MOJIBAKE = re.compile(f"[\u00c2-\u00f4][{_CONTINUATIONS}]{{1,3}}")
"""A lead byte of a UTF-8 sequence followed by continuation bytes, each shown as a character."""


class LanguageCheck:
    """The agent's own words are neither garbled nor drifting into another language."""

    name = "language"
    reasons = (GARBLED_TEXT, MIXED_LANGUAGES)

    def __init__(self, max_foreign_letters: int = MAX_FOREIGN_LETTERS) -> None:
        self.max_foreign_letters = max_foreign_letters

    def check(self, trajectory: Trajectory) -> Decision:
        allowed = {"LATIN", main_script(trajectory.task.question)}
        seen = [trajectory.first_message]
        foreign: list[tuple[int, str]] = []
        for turn in trajectory.turns:
            for text in natural_text(turn):
                if (problem := garbled(text, seen)) is not None:
                    return Decision(reason=GARBLED_TEXT, detail=f"turn {turn.index}: {problem}")
                foreign += [(turn.index, word) for word in foreign_words(text, allowed, seen)]
            if turn.observation:
                seen.append(turn.observation)
        letters = sum(len(word) for _, word in foreign)
        if letters > self.max_foreign_letters:
            scripts = sorted({script(word[0]) or "" for _, word in foreign})
            words = ", ".join(repr(word) for _, word in foreign[:5])
            return Decision(
                reason=MIXED_LANGUAGES,
                detail=f"{letters} letters in {'/'.join(scripts)} from turn {foreign[0][0]} on: {words}",
            )
        return KEEP


def natural_text(turn: Turn) -> list[str]:
    """What the agent wrote in words in ``turn``: its thought and answer, code spans blanked out."""
    return [_CODE.sub(" ", text) for text in (turn.thought, turn.answer) if text]


def garbled(text: str, sources: Sequence[str]) -> str | None:
    """What is garbled in ``text`` (the first thing found), unless copied from one of ``sources``."""
    for start, end, what in _suspects(text):
        if not _copied(text, start, end, sources):
            return what
    return None


def foreign_words(text: str, allowed: set[str], sources: Sequence[str]) -> list[str]:
    """The words of ``text`` in a script outside ``allowed``, not copied from ``sources`` and not notation.

    Scripts written without spaces count character by character.
    """
    found = []
    for match in _LETTERS.finditer(text):
        if match.group().isascii():
            continue
        for word in _script_runs(match.group()):
            name = script(word[0])
            if name is None or name in allowed or (name == "GREEK" and len(word) == 1):
                continue
            for unit in word if name in _NO_SPACES else (word,):
                if not any(unit in source for source in sources):
                    found.append(unit)
    return found


def main_script(text: str) -> str:
    """The script most letters of ``text`` are written in (Latin when it has none)."""
    if text.isascii():
        return "LATIN"
    counts = Counter(script(char) for char in text if char.isalpha())
    counts.pop(None, None)
    return counts.most_common(1)[0][0] if counts else "LATIN"


@functools.cache
def script(char: str) -> str | None:
    """The writing system of a letter, from its Unicode name (``CYRILLIC``, ``CJK``); None for notation."""
    words = unicodedata.name(char, "").split()
    if words[:1] in (["FULLWIDTH"], ["HALFWIDTH"]):
        words = words[1:]
    if not words or words[0] in _NOTATION:
        return None
    return _SCRIPT_GROUPS.get(words[0], words[0])


def _script_runs(letters: str) -> Iterator[str]:
    """``letters`` cut where the script changes."""
    start = 0
    for index in range(1, len(letters) + 1):
        if index == len(letters) or script(letters[index]) != script(letters[start]):
            yield letters[start:index]
            start = index


def _suspects(text: str) -> Iterator[tuple[int, int, str]]:
    """Spans of ``text`` that look garbled: start, end and what they are."""
    for match in _NOT_PLAIN.finditer(text):
        if (what := _odd_character(match.group())) is not None:
            yield match.start(), match.end(), what
    for match in _MOJIBAKE.finditer(text):
        if (decoded := _utf8_behind(match.group())) is not None:
            yield match.start(), match.end(), f"mojibake {match.group()!r} (UTF-8 {decoded!r} read as Latin-1)"
    for match in _SPECIAL_TOKEN.finditer(text):
        yield match.start(), match.end(), f"special token text {match.group()!r}"
    for match in _SYMBOLS.finditer(text):
        if not set(match.group()) <= _RULE_CHARS:
            yield match.start(), match.end(), f"a run of {len(match.group())} symbols {match.group()[:20]!r}"
    yield from _repeated_words(text)


def _odd_character(char: str) -> str | None:
    if char == "\ufffd":
        return "a replacement character (U+FFFD)"
    kind = _ODD_CATEGORIES.get(unicodedata.category(char))
    return f"a {kind} character (U+{ord(char):04X})" if kind else None


def _utf8_behind(shown: str) -> str | None:
    """The character whose UTF-8 bytes ``shown`` displays one byte per character, if it is one."""
    data = bytes(_BYTE_OF[char] for char in shown)
    length = 2 if data[0] < 0xE0 else 3 if data[0] < 0xF0 else 4
    try:
        return data[:length].decode("utf-8") if len(data) >= length else None
    except UnicodeDecodeError:
        return None


def _repeated_words(text: str) -> Iterator[tuple[int, int, str]]:
    """Runs of the same word (one holding a letter) at least ``REPEATED_WORD`` times in a row."""
    words = list(re.finditer(r"\S+", text))
    start = 0
    for index in range(1, len(words) + 1):
        if index == len(words) or words[index].group() != words[start].group():
            word, count = words[start].group(), index - start
            if count >= REPEATED_WORD and any(char.isalpha() for char in word):
                yield words[start].start(), words[index - 1].end(), f"{word!r} {count} times in a row"
            start = index


def _copied(text: str, start: int, end: int, sources: Sequence[str]) -> bool:
    """Whether ``text[start:end]``, with the rest of the words it is in, is in a source.

    Punctuation at the edges of those words is left out, where it is not part of the span itself.
    """
    left, right = start, end
    while left > 0 and not text[left - 1].isspace():
        left -= 1
    while right < len(text) and not text[right].isspace():
        right += 1
    while left < start and text[left] in _EDGES:
        left += 1
    while right > end and text[right - 1] in _EDGES:
        right -= 1
    return any(text[left:right] in source for source in sources)
