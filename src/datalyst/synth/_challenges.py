"""Families of synthetic datasets that hide an analytical trap, in the manner of Datarus' procedural challenges.

A family knows the columns its datasets have (``columns``), how to generate one from a seed
(``generate``), how to prove the trap is really in a dataset (``detect``), whoever generated it, and which
questions have an answer that depends on handling the trap (``drafts``: solutions that handle it, run in
the sandbox like every template's). The data's domain (shops, wards, meters, ...) only changes names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from datalyst.synth._templates import Answer, Draft


@dataclass(frozen=True)
class Domain:
    name: str
    entity: str
    group: str
    groups: tuple[str, ...]
    measure: str
    """A column name, also used in questions with underscores as spaces."""
    unit: str
    scale: float
    """A typical value of the measure."""
    driver: str
    """A second measure that the first depends on."""


DOMAINS = (
    Domain("retail", "store", "region", ("North", "South", "East", "West"), "sales", "dollars", 2500.0, "footfall"),
    Domain("hospital", "ward", "department", ("Cardiology", "Oncology", "Surgery"), "stay_days", "days", 6.0, "age"),
    Domain(
        "energy",
        "meter",
        "district",
        ("Harbour", "Hills", "Centre", "Airport"),
        "consumption_kwh",
        "kWh",
        320.0,
        "temperature",
    ),
    Domain("logistics", "parcel", "carrier", ("Swift", "Cargo One", "Parcelo"), "weight_kg", "kg", 12.0, "distance_km"),
    Domain("web", "page", "channel", ("search", "social", "email", "direct"), "visits", "visits", 900.0, "ad_spend"),
)


def words(name: str) -> str:
    return name.replace("_", " ")


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    description: str
    """What the trap is, in words a model can turn into a generator script."""
    columns: Callable[[Domain], dict[str, str]]
    generate: Callable[[np.random.Generator, Domain, int], pd.DataFrame]
    detect: Callable[[pd.DataFrame, Domain], bool]
    drafts: Callable[[Domain], list[Draft]]


def _base(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    """Rows with an id, a day of one year, a group and the two measures (the measure grows with the driver)."""
    driver = rng.uniform(0.5, 1.5, rows)
    return pd.DataFrame(
        {
            "id": np.arange(1, rows + 1),
            "date": pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 365, rows), unit="D"),
            domain.group: rng.choice(domain.groups, rows),
            domain.driver: (driver * 100).round(1),
            domain.measure: (domain.scale * driver * rng.lognormal(0, 0.25, rows)).round(2),
        }
    ).sort_values("date", kind="stable", ignore_index=True)


def _base_columns(domain: Domain) -> dict[str, str]:
    return {
        "id": f"a running number of the {domain.entity}'s record",
        "date": "the day of the record in 2023, as YYYY-MM-DD",
        domain.group: f"one of: {', '.join(domain.groups)}",
        domain.driver: f"a number the {words(domain.measure)} grows with",
        domain.measure: f"the {words(domain.measure)} in {domain.unit}, around {domain.scale:g}",
    }


def _draft(family: str, category: str, level: str, question: str, constraints: str, answers: list[Answer],
           code: str) -> Draft:  # fmt: skip
    return Draft(f"dataset.{family}", category, level, question, constraints, tuple(answers), code)


# -- 1. missing values written as a sentinel code


def _sentinel_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    frame.loc[rng.random(rows) < 0.08, domain.measure] = -999
    return frame


def _sentinel_drafts(domain: Domain) -> list[Draft]:
    m = domain.measure
    code = (
        f"values = df[{m!r}].replace(-999, float('nan'))\n"
        'print(f"@mean[{values.mean():.2f}]")\n'
        'print(f"@missing[{int(values.isna().sum())}]")\n'
    )
    question = f"What is the average {words(m)}, and how many records have no {words(m)} recorded?"
    constraints = f"The value -999 in {m} is a code for a missing reading, not a measurement."
    answers = [Answer("mean", f"the mean {words(m)} over real readings", decimals=2),
               Answer("missing", "the number of records without a reading", integer=True)]  # fmt: skip
    return [_draft("sentinel", "Comprehensive Data Preprocessing", "medium", question, constraints, answers, code)]


# -- 2. gross outliers


def _outliers_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    spikes = rng.choice(rows, size=max(3, rows // 100), replace=False)
    frame.loc[spikes, domain.measure] = (frame.loc[spikes, domain.measure] * rng.uniform(20, 50, len(spikes))).round(2)
    return frame


def _outliers_drafts(domain: Domain) -> list[Draft]:
    m = domain.measure
    code = (
        f"values = df[{m!r}]\n"
        "q1, q3 = values.quantile(0.25), values.quantile(0.75)\n"
        "inside = values[(values >= q1 - 1.5 * (q3 - q1)) & (values <= q3 + 1.5 * (q3 - q1))]\n"
        'print(f"@outliers[{len(values) - len(inside)}]")\n'
        'print(f"@robust_mean[{inside.mean():.2f}]")\n'
    )
    question = f"Some {words(m)} values are far out of line. How many are outliers, and what is the mean without them?"
    constraints = "Outliers lie outside the 1.5 IQR fences (Q1 - 1.5 IQR, Q3 + 1.5 IQR), pandas' default quantiles."
    answers = [Answer("outliers", "the number of outlying records", integer=True),
               Answer("robust_mean", f"the mean {words(m)} of the others", decimals=2)]  # fmt: skip
    return [_draft("outliers", "Anomaly Detection", "medium", question, constraints, answers, code)]


# -- 3. duplicated records


def _duplicates_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    copies = frame.iloc[rng.choice(rows, size=rows // 12, replace=False)]
    return pd.concat([frame, copies]).sort_values("date", kind="stable", ignore_index=True)


def _duplicates_drafts(domain: Domain) -> list[Draft]:
    m = domain.measure
    code = (
        "unique = df.drop_duplicates()\n"
        'print(f"@records[{len(unique)}]")\n'
        f'print(f"@total[{{unique[{m!r}].sum():.2f}}]")\n'
    )
    question = (
        f"Some records were loaded twice. How many distinct records are there, and what is their total {words(m)}?"
    )
    constraints = "A record loaded twice appears as an identical row (same id and values); count it once."
    answers = [Answer("records", "the number of distinct records", integer=True),
               Answer("total", f"the total {words(m)} over distinct records", decimals=2)]  # fmt: skip
    return [_draft("duplicates", "Comprehensive Data Preprocessing", "medium", question, constraints, answers, code)]


# -- 4. one measure in two units


def _units_columns(domain: Domain) -> dict[str, str]:
    return _base_columns(domain) | {
        "unit": f"'{domain.unit}' or 'milli-{domain.unit}' (the value is 1000 times larger)"
    }


def _units_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    milli = rng.random(rows) < 0.3
    frame["unit"] = np.where(milli, f"milli-{domain.unit}", domain.unit)
    frame.loc[milli, domain.measure] = (frame.loc[milli, domain.measure] * 1000).round(0)
    return frame


def _units_drafts(domain: Domain) -> list[Draft]:
    m, unit = domain.measure, domain.unit
    code = (
        f"values = df[{m!r}].where(df['unit'] == {unit!r}, df[{m!r}] / 1000)\n"
        f"means = values.groupby(df[{domain.group!r}]).mean()\n"
        'print(f"@mean[{values.mean():.2f}]")\n'
        'print(f"@top_group[{means.idxmax()}]")\n'
    )
    question = (
        f"What is the average {words(m)} in {unit}, and which {domain.group} has the highest average? Mind the "
        "unit column."
    )
    constraints = f"Rows in milli-{unit} hold values 1000 times larger; convert them to {unit} first."
    answers = [Answer("mean", f"the mean in {unit}", decimals=2),
               Answer("top_group", f"the {domain.group} with the highest mean")]  # fmt: skip
    return [_draft("mixed_units", "Comprehensive Data Preprocessing", "hard", question, constraints, answers, code)]


# -- 5. a weekly pattern


def _seasonal_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    peak = int(rng.integers(0, 7))
    lift = np.where(frame["date"].dt.day_of_week == peak, 1.6, 1.0)
    frame[domain.measure] = (frame[domain.measure] * lift).round(2)
    return frame


def _seasonal_drafts(domain: Domain) -> list[Draft]:
    m = domain.measure
    code = (
        "days = pd.to_datetime(df['date']).dt.day_name()\n"
        f"means = df[{m!r}].groupby(days).mean()\n"
        'print(f"@busiest_day[{means.idxmax()}]")\n'
        'print(f"@ratio[{means.max() / means.min():.2f}]")\n'
    )
    question = f"On which day of the week is the average {words(m)} highest, and how many times the lowest day's is it?"
    constraints = "Group records by the weekday of their date; compare the mean per weekday."
    answers = [Answer("busiest_day", "the weekday's English name, e.g. Monday"),
               Answer("ratio", "the highest weekday mean divided by the lowest", decimals=2)]  # fmt: skip
    return [_draft("weekly_pattern", "Time-based Calculation", "medium", question, constraints, answers, code)]


# -- 6. a structural break


def _break_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    month = int(rng.integers(4, 10))
    after = frame["date"].dt.month >= month
    frame.loc[after, domain.measure] = (frame.loc[after, domain.measure] * 1.8).round(2)
    return frame


def _break_drafts(domain: Domain) -> list[Draft]:
    m = domain.measure
    code = (
        "months = pd.to_datetime(df['date']).dt.month\n"
        f"monthly = df[{m!r}].groupby(months).mean().sort_index()\n"
        "jump = monthly.diff()\n"
        'print(f"@break_month[{int(jump.idxmax())}]")\n'
        'print(f"@jump[{jump.max():.2f}]")\n'
    )
    question = (
        f"The level of {words(m)} shifts at some point in the year. In which month does the monthly mean jump most?"
    )
    constraints = (
        "Compare each month's mean with the previous month's (months 1-12 of the date); report the month number."
    )
    answers = [Answer("break_month", "the month number, 1-12", integer=True),
               Answer("jump", "the rise of the monthly mean in that month", decimals=2)]  # fmt: skip
    return [_draft("structural_break", "Time-based Calculation", "hard", question, constraints, answers, code)]


# -- 7. Simpson's paradox


def _simpson_columns(domain: Domain) -> dict[str, str]:
    return {
        "id": "a running number",
        "severity": "'mild' or 'severe'",
        "option": "'A' or 'B', the option chosen",
        "success": "1 if it worked, else 0",
    }


def _simpson_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    severe = rng.random(rows) < 0.5
    # A goes mostly to severe cases, B to mild ones; A is better within each severity.
    option = np.where(severe, np.where(rng.random(rows) < 0.8, "A", "B"), np.where(rng.random(rows) < 0.2, "A", "B"))
    base = np.where(severe, 0.3, 0.8) + np.where(option == "A", 0.12, 0.0)
    return pd.DataFrame(
        {
            "id": np.arange(1, rows + 1),
            "severity": np.where(severe, "severe", "mild"),
            "option": option,
            "success": (rng.random(rows) < base).astype(int),
        }
    )


def _simpson_detect(frame: pd.DataFrame, domain: Domain) -> bool:
    overall = frame.groupby("option")["success"].mean()
    within = frame.groupby(["severity", "option"])["success"].mean().unstack()
    return bool((within.idxmax(axis=1) != overall.idxmax()).all())


def _simpson_drafts(domain: Domain) -> list[Draft]:
    code = (
        "overall = df.groupby('option')['success'].mean()\n"
        "within = df.groupby(['severity', 'option'])['success'].mean().unstack()\n"
        "winners = set(within.idxmax(axis=1))\n"
        'print(f"@better_overall[{overall.idxmax()}]")\n'
        "print(f\"@better_within[{winners.pop() if len(winners) == 1 else 'mixed'}]\")\n"
    )
    question = (
        "Which option has the higher success rate over all cases, and which has it within each severity level "
        "(or 'mixed' if that differs by level)?"
    )
    constraints = "The success rate is the mean of success; compare options overall and within mild and severe cases."
    answers = [Answer("better_overall", "A or B"), Answer("better_within", "A, B or mixed")]
    return [_draft("simpsons_paradox", "Causal Analysis", "hard", question, constraints, answers, code)]


# -- 8. heavy tails


def _heavy_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    frame[domain.measure] = (domain.scale * (rng.pareto(1.6, rows) + 1)).round(2)
    return frame


def _heavy_drafts(domain: Domain) -> list[Draft]:
    m = domain.measure
    code = (
        f"values = df[{m!r}].sort_values(ascending=False)\n"
        "top = values.head(int(len(values) * 0.1)).sum() / values.sum()\n"
        'print(f"@median[{values.median():.2f}]")\n'
        'print(f"@top_share[{100 * top:.2f}]")\n'
    )
    question = (
        f"The {words(m)} is very unequal across records. What is the median, and what percentage of the total do "
        "the top 10% of records hold?"
    )
    constraints = "The top 10% are the largest values, as many as 10% of the records rounded down."
    answers = [Answer("median", "the median", decimals=2), Answer("top_share", "their share in percent", decimals=2)]
    return [_draft("heavy_tails", "Distribution Analysis", "medium", question, constraints, answers, code)]


# -- 9. a category spelled several ways


def _labels_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    variants = [str.upper, str.lower, lambda text: f" {text}", lambda text: f"{text} "]
    messy = rng.random(rows) < 0.25
    frame.loc[messy, domain.group] = [variants[rng.integers(len(variants))](v) for v in frame.loc[messy, domain.group]]
    return frame


def _labels_drafts(domain: Domain) -> list[Draft]:
    g, m = domain.group, domain.measure
    code = (
        f"names = df[{g!r}].str.strip().str.title()\n"
        f"totals = df[{m!r}].groupby(names).sum()\n"
        'print(f"@groups[{names.nunique()}]")\n'
        'print(f"@top_group[{totals.idxmax()}]")\n'
        'print(f"@top_total[{totals.max():.2f}]")\n'
    )
    question = f"How many distinct {g}s are there really, and which has the largest total {words(m)}?"
    constraints = f"The same {g} is sometimes written in other case or with spaces around it; treat those as one."
    answers = [Answer("groups", f"the number of distinct {g}s", integer=True),
               Answer("top_group", f"its name in title case, e.g. {domain.groups[0].title()}"),
               Answer("top_total", "its total", decimals=2)]  # fmt: skip
    return [_draft("mislabelled_category", "Comprehensive Data Preprocessing", "medium", question, constraints,
                   answers, code)]  # fmt: skip


# -- 10. a confounded correlation


def _confounded_columns(domain: Domain) -> dict[str, str]:
    return _base_columns(domain) | {"incidents": "a count that, like the measure, rises with the driver"}


def _confounded_generate(rng: np.random.Generator, domain: Domain, rows: int) -> pd.DataFrame:
    frame = _base(rng, domain, rows)
    frame["incidents"] = rng.poisson(frame[domain.driver].to_numpy() / 10)
    return frame


def _confounded_drafts(domain: Domain) -> list[Draft]:
    m, d = domain.measure, domain.driver
    code = (
        "import numpy as np\n\n"
        f"x, y, z = df[{m!r}], df['incidents'], df[{d!r}]\n"
        "rx = x - np.polyval(np.polyfit(z, x, 1), z)\n"
        "ry = y - np.polyval(np.polyfit(z, y, 1), z)\n"
        'print(f"@correlation[{x.corr(y):.2f}]")\n'
        'print(f"@partial_correlation[{rx.corr(ry):.2f}]")\n'
    )
    question = (
        f"Is {words(m)} related to incidents? Give their Pearson correlation, and their partial correlation once "
        f"{words(d)} is accounted for."
    )
    constraints = f"The partial correlation is the correlation of the residuals of each on {words(d)} (linear fits)."
    answers = [Answer("correlation", "Pearson's r", decimals=2),
               Answer("partial_correlation", "the partial correlation", decimals=2)]  # fmt: skip
    return [_draft("confounded_correlation", "Correlation Analysis", "hard", question, constraints, answers, code)]


def _detect_sentinel(frame: pd.DataFrame, domain: Domain) -> bool:
    return bool((frame[domain.measure] == -999).mean() >= 0.03)


def _detect_outliers(frame: pd.DataFrame, domain: Domain) -> bool:
    return bool((np.abs(stats.zscore(frame[domain.measure])) > 4).sum() >= 3)


def _detect_duplicates(frame: pd.DataFrame, domain: Domain) -> bool:
    return bool(frame.duplicated().mean() >= 0.03)


def _detect_units(frame: pd.DataFrame, domain: Domain) -> bool:
    if "unit" not in frame or frame["unit"].nunique() != 2:
        return False
    means = frame.groupby("unit")[domain.measure].median()
    return bool(means.max() / means.min() > 200)


def _detect_seasonal(frame: pd.DataFrame, domain: Domain) -> bool:
    days = pd.to_datetime(frame["date"]).dt.day_of_week
    groups = [frame[domain.measure][days == day] for day in range(7)]
    return bool(stats.f_oneway(*groups).pvalue < 0.001)


def _detect_break(frame: pd.DataFrame, domain: Domain) -> bool:
    monthly = frame[domain.measure].groupby(pd.to_datetime(frame["date"]).dt.month).mean().sort_index()
    jumps = monthly.diff().dropna()
    return bool(jumps.max() > 4 * jumps.drop(jumps.idxmax()).abs().median())


def _detect_heavy(frame: pd.DataFrame, domain: Domain) -> bool:
    values = frame[domain.measure]
    return bool(stats.kurtosis(values) > 10 and values.mean() > 1.3 * values.median())


def _detect_labels(frame: pd.DataFrame, domain: Domain) -> bool:
    names = frame[domain.group].astype(str)
    return bool(names.nunique() > names.str.strip().str.title().nunique())


def _detect_confounded(frame: pd.DataFrame, domain: Domain) -> bool:
    x, y, z = frame[domain.measure], frame["incidents"], frame[domain.driver]
    rx = x - np.polyval(np.polyfit(z, x, 1), z)
    ry = y - np.polyval(np.polyfit(z, y, 1), z)
    return bool(abs(x.corr(y)) > 0.3 and abs(rx.corr(ry)) < 0.15)


FAMILIES = (
    Family("sentinel", "Comprehensive Data Preprocessing",
           "Some readings of the measure are missing and written as the code -999 instead of being left empty.",
           _base_columns, _sentinel_generate, _detect_sentinel, _sentinel_drafts),
    Family("outliers", "Anomaly Detection",
           "About 1% of the measure's values are data-entry errors 20 to 50 times too large.",
           _base_columns, _outliers_generate, _detect_outliers, _outliers_drafts),
    Family("duplicates", "Comprehensive Data Preprocessing",
           "About 8% of the records appear twice as identical rows, as if loaded twice.",
           _base_columns, _duplicates_generate, _detect_duplicates, _duplicates_drafts),
    Family("mixed_units", "Comprehensive Data Preprocessing",
           "About 30% of the rows give the measure in a unit 1000 times smaller, named in a unit column.",
           _units_columns, _units_generate, _detect_units, _units_drafts),
    Family("weekly_pattern", "Time-based Calculation",
           "The measure is 60% higher on one day of the week than on the others.",
           _base_columns, _seasonal_generate, _detect_seasonal, _seasonal_drafts),
    Family("structural_break", "Time-based Calculation",
           "From one month of the year on, the measure's level is 80% higher than before.",
           _base_columns, _break_generate, _detect_break, _break_drafts),
    Family("simpsons_paradox", "Causal Analysis",
           "Option A is better within each severity level, but goes mostly to severe cases, so B looks better overall.",
           _simpson_columns, _simpson_generate, _simpson_detect, _simpson_drafts),
    Family("heavy_tails", "Distribution Analysis",
           "The measure follows a Pareto distribution with a heavy right tail (shape about 1.6).",
           _base_columns, _heavy_generate, _detect_heavy, _heavy_drafts),
    Family("mislabelled_category", "Comprehensive Data Preprocessing",
           "A quarter of the group names are written in other case or with spaces around them.",
           _base_columns, _labels_generate, _detect_labels, _labels_drafts),
    Family("confounded_correlation", "Correlation Analysis",
           "An incidents count and the measure both rise with the driver, but are unrelated once it is held fixed.",
           _confounded_columns, _confounded_generate, _detect_confounded, _confounded_drafts),
)  # fmt: skip
