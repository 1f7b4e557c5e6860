"""The TableBench scorer against the official parsing and metrics (shared/benchmarks/tablebench-example/SOURCE.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from datalyst.jsonl import read_records
from datalyst.judge import (
    TABLEBENCH_SUBTYPE_METRICS,
    TableBenchReport,
    parse_final_answer,
    parse_tablebench_row,
    score_tablebench,
    score_tablebench_predictions,
    squad_normalize,
    tablebench_em,
    tablebench_em_within,
    tablebench_item_score,
    tablebench_rouge_l,
    tablebench_subtype_metric,
)
from datalyst.paths import benchmarks_dir

# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("Reasoning...\nFinal Answer: 12, 13\nmore text", "12, 13"),
        ("Final Answer: first\nFinal Answer: second", "first"),  # the first match wins
        ("Final Answer:  padded  ", " padded  "),  # nothing is stripped
        ("Final Answer: x\r\nrest", "x\r"),  # '.' stops only at '\n'
        ("Final Answer: \nFinal Answer: y", "y"),  # an empty first line does not match
        ("final answer: x", ""),  # case-sensitive
        ("Final Answer:x", ""),  # the space is required
        ("no answer here", ""),
        (None, ""),
    ],
)
def test_parse_final_answer(text, parsed):
    assert parse_final_answer(text) == parsed


# ---------------------------------------------------------------- normalization and EM


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Answer, is: A 10.6%!", "answer is 106"),
        ("  Theme   and\tan\nApple ", "theme and apple"),  # articles only as whole words
        ("-3.24", "324"),
        ("1994\u201395", "1994\u201395"),  # the en dash is not ASCII punctuation
        ("nicosia (cyp), 3 - 0", "nicosia cyp 3 0"),
    ],
)
def test_squad_normalize(text, normalized):
    assert squad_normalize(text) == normalized


@pytest.mark.parametrize(
    ("prediction", "reference", "credit"),
    [
        ("10.6", "10.6", 1.0),
        ("10.60", "10.6", 0.0),  # '106' against '1060' once the point is gone
        ("69.75", "69.75%", 1.0),  # the percent sign is punctuation too
        ("-3.24", "3.24", 1.0),  # and so is the minus sign
        ("007", "7", 1.0),  # digits-only references compare as numbers
        ("1e3", "1000", 1.0),
        ("australia", "Australia", 1.0),
        ("No correlation, -0.15.", "No correlation, -0.15", 1.0),
        ("No clear trend, No clear trend", "No clear trend", 0.0),
        ("9.33, 1.11", "9.33, 1.11", 1.0),
        ("9.33, 1.18", "9.33, 1.11", 0.0),  # the commas are gone: one item, all or nothing
        ("abc", "12", 0.0),
        ("", "", 1.0),
        ("1" * 29, "1" * 29, 0.0),  # too many digits for the 28-digit decimal context
    ],
)
def test_em_item_semantics(prediction, reference, credit):
    assert tablebench_em(prediction, reference) == credit


@pytest.mark.parametrize(
    ("prediction", "reference", "percent", "credit"),
    [
        ("106", "100", 5, 0.0),
        ("106", "100", 10, 1.0),
        ("110", "100", 10, 1.0),  # exactly 10% is inside
        ("98", "100", 2, 1.0),  # exactly 2% is inside
        ("97", "100", 2, 0.0),
        ("0", "0", 2, 1.0),
        ("1", "0", 10, 0.0),  # a zero reference needs the exact value
        ("52.08", "51", 5, 0.0),  # '5208' against '51'
        ("9.33, 1.11", "9.34, 1.18", 10, 0.0),  # not a number once the comma is gone: text must be equal
        ("No Correlation", "no correlation", 10, 1.0),
        ("nan", "5", 10, 0.0),
    ],
)
def test_em_with_error(prediction, reference, percent, credit):
    assert tablebench_em_within(prediction, reference, percent) == credit


def test_rouge_l_is_the_f_measure_on_normalized_text():
    assert tablebench_rouge_l("Red, green; blue.", "red blue") == pytest.approx(0.8)  # P 2/3, R 1
    assert tablebench_rouge_l("The same words", "same WORDS") == 1.0
    assert tablebench_rouge_l("nothing shared", "at all") == 0.0
    assert tablebench_rouge_l("", "something") == 0.0


def test_item_score_uses_the_metric_of_the_subtype():
    assert len(TABLEBENCH_SUBTYPE_METRICS) == 17
    assert tablebench_item_score("9.8", "9.8", "Comparison") == 1.0
    assert tablebench_item_score("runs scored", "innings", "ImpactAnalysis") == 0.0
    assert tablebench_item_score("1300", "1213", "TrendForecasting") == 1.0  # 7.2% off
    assert tablebench_item_score("1355", "1213", "TrendForecasting") == 0.0  # 11.7% off
    prediction, reference = "Strong positive correlation, 0.90.", "Strong positive correlation, 0.96"
    assert tablebench_item_score(prediction, reference, "CorrelationAnalysis") == 0.0  # text: exact only
    assert tablebench_item_score("red green blue", "red blue", "CausalAnalysis") == pytest.approx(0.8)
    assert tablebench_subtype_metric("StatisticalAnalysis") == "EM_with_error_10"


def test_an_unknown_subtype_scores_with_rouge_l_as_in_the_aggregate():
    assert tablebench_subtype_metric("Unknown") == "ROUGE-L"
    assert tablebench_item_score("red green blue", "red blue", "Unknown") == pytest.approx(0.8)
    assert tablebench_item_score("1300", "1213", "SomethingNew") == 0.0  # no 10% slack: ROUGE-L on the text


# ---------------------------------------------------------------- a hand-computed report


def _row(rid, qtype, qsubtype, answer, parsed, **flags):
    parse_ok = parsed not in ("", None)
    return {
        "id": rid,
        "qtype": qtype,
        "qsubtype": qsubtype,
        "answer": answer,
        "parsed_result": {"parsed_prediction": parsed, "Parse@1": parse_ok, **flags},
    }


SMALL = [
    _row("f1", "FactChecking", "MatchBased", "Jerel Myers", "jerel myers"),
    _row("f2", "FactChecking", "MatchBased", "68", ""),
    _row("n1", "NumericalReasoning", "Counting", "10", "10"),
    _row("d1", "DataAnalysis", "ImpactAnalysis", "Positive impact", "positive impact"),
    _row("d2", "DataAnalysis", "TrendForecasting", "1213", "1300"),
    _row("d3", "DataAnalysis", "CausalAnalysis", "red blue", "red green blue"),
    _row("v1", "Visualization", "ChartGeneration", "y_references = [[1]]", True, ecr_1=True),
    _row("v2", "Visualization", "ChartGeneration", "y_references = [[2]]", False, ecr_1=True),
]


def test_hand_computed_report():
    report = score_tablebench(SMALL, official_overall_bug=True, bootstrap_seed=1)
    assert isinstance(report, TableBenchReport) and report.n_rows == 8
    assert list(report.subtypes) == [
        "FactChecking_MatchBased",
        "NumericalReasoning_Counting",
        "DataAnalysis_ImpactAnalysis",
        "DataAnalysis_TrendForecasting",
        "DataAnalysis_CausalAnalysis",
        "Visualization_ChartGeneration",
    ]
    fact = report.types["FactChecking"]
    assert (fact.total, fact.em, fact.em_with_error_10, fact.parse_at_1) == (2, 50.0, 50.0, 50.0)
    trend = report.subtypes["DataAnalysis_TrendForecasting"]
    assert (trend.em, trend.em_with_error_5, trend.em_with_error_10) == (0.0, 0.0, 100.0)  # 7.2% off
    assert report.subtypes["DataAnalysis_CausalAnalysis"].rouge_l == 80.0  # one row: no spread
    analysis = report.types["DataAnalysis"]
    assert analysis.em == 33.33 and analysis.total == 3
    assert analysis.mix_metric == 93.33  # (100 EM + 100 EM_with_error_10 + 80 ROUGE-L) / 3
    charts = report.types["Visualization"]
    assert (charts.ecr_at_1, charts.pass_at_1, charts.parse_at_1, charts.em) == (100.0, 50.0, 100.0, None)
    assert charts.model_dump(by_alias=True, exclude_none=True) == {
        "total": 2,
        "ECR@1": 100.0,
        "Pass@1": 50.0,
        "Parse@1": 100.0,
    }
    # Overall: EM over the 4 FactChecking/NumericalReasoning/ImpactAnalysis rows is 75; with the
    # official bug (75*4 + 100 + 80 + 0.5*2) / 8 = 60.125, which round() takes to 60.12.
    assert report.overall.mix_metric == 60.12
    assert report.overall.mix_metric_corrected == 72.5  # (75*4 + 100 + 80 + 50*2) / 8
    assert report.overall.parse_at_1 == 87.5 and report.overall.ecr_at_1 is None
    fixed = score_tablebench(SMALL, bootstrap_seed=1)
    assert fixed.overall.mix_metric == fixed.overall.mix_metric_corrected == 72.5
    assert not fixed.official_overall_bug


def test_missing_types_are_left_out_and_empty_input_scores_zero():
    report = score_tablebench(SMALL[:3])
    assert list(report.types) == ["FactChecking", "NumericalReasoning"]
    assert report.overall.mix_metric == 66.67  # (50*2 + 100) / 3
    empty = score_tablebench([])
    assert empty.types == {} and empty.overall.mix_metric == 0.0 and empty.overall.parse_at_1 == 0.0


def test_pot_rows_report_execution():
    rows = [{**row, "instruction_type": "PoT"} for row in SMALL[:3]]
    rows[0]["parsed_result"] = {**rows[0]["parsed_result"], "ecr_1": True}
    report = score_tablebench(rows)
    assert report.types["FactChecking"].ecr_at_1 == 50.0 and report.overall.ecr_at_1 == 33.33
    with pytest.raises(ValueError, match="PoT"):
        parse_tablebench_row({**rows[0], "prediction": "```python\nprint(1)\n```"})


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": 1, "qtype": "Other", "qsubtype": "x", "parsed_result": {}}, "qtype 'Other'"),
        ({"id": 2, "qtype": "FactChecking", "qsubtype": "MatchBased", "answer": "1"}, "parse it first"),
        (_row(3, "FactChecking", "MatchBased", "1", None), "text 'parsed_prediction'"),
        (_row(4, "FactChecking", "MatchBased", 1, "1"), "text 'answer'"),
    ],
)
def test_bad_rows_are_rejected(row, message):
    with pytest.raises(ValueError, match=message):
        score_tablebench([row])


def test_raw_predictions_are_parsed_first():
    counting = {"qtype": "NumericalReasoning", "qsubtype": "Counting"}
    raw = [
        {"id": "a", **counting, "answer": "5", "prediction": "Final Answer: 5"},
        {"id": "b", **counting, "answer": "6", "prediction": "six"},
    ]
    assert parse_tablebench_row(raw[1])["parsed_result"] == {"parsed_prediction": "", "Parse@1": False}
    report = score_tablebench_predictions(raw)
    assert (report.types["NumericalReasoning"].em, report.overall.parse_at_1) == (50.0, 50.0)
    chart = {"id": "c", "qtype": "Visualization", "qsubtype": "ChartGeneration", "answer": "", "prediction": ""}
    with pytest.raises(ValueError, match="chart row c"):
        score_tablebench_predictions([*raw, chart])


def test_a_seed_repeats_the_bootstrap_and_restores_numpy():
    rows = [_row(str(i), "DataAnalysis", "CausalAnalysis", "red blue", text) for i, text in enumerate("abcdefg")]
    rows += [_row("h", "DataAnalysis", "CausalAnalysis", "red blue", "red blue")]
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    first = score_tablebench(rows, bootstrap_seed=7)
    assert np.random.random() == expected_next
    assert score_tablebench(rows, bootstrap_seed=7) == first


# ---------------------------------------------------------------- the official 54-row example

EXAMPLE = benchmarks_dir() / "tablebench-example"
RUN = "o3-mini-2025-01-31=TableBench_DP=Example.jsonl"
EXPECTED_KEY = "o3-mini-2025-01-31/DP"
ROUGE_L_TOLERANCE = 2.0
"""Points of ROUGE-L by which our figure may differ from the official one; see test_official_figures."""
EXACT = {"EM", "EM_with_error_2", "EM_with_error_5", "EM_with_error_10", "total", "Parse@1", "ECR@1", "Pass@1"}


@pytest.fixture(scope="module")
def example() -> dict:
    if not (EXAMPLE / "parsed_results" / RUN).is_file():
        pytest.skip(f"TableBench example not found at {EXAMPLE}; set DATALYST_BENCHMARKS")
    results = EXAMPLE / "evaluation_results"
    return {
        "raw": read_records(EXAMPLE / "inference_results" / RUN),
        "parsed": read_records(EXAMPLE / "parsed_results" / RUN),
        "subtype": json.loads((results / "llm_eval_subtype_results.json").read_text())[EXPECTED_KEY],
        "type": json.loads((results / "llm_eval_type_results.json").read_text())[EXPECTED_KEY],
    }


@pytest.fixture(scope="module")
def official_report(example) -> TableBenchReport:
    return score_tablebench(example["parsed"], official_overall_bug=True, bootstrap_seed=0)


def test_our_parser_gives_the_shipped_parsed_predictions(example):
    """Parsing the 54 raw predictions gives the shipped parsed rows, so both scoring entry points agree."""
    assert len(example["raw"]) == len(example["parsed"]) == 54
    for raw, parsed in zip(example["raw"], example["parsed"], strict=True):
        assert raw["id"] == parsed["id"]
        if raw["qtype"] == "Visualization":  # chart flags come from the official checker
            raw = {**raw, "parsed_result": parsed["parsed_result"]}
        assert parse_tablebench_row(raw) == {**raw, "parsed_result": parsed["parsed_result"]}


def _assert_matches(got: dict, expected: dict, rouge_tolerance: float, where: str) -> None:
    for name, value in expected.items():
        if name in EXACT:
            assert got[name] == value, f"{where} {name}"
        else:  # ROUGE-L, or a mix that contains a ROUGE-L part
            assert got[name] == pytest.approx(value, abs=rouge_tolerance), f"{where} {name}"


def test_official_figures(example, official_report):
    """Every EM-based figure, Parse@1, ECR@1 and Pass@1 is reproduced exactly; ROUGE-L within 2 points.

    The official ROUGE-L of a group is the median of a 1000-sample bootstrap of the mean F-measure,
    drawn from numpy's global generator with no seed, so it is one random draw. Simulating that
    bootstrap 20,000 times on these rows: the 3-row subtype figures never move (the median lands on
    the plain mean), the 21-row DataAnalysis figure ranges over 35.52-37.74 (official: 37.06, at most
    1.54 away), and the 9-row ROUGE-L part of the mixes over 26.86-28.17. Hence a tolerance of 2
    points on ROUGE-L, which reaches a mix scaled by the ROUGE-L rows' share: 9/21 of it for the
    DataAnalysis mix and 9/54 for the overall mix (plus 0.01 for rounding).
    """
    report = official_report
    assert list(report.subtypes) == list(example["subtype"])
    for key, expected in example["subtype"].items():
        _assert_matches(report.subtypes[key].model_dump(by_alias=True), expected, ROUGE_L_TOLERANCE, key)
    for qtype in ("FactChecking", "NumericalReasoning", "Visualization"):
        _assert_matches(report.types[qtype].model_dump(by_alias=True), example["type"][qtype], ROUGE_L_TOLERANCE, qtype)
    analysis = report.types["DataAnalysis"].model_dump(by_alias=True)
    expected = dict(example["type"]["DataAnalysis"])
    assert analysis["Mix_Metric"] == pytest.approx(expected.pop("Mix_Metric"), abs=ROUGE_L_TOLERANCE * 9 / 21 + 0.01)
    _assert_matches(analysis, expected, ROUGE_L_TOLERANCE, "DataAnalysis")

    overall = example["type"]["Overall"]
    assert report.overall.parse_at_1 == overall["Parse@1"] == 100.0
    assert report.overall.mix_metric == pytest.approx(58.34, abs=ROUGE_L_TOLERANCE * 9 / 54 + 0.01)
    assert overall["Mix_Metric"] == 58.34


def test_the_corrected_overall_mix(official_report):
    """The fix only rescales the visualization term: 3 of 54 rows, Pass@1 33.33 instead of 0.3333."""
    shift = (33.33 - 1 / 3) * 3 / 54
    overall = official_report.overall
    assert overall.mix_metric_corrected - overall.mix_metric == pytest.approx(shift, abs=0.011)
    assert overall.mix_metric_corrected == pytest.approx(58.34 + shift, abs=ROUGE_L_TOLERANCE * 9 / 54 + 0.02)
