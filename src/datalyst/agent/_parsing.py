"""Tolerant reading of model turns: tag blocks and code fences, shared by the dialects.

Small models break formats in a handful of ways: a closing tag is missing because
generation stopped, a code fence sits inside a tag or stands without one, tags
change case, text trails after the answer. These helpers read such text without
ever raising; the dialects combine them into one `Step`.

Shared conventions:

- A tag block's content runs from its opening tag to the next tag of the
  dialect's vocabulary (normally its own closing tag) or to the end of the text,
  so an unclosed block simply extends as far as it can.
- A fence opens with three backticks and closes at the next three backticks or
  the end of the region. Code containing three backticks cannot be read.
- Code is dedented and stripped of blank edges; thoughts and answers are stripped.
"""

from __future__ import annotations

import bisect
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

FENCE = "```"
_PYTHON_LANG = re.compile(r"(?:i?python|py)[\d.]*", re.IGNORECASE)
"""Fence language markers taken as Python: python, py, Python3, py3, ipython, python3.11."""
_LANG_TOKEN = re.compile(r"[\w.+#-]+")


def tag_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """Opening and closing forms of the named tags, in any case, tolerating inner spaces."""
    alternatives = "|".join(sorted((re.escape(name) for name in names), key=len, reverse=True))
    return re.compile(rf"<\s*(?:(/)\s*)?({alternatives})\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """The content of one tag block in a turn."""

    name: str
    """Tag name, lower case."""
    start: int
    """Position of the opening tag."""
    content_start: int
    end: int
    """End of the content (the next tag, or the end of the text)."""
    close_end: int | None = None
    """End of the block's own closing tag when the next tag closes it (None: left open)."""

    def content(self, text: str) -> str:
        return text[self.content_start : self.end]


def find_blocks(text: str, pattern: re.Pattern[str]) -> list[Block]:
    """Every opening tag in `text`, its content ending at the next tag of the vocabulary."""
    tags = list(pattern.finditer(text))
    blocks = []
    for index, tag in enumerate(tags):
        if tag.group(1):  # a closing tag
            continue
        name, following = tag.group(2).lower(), tags[index + 1] if index + 1 < len(tags) else None
        end = following.start() if following else len(text)
        closes = following is not None and following.group(1) and following.group(2).lower() == name
        blocks.append(Block(name, tag.start(), tag.end(), end, following.end() if closes else None))
    return blocks


def strip_tags(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub("", text).strip()


def cut_at(text: str, pattern: re.Pattern[str]) -> str:
    """`text` up to the first match of `pattern` (the model wrote past its stop sequence)."""
    match = pattern.search(text)
    return text[: match.start()] if match else text


@dataclass(frozen=True)
class Fence:
    """A fenced code block."""

    start: int
    """Position of the opening backticks."""
    end: int
    """Position after the closing backticks (or the end of the region when unclosed)."""
    lang: str
    body: str

    @property
    def is_python(self) -> bool:
        """A Python marker, or none at all (small models often leave it out)."""
        return not self.lang or _PYTHON_LANG.fullmatch(self.lang) is not None

    @property
    def code(self) -> str:
        return clean_code(self.body)


def _read_fence(text: str, start: int, stop: int) -> Fence:
    """The fence whose opening backticks are at `start`, read no further than `stop`."""
    head = start + len(FENCE)
    line_end = text.find("\n", head, stop)
    line_end = stop if line_end == -1 else line_end
    tick = text.find(FENCE, head, line_end)
    info = text[head : line_end if tick == -1 else tick]
    words = info.split(None, 1)
    if not info.strip():
        lang, body_start = "", line_end + 1 if tick == -1 else head
    elif len(words) == 1 and tick == -1 and _LANG_TOKEN.fullmatch(words[0]):
        lang, body_start = words[0], line_end + 1
    elif _PYTHON_LANG.fullmatch(words[0]):  # ```python print(1)```
        lang, body_start = words[0], head + info.index(words[0]) + len(words[0])
    else:  # ```print(1)```
        lang, body_start = "", head
    body_start = min(body_start, stop)
    close = text.find(FENCE, body_start, stop)
    if close == -1:
        return Fence(start, stop, lang, text[body_start:stop])
    return Fence(start, close + len(FENCE), lang, text[body_start:close])


def find_fences(text: str, start: int = 0, stop: int | None = None) -> list[Fence]:
    """The fenced blocks of `text[start:stop]`, in order."""
    stop = len(text) if stop is None else stop
    fences = []
    position = text.find(FENCE, start, stop)
    while position != -1:
        fence = _read_fence(text, position, stop)
        fences.append(fence)
        position = text.find(FENCE, max(fence.end, position + 1), stop)
    return fences


def clean_code(code: str) -> str:
    """Dedent and drop blank edges (``textwrap.dedent`` also empties whitespace-only lines)."""
    return textwrap.dedent(code).strip("\n").rstrip()


def code_in_region(text: str, start: int, stop: int) -> tuple[str, int]:
    """The code of an explicit code region (a code tag) and where it ends: its first fence, else the region.

    Any fence language counts here, because the tag already says the content is code. An
    unfenced region may begin with a lone language line (``<code>python``), which is dropped.
    """
    fences = find_fences(text, start, stop)
    if fences:
        return clean_code(fences[0].body), fences[0].end
    lines = text[start:stop].strip("\n").split("\n", 1)
    if _PYTHON_LANG.fullmatch(lines[0].strip()):
        lines = lines[1:]
    return clean_code("\n".join(lines)), stop


def python_fences(text: str, skip: Sequence[tuple[int, int]] = ()) -> list[Fence]:
    """The non-empty Python (or unmarked) fences of `text` that begin outside the `skip` spans.

    `skip` holds sorted, non-overlapping (start, end) spans, such as tag blocks.
    """
    starts = [start for start, _ in skip]
    found = []
    for fence in find_fences(text):
        index = bisect.bisect_right(starts, fence.start) - 1
        if index >= 0 and fence.start < skip[index][1]:
            continue
        if fence.is_python and fence.code:
            found.append(fence)
    return found


def unwrap_fence(text: str) -> str:
    """An answer the model fenced (``` @x[1] ```) without its fence; other text stripped as it is."""
    text = text.strip()
    if text.startswith(FENCE):
        fence = _read_fence(text, 0, len(text))
        if fence.end == len(text):
            return fence.body.strip()
    return text


def thought_before(text: str, blocks: list[Block], tag: str, stop: int, pattern: re.Pattern[str]) -> str:
    """The `tag` blocks that open before `stop` (cut at `stop`), else the bare text before `stop`.

    Several thought blocks are joined by a blank line. Bare text is kept so that a model that
    forgot its thought tags (or whose chat template already opened them) keeps its reasoning.
    """
    parts = []
    for block in blocks:
        if block.name == tag and block.start < stop:
            part = text[block.content_start : min(block.end, stop)].strip()
            if part:
                parts.append(part)
    return "\n\n".join(parts) if parts else strip_tags(text[:stop], pattern)
