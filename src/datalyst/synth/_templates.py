"""Question templates: each reads a table's column roles and writes a question with its canonical solution.

A template returns a :class:`Draft` or None (the table has no columns that suit it). It never computes
the answer: the solution prints it as ``@name[value]`` lines when it runs in the sandbox, and only
what it prints becomes the task's answer. Parameters the question names (a threshold, a group) come
from the meta-information, never from the data itself. Each template has a few phrasings, chosen by
the random generator it is given, so questions of one template do not all read alike.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from datalyst.synth._roles import Column, Roles

LEVELS = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Answer:
    """One ``@name[value]`` the question asks for: what the value is, and how it must be written."""

    name: str
    what: str
    decimals: int | None = None
    """Digits after the point of a number; None for an integer or a text."""
    integer: bool = False

    @property
    def format_line(self) -> str:
        how = f", rounded to {self.decimals} decimal places" if self.decimals is not None else ""
        return f"@{self.name}[value] where value is {self.what}{', an integer' if self.integer else how}."

    def well_formed(self, value: str) -> bool:
        """Whether a printed value is written as the format says (and is a finite number when one)."""
        if self.decimals is not None:
            return re.fullmatch(rf"-?\d+\.\d{{{self.decimals}}}", value) is not None
        if self.integer:
            return re.fullmatch(r"-?\d+", value) is not None
        return bool(value.strip()) and value.strip().lower() not in ("nan", "none", "nat", "inf", "-inf")


@dataclass(frozen=True)
class Draft:
    """A question and the code that answers it, before the answer is known."""

    template: str
    category: str
    level: str
    question: str
    constraints: str
    answers: tuple[Answer, ...]
    code: str
    """The solution after the table is loaded into ``df``; it prints one ``@name[value]`` line per answer."""
    params: dict[str, object] = field(default_factory=dict, compare=False)
    """The template's choices: columns, groups, thresholds (for tests and for composing harder drafts)."""
    parents: tuple[Draft, ...] = field(default=(), compare=False, repr=False)
    """The easier drafts this one composes (their answers are its intermediate steps)."""


Template = Callable[[Roles, random.Random], Draft | None]
TEMPLATES: dict[str, tuple[str, Template]] = {}
"""Template name -> (category, function)."""


def template(name: str, category: str) -> Callable[[Template], Template]:
    def register(function: Template) -> Template:
        TEMPLATES[name] = (category, function)
        return function

    return register


def _draft(
    name: str, level: str, question: str, constraints: str, answers: list[Answer], code: str, **params: object
) -> Draft:
    """A draft of template ``name``; ``params`` are the choices its question names (columns, groups, limits)."""
    return Draft(name, TEMPLATES[name][0], level, question, constraints, tuple(answers), code, params)


def _pick(rng: random.Random, columns: tuple[Column, ...], k: int = 1) -> list[Column] | None:
    return rng.sample(list(columns), k) if len(columns) >= k else None


def _threshold(column: Column) -> float | int | None:
    """A round number near the column's mean (from its meta-information) to compare rows against."""
    mean = column.info.mean
    if mean is None:
        return None
    if abs(mean) >= 100:
        return int(round(mean, -len(str(int(abs(mean)))) + 2))
    return round(mean) if abs(mean) >= 10 else round(mean, 1)


@template("aggregation.group_statistic", "Aggregation")
def group_statistic(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or not (group := _pick(rng, roles.categories)):
        return None
    number, category = picked[0], group[0]
    value = rng.choice(category.values)
    stat = rng.choice(["mean", "median", "sum"])
    words = {"mean": "average", "median": "median", "sum": "total"}[stat]
    question = rng.choice([
        f"What is the {words} {number.words} of the rows whose {category.words} is {value}?",
        f"For records with {category.words} equal to {value}, what is the {words} {number.words}?",
    ])  # fmt: skip
    code = f"value = df[df[{category.code}].astype(str) == {value!r}][{number.code}].{stat}()\n"
    code += f'print(f"@{stat}_{_snake(number.name)}[{{value:.2f}}]")\n'
    constraints = f"Use only rows where {category.words} is exactly {value}; ignore missing {number.words} values."
    answers = [Answer(f"{stat}_{_snake(number.name)}", f"the {words} {number.words}", decimals=2)]
    return _draft(
        "aggregation.group_statistic",
        "easy",
        question,
        constraints,
        answers,
        code,
        number=number.name,
        category=category.name,
        value=value,
        stat=stat,
    )


@template("ranking.top_group", "Ranking")
def top_group(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or not (group := _pick(rng, roles.categories)):
        return None
    number, category = picked[0], group[0]
    highest = rng.random() < 0.6
    extreme, method = ("highest", "idxmax") if highest else ("lowest", "idxmin")
    question = rng.choice([
        f"Which {category.words} has the {extreme} average {number.words}?",
        f"Group the rows by {category.words}. Which group's mean {number.words} is the {extreme}?",
    ])  # fmt: skip
    name = f"{extreme}_{_snake(category.name)}"
    code = f'means = df.groupby({category.code})[{number.code}].mean()\nprint(f"@{name}[{{means.{method}()}}]")\n'
    constraints = f"Compare the mean {number.words} of each {category.words}; ignore missing values."
    answers = [Answer(name, f"the {category.words} as written in the data")]
    return _draft(
        "ranking.top_group",
        "easy",
        question,
        constraints,
        answers,
        code,
        number=number.name,
        category=category.name,
        highest=highest,
    )


@template("ranking.nth_label", "Ranking")
def nth_label(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or not (label := _pick(rng, roles.labels)):
        return None
    number, names = picked[0], label[0]
    place = rng.choice([2, 3, 4, 5])
    ordinal = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}[place]
    question = f"Which {names.words} has the {ordinal} largest {number.words}?"
    answer = f"rank_{place}_{_snake(names.name)}"
    code = (
        f"ordered = df.dropna(subset=[{number.code}]).sort_values({number.code}, ascending=False, kind='stable')\n"
        f'print(f"@{answer}[{{ordered.iloc[{place - 1}][{names.code}]}}]")\n'
    )
    constraints = (
        f"Sort by {number.words} from largest to smallest (ties keep the file's order) and skip missing values."
    )
    answers = [Answer(answer, f"the {names.words} as written in the data")]
    return _draft(
        "ranking.nth_label",
        "easy",
        question,
        constraints,
        answers,
        code,
        number=number.name,
        label=names.name,
        place=place,
    )


@template("counting.above_threshold", "Counting")
def above_threshold(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or (threshold := _threshold(picked[0])) is None:
        return None
    number = picked[0]
    question = rng.choice([
        f"How many rows have {number.words} greater than {threshold}?",
        f"Count the records whose {number.words} exceeds {threshold}.",
    ])  # fmt: skip
    answer = f"count_above_{_snake(str(threshold))}"
    code = f'print(f"@{answer}[{{int((df[{number.code}] > {threshold}).sum())}}]")\n'
    answers = [Answer(answer, "the number of rows", integer=True)]
    return _draft(
        "counting.above_threshold",
        "easy",
        question,
        "Rows with a missing value do not count.",
        answers,
        code,
        number=number.name,
        threshold=threshold,
    )


@template("comparison.group_gap", "Comparison")
def group_gap(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or not (group := _pick(rng, roles.categories)):
        return None
    number, category = picked[0], group[0]
    if len(category.values) < 2:
        return None
    first, second = rng.sample(category.values[:6], 2)
    question = (
        f"How much higher or lower is the average {number.words} of {category.words} {first} than that of "
        f"{category.words} {second}?"
    )
    code = (
        f"groups = df.groupby(df[{category.code}].astype(str))[{number.code}].mean()\n"
        f"difference = groups[{first!r}] - groups[{second!r}]\n"
        'print(f"@difference[{difference:.2f}]")\n'
    )
    constraints = f"Subtract the mean for {second} from the mean for {first}; a negative value means lower."
    answers = [Answer("difference", "the difference of the two means", decimals=2)]
    return _draft(
        "comparison.group_gap",
        "medium",
        question,
        constraints,
        answers,
        code,
        number=number.name,
        category=category.name,
        first=first,
        second=second,
    )


@template("statistics.welch_t_test", "Statistical Analysis")
def welch_t_test(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or not (group := _pick(rng, roles.categories)):
        return None
    number, category = picked[0], group[0]
    if len(category.values) < 2:
        return None
    first, second = category.values[:2]
    question = (
        f"Is the mean {number.words} different between rows with {category.words} {first} and rows with "
        f"{category.words} {second}? Use a two-sample t-test at the 0.05 significance level."
    )
    code = (
        "from scipy import stats\n\n"
        f"a = df[df[{category.code}].astype(str) == {first!r}][{number.code}].dropna()\n"
        f"b = df[df[{category.code}].astype(str) == {second!r}][{number.code}].dropna()\n"
        "result = stats.ttest_ind(a, b, equal_var=False)\n"
        'print(f"@t_statistic[{result.statistic:.2f}]")\n'
        'print(f"@p_value[{result.pvalue:.4f}]")\n'
        "print(f\"@significant[{'yes' if result.pvalue < 0.05 else 'no'}]\")\n"
    )
    constraints = (
        f"Use Welch's t-test (unequal variances) on {number.words}, {first} first, dropping missing values; "
        "the difference is significant when the p-value is below 0.05."
    )
    answers = [
        Answer("t_statistic", "the t statistic", decimals=2),
        Answer("p_value", "the p-value", decimals=4),
        Answer("significant", "yes or no"),
    ]
    return _draft(
        "statistics.welch_t_test",
        "medium",
        question,
        constraints,
        answers,
        code,
        number=number.name,
        category=category.name,
        first=first,
        second=second,
    )


@template("correlation.pearson", "Correlation Analysis")
def pearson(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers, 2)):
        return None
    x, y = picked
    question = rng.choice([
        f"What is the Pearson correlation coefficient between {x.words} and {y.words}?",
        f"How strongly are {x.words} and {y.words} linearly related? Give Pearson's r.",
    ])  # fmt: skip
    code = (
        f"pair = df[[{x.code}, {y.code}]].dropna()\n"
        f"r = pair[{x.code}].corr(pair[{y.code}])\n"
        'print(f"@correlation[{r:.2f}]")\n'
        "strength = 'strong' if abs(r) >= 0.7 else 'moderate' if abs(r) >= 0.3 else 'weak'\n"
        'print(f"@strength[{strength}]")\n'
    )
    constraints = (
        "Drop rows where either value is missing. The relationship is strong when |r| >= 0.7, moderate when "
        "0.3 <= |r| < 0.7 and weak otherwise."
    )
    answers = [Answer("correlation", "Pearson's r", decimals=2), Answer("strength", "strong, moderate or weak")]
    return _draft("correlation.pearson", "easy", question, constraints, answers, code, x=x.name, y=y.name)


@template("arithmetic.group_share", "Arithmetic Calculation")
def group_share(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)) or not (group := _pick(rng, roles.categories)):
        return None
    number, category = picked[0], group[0]
    value = rng.choice(category.values)
    question = f"What percentage of the total {number.words} comes from rows whose {category.words} is {value}?"
    code = (
        f"part = df[df[{category.code}].astype(str) == {value!r}][{number.code}].sum()\n"
        f"share = 100 * part / df[{number.code}].sum()\n"
        'print(f"@percentage[{share:.2f}]")\n'
    )
    answers = [Answer("percentage", "the share in percent", decimals=2)]
    constraints = "Missing values count as zero in both sums."
    return _draft(
        "arithmetic.group_share",
        "easy",
        question,
        constraints,
        answers,
        code,
        number=number.name,
        category=category.name,
        value=value,
    )


@template("anomaly.z_score", "Anomaly Detection")
def z_score(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)):
        return None
    number = picked[0]
    limit = rng.choice([2, 3])
    question = f"How many rows are outliers in {number.words}, by a z-score above {limit} in absolute value?"
    code = (
        f"values = df[{number.code}].dropna()\n"
        "z = (values - values.mean()) / values.std()\n"
        f'print(f"@outliers[{{int((z.abs() > {limit}).sum())}}]")\n'
    )
    constraints = f"z = (value - mean) / standard deviation (sample, ddof=1), over the non-missing {number.words}."
    answers = [Answer("outliers", "the number of outlying rows", integer=True)]
    return _draft("anomaly.z_score", "easy", question, constraints, answers, code, number=number.name, limit=limit)


@template("distribution.shape", "Distribution Analysis")
def shape(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers)):
        return None
    number = picked[0]
    question = f"Describe the shape of the distribution of {number.words}: what are its skewness and kurtosis?"
    code = (
        f"values = df[{number.code}].dropna()\n"
        'print(f"@skewness[{values.skew():.2f}]")\n'
        'print(f"@kurtosis[{values.kurt():.2f}]")\n'
    )
    constraints = "Use pandas' sample skewness and excess kurtosis (Series.skew and Series.kurt) on non-missing values."
    answers = [Answer("skewness", "the skewness", decimals=2), Answer("kurtosis", "the excess kurtosis", decimals=2)]
    return _draft("distribution.shape", "easy", question, constraints, answers, code, number=number.name)


@template("features.ratio_column", "Feature Engineering")
def ratio_column(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers, 2)):
        return None
    top, bottom = picked
    question = (
        f"Create a feature equal to {top.words} divided by {bottom.words}. What is its median over the rows "
        "where it is defined?"
    )
    code = (
        "import numpy as np\n\n"
        f"ratio = (df[{top.code}] / df[{bottom.code}]).replace([np.inf, -np.inf], np.nan)\n"
        'print(f"@median_ratio[{ratio.median():.2f}]")\n'
    )
    constraints = f"Leave out rows where {bottom.words} is zero or either value is missing."
    answers = [Answer("median_ratio", "the median of the new feature", decimals=2)]
    return _draft(
        "features.ratio_column", "easy", question, constraints, answers, code, top=top.name, bottom=bottom.name
    )


@template("impact.slope", "Impact Analysis")
def slope(roles: Roles, rng: random.Random) -> Draft | None:
    if not (picked := _pick(rng, roles.numbers, 2)):
        return None
    x, y = picked
    question = (
        f"By how much does {y.words} change, on average, for each one-unit increase in {x.words}? Fit a "
        "straight line by least squares."
    )
    code = (
        "import numpy as np\n\n"
        f"pair = df[[{x.code}, {y.code}]].dropna()\n"
        f"slope, intercept = np.polyfit(pair[{x.code}], pair[{y.code}], 1)\n"
        'print(f"@slope[{slope:.4f}]")\n'
    )
    constraints = (
        f"Ordinary least squares of {y.words} on {x.words} with an intercept, rows with missing values dropped."
    )
    answers = [Answer("slope", "the fitted slope", decimals=4)]
    return _draft("impact.slope", "medium", question, constraints, answers, code, x=x.name, y=y.name)


def _snake(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_").lower()[:40] or "value"
