"""``synth sequences``: each sequence becomes a problem asking for its general term, with exact test cases.

A problem (CodeSeq's recipe) states the definition and the first terms, the input and output formats, two
example cases with explanations, and 5 to 7 hidden test cases, all computed from the generator. The first
example's index lies among the terms the statement shows, so the statement fixes its answer; the second lies
beyond them.

With a guiding model, each problem is checked as CodeSeq validates: the guide reads the statement without the
examples' outputs and predicts them. Right on both: kept (level ``guide solved``). Wrong on the first, which
the statement itself fixes: the statement is unclear (usually about where the indices start), so it is
rewritten once with every shown term next to its index and checked again (levels ``... after repair``),
and dropped as ``ambiguous`` if the guide still misses it. Wrong only on the second: the statement is sound
and the problem is simply hard, so it is kept (``guide unsolved``), as CodeSeq keeps problems a model cannot
yet solve.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.synth._sequences import Sequence, draw_sequences, oeis_sequences
from datalyst.synth._stage import Made, TaskSummary, run_units
from datalyst.tasks import Case, Lineage, Task

GENERATOR_VERSION = 1
SOURCE = "synth:sequences"
CHECKS = ("ambiguous", "no_guide_reply")
GUIDE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=768)
SHOWN = 8
"""Terms the statement lists (more for a rule to infer: see :func:`_shown`)."""


class SequenceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    count: int = Field(200, ge=1)
    """Sequences drawn, the six families taking turns (each becomes at most one problem)."""
    seed: int = 0
    """Seed of the drawn sequences, examples and test cases."""
    tests: tuple[int, int] = (5, 7)
    """The fewest and most hidden test cases per problem."""
    oeis: Path | None = None
    """A folder holding the OEIS data export (``stripped``, ``names``): draw from it instead of our families."""


@dataclass(frozen=True)
class Problem:
    """A sequence's problem before it becomes a task: what the statement shows and the cases."""

    sequence: Sequence
    shown: int
    examples: tuple[Case, Case]
    tests: tuple[Case, ...]

    def statement(self, *, indexed: bool = False, outputs: bool = True) -> str:
        """The problem text; ``indexed`` puts each shown term next to its index, ``outputs=False`` leaves the
        examples' outputs and explanations out (what the guide reads)."""
        s = self.sequence
        first = range(s.offset, s.offset + self.shown)
        if indexed:
            terms = "The first terms are " + ", ".join(f"a({n}) = {s.term(n)}" for n in first) + "."
        else:
            values = ", ".join(str(s.term(n)) for n in first)
            terms = f"The sequence starts at index {s.offset}: a({s.offset}), a({s.offset + 1}), ... are {values}, ..."
        lines = [s.definition, terms, "",
                 "Write a program that reads n and prints a(n).", "",
                 f"Input format: one line holding an integer n with {s.offset} <= n <= {s.max_n}.",
                 "Output format: one line holding the integer a(n)."]  # fmt: skip
        for number, case in enumerate(self.examples, start=1):
            lines += ["", f"Example {number}", f"Input: {case.input.strip()}"]
            if outputs:
                lines += [f"Output: {case.output}", f"Explanation: {s.explain(int(case.input))}."]
        return "\n".join(lines)


def make_problem(sequence: Sequence, rng: random.Random, tests: tuple[int, int] = (5, 7)) -> Problem:
    """The sequence's problem: shown terms, one example inside them and one beyond, and hidden tests."""
    shown = _shown(sequence)
    start, last = sequence.offset, sequence.max_n
    inside = rng.randrange(start + 2, start + shown)
    beyond = rng.randrange(start + shown, min(last, start + shown + 12) + 1)
    pool = [n for n in range(start, last + 1) if n not in (inside, beyond)] if last - start < 400 else None
    indices: set[int] = set()
    count = rng.randint(*tests)
    while len(indices) < count:  # half near the start, half anywhere up to the largest index
        near = len(indices) % 2 == 0
        n = rng.choice(pool) if pool and not near else rng.randint(start, min(last, start + 40 if near else last))
        if n not in (inside, beyond):
            indices.add(n)
    cases = tuple(_case(sequence, n) for n in sorted(indices))
    return Problem(sequence, shown, (_case(sequence, inside), _case(sequence, beyond)), cases)


def _shown(sequence: Sequence) -> int:
    return SHOWN + 2 if sequence.inductive else SHOWN


def _case(sequence: Sequence, n: int) -> Case:
    return Case(input=f"{n}\n", output=str(sequence.term(n)))


def problem_task(problem: Problem, *, seed: int, indexed: bool = False, level: str | None = None) -> Task:
    s = problem.sequence
    return Task(
        id=f"seq-{s.id}",
        question=problem.statement(indexed=indexed),
        judge="cases",
        tests=list(problem.tests),
        category="sequence",
        subcategory=s.family,
        level=level,
        source=SOURCE if s.source == "generated" else f"{SOURCE}:{s.source}",
        lineage=Lineage(generator=f"sequences.{s.family}", version=GENERATOR_VERSION, seed=seed),
    )


def guide_messages(problem: Problem, *, indexed: bool) -> list[ChatMessage]:
    """What the guide reads: the statement without the examples' outputs, and a request for them."""
    inputs = [case.input.strip() for case in problem.examples]
    blanks = "\n".join(f"{n} -> ?" for n in inputs)
    request = (
        f"{problem.statement(indexed=indexed, outputs=False)}\n\n"
        f"Do not write a program. Work out {' and '.join(f'a({n})' for n in inputs)} from the statement alone: a "
        "term among the listed ones is read off the list (count the indices from the first one), the others "
        "follow from the definition. Show your working briefly, then end your reply with these lines, each ? "
        f"replaced by the value:\n{blanks}"
    )
    return [ChatMessage(role=Role.USER, content=request)]


def read_predictions(text: str) -> dict[str, str]:
    """``n -> value`` lines of a guide's reply (the last one wins for each n)."""
    return {n: value for n, value in re.findall(r"(-?\d+)\s*(?:->|→|=>)\s*(-?\d+)", text)}


async def guide_level(problem: Problem, guide: ChatModel) -> tuple[str | None, bool]:
    """The guide's verdict on ``problem``: its level (None: drop it as ambiguous) and whether the statement
    had to be indexed; raises LookupError when the guide never gives predictions."""
    inside, beyond = problem.examples
    for indexed in (False, True):
        [reply] = await guide.agenerate(guide_messages(problem, indexed=indexed), GUIDE_SAMPLING)
        predicted = read_predictions(reply.text)
        if not predicted:
            raise LookupError("the guide gave no predictions")
        if predicted.get(inside.input.strip()) == inside.output:
            solved = predicted.get(beyond.input.strip()) == beyond.output
            level = "guide solved" if solved else "guide unsolved"
            return (f"{level} after repair" if indexed else level), indexed
    return None, True


def make_sequence_tasks(
    out: str | Path,
    *,
    guide: ChatModel | None = None,
    options: SequenceOptions | None = None,
    progress: bool = True,
) -> TaskSummary:
    """Append to ``out`` the problem of every drawn sequence not done yet (checked by ``guide`` when given)."""
    options = options or SequenceOptions()
    settings = {"stage": "sequences", "options": options.model_dump(mode="json"), "version": GENERATOR_VERSION,
                "guide": guide.spec if guide else None}  # fmt: skip
    if options.oeis is not None:
        sequences = oeis_sequences(options.oeis, options.count, seed=options.seed)
    else:
        sequences = draw_sequences(options.count, seed=options.seed)

    async def make(sequence: Sequence) -> Made:
        problem = make_problem(sequence, random.Random(f"{options.seed}:{sequence.id}"), options.tests)
        if guide is None:
            return [problem_task(problem, seed=options.seed)], Counter()
        try:
            level, indexed = await guide_level(problem, guide)
        except LookupError:
            return [], Counter(no_guide_reply=1)
        if level is None:
            return [], Counter(ambiguous=1)
        return [problem_task(problem, seed=options.seed, indexed=indexed, level=level)], Counter()

    return run_units(sequences, out, make, checks=CHECKS, settings=settings, progress=progress)
