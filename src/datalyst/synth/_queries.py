"""``synth queries``: questions written by a chat model, DataMind's recipe, with no answer yet.

For each table, a few categories of the taxonomy are drawn (by seed and table). For each category the
model gets the table's description, the category's description and exemplars, and writes a question;
then, round after round, a harder question that needs the previous one's result as a step (DataMind's
easy-to-hard composition); then every question is standardised, as NbQA standardises its tasks, into
a question, constraints and an ``@name[value]`` answer format. The tasks keep ``answer=None``: curation
obtains answers by consistent sampling. What the model writes is checked (the three parts present, 1-5
well-named answers, a column of the table named, no near-duplicate), and every drop is counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.synth._files import SourceFile, read_source_files
from datalyst.synth._stage import Made, TaskSummary, run_units
from datalyst.synth._verify import near_duplicate, shingles
from datalyst.synth.taxonomy import CATEGORIES, Category
from datalyst.tasks import Lineage, Task

GENERATOR_VERSION = 1
SOURCE = "synth:queries"
CHECKS = ("no_question", "not_standardised", "bad_format", "off_table", "near_duplicate")
SAMPLING = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=400)
STANDARD_SAMPLING = SamplingParams(temperature=0.2, top_p=0.95, max_tokens=500)
FORMAT_LINE = re.compile(r"@([a-z][a-z0-9_]*)\[[^\]]*\]")
LABEL = re.compile(r"(?im)(?:^[\s*#>-]*|(?<=[.!?]) )(question|constraints|format)\s*:\s*")
"""A part's label: at the start of a line (after list or quote marks), or after a sentence ("Sure! Question: ...")."""
BULLET = re.compile(r"^(?:[-*\u2022]|[0-9]{1,2}[.)])\s+")
GUESSED = re.compile(r"@([a-z][a-z0-9_]*)\[\s*(?:[-+]?[0-9][0-9.,]*\s*%?|yes|no|true|false)\s*\]", re.IGNORECASE)
OTHER_LABEL = re.compile(r"^[\s*#>-]*[A-Z][\w-]*(?: [\w-]+){0,3}\**\s*:\**\s+(\S.*)$")
"""A line that starts with a label of one to four words, then a colon."""
SYSTEM = (
    "You write data-analysis questions about one table. A good question can be answered exactly by running "
    "code on the table, names the columns it uses, and has one precise answer (a number, a name, a yes/no)."
)


class QueryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = 0
    """Seed of the categories and the sample."""
    categories_per_table: int = Field(3, ge=1, le=len(CATEGORIES))
    """Categories of the taxonomy asked per table."""
    rounds: int = Field(3, ge=1, le=5)
    """Questions per chain (1-5): the first, then each harder one built on the one before."""
    sample: int | None = Field(None, ge=1)
    """Ask about this many tables only, drawn by seed (all when None)."""


@dataclass(frozen=True)
class _Written:
    question: str
    constraints: str
    format: str
    level: str
    category: str
    parent: str | None


def make_query_tasks(
    files: str | Path,
    out: str | Path,
    model: ChatModel,
    *,
    options: QueryOptions | None = None,
    progress: bool = True,
) -> TaskSummary:
    """Append to ``out`` the model-written tasks (no answers) of every table in ``files`` not done yet."""
    options = options or QueryOptions()
    settings = {
        "stage": "queries",
        "files": str(Path(files).resolve()),
        "options": options.model_dump(),
        "version": GENERATOR_VERSION,
        "model": model.spec,
    }
    records = read_source_files(files)
    if options.sample is not None and options.sample < len(records):
        chosen = set(random.Random(options.seed).sample(range(len(records)), options.sample))
        records = [record for index, record in enumerate(records) if index in chosen]
    make = partial(_table_tasks, model=model, options=options)
    return run_units(records, out, make, checks=CHECKS, settings=settings, progress=progress)


async def _table_tasks(record: SourceFile, model: ChatModel, options: QueryOptions) -> Made:
    categories = random.Random(f"{options.seed}:{record.id}").sample(CATEGORIES, options.categories_per_table)
    description = record.info.render()
    chains = await asyncio.gather(*(_chain(model, description, category, options.rounds) for category in categories))
    rejected: Counter[str] = Counter()
    tasks: list[Task] = []
    kept: list[frozenset[tuple[str, ...]]] = []
    ids: dict[str, str] = {}
    columns = [column.name for table in record.info.tables for column in table.columns]
    for written, reasons in chains:
        rejected.update(reasons)
        for item in written:
            problem = _problem(item, columns, kept)
            if problem is not None:
                rejected[problem] += 1
                continue
            kept.append(shingles(item.question))
            task = _task(record, item, options.seed, [ids[item.parent]] if item.parent in ids else [])
            ids[item.question] = task.id
            tasks.append(task)
    return tasks, rejected


async def _chain(model: ChatModel, description: str, category: Category, rounds: int) -> tuple[list[_Written], Counter]:
    """The category's question and the harder ones built on it, each standardised; and what was dropped."""
    rejected: Counter[str] = Counter()
    written: list[_Written] = []
    previous: str | None = None
    for round_ in range(rounds):
        messages = _ask_first(description, category) if previous is None else _ask_harder(description, previous)
        [completion] = await model.agenerate(messages, SAMPLING)
        question = _question(completion.text)
        if not question:
            rejected["no_question"] += 1
            break
        [standard] = await model.agenerate(_ask_standard(description, question), STANDARD_SAMPLING)
        parts = _parts(standard.text)
        text, constraints, answer_format = (parts.get(name, "") for name in ("Question", "Constraints", "Format"))
        if not text or not answer_format:
            rejected["not_standardised"] += 1
            break
        level = ("easy", "medium", "hard")[min(round_, 2)]
        written.append(
            _Written(
                " ".join(text.split()), " ".join(constraints.split()), answer_format, level, category.name, previous
            )
        )
        previous = written[-1].question
    return written, rejected


def _ask_first(description: str, category: Category) -> list[ChatMessage]:
    examples = "\n".join(f"- {text}" for text in category.exemplars)
    request = (
        f"{description}\n\nWrite one question of the kind '{category.name}': {category.description}\n"
        f"Questions of this kind about other tables:\n{examples}\n\n"
        "Ask about this table, using its column names. Reply with one line: Question: <the question>"
    )
    return _conversation(request)


def _ask_harder(description: str, previous: str) -> list[ChatMessage]:
    request = (
        f"{description}\n\nHere is a question about this table:\n{previous}\n\n"
        "Write a harder question that builds on it: answering it must take the earlier question's result as one "
        "step and then go further (filter by it, compare with it, combine it with another column). "
        "Reply with one line: Question: <the question>"
    )
    return _conversation(request)


def _ask_standard(description: str, question: str) -> list[ChatMessage]:
    request = (
        f"{description}\n\nRewrite this question as a precise task:\n{question}\n\n"
        "Reply in exactly three parts:\n"
        "Question: <the question, self-contained>\n"
        "Constraints: <how to compute the answer: the method, filters, how to treat missing values, rounding>\n"
        "Format: <one line per value asked for, each like @mean_price[value] where value is the mean price "
        "rounded to 2 decimal places; at most 5 lines>"
    )
    return _conversation(request)


def _conversation(request: str) -> list[ChatMessage]:
    return [ChatMessage(role=Role.SYSTEM, content=SYSTEM), ChatMessage(role=Role.USER, content=request)]


def _parts(text: str) -> dict[str, str]:
    """The ``Question:``, ``Constraints:`` and ``Format:`` parts of a reply (the first of each), by label."""
    pieces = LABEL.split(text)
    parts: dict[str, str] = {}
    for label, body in zip(pieces[1::2], pieces[2::2], strict=True):
        parts.setdefault(label.title(), body.strip())
    return parts


def _question(reply: str) -> str:
    """The question a reply asked for in one line gives: its ``Question:`` part; else a first line labelled
    otherwise (small models often put the category's name, "Ranking: Order ..."), or one ending in "?"."""
    if labelled := _parts(reply).get("Question"):
        return " ".join(labelled.split())
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    if other := OTHER_LABEL.match(line):
        return " ".join(other.group(1).split())
    return line if line.endswith("?") else ""


def _problem(item: _Written, columns: list[str], kept: list[frozenset[tuple[str, ...]]]) -> str | None:
    names = FORMAT_LINE.findall(item.format)
    if not 1 <= len(names) <= 5 or len(set(names)) != len(names):
        return "bad_format"
    text = f"{item.question} {item.constraints}".lower()
    if not any(column.lower() in text or column.lower().replace("_", " ") in text for column in columns):
        return "off_table"
    if near_duplicate(item.question, kept):
        return "near_duplicate"
    return None


def clean_format(text: str) -> str:
    """A model's format lines without list markers, and with any value it guessed for an answer (a number,
    yes or no) put back as ``value``: the format says how to write the answer, never what it is."""
    lines = (BULLET.sub("", line.strip()) for line in text.splitlines())
    return "\n".join(GUESSED.sub(r"@\1[value]", line) for line in lines if line)


def _task(record: SourceFile, item: _Written, seed: int, parents: list[str]) -> Task:
    digest = hashlib.sha256(f"{item.question}\n{item.constraints}".encode()).hexdigest()[:8]
    return Task(
        id=f"{record.id[:8]}-q-{digest}",
        question=item.question,
        constraints=item.constraints,
        format=clean_format(item.format),
        files=[record.path],
        judge="dabench",
        category=item.category,
        level=item.level,
        source=SOURCE,
        lineage=Lineage(
            generator="queries.compose",
            version=GENERATOR_VERSION,
            seed=seed,
            parents=parents,
            source_hash=record.content_hash,
        ),
    )
