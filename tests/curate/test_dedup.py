"""Exact and near-duplicate trajectories, on hand-made code trajectories."""

from __future__ import annotations

import pytest
from curate_helpers import trajectory_of

from datalyst.agent import ActionKind, Trajectory, Turn
from datalyst.curate._dedup import (
    EXACT_DUPLICATE,
    NEAR_DUPLICATE,
    Duplicate,
    compared_text,
    deduplicate,
    shingles,
)
from datalyst.errors import ConfigError
from datalyst.tasks import Task

TASK = Task(id="t", question="What is the mean fare?", files=["titanic.csv"])

CELLS = [
    (
        "First I load the table and look at its columns, so that I know which names to use.",
        "import pandas as pd\ndf = pd.read_csv('titanic.csv')\nprint(df.columns.tolist())\nprint(df.head())",
    ),
    (
        "The fare column holds the ticket prices; some values may be missing, so I count them first.",
        "print(df['Fare'].isna().sum())\nprint(df['Fare'].describe())",
    ),
    (
        "Before averaging I check that no fare is negative or absurdly large, which would hint at a unit problem.",
        "print((df['Fare'] < 0).sum(), df['Fare'].max())\nprint(df.sort_values('Fare').tail(5)[['Name', 'Fare']])",
    ),
    (
        "The largest fares belong to first-class passengers sharing one ticket, so they are real and I keep them.",
        "print(df.groupby('Pclass')['Fare'].agg(['mean', 'median', 'count']))",
    ),
    (
        "No fare is missing, so the mean over every passenger is the answer; I round it to two decimals.",
        "mean_fare = round(df['Fare'].mean(), 2)\nprint(mean_fare)",
    ),
]


def _trajectory(
    tid: str, cells: list[tuple[str, str]], *, answer_thought: str = "The mean fare is 34.69."
) -> Trajectory:
    turns = [
        Turn(index=index, raw=code, text=code, thought=thought, kind=ActionKind.CODE, code=code, observation="out")
        for index, (thought, code) in enumerate(cells)
    ]
    turns.append(
        Turn(
            index=len(cells), raw="34.69", text="34.69", thought=answer_thought, kind=ActionKind.ANSWER, answer="34.69"
        )
    )
    return trajectory_of(turns, TASK).model_copy(update={"id": tid})


ONE_TOKEN_CHANGED = [*CELLS[:-1], (CELLS[-1][0], CELLS[-1][1].replace(", 2)", ", 3)"))]
DIFFERENT = [
    (
        "I open the sales workbook and list the regions, because the question compares them by revenue.",
        "import pandas as pd\nsales = pd.read_excel('sales.xlsx')\nprint(sales['region'].unique())",
    ),
    (
        "Revenue is price times quantity; I add that column and total it per region, largest first.",
        "sales['revenue'] = sales['price'] * sales['qty']\nprint(sales.groupby('region')['revenue'].sum().nlargest(3))",
    ),
]


def test_identical_trajectories_keep_the_first():
    dropped = deduplicate([_trajectory("t#0", CELLS), _trajectory("t#1", CELLS)])
    assert dropped == {"t#1": Duplicate(of="t#0", reason=EXACT_DUPLICATE, similarity=1.0)}
    assert dropped["t#1"].verdict.reason == EXACT_DUPLICATE
    assert "t#0" in dropped["t#1"].verdict.detail


def test_the_question_is_compared_too():
    question = "Which passenger class paid the highest median fare?"
    other = _trajectory("u#0", CELLS[:1])
    other = other.model_copy(update={"task": TASK.model_copy(update={"id": "u", "question": question})})
    pair = [_trajectory("t#0", CELLS[:1]), other]
    assert compared_text(other).startswith("which passenger class") and deduplicate(pair, threshold=0.9) == {}
    assert deduplicate(pair, threshold=0.8)["u#0"].reason == NEAR_DUPLICATE  # true Jaccard similarity 0.83


def test_whitespace_and_case_differences_are_exact_duplicates():
    spaced = [(f"  {thought.upper()}\n", code.replace(" = ", "  =  ").replace("\n", "\n\n")) for thought, code in CELLS]
    dropped = deduplicate([_trajectory("t#0", CELLS), _trajectory("t#1", spaced)])
    assert dropped["t#1"].reason == EXACT_DUPLICATE


def test_outputs_and_answers_are_not_compared():
    other = _trajectory("t#1", CELLS)
    for turn in other.turns:
        turn.observation = "something else entirely"
    other.turns[-1].answer = "12.5"
    assert compared_text(other) == compared_text(_trajectory("t#0", CELLS))


def test_one_changed_token_in_a_long_trajectory_is_a_near_duplicate():
    dropped = deduplicate([_trajectory("t#0", CELLS), _trajectory("t#1", ONE_TOKEN_CHANGED)])
    assert dropped["t#1"].reason == NEAR_DUPLICATE
    assert dropped["t#1"].of == "t#0"
    assert 0.8 <= dropped["t#1"].similarity < 1.0
    assert "t#0" in dropped["t#1"].verdict.detail


def test_the_threshold_decides_what_is_near():
    pair = [_trajectory("t#0", CELLS), _trajectory("t#1", CELLS[:3] + DIFFERENT)]  # true Jaccard 0.44
    assert deduplicate(pair) == {}
    assert deduplicate(pair, threshold=0.3)["t#1"].reason == NEAR_DUPLICATE


def test_clearly_different_trajectories_are_kept():
    assert deduplicate([_trajectory("t#0", CELLS), _trajectory("u#0", DIFFERENT)]) == {}


def test_a_trajectory_with_no_code_or_thought_is_never_a_duplicate():
    empty = [_trajectory(f"t#{n}", [], answer_thought="") for n in range(2)]
    assert deduplicate(empty) == {}


def test_the_result_is_the_same_on_every_run():
    changed = [(thought.replace("first", "at once"), code) for thought, code in CELLS]
    runs = [
        deduplicate([_trajectory("t#0", CELLS), _trajectory("t#1", changed), _trajectory("t#2", CELLS)])
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert runs[0]["t#2"].reason == EXACT_DUPLICATE


def test_a_repeated_id_is_refused():
    with pytest.raises(ConfigError, match="t#0 appears twice"):
        deduplicate([_trajectory("t#0", CELLS), _trajectory("t#0", DIFFERENT)])


@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_a_threshold_outside_zero_to_one_is_refused(threshold):
    with pytest.raises(ConfigError, match="outside"):
        deduplicate([], threshold=threshold)


def test_too_few_permutations_for_lsh_are_refused():
    with pytest.raises(ConfigError, match="more permutations"):
        deduplicate([], num_perm=4)


def test_shingles_cover_short_texts_whole():
    assert shingles("df.mean()", 5) == {"df . mean ()"}
    assert shingles("", 5) == set()
    assert len(shingles("a b c d e f", 5)) == 2
