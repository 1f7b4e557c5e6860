"""Scoring of TableBench answers, following the official evaluation scripts.

The rules reproduced here (see ``shared/benchmarks/tablebench-example/SOURCE.md``):

* parsing: the rest of the line after the first ``Final Answer: ``, kept exactly as written
  (nothing is stripped); ``""`` when there is no such line, which also makes Parse@1 false;
* before any metric both texts are normalized SQuAD style: lowercase, ASCII punctuation removed,
  the words a/an/the dropped, whitespace collapsed;
* EM: the official metric splits the *normalized* texts on commas and credits items in order.
  Normalization has already removed every comma, so in effect a whole answer is one item
  (``"9.33, 1.11"`` is all right or all wrong). Against a reference made only of digits the
  prediction is read as a decimal number (``"007"`` matches ``"7"``, ``"1e3"`` matches ``"1000"``);
  the decimal point is gone as well, so ``10.6`` against ``10.60`` is ``106`` against ``1060``;
* EM_with_error_k: a digits-only reference accepts a prediction within ``k`` percent relative
  error (a zero reference needs an exact value); any other reference needs equal text;
* ROUGE-L: the F-measure of ``rouge-score``'s longest common subsequence on the normalized texts.
  A group's figure is, as in the official run, the median of a 1000-sample bootstrap of the mean,
  drawn without a seed; it can move by about a point on a group of 20 rows (docs/evaluation.md);
* a group's figures are percentages rounded to 2 decimals; the DataAnalysis and overall mixes
  combine those rounded figures weighted by row counts, then round again.
"""

from __future__ import annotations

import decimal
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import ROUND_HALF_UP, Decimal, localcontext
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FINAL_ANSWER_PATTERN = re.compile(r"Final Answer: (.+)")
ERROR_PERCENTS = (2, 5, 10)
DIGITS = 2

QTYPES = ("FactChecking", "NumericalReasoning", "DataAnalysis", "Visualization")
Metric = Literal["EM", "EM_with_error_10", "ROUGE-L"]
TABLEBENCH_SUBTYPE_METRICS: dict[str, Metric] = {
    **dict.fromkeys(("MatchBased", "Multi-hop FactChecking"), "EM"),
    **dict.fromkeys(
        (
            "Aggregation",
            "Multi-hop NumericalReasoing",  # sic: the dataset's own spelling
            "Counting",
            "Domain-Specific",
            "Time-basedCalculation",
            "ArithmeticCalculation",
            "Ranking",
            "Comparison",
        ),
        "EM",
    ),
    "ImpactAnalysis": "EM",
    **dict.fromkeys(("CorrelationAnalysis", "TrendForecasting", "StatisticalAnalysis"), "EM_with_error_10"),
    **dict.fromkeys(("CausalAnalysis", "DescriptiveAnalysis", "AnomalyDetection"), "ROUGE-L"),
}
"""The metric each text subtype contributes to the mixes (ChartGeneration needs code execution)."""

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DIGITS_ONLY = re.compile(r"\d+")
_ONE = Decimal(1)
# The official numbers go through Python's default decimal context; pin it so a caller's changes do not leak in.
_TRAPS = [decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow]
_DECIMALS = decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN, traps=_TRAPS)


class TableBenchGroup(BaseModel):
    """Figures for one subtype or type; ``model_dump(by_alias=True, exclude_none=True)`` gives the official keys."""

    model_config = ConfigDict(frozen=True)

    total: int
    em: float | None = Field(default=None, serialization_alias="EM")
    em_with_error_2: float | None = Field(default=None, serialization_alias="EM_with_error_2")
    em_with_error_5: float | None = Field(default=None, serialization_alias="EM_with_error_5")
    em_with_error_10: float | None = Field(default=None, serialization_alias="EM_with_error_10")
    rouge_l: float | None = Field(default=None, serialization_alias="ROUGE-L")
    mix_metric: float | None = Field(default=None, serialization_alias="Mix_Metric")
    """DataAnalysis only: each subtype's own metric, weighted by its row count."""
    ecr_at_1: float | None = Field(default=None, serialization_alias="ECR@1")
    """Share of rows whose code ran (Visualization, and every group of a PoT run)."""
    pass_at_1: float | None = Field(default=None, serialization_alias="Pass@1")
    """Visualization only: share of charts that the official checker accepted."""
    parse_at_1: float = Field(serialization_alias="Parse@1")


class TableBenchOverall(BaseModel):
    """The single TableBench figure and the share of parsed answers over all rows."""

    model_config = ConfigDict(frozen=True)

    mix_metric: float = Field(serialization_alias="Mix_Metric")
    """The overall mix as requested: with the official 0-1 visualization term, or corrected."""
    mix_metric_corrected: float
    """The overall mix with Pass@1 on the same 0-100 scale as the other terms."""
    parse_at_1: float = Field(serialization_alias="Parse@1")
    ecr_at_1: float | None = Field(default=None, serialization_alias="ECR@1")


class TableBenchReport(BaseModel):
    """TableBench metrics for the rows of one model and prompting style."""

    model_config = ConfigDict(frozen=True)

    subtypes: dict[str, TableBenchGroup]
    """``"<qtype>_<qsubtype>"`` (the official key) -> figures, in order of first appearance."""
    types: dict[str, TableBenchGroup]
    """Question type -> figures, for the types present, in the order of :data:`QTYPES`."""
    overall: TableBenchOverall
    official_overall_bug: bool
    """Whether ``overall.mix_metric`` adds Pass@1 as a fraction, as the official script does."""
    n_rows: int


# ---------------------------------------------------------------- one answer


def parse_final_answer(text: object) -> str:
    """The text after the first ``Final Answer: `` up to the end of its line; ``""`` when absent."""
    if not isinstance(text, str):
        return ""
    match = FINAL_ANSWER_PATTERN.search(text)
    return match.group(1) if match else ""


def tablebench_prediction(answer: str) -> str:
    """The prediction in an agent's answer: after ``Final Answer:`` when written, else all of it, stripped."""
    return parse_final_answer(answer) if "Final Answer:" in answer else answer.strip()


def squad_normalize(text: str) -> str:
    """Lowercase, drop ASCII punctuation, drop the words a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _credit(prediction: str, reference: str, item_matches: Callable[[str, str], bool]) -> float:
    """Official item weighting on normalized texts: reference items in order, each worth an equal share."""
    references = [item.strip() for item in reference.split(",")]
    predictions = [item.strip() for item in prediction.split(",")]
    share = 1.0 / len(references)
    return sum(share for ref, pred in zip(references, predictions, strict=False) if item_matches(pred, ref))


def _same_item(prediction: str, reference: str) -> bool:
    if not _DIGITS_ONLY.fullmatch(reference):
        return reference == prediction
    try:
        with localcontext(_DECIMALS):
            ref = Decimal(reference).quantize(_ONE, rounding=ROUND_HALF_UP)
            pred = Decimal(prediction).quantize(_ONE, rounding=ROUND_HALF_UP)
    except ArithmeticError:  # not a number, or too many digits for the context
        return False
    return str(ref) == str(pred)


def _close_item(prediction: str, reference: str, percent: float) -> bool:
    if not _DIGITS_ONLY.fullmatch(reference):
        return reference == prediction
    try:
        with localcontext(_DECIMALS):
            ref, pred = Decimal(reference), Decimal(prediction)
            if ref == 0:
                return pred == ref
            # Decimal(float) keeps the binary value of k/100, exactly as the official float comparison does.
            return abs(ref - pred) / abs(ref) <= Decimal(percent / 100)
    except ArithmeticError:  # not a number, NaN, infinity
        return False


def tablebench_em(prediction: str, reference: str) -> float:
    """Official EM credit (0 to 1) of one answer, after normalizing both texts."""
    return _credit(squad_normalize(prediction), squad_normalize(reference), _same_item)


def tablebench_em_within(prediction: str, reference: str, percent: float) -> float:
    """Official EM_with_error credit (0 to 1): numbers within ``percent`` relative error."""
    return _credit(squad_normalize(prediction), squad_normalize(reference), lambda p, r: _close_item(p, r, percent))


@cache
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer  # imported here: it pulls in nltk, which is slow to load

    return rouge_scorer.RougeScorer(["rougeL"])


def _rouge_l_score(prediction: str, reference: str) -> Any:
    return _rouge_scorer().score(reference, prediction)["rougeL"]


def tablebench_rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (0 to 1) of one answer, after normalizing both texts."""
    return _rouge_l_score(squad_normalize(prediction), squad_normalize(reference)).fmeasure


def tablebench_subtype_metric(qsubtype: str) -> Metric:
    """The metric a subtype contributes to the TableBench mix; an unknown one counts as ROUGE-L, as officially."""
    return TABLEBENCH_SUBTYPE_METRICS.get(qsubtype, "ROUGE-L")


def tablebench_item_score(prediction: str, reference: str, qsubtype: str) -> float:
    """Score (0 to 1) of one parsed answer with the metric its subtype uses in the mix.

    ROUGE-L is the plain per-answer F-measure here (no bootstrap over a single answer).
    """
    metric = tablebench_subtype_metric(qsubtype)
    if metric == "EM":
        return tablebench_em(prediction, reference)
    if metric == "EM_with_error_10":
        return tablebench_em_within(prediction, reference, 10)
    return tablebench_rouge_l(prediction, reference)


# ---------------------------------------------------------------- groups of rows


def _percent(credits: Sequence[float]) -> float:
    return round(sum(credits) / len(credits) * 100, DIGITS) if credits else 0.0


def _share(flags: Iterable[object], total: int) -> float:
    return round(list(flags).count(True) / total * 100, DIGITS) if total else 0.0


def _bootstrap_rouge_l(pairs: Sequence[tuple[str, str]]) -> float:
    """The official aggregate: the median of rouge-score's bootstrap of the mean F-measure, as a percent."""
    if not pairs:
        return 0.0
    from rouge_score.scoring import BootstrapAggregator

    aggregator = BootstrapAggregator()
    for prediction, reference in pairs:
        aggregator.add_scores({"rougeL": _rouge_l_score(prediction, reference)})
    return round(float(aggregator.aggregate()["rougeL"].mid.fmeasure) * 100, DIGITS)


@contextmanager
def _seeded_numpy(seed: int | None) -> Iterator[None]:
    """rouge-score draws from numpy's global generator; seed it for the block and put its state back."""
    if seed is None:
        yield
        return
    import numpy as np

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _pairs(rows: Sequence[Mapping]) -> list[tuple[str, str]]:
    """(normalized prediction, normalized reference) of each text row."""
    return [(squad_normalize(r["parsed_result"]["parsed_prediction"]), squad_normalize(r["answer"])) for r in rows]


def _em(rows: Sequence[Mapping]) -> float:
    return _percent([_credit(p, r, _same_item) for p, r in _pairs(rows)])


def _em_within(rows: Sequence[Mapping], percent: float) -> float:
    return _percent([_credit(p, r, lambda a, b: _close_item(a, b, percent)) for p, r in _pairs(rows)])


def _flags(rows: Sequence[Mapping], key: str) -> list[object]:
    return [row["parsed_result"].get(key) for row in rows]


def _text_scores(rows: Sequence[Mapping], *, is_pot: bool, mix_metric: float | None = None) -> TableBenchGroup:
    errors = {f"em_with_error_{k}": _em_within(rows, k) for k in ERROR_PERCENTS}
    return TableBenchGroup(
        total=len(rows),
        em=_em(rows),
        **errors,
        rouge_l=_bootstrap_rouge_l(_pairs(rows)),
        mix_metric=mix_metric,
        ecr_at_1=_share(_flags(rows, "ecr_1"), len(rows)) if is_pot else None,
        parse_at_1=_share(_flags(rows, "Parse@1"), len(rows)),
    )


def _chart_scores(rows: Sequence[Mapping]) -> TableBenchGroup:
    return TableBenchGroup(
        total=len(rows),
        ecr_at_1=_share(_flags(rows, "ecr_1"), len(rows)),
        pass_at_1=_share(_flags(rows, "parsed_prediction"), len(rows)),
        parse_at_1=_share(_flags(rows, "Parse@1"), len(rows)),
    )


def _weighted(parts: Sequence[tuple[float, int]]) -> float:
    count = sum(n for _, n in parts)
    return round(sum(value * n for value, n in parts) / count, DIGITS) if count else 0.0


def _analysis_parts(rows: Sequence[Mapping]) -> dict[Metric, list[Mapping]]:
    """DataAnalysis rows by the metric of their subtype."""
    parts: dict[Metric, list[Mapping]] = {"EM": [], "EM_with_error_10": [], "ROUGE-L": []}
    for row in rows:
        parts[tablebench_subtype_metric(row["qsubtype"])].append(row)
    return parts


def _check_rows(rows: Sequence[Mapping]) -> None:
    for row in rows:
        rid = row.get("id", "?")
        if row.get("qtype") not in QTYPES:
            raise ValueError(f"TableBench row {rid} has qtype {row.get('qtype')!r}; expected one of {QTYPES}")
        if not isinstance(row.get("qsubtype"), str) or not isinstance(row.get("parsed_result"), Mapping):
            raise ValueError(f"TableBench row {rid} needs a 'qsubtype' and a 'parsed_result'; parse it first")
        if row["qtype"] != "Visualization" and not (
            isinstance(row.get("answer"), str) and isinstance(row["parsed_result"].get("parsed_prediction"), str)
        ):
            raise ValueError(f"TableBench row {rid} needs a text 'answer' and a text 'parsed_prediction'")


def score_tablebench(
    rows: Iterable[Mapping],
    *,
    official_overall_bug: bool = False,
    bootstrap_seed: int | None = None,
) -> TableBenchReport:
    """Score rows shaped like the official ``parsed_results`` files (one model, one prompting style).

    Text rows need ``answer`` and ``parsed_result.parsed_prediction``; Visualization rows are scored
    from their ``parsed_result`` flags ``ecr_1`` and ``parsed_prediction`` (chart checking runs code,
    which this judge does not). ``official_overall_bug=True`` puts the official overall mix (Pass@1
    added as a 0-1 fraction) in ``overall.mix_metric``; the corrected value is always reported too.
    ``bootstrap_seed`` fixes the ROUGE-L bootstrap; ``None`` leaves it unseeded like the official run.
    """
    rows = list(rows)
    _check_rows(rows)
    is_pot = bool(rows) and all(row.get("instruction_type") == "PoT" for row in rows)
    by_subtype: dict[str, list[Mapping]] = {}
    by_type: dict[str, list[Mapping]] = {qtype: [] for qtype in QTYPES}
    for row in rows:
        by_subtype.setdefault(f"{row['qtype']}_{row['qsubtype']}", []).append(row)
        by_type[row["qtype"]].append(row)
    charts = by_type["Visualization"]
    analysis = _analysis_parts(by_type["DataAnalysis"])

    with _seeded_numpy(bootstrap_seed):
        subtypes = {
            key: _chart_scores(group) if key.startswith("Visualization_") else _text_scores(group, is_pot=is_pot)
            for key, group in by_subtype.items()
        }
        types: dict[str, TableBenchGroup] = {}
        for qtype in ("FactChecking", "NumericalReasoning"):
            if by_type[qtype]:
                types[qtype] = _text_scores(by_type[qtype], is_pot=is_pot)
        em_part = (_em(analysis["EM"]), len(analysis["EM"]))
        error_part = (_em_within(analysis["EM_with_error_10"], 10), len(analysis["EM_with_error_10"]))
        rouge_part = (_bootstrap_rouge_l(_pairs(analysis["ROUGE-L"])), len(analysis["ROUGE-L"]))
        if by_type["DataAnalysis"]:
            mix = _weighted([em_part, error_part, rouge_part])
            types["DataAnalysis"] = _text_scores(by_type["DataAnalysis"], is_pot=is_pot, mix_metric=mix)
        if charts:
            types["Visualization"] = _chart_scores(charts)
        exact_rows = [*by_type["FactChecking"], *by_type["NumericalReasoning"], *analysis["EM"]]
        overall_em = (_em(exact_rows), len(exact_rows))

    fraction = _flags(charts, "parsed_prediction").count(True) / len(charts) if charts else 0.0
    official = _weighted([overall_em, error_part, rouge_part, (fraction, len(charts))])
    corrected = _weighted([overall_em, error_part, rouge_part, (round(fraction * 100, DIGITS), len(charts))])
    overall = TableBenchOverall(
        mix_metric=official if official_overall_bug else corrected,
        mix_metric_corrected=corrected,
        parse_at_1=_share(_flags(rows, "Parse@1"), len(rows)),
        ecr_at_1=_share(_flags(rows, "ecr_1"), len(rows)) if is_pot else None,
    )
    return TableBenchReport(
        subtypes=subtypes,
        types=types,
        overall=overall,
        official_overall_bug=official_overall_bug,
        n_rows=len(rows),
    )


def parse_tablebench_row(row: Mapping) -> dict:
    """A copy of an inference row with the official ``parsed_result`` of its ``prediction``.

    A Visualization row must already carry ``parsed_result`` (its chart is checked by running code),
    and PoT rows cannot be parsed here at all (their answer is what their code prints).
    """
    if row.get("instruction_type") == "PoT":
        raise ValueError(
            f"TableBench row {row.get('id', '?')} is a PoT answer; run its code with the official script "
            "and score the parsed rows with score_tablebench"
        )
    if row.get("qtype") == "Visualization":
        if not isinstance(row.get("parsed_result"), Mapping):
            raise ValueError(
                f"TableBench chart row {row.get('id', '?')} has no 'parsed_result'; "
                "check its chart with the official script first, or leave Visualization rows out"
            )
        return dict(row)
    parsed = parse_final_answer(row.get("prediction"))
    return {**row, "parsed_result": {"parsed_prediction": parsed, "Parse@1": parsed != ""}}


def score_tablebench_predictions(
    rows: Iterable[Mapping],
    *,
    official_overall_bug: bool = False,
    bootstrap_seed: int | None = None,
) -> TableBenchReport:
    """Parse each row's raw ``prediction`` (DP/TCoT/SCoT style), then score as :func:`score_tablebench`."""
    return score_tablebench(
        [parse_tablebench_row(row) for row in rows],
        official_overall_bug=official_overall_bug,
        bootstrap_seed=bootstrap_seed,
    )
