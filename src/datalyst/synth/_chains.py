"""Easy-to-hard composition: questions made of 2 to 5 operations, each working on the previous one's result.

A chain walks a small state machine. Its state is the table so far (rows kept by earlier filters,
columns added by earlier steps), the last label found (a group that won a ranking) or the last number
computed. Each operation reads the state and changes it: ``filter`` and ``derive`` change the table,
``rank`` turns the table into a label, ``select`` turns a label back into its rows, ``aggregate`` turns
the table into a number, ``above`` keeps the rows above that number, and the last step (``aggregate``,
``count``, ``rank`` or ``correlate``) asks the question. The number of operations sets the level
(2: easy, 3: medium, 4-5: hard), as DataMind grows a question by composing easier ones; every shorter
chain of two or more operations that already ends in an answer is kept as a parent, its last step put as
a question, so a hard task's lineage names the questions it is built on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from datalyst.synth._roles import Column, Roles
from datalyst.synth._templates import Answer, Draft, snake, template, threshold_near_mean

CATEGORY = "Multi-hop Numerical Reasoning"
STATS = {"mean": "average", "median": "median", "sum": "total"}


@dataclass(frozen=True)
class _State:
    numbers: tuple[Column, ...]
    categories: tuple[Column, ...]
    label: Column | None = None
    """The category of the label found by the last ``rank``, while it is the result."""
    number: tuple[Column, str] | None = None
    """The column and statistic of the number computed by the last ``aggregate``, while it is the result."""
    sentences: tuple[str, ...] = ()
    code: str = ""
    answers: tuple[Answer, ...] = ()
    used: frozenset[str] = field(default_factory=frozenset)
    """Columns filtered or grouped on already (not used that way twice)."""
    derived: bool = False
    steps: tuple[tuple[object, ...], ...] = ()
    """The operations so far with their arguments, e.g. ``("rank", "region", "units", "highest")``."""
    asked: str = ""
    """The last step put as a question, for when a shorter chain ending there is a task of its own."""


def _say(state: _State, rng: random.Random, *phrasings: str) -> tuple[str, ...]:
    """The question's sentences so far, and one of ``phrasings`` for the new step."""
    return (*state.sentences, rng.choice(phrasings))


def _filter(state: _State, rng: random.Random) -> _State | None:
    options = [c for c in state.categories if c.name not in state.used and c.values]
    if options and rng.random() < 0.5:
        column = rng.choice(options)
        value = rng.choice(column.values[:4])
        return replace(
            state,
            sentences=_say(
                state,
                rng,
                f"Keep only the rows whose {column.words} is {value}.",
                f"Restrict the table to {column.words} {value}.",
                f"Consider only records with {column.words} equal to {value}.",
            ),
            code=state.code + f"df = df[df[{column.code}].astype(str) == {value!r}]\n",
            used=state.used | {column.name},
            steps=(*state.steps, ("keep", column.name, value)),
        )
    numbers = [c for c in state.numbers if c.name not in state.used and threshold_near_mean(c) is not None]
    if not numbers:
        return None
    column = rng.choice(numbers)
    threshold = threshold_near_mean(column)
    return replace(
        state,
        sentences=_say(
            state,
            rng,
            f"Keep only the rows with {column.words} above {threshold}.",
            f"Leave out every row whose {column.words} is {threshold} or less.",
            f"Consider only records where {column.words} exceeds {threshold}.",
        ),
        code=state.code + f"df = df[df[{column.code}] > {threshold}]\n",
        used=state.used | {column.name},
        steps=(*state.steps, ("above", column.name, threshold)),
    )


def _derive(state: _State, rng: random.Random) -> _State | None:
    if state.derived or len(state.numbers) < 2:
        return None
    top, bottom = rng.sample(list(state.numbers), 2)
    name = f"{snake(top.name)}_per_{snake(bottom.name)}"
    derived = Column(name, top.info.model_copy(update={"name": name, "mean": None}))
    return replace(
        state,
        numbers=(*state.numbers, derived),
        sentences=_say(
            state,
            rng,
            f"Add a column {name} equal to {top.words} divided by {bottom.words}.",
            f"Derive {name} as the ratio of {top.words} to {bottom.words}.",
        ),
        code=state.code + f"df[{name!r}] = df[{top.code}] / df[{bottom.code}].replace(0, float('nan'))\n",
        derived=True,
        steps=(*state.steps, ("derive", name, top.name, bottom.name)),
    )


def _rank(state: _State, rng: random.Random, last: bool) -> _State | None:
    options = [c for c in state.categories if c.name not in state.used]
    if not options or not state.numbers:
        return None
    category, number = rng.choice(options), rng.choice(state.numbers)
    extreme, method = rng.choice([("highest", "idxmax"), ("lowest", "idxmin")])
    name = f"{extreme}_{snake(category.name)}"
    question = rng.choice(
        [
            f"Which {category.words} has the {extreme} average {number.words}?",
            f"Grouping by {category.words}, which group's mean {number.words} is the {extreme}?",
        ]
    )
    step = f"Find the {category.words} with the {extreme} average {number.words}, and report it."
    return replace(
        state,
        label=category,
        number=None,
        sentences=(*state.sentences, question if last else step),
        asked=question,
        code=state.code + f"label = df.groupby({category.code})[{number.code}].mean().{method}()\n"
        f'print(f"@{name}[{{label}}]")\n',
        answers=(*state.answers, Answer(name, f"the {category.words} as written in the data")),
        used=state.used | {category.name},
        steps=(*state.steps, ("rank", category.name, number.name, extreme)),
    )


def _select(state: _State, rng: random.Random) -> _State | None:
    if state.label is None:
        return None
    return replace(
        state,
        label=None,
        sentences=_say(
            state,
            rng,
            f"Keep only the rows of that {state.label.words}.",
            f"From now on, look only at that {state.label.words}'s records.",
        ),
        code=state.code + f"df = df[df[{state.label.code}] == label]\n",
        steps=(*state.steps, ("select",)),
    )


def _aggregate(state: _State, rng: random.Random, last: bool) -> _State | None:
    if not state.numbers:
        return None
    column, stat = rng.choice(state.numbers), rng.choice(list(STATS))
    words = STATS[stat]
    phrasings = (
        [f"What is the {words} {column.words} of the remaining rows?", f"What {words} {column.words} do they have?"]
        if last
        else [f"Compute the {words} {column.words} of these rows.", f"Find their {words} {column.words}."]
    )
    name = f"{stat}_{snake(column.name)}"
    code = state.code + f"value = df[{column.code}].{stat}()\n"
    answers = state.answers
    if last:
        code += f'print(f"@{name}[{{value:.2f}}]")\n'
        answers = (*answers, Answer(name, f"the {words} {column.words}", decimals=2))
    step = ("aggregate", column.name, stat)
    return replace(
        state,
        label=None,
        number=(column, words),
        sentences=_say(state, rng, *phrasings),
        code=code,
        answers=answers,
        steps=(*state.steps, step),
    )


def _above(state: _State, rng: random.Random) -> _State | None:
    if state.number is None:
        return None
    column, words = state.number
    return replace(
        state,
        number=None,
        sentences=_say(
            state,
            rng,
            f"Keep only the rows whose {column.words} is above that {words}.",
            f"Then drop every row whose {column.words} does not exceed that {words}.",
        ),
        code=state.code + f"df = df[df[{column.code}] > value]\n",
        steps=(*state.steps, ("above_result", column.name)),
    )


def _count(state: _State, rng: random.Random) -> _State | None:
    return replace(
        state,
        sentences=_say(state, rng, "How many rows remain?", "How many records are left?"),
        code=state.code + 'print(f"@rows[{len(df)}]")\n',
        answers=(*state.answers, Answer("rows", "the number of rows left", integer=True)),
        steps=(*state.steps, ("count",)),
    )


def _correlate(state: _State, rng: random.Random) -> _State | None:
    if len(state.numbers) < 2:
        return None
    x, y = rng.sample(list(state.numbers), 2)
    return replace(
        state,
        sentences=_say(
            state,
            rng,
            f"What is the Pearson correlation between {x.words} and {y.words} in them?",
            f"Over those rows, how strongly do {x.words} and {y.words} correlate (Pearson's r)?",
        ),
        code=state.code + f"r = df[{x.code}].corr(df[{y.code}])\n" + 'print(f"@correlation[{r:.2f}]")\n',
        answers=(*state.answers, Answer("correlation", "Pearson's r over the remaining rows", decimals=2)),
        steps=(*state.steps, ("correlate", x.name, y.name)),
    )


def chain(roles: Roles, rng: random.Random, hops: int) -> Draft | None:
    """A question of ``hops`` operations on the table, with the shorter questions it is built on as parents
    (None when the walk reaches a dead end)."""
    state = _State(roles.numbers, roles.categories)
    parents: list[Draft] = []
    for hop in range(hops):
        last = hop == hops - 1
        if state.label is not None:
            moves = [_select]
        elif state.number is not None:
            moves = [_above]
        elif last:
            moves = [lambda s, r: _aggregate(s, r, True), _count, lambda s, r: _rank(s, r, True), _correlate]
        else:
            moves = [_filter, _derive, lambda s, r: _rank(s, r, False), lambda s, r: _aggregate(s, r, False)]
        rng.shuffle(moves)
        following = next((found for move in moves if (found := move(state, rng)) is not None), None)
        if following is None or (last and following.answers == state.answers):
            return None
        if 0 < hop < hops - 1 and following.answers != state.answers:  # a multi-hop question of its own already
            asked = replace(following, sentences=(*following.sentences[:-1], following.asked))
            parents.append(_draft(asked, parents))
        state = following
    return _draft(state, parents)


def _draft(state: _State, parents: list[Draft]) -> Draft:
    hops = len(state.sentences)
    level = "easy" if hops <= 2 else "medium" if hops == 3 else "hard"
    constraints = (
        "Apply the steps in order: each works on the rows the previous steps kept. Averages, medians and totals "
        "ignore missing values."
    )
    return Draft(
        template="multihop.chain",
        category=CATEGORY,
        level=level,
        question=" ".join(state.sentences),
        constraints=constraints,
        answers=state.answers,
        code=state.code,
        params={"steps": list(state.steps)},
        parents=tuple(parents),  # copied: later parents are not this one's
    )


@template("multihop.chain", CATEGORY)
def multihop(roles: Roles, rng: random.Random) -> Draft | None:
    hops = rng.choice([2, 3, 3, 4, 4, 5])
    return next((draft for _ in range(8) if (draft := chain(roles, rng, hops)) is not None), None)
