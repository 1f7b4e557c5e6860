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
from dataclasses import dataclass, field, replace
from functools import wraps

from datalyst.synth._roles import Column, Roles, as_words
from datalyst.tasks import Lineage, Task

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
    figure: bool = False
    """The question asks for a chart, which the solution draws."""

    def task(
        self, task_id: str, file: str, answer: dict[str, str], solution: str, source: str, lineage: Lineage
    ) -> Task:
        """The task this draft becomes once ``solution`` has printed ``answer`` (judged by the DABench rules)."""
        return Task(
            id=task_id,
            question=self.question,
            constraints=self.constraints,
            format="\n".join(expected.format_line for expected in self.answers),
            files=[file],
            answer=answer,
            judge="dabench",
            category=self.category,
            level=self.level,
            source=source,
            solution=solution,
            lineage=lineage,
            figure=self.figure,
        )


Template = Callable[[Roles, random.Random], Draft | None]
TEMPLATES: dict[str, tuple[str, Template]] = {}
"""Template name -> (category, function)."""


def template(name: str, category: str, level: str = "", **columns: int) -> Callable[[Callable], Template]:
    """Register a template as ``name``: its drafts are of that name and ``category``, and of ``level`` when it is
    given (else of the level each draft says). ``columns`` (``numbers=2, categories=1``) are drawn from those roles,
    in that order, and given to the function after the random generator; the table has no draft without them.
    Without ``columns`` the function is given the roles themselves."""

    def register(function: Callable[..., Draft | None]) -> Template:
        @wraps(function)
        def named(roles: Roles, rng: random.Random) -> Draft | None:
            pools = [(list(getattr(roles, role)), k) for role, k in columns.items()]
            if any(len(pool) < k for pool, k in pools):
                return None
            drawn = [column for pool, k in pools for column in rng.sample(pool, k)]
            draft = function(rng, *drawn) if columns else function(roles, rng)
            return draft and replace(draft, template=name, category=category, level=level or draft.level)

        TEMPLATES[name] = (category, named)
        return named

    return register


def _draft(question: str, constraints: str, answers: list[Answer], code: str, **params: object) -> Draft:
    """A template's draft (its name, category and level are set as it is registered); ``params`` are the choices
    its question names (columns, groups, limits)."""
    return Draft("", "", "", question, constraints, tuple(answers), code, params)


def threshold_near_mean(column: Column) -> float | int | None:
    """A round number near the column's mean (from its meta-information) to compare rows against."""
    mean = column.info.mean
    if mean is None:
        return None
    if abs(mean) >= 100:
        return int(round(mean, -len(str(int(abs(mean)))) + 2))
    return round(mean) if abs(mean) >= 10 else round(mean, 1)


@template("aggregation.group_statistic", "Aggregation", "easy", numbers=1, categories=1)
def group_statistic(rng: random.Random, number: Column, category: Column) -> Draft | None:
    value = rng.choice(category.values)
    stat = rng.choice(["mean", "median", "sum"])
    words = {"mean": "average", "median": "median", "sum": "total"}[stat]
    question = rng.choice([
        f"What is the {words} {number.words} of the rows whose {category.words} is {value}?",
        f"For records with {category.words} equal to {value}, what is the {words} {number.words}?",
    ])  # fmt: skip
    code = f"value = df[df[{category.code}].astype(str) == {value!r}][{number.code}].{stat}()\n"
    code += f'print(f"@{stat}_{snake(number.name)}[{{value:.2f}}]")\n'
    constraints = f"Use only rows where {category.words} is exactly {value}; ignore missing {number.words} values."
    answers = [Answer(f"{stat}_{snake(number.name)}", f"the {words} {number.words}", decimals=2)]
    return _draft(
        question, constraints, answers, code, number=number.name, category=category.name, value=value, stat=stat
    )


@template("ranking.top_group", "Ranking", "easy", numbers=1, categories=1)
def top_group(rng: random.Random, number: Column, category: Column) -> Draft | None:
    highest = rng.random() < 0.6
    extreme, method = ("highest", "idxmax") if highest else ("lowest", "idxmin")
    question = rng.choice([
        f"Which {category.words} has the {extreme} average {number.words}?",
        f"Group the rows by {category.words}. Which group's mean {number.words} is the {extreme}?",
    ])  # fmt: skip
    name = f"{extreme}_{snake(category.name)}"
    code = f'means = df.groupby({category.code})[{number.code}].mean()\nprint(f"@{name}[{{means.{method}()}}]")\n'
    constraints = f"Compare the mean {number.words} of each {category.words}; ignore missing values."
    answers = [Answer(name, f"the {category.words} as written in the data")]
    return _draft(question, constraints, answers, code, number=number.name, category=category.name, highest=highest)


@template("ranking.nth_label", "Ranking", "easy", numbers=1, labels=1)
def nth_label(rng: random.Random, number: Column, names: Column) -> Draft | None:
    place = rng.choice([2, 3, 4, 5])
    ordinal = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}[place]
    question = rng.choice([
        f"Which {names.words} has the {ordinal} largest {number.words}?",
        f"Ranking rows by {number.words} from the top, which {names.words} is in place {place}?",
    ])  # fmt: skip
    answer = f"rank_{place}_{snake(names.name)}"
    code = (
        f"ordered = df.dropna(subset=[{number.code}]).sort_values({number.code}, ascending=False, kind='stable')\n"
        f'print(f"@{answer}[{{ordered.iloc[{place - 1}][{names.code}]}}]")\n'
    )
    constraints = (
        f"Sort by {number.words} from largest to smallest (ties keep the file's order) and skip missing values."
    )
    answers = [Answer(answer, f"the {names.words} as written in the data")]
    return _draft(question, constraints, answers, code, number=number.name, label=names.name, place=place)


@template("counting.above_threshold", "Counting", "easy", numbers=1)
def above_threshold(rng: random.Random, number: Column) -> Draft | None:
    if (threshold := threshold_near_mean(number)) is None:
        return None
    question = rng.choice([
        f"How many rows have {number.words} greater than {threshold}?",
        f"Count the records whose {number.words} exceeds {threshold}.",
    ])  # fmt: skip
    answer = f"count_above_{snake(str(threshold))}"
    code = f'print(f"@{answer}[{{int((df[{number.code}] > {threshold}).sum())}}]")\n'
    answers = [Answer(answer, "the number of rows", integer=True)]
    return _draft(
        question, "Rows with a missing value do not count.", answers, code, number=number.name, threshold=threshold
    )


@template("comparison.group_gap", "Comparison", "medium", numbers=1, categories=1)
def group_gap(rng: random.Random, number: Column, category: Column) -> Draft | None:
    if len(category.values) < 2:
        return None
    first, second = rng.sample(category.values[:6], 2)
    question = rng.choice([
        f"How much higher or lower is the average {number.words} of {category.words} {first} than that of "
        f"{category.words} {second}?",
        f"What is the mean {number.words} of {category.words} {first} minus that of {category.words} {second}?",
    ])  # fmt: skip
    code = (
        f"groups = df.groupby(df[{category.code}].astype(str))[{number.code}].mean()\n"
        f"difference = groups[{first!r}] - groups[{second!r}]\n"
        'print(f"@difference[{difference:.2f}]")\n'
    )
    constraints = f"Subtract the mean for {second} from the mean for {first}; a negative value means lower."
    answers = [Answer("difference", "the difference of the two means", decimals=2)]
    return _draft(
        question, constraints, answers, code, number=number.name, category=category.name, first=first, second=second
    )


@template("statistics.welch_t_test", "Statistical Analysis", "medium", numbers=1, categories=1)
def welch_t_test(rng: random.Random, number: Column, category: Column) -> Draft | None:
    if len(category.values) < 2:
        return None
    first, second = category.values[:2]
    question = rng.choice([
        f"Is the mean {number.words} different between rows with {category.words} {first} and rows with "
        f"{category.words} {second}? Use a two-sample t-test at the 0.05 significance level.",
        f"Test whether {number.words} differs on average between {category.words} {first} and {second}, with a "
        "two-sample t-test at the 0.05 level.",
    ])  # fmt: skip
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
        question, constraints, answers, code, number=number.name, category=category.name, first=first, second=second
    )


@template("correlation.pearson", "Correlation Analysis", "easy", numbers=2)
def pearson(rng: random.Random, x: Column, y: Column) -> Draft | None:
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
    return _draft(question, constraints, answers, code, x=x.name, y=y.name)


@template("arithmetic.group_share", "Arithmetic Calculation", "easy", numbers=1, categories=1)
def group_share(rng: random.Random, number: Column, category: Column) -> Draft | None:
    value = rng.choice(category.values)
    question = rng.choice([
        f"What percentage of the total {number.words} comes from rows whose {category.words} is {value}?",
        f"Rows with {category.words} {value} account for what share, in percent, of all {number.words}?",
    ])  # fmt: skip
    code = (
        f"part = df[df[{category.code}].astype(str) == {value!r}][{number.code}].sum()\n"
        f"share = 100 * part / df[{number.code}].sum()\n"
        'print(f"@percentage[{share:.2f}]")\n'
    )
    answers = [Answer("percentage", "the share in percent", decimals=2)]
    constraints = "Missing values count as zero in both sums."
    return _draft(question, constraints, answers, code, number=number.name, category=category.name, value=value)


@template("anomaly.z_score", "Anomaly Detection", "easy", numbers=1)
def z_score(rng: random.Random, number: Column) -> Draft | None:
    limit = rng.choice([2, 3])
    question = rng.choice([
        f"How many rows are outliers in {number.words}, by a z-score above {limit} in absolute value?",
        f"Using z-scores, how many {number.words} values lie more than {limit} standard deviations from the mean?",
    ])  # fmt: skip
    code = (
        f"values = df[{number.code}].dropna()\n"
        "z = (values - values.mean()) / values.std()\n"
        f'print(f"@outliers[{{int((z.abs() > {limit}).sum())}}]")\n'
    )
    constraints = f"z = (value - mean) / standard deviation (sample, ddof=1), over the non-missing {number.words}."
    answers = [Answer("outliers", "the number of outlying rows", integer=True)]
    return _draft(question, constraints, answers, code, number=number.name, limit=limit)


@template("distribution.shape", "Distribution Analysis", "easy", numbers=1)
def shape(rng: random.Random, number: Column) -> Draft | None:
    question = rng.choice([
        f"Describe the shape of the distribution of {number.words}: what are its skewness and kurtosis?",
        f"How skewed and how heavy-tailed is {number.words}? Give its skewness and kurtosis.",
    ])  # fmt: skip
    code = (
        f"values = df[{number.code}].dropna()\n"
        'print(f"@skewness[{values.skew():.2f}]")\n'
        'print(f"@kurtosis[{values.kurt():.2f}]")\n'
    )
    constraints = "Use pandas' sample skewness and excess kurtosis (Series.skew and Series.kurt) on non-missing values."
    answers = [Answer("skewness", "the skewness", decimals=2), Answer("kurtosis", "the excess kurtosis", decimals=2)]
    return _draft(question, constraints, answers, code, number=number.name)


@template("features.ratio_column", "Feature Engineering", "easy", numbers=2)
def ratio_column(rng: random.Random, top: Column, bottom: Column) -> Draft | None:
    question = rng.choice([
        f"Create a feature equal to {top.words} divided by {bottom.words}. What is its median over the rows "
        "where it is defined?",
        f"Derive the ratio of {top.words} to {bottom.words} for each row. What is the median ratio?",
    ])  # fmt: skip
    code = (
        "import numpy as np\n\n"
        f"ratio = (df[{top.code}] / df[{bottom.code}]).replace([np.inf, -np.inf], np.nan)\n"
        'print(f"@median_ratio[{ratio.median():.2f}]")\n'
    )
    constraints = f"Leave out rows where {bottom.words} is zero or either value is missing."
    answers = [Answer("median_ratio", "the median of the new feature", decimals=2)]
    return _draft(question, constraints, answers, code, top=top.name, bottom=bottom.name)


@template("impact.slope", "Impact Analysis", "medium", numbers=2)
def slope(rng: random.Random, x: Column, y: Column) -> Draft | None:
    question = rng.choice([
        f"By how much does {y.words} change, on average, for each one-unit increase in {x.words}? Fit a "
        "straight line by least squares.",
        f"Fit {y.words} against {x.words} with a least-squares line. What is its slope?",
    ])  # fmt: skip
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
    return _draft(question, constraints, answers, code, x=x.name, y=y.name)


@template("descriptive.quartiles", "Descriptive Analysis", "easy", numbers=1)
def quartiles(rng: random.Random, number: Column) -> Draft | None:
    question = rng.choice([
        f"What are the first and third quartiles of {number.words}, and the interquartile range?",
        f"Summarise the spread of {number.words}: give its 25th and 75th percentiles and their difference.",
    ])  # fmt: skip
    code = (
        f"values = df[{number.code}].dropna()\n"
        "q1, q3 = values.quantile(0.25), values.quantile(0.75)\n"
        'print(f"@q1[{q1:.2f}]")\n'
        'print(f"@q3[{q3:.2f}]")\n'
        'print(f"@iqr[{q3 - q1:.2f}]")\n'
    )
    constraints = "Use linear interpolation between values (pandas' default quantile method); ignore missing values."
    answers = [
        Answer("q1", "the 25th percentile", decimals=2),
        Answer("q3", "the 75th percentile", decimals=2),
        Answer("iqr", "the interquartile range", decimals=2),
    ]
    return _draft(question, constraints, answers, code, number=number.name)


@template("descriptive.incomplete_rows", "Descriptive Analysis", "easy")
def incomplete_rows(roles: Roles, rng: random.Random) -> Draft | None:
    if not any(column.info.missing for column in roles.numbers + roles.categories + roles.labels):
        return None
    question = rng.choice([
        "How many rows have at least one missing value, and how many columns have no missing value at all?",
        "Count the rows that have any empty cell, and the columns that have none.",
    ])  # fmt: skip
    code = (
        'print(f"@incomplete_rows[{int(df.isna().any(axis=1).sum())}]")\n'
        'print(f"@complete_columns[{int((~df.isna().any()).sum())}]")\n'
    )
    constraints = "An empty cell counts as missing; consider every column of the table."
    answers = [
        Answer("incomplete_rows", "the number of rows with a missing value", integer=True),
        Answer("complete_columns", "the number of columns without one", integer=True),
    ]
    return _draft(question, constraints, answers, code)


@template("time.top_year", "Time-based Calculation", "medium", numbers=1, dates=1)
def top_year(rng: random.Random, number: Column, date: Column) -> Draft | None:
    question = rng.choice([
        f"In which year was the total {number.words} the highest, and what was that total?",
        f"Add up {number.words} by calendar year (from {date.words}). Which year has the largest sum, and what is it?",
    ])  # fmt: skip
    code = (
        f"years = {date.year_code}\n"
        f"totals = df[{number.code}].groupby(years).sum()\n"
        'print(f"@year[{int(totals.idxmax())}]")\n'
        'print(f"@total[{totals.max():.2f}]")\n'
    )
    constraints = f"The year of a row is the calendar year of its {date.words}; rows without one are left out."
    answers = [Answer("year", "the year", integer=True), Answer("total", "that year's total", decimals=2)]
    return _draft(question, constraints, answers, code, number=number.name, date=date.name)


@template("time.yearly_growth", "Time-based Calculation", "medium", numbers=1, dates=1)
def yearly_growth(rng: random.Random, number: Column, date: Column) -> Draft | None:
    question = rng.choice([
        f"By what percentage did the yearly total of {number.words} change from the first year in the data to "
        "the last one?",
        f"Comparing the first and the last year in the data, by how many percent did total {number.words} grow "
        "or shrink?",
    ])  # fmt: skip
    code = (
        f"years = {date.year_code}\n"
        f"totals = df[{number.code}].groupby(years).sum().sort_index()\n"
        "change = 100 * (totals.iloc[-1] - totals.iloc[0]) / totals.iloc[0]\n"
        'print(f"@percent_change[{change:.2f}]")\n'
    )
    constraints = (
        f"Take calendar years of {date.words}, sum {number.words} per year, and compare the latest year's total "
        "with the earliest year's."
    )
    answers = [Answer("percent_change", "the change in percent (negative for a fall)", decimals=2)]
    return _draft(question, constraints, answers, code, number=number.name, date=date.name)


@template("facts.same_leader", "Fact Checking", "medium", numbers=2, categories=1)
def same_leader(rng: random.Random, first: Column, second: Column, category: Column) -> Draft | None:
    question = rng.choice([
        f"Check this claim: the {category.words} with the highest average {first.words} also has the highest "
        f"average {second.words}. Is it true?",
        f"True or false: one {category.words} leads on both average {first.words} and average {second.words}.",
    ])  # fmt: skip
    code = (
        f"means = df.groupby({category.code})[[{first.code}, {second.code}]].mean()\n"
        f"first, second = means[{first.code}].idxmax(), means[{second.code}].idxmax()\n"
        'print(f"@leader_first[{first}]")\n'
        'print(f"@leader_second[{second}]")\n'
        "print(f\"@claim[{'true' if first == second else 'false'}]\")\n"
    )
    constraints = f"Compare the mean of each measure per {category.words}, ignoring missing values."
    answers = [
        Answer("leader_first", f"the {category.words} with the highest average {first.words}"),
        Answer("leader_second", f"the {category.words} with the highest average {second.words}"),
        Answer("claim", "true or false"),
    ]
    return _draft(
        question, constraints, answers, code,
        first=first.name, second=second.name, category=category.name
    )  # fmt: skip


@template("causal.adjusted_slope", "Causal Analysis", "hard", numbers=3)
def adjusted_slope(rng: random.Random, x: Column, y: Column, z: Column) -> Draft | None:
    question = rng.choice([
        f"Does {x.words} still go with {y.words} once {z.words} is taken into account? Give the least-squares "
        f"slope of {y.words} on {x.words} alone, and the coefficient of {x.words} when {z.words} is also in the "
        "model.",
        f"Regress {y.words} on {x.words}, then on {x.words} and {z.words} together. What is the coefficient of "
        f"{x.words} in each model?",
    ])  # fmt: skip
    code = (
        "import numpy as np\n\n"
        f"data = df[[{x.code}, {y.code}, {z.code}]].dropna()\n"
        f"raw = np.polyfit(data[{x.code}], data[{y.code}], 1)[0]\n"
        f"design = np.column_stack([np.ones(len(data)), data[{x.code}], data[{z.code}]])\n"
        f"coefficients = np.linalg.lstsq(design, data[{y.code}], rcond=None)[0]\n"
        'print(f"@raw_slope[{raw:.4f}]")\n'
        'print(f"@adjusted_slope[{coefficients[1]:.4f}]")\n'
    )
    constraints = (
        f"Both models are ordinary least squares with an intercept, fitted on the rows where {x.words}, {y.words} "
        f"and {z.words} are all present."
    )
    answers = [
        Answer("raw_slope", f"the slope of {x.words} alone", decimals=4),
        Answer("adjusted_slope", f"the coefficient of {x.words} with {z.words} controlled for", decimals=4),
    ]
    return _draft(question, constraints, answers, code, x=x.name, y=y.name, z=z.name)


@template("preprocessing.clean_then_summarise", "Comprehensive Data Preprocessing", "medium", numbers=1)
def clean_then_summarise(rng: random.Random, number: Column) -> Draft | None:
    question = rng.choice([
        f"Clean the table, then summarise {number.words}: drop exact duplicate rows, fill missing {number.words} "
        "with the median of the remaining values, and standardise it to zero mean and unit variance. How many "
        "rows are left, and how many standardised values are above 1?",
        f"Prepare {number.words} for modelling: remove duplicate rows, impute its missing values with the median, "
        "then standardise it. How many rows remain, and how many standardised values exceed 1?",
    ])  # fmt: skip
    code = (
        "clean = df.drop_duplicates().copy()\n"
        f"values = clean[{number.code}].fillna(clean[{number.code}].median())\n"
        "z = (values - values.mean()) / values.std()\n"
        'print(f"@rows[{len(clean)}]")\n'
        'print(f"@above_one[{int((z > 1).sum())}]")\n'
    )
    constraints = (
        "Steps in this order; the median is taken after dropping duplicates; standardise with the sample "
        "standard deviation."
    )
    answers = [
        Answer("rows", "the number of rows after dropping duplicates", integer=True),
        Answer("above_one", "the number of standardised values above 1", integer=True),
    ]
    return _draft(question, constraints, answers, code, number=number.name)


@template("distribution.normality", "Distribution Analysis", "medium", numbers=1)
def normality(rng: random.Random, number: Column) -> Draft | None:
    question = rng.choice([
        f"Is {number.words} normally distributed? Use the Shapiro-Wilk test at the 0.05 significance level.",
        f"Test whether {number.words} follows a normal distribution, with a Shapiro-Wilk test at the 5% level.",
    ])  # fmt: skip
    code = (
        "from scipy import stats\n\n"
        f"values = df[{number.code}].dropna()\n"
        "result = stats.shapiro(values)\n"
        'print(f"@w_statistic[{result.statistic:.4f}]")\n'
        'print(f"@p_value[{result.pvalue:.4f}]")\n'
        "print(f\"@normal[{'yes' if result.pvalue >= 0.05 else 'no'}]\")\n"
    )
    constraints = "Test the non-missing values; they count as normal when the p-value is at least 0.05."
    answers = [
        Answer("w_statistic", "the Shapiro-Wilk W statistic", decimals=4),
        Answer("p_value", "the p-value", decimals=4),
        Answer("normal", "yes or no"),
    ]
    return _draft(question, constraints, answers, code, number=number.name)


@template("statistics.chi_square", "Statistical Analysis", "medium", categories=2)
def chi_square(rng: random.Random, first: Column, second: Column) -> Draft | None:
    if len(first.values) < 2 or len(second.values) < 2:
        return None
    question = rng.choice([
        f"Are {first.words} and {second.words} independent? Use a chi-square test of independence at the 0.05 "
        "level.",
        f"Does {second.words} depend on {first.words}? Test it with a chi-square test on their contingency table, "
        "at the 5% level.",
    ])  # fmt: skip
    code = (
        "from scipy import stats\n\n"
        f"table = pd.crosstab(df[{first.code}], df[{second.code}])\n"
        "chi2, p, dof, expected = stats.chi2_contingency(table, correction=False)\n"
        'print(f"@chi_square[{chi2:.2f}]")\n'
        'print(f"@p_value[{p:.4f}]")\n'
        "print(f\"@independent[{'yes' if p >= 0.05 else 'no'}]\")\n"
    )
    constraints = (
        "Count the rows of every pair of values (rows missing either value left out) and use no continuity "
        "correction; the two are independent when the p-value is at least 0.05."
    )
    answers = [
        Answer("chi_square", "the chi-square statistic", decimals=2),
        Answer("p_value", "the p-value", decimals=4),
        Answer("independent", "yes or no"),
    ]
    return _draft(question, constraints, answers, code, first=first.name, second=second.name)


@template("anomaly.iqr", "Anomaly Detection", "easy", numbers=1)
def iqr_outliers(rng: random.Random, number: Column) -> Draft | None:
    question = rng.choice([
        f"How many {number.words} values are outliers by the 1.5 x IQR rule? Give the bounds as well.",
        f"Using the interquartile range, count the rows whose {number.words} lies more than 1.5 IQR below the "
        "first quartile or above the third, and give both fences.",
    ])  # fmt: skip
    code = (
        f"values = df[{number.code}].dropna()\n"
        "q1, q3 = values.quantile(0.25), values.quantile(0.75)\n"
        "low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)\n"
        'print(f"@lower_fence[{low:.2f}]")\n'
        'print(f"@upper_fence[{high:.2f}]")\n'
        'print(f"@outliers[{int(((values < low) | (values > high)).sum())}]")\n'
    )
    constraints = (
        "Quartiles by linear interpolation (pandas' default) over the non-missing values; a value is an outlier "
        "when it lies strictly outside the fences."
    )
    answers = [
        Answer("lower_fence", "Q1 - 1.5 IQR", decimals=2),
        Answer("upper_fence", "Q3 + 1.5 IQR", decimals=2),
        Answer("outliers", "the number of outlying rows", integer=True),
    ]
    return _draft(question, constraints, answers, code, number=number.name)


@template("correlation.pearson_test", "Correlation Analysis", "medium", numbers=2)
def pearson_test(rng: random.Random, x: Column, y: Column) -> Draft | None:
    question = rng.choice([
        f"Is the linear correlation between {x.words} and {y.words} significant? Give Pearson's r and its "
        "p-value, at the 0.05 level.",
        f"Test the Pearson correlation of {x.words} with {y.words} for significance at the 5% level.",
    ])  # fmt: skip
    code = (
        "from scipy import stats\n\n"
        f"pair = df[[{x.code}, {y.code}]].dropna()\n"
        f"result = stats.pearsonr(pair[{x.code}], pair[{y.code}])\n"
        'print(f"@correlation[{result.statistic:.2f}]")\n'
        'print(f"@p_value[{result.pvalue:.4f}]")\n'
        "print(f\"@significant[{'yes' if result.pvalue < 0.05 else 'no'}]\")\n"
    )
    constraints = "Drop rows where either value is missing; two-sided test; significant when the p-value is below 0.05."
    answers = [
        Answer("correlation", "Pearson's r", decimals=2),
        Answer("p_value", "the two-sided p-value", decimals=4),
        Answer("significant", "yes or no"),
    ]
    return _draft(question, constraints, answers, code, x=x.name, y=y.name)


@template("impact.regression", "Impact Analysis", "hard", numbers=3)
def regression(rng: random.Random, x: Column, z: Column, y: Column) -> Draft | None:
    question = rng.choice([
        f"Predict {y.words} from {x.words} and {z.words} with a linear regression trained on 80% of the rows. "
        f"How much does {y.words} change per unit of {x.words}, and how well does the model do on the other 20% "
        "(R-squared and RMSE)?",
        f"Fit a linear regression of {y.words} on {x.words} and {z.words} with a train/test split (80/20). Report "
        f"the coefficient of {x.words}, and the R-squared and root mean squared error on the test rows.",
    ])  # fmt: skip
    code = (
        "import numpy as np\n"
        "from sklearn.linear_model import LinearRegression\n"
        "from sklearn.metrics import mean_squared_error, r2_score\n"
        "from sklearn.model_selection import train_test_split\n\n"
        f"data = df[[{x.code}, {z.code}, {y.code}]].dropna()\n"
        "X_train, X_test, y_train, y_test = train_test_split(\n"
        f"    data[[{x.code}, {z.code}]], data[{y.code}], test_size=0.2, random_state=42\n"
        ")\n"
        "model = LinearRegression().fit(X_train, y_train)\n"
        "predicted = model.predict(X_test)\n"
        'print(f"@coefficient[{model.coef_[0]:.4f}]")\n'
        'print(f"@r_squared[{r2_score(y_test, predicted):.4f}]")\n'
        'print(f"@rmse[{np.sqrt(mean_squared_error(y_test, predicted)):.4f}]")\n'
    )
    constraints = (
        f"Use the rows where {x.words}, {z.words} and {y.words} are all present, split by scikit-learn's "
        "train_test_split with test_size=0.2 and random_state=42; ordinary least squares with an intercept "
        "(LinearRegression)."
    )
    answers = [
        Answer("coefficient", f"the coefficient of {x.words}", decimals=4),
        Answer("r_squared", "R-squared on the test rows", decimals=4),
        Answer("rmse", "the root mean squared error on the test rows", decimals=4),
    ]
    return _draft(question, constraints, answers, code, x=x.name, z=z.name, y=y.name)


Chosen = dict[str, str]
"""A draft's choices (its ``params``) as text: the column names its question and solution use."""


def _chart_request(
    name: str, category: str, base: Template, ask: Callable[[Chosen], list[str]], plot: Callable[[Chosen], str]
) -> None:
    """Register template ``name``: ``base``'s question asked with a chart. ``ask`` gives its phrasings and ``plot`` the
    code that draws the chart, both from the base draft's choices (column names); the solution draws it before
    computing the same answers."""

    def make(roles: Roles, rng: random.Random) -> Draft | None:
        if (draft := base(roles, rng)) is None:
            return None
        chosen = {key: str(value) for key, value in draft.params.items()}
        code = f"import matplotlib.pyplot as plt\n\n{plot(chosen)}plt.tight_layout()\n{draft.code}"
        return Draft(name, category, draft.level, rng.choice(ask(chosen)), draft.constraints, draft.answers, code,
                     draft.params, figure=True)  # fmt: skip

    TEMPLATES[name] = (category, make)


def _extreme(chosen: Chosen) -> str:
    return "highest" if chosen["highest"] == "True" else "lowest"


_chart_request(
    "ranking.top_group_chart", "Ranking", top_group,
    lambda c: [f"Draw a bar chart of the average {as_words(c['number'])} of each {as_words(c['category'])}. Which "
               f"{as_words(c['category'])} has the {_extreme(c)} average?",
               f"Plot the mean {as_words(c['number'])} per {as_words(c['category'])} as bars, and name the "
               f"{as_words(c['category'])} whose mean is the {_extreme(c)}."],
    lambda c: f"df.groupby({c['category']!r})[{c['number']!r}].mean().sort_values().plot.bar()\n",
)  # fmt: skip
_chart_request(
    "correlation.pearson_chart", "Correlation Analysis", pearson,
    lambda c: [f"Make a scatter plot of {as_words(c['y'])} against {as_words(c['x'])}. What is their Pearson "
               "correlation?",
               f"Plot {as_words(c['x'])} (x axis) against {as_words(c['y'])} (y axis) as points, then give Pearson's r "
               "between them."],
    lambda c: f"df.plot.scatter(x={c['x']!r}, y={c['y']!r}, s=8)\n",
)  # fmt: skip
_chart_request(
    "distribution.histogram_chart", "Distribution Analysis", quartiles,
    lambda c: [f"Show the distribution of {as_words(c['number'])} as a histogram, and give its quartiles and "
               "interquartile range.",
               f"Draw a histogram of {as_words(c['number'])}. What are its first and third quartiles, and the range "
               "between them?"],
    lambda c: f"df[{c['number']!r}].dropna().plot.hist(bins=20)\n",
)  # fmt: skip


def snake(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_").lower()[:40] or "value"
