"""The DABench scorer against the official closed-form rules (shared/benchmarks/dabench/SOURCE.md)."""

from __future__ import annotations

import json

import pytest

from datalyst.errors import DataFileError
from datalyst.judge import (
    DABenchReport,
    QuestionVerdict,
    dabench_dir,
    is_correct,
    load_concepts,
    load_labels,
    score_responses,
)
from datalyst.tasks import extract_answers

# ---------------------------------------------------------------- extraction


def test_extract_simple_pairs():
    assert extract_answers("The mean is @mean_fare[34.65] and @count[7].") == {"mean_fare": "34.65", "count": "7"}


def test_extract_stops_at_first_closing_bracket():
    assert extract_answers("@items[a, b] tail]") == {"items": "a, b"}
    assert extract_answers("@nested[[1, 2], [3]]") == {"nested": "[1, 2"}


def test_extract_outlier_list_of_empty_list_gives_open_bracket():
    assert extract_answers("@outlier_list[[]]") == {"outlier_list": "["}


def test_extract_does_not_cross_newlines():
    assert extract_answers("@value[12\n3]") == {}
    assert extract_answers("@value[12\n@other[3]") == {"other": "3"}


def test_extract_last_occurrence_wins():
    assert extract_answers("@x[1] then @y[2] and finally @x[3]") == {"x": "3", "y": "2"}


def test_extract_names_are_case_sensitive():
    found = extract_answers("@Mean[1] @mean[2]")
    assert found == {"Mean": "1", "mean": "2"}
    assert is_correct(found.get("MEAN"), "1") is False


def test_extract_empty_value_and_non_word_names():
    assert extract_answers("@empty[]") == {"empty": ""}
    assert extract_answers("@two words[1] @hy-phen[2] @ok_1[3]") == {"ok_1": "3"}
    assert extract_answers("no answers here") == {}


# ---------------------------------------------------------------- one sub-answer


@pytest.mark.parametrize(
    ("extracted", "expected", "right"),
    [
        ("0.1234567", "0.1234568", True),  # 1e-7 apart
        ("0.12345", "0.12346", False),  # 1e-5 apart
        ("1.0", "1", True),
        ("1", "1.0", True),
        ("abc", "abc", True),
        ("abc", "ABC", False),
        ("1e-3", "0.001", True),
        (" 2 ", "2", True),  # float() strips whitespace
        ("1_000", "1000", True),  # float() accepts underscores
        ("", "", True),
        ("", "0", False),
        ("x", "1", False),  # parse failure is wrong
        ("nan", "nan", True),  # exact text match
        ("NaN", "nan", False),  # nan never within tolerance
        ("inf", "inf", True),
        ("Infinity", "inf", False),  # inf - inf is nan
        ("1.0000009", "1", True),
        ("1.0000011", "1", False),
        (None, "1", False),  # missing name
    ],
)
def test_sub_answer_rule(extracted, expected, right):
    assert is_correct(extracted, expected) is right


# ---------------------------------------------------------------- synthetic metrics

LABELS = {
    1: {"a": "1"},
    2: {"b": "2.5", "c": "yes"},
    3: {"d": "x", "e": "0.333", "f": "10"},
}
CONCEPTS = {1: ["A"], 2: ["A", "B"], 3: ["B"]}
RESPONSES = [
    {"id": 1, "response": "@a[1.0]"},  # 1/1
    {"id": 2, "response": "@b[2.5000001] @c[no]"},  # 1/2
    {"id": 3, "response": "@d[x]\n@e[0.333]\n@f[11]"},  # 2/3
]


def test_hand_computed_metrics():
    report = score_responses(RESPONSES, LABELS, CONCEPTS)
    assert isinstance(report, DABenchReport)
    assert report.view == "official"
    assert report.accuracy_by_question == 0.3333  # 1 of 3
    assert report.accuracy_by_sub_question == 0.6667  # 4 of 6
    assert report.proportional_accuracy == 0.7222  # (1 + 1/2 + 2/3) / 3
    assert (report.n_scored, report.n_skipped, report.n_missing) == (3, 0, 0)
    assert report.per_concept == {"A": 0.5, "B": 0.0}
    assert report.by_concept_count == {1: 0.5, 2: 0.0}
    assert [(v.id, v.n_correct, v.n_total) for v in report.verdicts] == [(1, 1, 1), (2, 1, 2), (3, 2, 3)]
    assert report.verdicts[1].correctness == {"b": True, "c": False}
    assert [v.all_correct for v in report.verdicts] == [True, False, False]
    assert all(isinstance(v, QuestionVerdict) and v.answered for v in report.verdicts)


def test_missing_response_is_skipped_in_the_official_view():
    report = score_responses(RESPONSES[:2], LABELS, CONCEPTS)
    assert report.view == "official"
    assert (report.n_scored, report.n_skipped, report.n_missing) == (2, 1, 1)
    assert report.accuracy_by_question == 0.5
    assert report.accuracy_by_sub_question == 0.6667  # 2 of 3
    assert report.proportional_accuracy == 0.75  # (1 + 1/2) / 2
    assert report.per_concept == {"A": 0.5, "B": 0.0}
    assert [v.id for v in report.verdicts] == [1, 2]


def test_missing_response_counts_as_wrong_in_the_strict_view():
    report = score_responses(RESPONSES[:2], LABELS, CONCEPTS, strict=True)
    assert report.view == "strict"
    assert (report.n_scored, report.n_skipped, report.n_missing) == (3, 0, 1)
    assert report.accuracy_by_question == 0.3333
    assert report.accuracy_by_sub_question == 0.3333  # 2 of 6
    assert report.proportional_accuracy == 0.5  # (1 + 1/2 + 0) / 3
    missing = report.verdicts[2]
    assert (missing.id, missing.answered, missing.n_correct) == (3, False, 0)
    assert missing.correctness == {"d": False, "e": False, "f": False}


def test_first_non_empty_response_per_id_is_used():
    responses = [
        {"id": 1, "response": ""},
        {"id": 1, "response": None},
        {"id": 1},
        {"id": 1, "response": "@a[2]"},  # first usable one: wrong
        {"id": 1, "response": "@a[1]"},  # ignored
        {"id": 99, "response": "@a[1]"},  # no such label
        {"response": "@a[1]"},  # no id
    ]
    report = score_responses(responses, {1: {"a": "1"}})
    assert report.n_scored == 1
    assert report.accuracy_by_question == 0.0
    assert report.verdicts[0].correctness == {"a": False}


def test_nothing_answered_gives_zero_rates():
    report = score_responses([], LABELS, CONCEPTS)
    assert (report.n_scored, report.n_skipped, report.n_missing) == (0, 3, 3)
    assert report.accuracy_by_question == report.accuracy_by_sub_question == report.proportional_accuracy == 0.0
    assert report.per_concept == {} and report.by_concept_count == {} and report.verdicts == []


def test_rates_are_rounded_to_four_decimals():
    labels = {i: {"v": "1"} for i in range(7)}
    responses = [{"id": 0, "response": "@v[1]"}] + [{"id": i, "response": "@v[0]"} for i in range(1, 7)]
    report = score_responses(responses, labels)
    assert report.accuracy_by_question == 0.1429  # 1/7 = 0.142857...
    assert report.accuracy_by_sub_question == 0.1429
    assert report.proportional_accuracy == 0.1429


def test_concepts_are_optional_and_repeated_tags_count_once():
    report = score_responses(RESPONSES, LABELS, {1: ["A", "A"]})
    assert report.per_concept == {"A": 1.0}
    assert report.by_concept_count == {2: 1.0}
    assert score_responses(RESPONSES, LABELS).per_concept == {}


def test_label_without_sub_answers_is_rejected():
    with pytest.raises(ValueError, match="label 5"):
        score_responses([], {5: {}})


# ---------------------------------------------------------------- loading files


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_load_labels_later_repeated_name_overwrites(tmp_path):
    path = _write_jsonl(
        tmp_path / "labels.jsonl",
        [
            {"id": 7, "common_answers": [["r", "0.38"], ["s", "yes"], ["r", "0.56"]]},
            {"id": 8, "common_answers": [["t", "1"]]},
        ],
    )
    labels = load_labels(path)
    assert labels == {7: {"r": "0.56", "s": "yes"}, 8: {"t": "1"}}
    report = score_responses([{"id": 7, "response": "@r[0.38] @s[yes]"}], labels)
    assert report.verdicts[0].correctness == {"r": False, "s": True}
    report = score_responses([{"id": 7, "response": "@r[0.38] @s[yes] @r[0.56]"}], labels)
    assert report.accuracy_by_question == 1.0


def test_load_concepts(tmp_path):
    path = _write_jsonl(tmp_path / "q.jsonl", [{"id": 1, "concepts": ["A", "B"]}, {"id": 2}])
    (tmp_path / "q.jsonl").write_text(path.read_text() + "\n   \n")  # blank lines are ignored
    assert load_concepts(path) == {1: ["A", "B"], 2: []}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json}\n", "line 1 is not JSON"),
        ("[1, 2]\n", "line 1 is not an object"),
        ('{"common_answers": []}\n', "line 1 is not an object"),
        ('{"id": 3, "common_answers": []}\n', "label 3"),
        ('{"id": 3}\n', "label 3"),
    ],
)
def test_bad_label_files_raise(tmp_path, content, message):
    path = tmp_path / "labels.jsonl"
    path.write_text(content)
    with pytest.raises(DataFileError, match=message):
        load_labels(path)


def test_missing_file_raises(tmp_path):
    with pytest.raises(DataFileError, match="cannot read"):
        load_labels(tmp_path / "absent.jsonl")


def test_dabench_dir_follows_the_benchmarks_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("DATALYST_BENCHMARKS", str(tmp_path))
    assert dabench_dir() == tmp_path / "dabench"


# ---------------------------------------------------------------- the official labels

OFFICIAL = dabench_dir()
needs_official = pytest.mark.skipif(
    not (OFFICIAL / "labels.jsonl").is_file() or not (OFFICIAL / "questions.jsonl").is_file(),
    reason=f"DABench data not found in {OFFICIAL}",
)


def _raw_labels() -> list[dict]:
    path = OFFICIAL / "labels.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


RAW_LABELS = _raw_labels()
# A label cannot be echoed back through the official pattern when its name is not `\w+`
# or its value holds `]` or a newline. No official label does; the set stays checked below.
UNREPRODUCIBLE: set[int] = set()


def _echo(pairs) -> str:
    """A response quoting every label pair in order, the way a perfect model would."""
    return "Answers:\n" + "\n".join(f"@{name}[{value}]" for name, value in pairs)


@needs_official
def test_official_data_shape():
    labels = load_labels(OFFICIAL / "labels.jsonl")
    concepts = load_concepts(OFFICIAL / "questions.jsonl")
    assert len(labels) == len(RAW_LABELS) == 257
    assert labels.keys() == concepts.keys()
    assert {qid for qid, answers in labels.items() if "" in answers.values()} == {116, 352, 473}
    assert labels[273]["outlier_list"] == "["
    assert labels[734] == {"correlation_coefficient": "0.56", "correlation_significance": "non-significant"}
    odd = {
        record["id"]
        for record in RAW_LABELS
        for name, value in record["common_answers"]
        if not name.isidentifier() or "]" in value or "\n" in value
    }
    assert odd == UNREPRODUCIBLE


@needs_official
@pytest.mark.parametrize("record", RAW_LABELS, ids=[str(r["id"]) for r in RAW_LABELS])
def test_each_official_label_echoed_back_scores_full_marks(record):
    labels = load_labels(OFFICIAL / "labels.jsonl")
    qid = record["id"]
    report = score_responses([{"id": qid, "response": _echo(record["common_answers"])}], {qid: labels[qid]})
    assert report.n_scored == 1
    assert (report.accuracy_by_question, report.accuracy_by_sub_question, report.proportional_accuracy) == (
        1.0,
        1.0,
        1.0,
    )


@needs_official
def test_all_official_labels_echoed_back_together():
    labels = load_labels(OFFICIAL / "labels.jsonl")
    concepts = load_concepts(OFFICIAL / "questions.jsonl")
    responses = [{"id": r["id"], "response": _echo(r["common_answers"])} for r in RAW_LABELS]
    for report in (
        score_responses(responses, labels, concepts),
        score_responses(responses, labels, concepts, strict=True),
    ):
        assert report.n_scored == 257 and report.n_missing == 0
        assert report.accuracy_by_question == report.accuracy_by_sub_question == report.proportional_accuracy == 1.0
        assert set(report.per_concept.values()) == {1.0}
        assert report.by_concept_count == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}


@needs_official
def test_all_official_responses_empty():
    labels = load_labels(OFFICIAL / "labels.jsonl")
    concepts = load_concepts(OFFICIAL / "questions.jsonl")
    responses = [{"id": r["id"], "response": ""} for r in RAW_LABELS]
    report = score_responses(responses, labels, concepts)
    assert (report.n_scored, report.n_skipped, report.n_missing) == (0, 257, 257)
    assert report.accuracy_by_question == 0.0
    strict = score_responses(responses, labels, concepts, strict=True)
    assert strict.n_scored == 257 and strict.accuracy_by_sub_question == 0.0
