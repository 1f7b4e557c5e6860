"""``synth queries`` with recorded completions: chains of harder questions, standardised, checked, linked."""

from __future__ import annotations

import pandas as pd
import pytest

from datalyst.llm import ReplayModel
from datalyst.synth import FileOptions, QueryOptions, clean_format, collect_files, make_query_tasks
from datalyst.tasks import read_tasks


@pytest.fixture
def files(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pd.DataFrame({"team": [f"t{i}" for i in range(30)], "league": ["east", "west"] * 15, "wins": range(30)}).to_csv(
        folder / "teams.csv", index=False
    )
    out = tmp_path / "files.jsonl"
    collect_files([folder], out, options=FileOptions(convert_share=0), progress=False)
    return out


def standard(question: str, answer: str) -> str:
    return (
        f"Question: {question}\nConstraints: Ignore missing values; round to 2 decimals.\n"
        f"Format: @{answer}[value] where value is the result rounded to 2 decimal places."
    )


def test_a_chain_of_harder_questions_is_standardised_and_linked(files, tmp_path):
    writer = ReplayModel(
        [
            "Question: What is the average wins per league?",
            standard("What is the average number of wins in each league?", "mean_wins"),
            "Sure! Question: Which league has the higher average wins, and by how much?",
            standard("Which league has the higher average wins, and by how much does it lead?", "lead"),
            "Question: In the leading league, how many teams beat the other league's average?",
            standard("In the league with higher average wins, how many teams beat the other league's average?",
                     "teams"),
        ]
    )  # fmt: skip
    out = tmp_path / "queries.jsonl"
    summary = make_query_tasks(files, out, writer, options=QueryOptions(categories_per_table=1), progress=False)
    tasks = read_tasks(out)
    assert summary.tasks == 3 and [t.level for t in tasks] == ["easy", "medium", "hard"]
    assert all(t.answer is None and t.judge == "dabench" and t.source == "synth:queries" for t in tasks)
    assert tasks[1].lineage.parents == [tasks[0].id] and tasks[2].lineage.parents == [tasks[1].id]
    assert tasks[0].format == "@mean_wins[value] where value is the result rounded to 2 decimal places."
    assert "Ignore missing values" in tasks[2].constraints
    harder_prompt = writer.calls[2][0][-1].content
    assert "What is the average number of wins in each league?" in harder_prompt and "teams.csv" in harder_prompt


@pytest.mark.parametrize(
    ("reply", "asked"),
    [
        ("Ranking: Which league has the most wins in total?", "Which league has the most wins in total?"),
        ("**Comparison:** Compare the total wins of the leagues.", "Compare the total wins of the leagues."),
        ("Which league has the most wins in total?", "Which league has the most wins in total?"),
    ],
)
def test_a_question_labelled_otherwise_or_unlabelled_is_taken(files, tmp_path, reply, asked):
    out = tmp_path / "queries.jsonl"
    writer = ReplayModel([reply, standard("What are the total wins of each league?", "total_wins")])
    make_query_tasks(files, out, writer, options=QueryOptions(categories_per_table=1, rounds=1), progress=False)
    assert len(read_tasks(out)) == 1
    assert f"Rewrite this question as a precise task:\n{asked}\n" in writer.calls[1][0][-1].content


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        (["I cannot think of one."], "no_question"),
        (["Question: How many wins?", "Here you go: the wins."], "not_standardised"),
        (["Question: How many wins?", standard("How many wins?", "Wins Total")], "bad_format"),
        (["Question: What is the tallest mountain?", standard("What is the tallest mountain?", "height")], "off_table"),
    ],
)
def test_unusable_replies_are_dropped_with_their_reason(files, tmp_path, replies, reason):
    out = tmp_path / "queries.jsonl"
    options = QueryOptions(categories_per_table=1, rounds=1)
    summary = make_query_tasks(files, out, ReplayModel(replies), options=options, progress=False)
    assert summary.tasks == 0 and summary.rejected_by_check == {reason: 1}


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("@mean_age[40.0974]", "@mean_age[value]"),
        ("- @mean_wins[3.34]\n- @teams[10]", "@mean_wins[value]\n@teams[value]"),
        ("1. @share[12.5%] where value is a percentage", "@share[value] where value is a percentage"),
        ("@mean_wins[value] where value is rounded", "@mean_wins[value] where value is rounded"),
        ("@league[name of the league]", "@league[name of the league]"),
        ("@lead[yes] or @lead[no]", "@lead[value] or @lead[value]"),
    ],
)
def test_formats_lose_bullets_and_the_values_a_model_guessed(written, kept):
    assert clean_format(written) == kept
