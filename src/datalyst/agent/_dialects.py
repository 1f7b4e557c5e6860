"""The three turn formats of docs/ARCHITECTURE (datamind, jupiter, datarus), the ``program`` format of
programming tasks, and `get_dialect`.

Each dialect writes its opening prompt from ``prompts/<name>.yaml`` and reads a model
turn back with the tolerant helpers of `_parsing`. The reading rules every dialect shares:

- Text after the dialect's stop marker is dropped: the model wrote past the point where
  the server should have stopped it, so what follows is an invented observation.
- The FIRST action of the turn wins: a non-empty code block or a non-blank answer, whichever
  starts first. Code after an answer is ignored (the turn is over), and an answer after code
  is ignored too (it was written before the code's output was seen).
- Among several code blocks the first non-empty one is run; the rest are ignored, as if
  generation had stopped after it. An explicit code tag (``<code>``, ``<action_input>``, a
  fence after ``Action:``) is preferred to a bare fence elsewhere in the turn.
- A bare Python (or unmarked) fence counts as code when the turn has no code tag.
- Answers are kept whole (``The mean is @mean[3.2]``): scoring extracts ``@name[value]``.
- A turn with neither code nor an answer is void; its thought is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jinja2

from datalyst.agent._dialect import Dialect, PromptContext, Step
from datalyst.agent._parsing import (
    FENCE,
    Block,
    code_in_region,
    cut_at,
    find_blocks,
    python_fences,
    strip_tags,
    tag_pattern,
    thought_before,
    unwrap_fence,
)
from datalyst.errors import ConfigError
from datalyst.prompts import prompt_templates
from datalyst.tasks import Task

DIALECTS = ("datamind", "jupiter", "datarus")
"""The turn formats of data analysis."""
PROGRAM = "program"
"""The turn format of programming tasks (sequence problems, HumanEval)."""


def _templates(name: str) -> dict[str, jinja2.Template]:
    """The dialect's prompt templates: ``system``, ``user``, ``void`` and, for conversations, ``follow_up``."""
    return prompt_templates("datalyst.agent", name)


class _Action(NamedTuple):
    """A candidate action of a turn: where it starts, its text (code or answer) and where it ends."""

    start: int
    text: str
    end: int


def _choose(thought: str, answer: _Action | None, code: _Action | None, length: int) -> tuple[Step, int]:
    """The Step for the first of two candidate actions, and where the kept turn ends (empty code: void)."""
    if answer and (code is None or answer.start < code.start):
        return Step(thought=thought, answer=answer.text), answer.end
    if code and code.text:
        return Step(thought=thought, code=code.text), code.end
    return Step(thought=thought), length


def _action_start(answer: _Action | None, code: _Action | None, default: int) -> int:
    return min([candidate.start for candidate in (answer, code) if candidate] or [default])


def _after_closing(text: str, end: int, closing: re.Pattern[str]) -> int:
    """``end`` moved past closing tags (of enclosing elements) that directly follow it."""
    while match := closing.match(text, end):
        end = match.end()
    return end


class _PromptedDialect:
    """Opening prompt and void feedback from the dialect's YAML templates."""

    name: str

    def parse(self, completion: str) -> Step:
        return self._read(completion)[0]

    def action_end(self, completion: str) -> int:
        return self._read(completion)[1]

    def _read(self, completion: str) -> tuple[Step, int]:
        """The parsed turn and where its first action ends."""
        raise NotImplementedError

    def opening(self, context: PromptContext) -> tuple[str, str]:
        templates, variables = _templates(self.name), dict(context)
        return templates["system"].render(variables).strip(), templates["user"].render(variables).strip()

    def follow_up(self, task: Task) -> str:
        templates = _templates(self.name)
        if "follow_up" not in templates:
            raise ConfigError(f"the {self.name} dialect answers one task per conversation; it takes no follow-up")
        return templates["follow_up"].render(task=task).strip()

    def void_feedback(self) -> str:
        """Already wrapped as an observation: send it as it is."""
        return self.observation(_templates(self.name)["void"].render().strip())

    def last_call(self) -> str:
        templates = _templates(self.name)
        if "last_call" not in templates:
            raise ConfigError(f"the {self.name} dialect has no last call: its answer is its code")
        return templates["last_call"].render().strip()

    def format_check(self, problems: Sequence[str], answer_format: str) -> str:
        templates = _templates(self.name)
        if "format_check" not in templates:
            raise ConfigError(f"the {self.name} dialect has no answer format to check: its answer is its code")
        return templates["format_check"].render(problems=problems, answer_format=answer_format).strip()

    def observation(self, text: str) -> str:
        raise NotImplementedError


class DataMindDialect(_PromptedDialect):
    """``<think>`` reasoning, ``<code>```python …```</code>``, ``<interpreter>`` output, ``<answer>``."""

    name = "datamind"
    answer_start = "<answer>\n"
    stop = ("</code>", "</answer>", "<interpreter>")
    _tags = tag_pattern(("think", "code", "answer", "interpreter"))
    _stop = re.compile(r"<\s*interpreter\s*>", re.IGNORECASE)

    def _read(self, completion: str) -> tuple[Step, int]:
        text = cut_at(completion, self._stop)
        blocks = find_blocks(text, self._tags)
        answer = _first_answer(text, blocks)
        code = _earlier(_first_code(text, blocks, "code"), _bare_fence(text, blocks, ("answer", "think")))
        stop = _action_start(answer, code, len(text))
        return _choose(thought_before(text, blocks, "think", stop, self._tags), answer, code, len(text))

    def render(self, step: Step) -> str:
        parts = [f"<think>\n{step.thought}\n</think>"] if step.thought else []
        if step.answer is not None:
            parts.append(f"<answer>\n{step.answer}\n</answer>")
        elif step.code:
            parts.append(f"<code>\n{FENCE}python\n{step.code}\n{FENCE}\n</code>")
        return "\n".join(parts)

    def observation(self, text: str) -> str:
        body = text.strip("\n")
        return f"<interpreter>\n{body}\n</interpreter>"


def _bare_fence(text: str, blocks: list[Block], outside: tuple[str, ...]) -> _Action | None:
    """The first Python fence that is not inside a tag block named in ``outside`` (an answer, a thought)."""
    spans = [(block.start, block.end) for block in blocks if block.name in outside]
    fences = python_fences(text, spans)
    return _Action(fences[0].start, fences[0].code, fences[0].end) if fences else None


def _earlier(tagged: _Action | None, fence: _Action | None) -> _Action | None:
    """The code action that starts first: tagged code, or a bare fence written before it."""
    if tagged is None or (fence is not None and fence.start < tagged.start):
        return fence
    return tagged


def _first_answer(text: str, blocks: list[Block]) -> _Action | None:
    for block in blocks:
        if block.name == "answer" and (answer := unwrap_fence(block.content(text))):
            return _Action(block.start, answer, block.close_end or block.end)
    return None


def _first_code(text: str, blocks: list[Block], name: str) -> _Action | None:
    """The first ``name`` block that holds code."""
    for block in blocks:
        if block.name == name:
            found, end = code_in_region(text, block.content_start, block.end)
            if found:
                return _Action(block.start, found, block.close_end or end)
    return None


_LABEL = re.compile(
    r"^[ \t]*(?:[*_#]+[ \t]*)?(thought|action|(?:formatted|final)[ \t]+answer)[ \t]*(?:[*_]+[ \t]*)?:[*_]*",
    re.IGNORECASE | re.MULTILINE,
)
"""A jupiter keyword at the start of a line, in any case, possibly in markdown bold or as a heading.

No two runs of spaces touch, so a long blank line cannot make the search backtrack quadratically."""
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_INLINE_LABEL = re.compile(
    r"(?:[*_]+[ \t]*)?(?:thought|(?:formatted|final)[ \t]+answer)[ \t]*(?:[*_]+[ \t]*)?:[*_]*\s*", re.IGNORECASE
)
"""A keyword repeated right after ``Formatted answer:`` (``Formatted answer: Thought: ...``): not part of the answer."""


_ANSWER_CELL = re.compile(r"(?:formatted|final)[ _]answer[ \t]*:[ \t]*(\S.*)", re.IGNORECASE)
"""A cell's only line when the model wrote its answer as code."""


class JupiterDialect(_PromptedDialect):
    """``Thought:``, ``Action:`` with one ```python block, ``Observation:``, ``Formatted answer:``.

    ``Final answer:`` is read as ``Formatted answer:``. An answer runs to the end of its paragraph
    (or the next keyword or fence), so commentary after a blank line is ignored.
    """

    name = "jupiter"
    answer_start = "Formatted answer:"
    stop = ("Observation:",)
    _stop = re.compile(r"^[ \t]*(?:[*_#]+[ \t]*)?(?i:observation)[ \t]*(?:[*_]+[ \t]*)?:|Observation:", re.MULTILINE)
    # Only the exact stop string, or the keyword opening a line, ends the turn: "my observation: ..."
    # inside a thought must not cut the code that follows it.

    def _read(self, completion: str) -> tuple[Step, int]:
        text = cut_at(completion, self._stop)
        labels = list(_LABEL.finditer(text))
        ends = [label.start() for label in labels[1:]] + [len(text)] * bool(labels)
        answer, answer_spans = None, []
        for label, end in zip(labels, ends, strict=True):
            if label.group(1).lower().endswith("answer"):
                answer_spans.append((label.start(), end))
                if answer is None:
                    found, found_end = _paragraph(text, label.end(), end)
                    answer = _Action(label.start(), found, found_end) if found else None
        code = None
        fences = python_fences(text, answer_spans)
        actions = [label for label in labels if label.group(1).lower() == "action"]
        if actions:  # prefer the first block after an Action: (a fence in the thought may be a sketch)
            fences = [fence for fence in fences if fence.start >= actions[0].end()] or fences
        if fences:
            fence = fences[0]
            before = [label.start() for label in actions if label.end() <= fence.start]
            code = _Action(before[-1] if before else fence.start, fence.code, fence.end)
        if code is not None and (said := _answer_cell(code.text)) and (answer is None or answer.start > code.start):
            answer, code = _Action(code.start, said, code.end), None
        stop = _action_start(answer, code, len(text))
        thoughts = [
            text[label.end() : min(end, stop)].strip()
            for label, end in zip(labels, ends, strict=True)
            if label.group(1).lower() == "thought" and label.start() < stop
        ]
        thought = "\n\n".join(part for part in thoughts if part) or _LABEL.sub("", text[:stop]).strip()
        return _choose(thought, answer, code, len(text))

    def render(self, step: Step) -> str:
        parts = [f"Thought: {step.thought}"] if step.thought else []
        if step.answer is not None:
            parts.append(f"Formatted answer: {step.answer}")
        elif step.code:
            parts.append(f"Action:\n{FENCE}python\n{step.code}\n{FENCE}")
        return "\n".join(parts)

    def observation(self, text: str) -> str:
        return "Observation: " + text.strip("\n")


def _answer_cell(code: str) -> str | None:
    """The answer of a cell that holds nothing but an answer line (``Formatted answer: No``, ``formatted_answer:
    @x[1]``, comments aside): small models sometimes write the answer as code, where it cannot run."""
    lines = [line.strip() for line in code.splitlines() if line.strip() and not line.strip().startswith("#")]
    match = _ANSWER_CELL.fullmatch(lines[0]) if len(lines) == 1 else None
    return match.group(1).strip() if match else None


def _paragraph(text: str, start: int, stop: int) -> tuple[str, int]:
    """The answer after its keyword (in ``text[start:stop]``) and where it ends.

    A fenced answer is unwrapped; otherwise the answer is the first paragraph before any fence.
    """
    region = text[start:stop]
    stripped = region.strip()
    if label := _INLINE_LABEL.match(stripped):
        start += region.index(stripped) + label.end()
        region, stripped = text[start:stop], stripped[label.end() :]
    if stripped.startswith(FENCE):
        return unwrap_fence(stripped), stop
    fence = region.find(FENCE)
    cut = len(region) if fence == -1 else fence
    blank = _BLANK_LINE.search(region, 0, cut)
    cut = blank.start() if blank else cut
    return region[:cut].strip(), start + len(region[:cut].rstrip())


class DatarusDialect(_PromptedDialect):
    """``<step><thought>…</thought><action>python_executor</action><action_input>…</action_input></step>``.

    Ends with ``<stop_analysis><thought>…</thought><answer>…</answer></stop_analysis>``; a
    ``<stop_analysis>`` without ``<answer>`` gives its non-thought text as the answer. A first
    ``<action>`` naming any tool but ``python_executor`` makes the turn void.
    """

    name = "datarus"
    answer_start = "<stop_analysis><answer>"
    stop = ("</step>", "</stop_analysis>", "<observation>")
    _tags = tag_pattern(("step", "thought", "action", "action_input", "answer", "stop_analysis", "observation"))
    _stop = re.compile(r"<\s*observation\s*>", re.IGNORECASE)
    _stop_analysis_end = re.compile(r"<\s*/\s*stop_analysis\s*>", re.IGNORECASE)
    _enclosing_end = re.compile(r"\s*<\s*/\s*(?:step|stop_analysis)\s*>", re.IGNORECASE)
    _tool = "python_executor"

    def _read(self, completion: str) -> tuple[Step, int]:
        text = cut_at(completion, self._stop)
        blocks = find_blocks(text, self._tags)
        answer = _first_answer(text, blocks) or self._stop_analysis_answer(text, blocks)
        code = _first_code(text, blocks, "action_input")
        action = next((block for block in blocks if block.name == "action"), None)
        tool = re.split(r"\n|" + FENCE, action.content(text), maxsplit=1)[0].strip().lower() if action else ""
        if action and tool != self._tool and (code is None or action.start < code.start):
            code = _Action(action.start, "", len(text))  # a tool we do not have: void unless an answer came first
        elif code and action and tool == self._tool:
            code = code._replace(start=min(code.start, action.start))
        code = _earlier(code, _bare_fence(text, blocks, ("answer", "stop_analysis", "thought")))
        stop = _action_start(answer, code, len(text))
        step, end = _choose(thought_before(text, blocks, "thought", stop, self._tags), answer, code, len(text))
        return step, _after_closing(text, end, self._enclosing_end)

    def _stop_analysis_answer(self, text: str, blocks: list[Block]) -> _Action | None:
        """The text of a ``<stop_analysis>`` that has no ``<answer>``, its thoughts left out."""
        opening = next((block for block in blocks if block.name == "stop_analysis"), None)
        if opening is None:
            return None
        closing = self._stop_analysis_end.search(text, opening.content_start)
        end = closing.start() if closing else len(text)
        pieces, position = [], opening.content_start
        for block in blocks:
            if block.name == "thought" and opening.content_start <= block.start < end:
                pieces.append(text[position : block.start])
                position = min(block.end, end)
        pieces.append(text[position:end])
        found = unwrap_fence(strip_tags("".join(pieces), self._tags))
        return _Action(end, found, closing.end() if closing else end) if found else None

    def render(self, step: Step) -> str:
        thought = f"<thought>\n{step.thought}\n</thought>\n" if step.thought else ""
        if step.answer is not None:
            return f"<stop_analysis>\n{thought}<answer>\n{step.answer}\n</answer>\n</stop_analysis>"
        if step.code:
            action = f"<action>{self._tool}</action>\n<action_input>\n{step.code}\n</action_input>\n"
            return f"<step>\n{thought}{action}</step>"
        return f"<step>\n{thought}</step>" if thought else ""

    def observation(self, text: str) -> str:
        body = text.strip("\n")
        return f"<observation>\n{body}\n</observation>"


class ProgramDialect(_PromptedDialect):
    """A plan, then one ```python block that is the turn's answer: the program or function a task asks for.

    Nothing runs in the agent's sandbox: the task's judge runs the program on its tests. A correction loop
    sends feedback on a failed program back as plain text.
    """

    name = PROGRAM
    answer_start = "```python\n"
    stop = ()

    def _read(self, completion: str) -> tuple[Step, int]:
        fences = python_fences(completion)
        if not fences:
            return Step(thought=completion.strip()), len(completion)
        return Step(thought=completion[: fences[0].start].strip(), answer=fences[0].code), fences[0].end

    def render(self, step: Step) -> str:
        block = f"{FENCE}python\n{step.answer}\n{FENCE}" if step.answer is not None else ""
        return "\n\n".join(part for part in (step.thought, block) if part)

    def observation(self, text: str) -> str:
        return text.strip("\n")


_CLASSES: dict[str, Callable[[], Dialect]] = {
    "datamind": DataMindDialect,
    "jupiter": JupiterDialect,
    "datarus": DatarusDialect,
    PROGRAM: ProgramDialect,
}


def get_dialect(name: str) -> Dialect:
    """The dialect called `name` (one of `DIALECTS`, or `PROGRAM`).

    Raises:
        ConfigError: no dialect has that name.

    >>> get_dialect("jupiter").stop
    ('Observation:',)
    """
    cls = _CLASSES.get(name.strip().lower())
    if cls is None:
        raise ConfigError(f"unknown dialect {name!r}: choose one of {', '.join(_CLASSES)}")
    return cls()
