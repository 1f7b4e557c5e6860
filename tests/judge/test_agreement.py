import pytest

from datalyst.judge import answers_agree, majority_answer


@pytest.mark.parametrize(
    ("first", "second", "agree"),
    [
        ("@mean[3.20]", "@mean[3.2]", True),
        ("@mean[100]", "@mean[102.9]", True),  # 2.9% apart
        ("@mean[100]", "@mean[104]", False),  # 4% apart
        ("@mean[3.2] @max[9]", "@max[9] @mean[3.2]", True),
        ("@mean[3.2] @max[9]", "@mean[3.2]", False),  # a missing part
        ("@mean[3.2]", "@average[3.2]", False),  # another name
        ("3.2", "The mean is 3.2", True),
        ("East", "  east. ", True),
        ("East", "West", False),
    ],
)
def test_answers_agree_under_the_three_percent_rule_and_normalised_text(first, second, agree):
    assert answers_agree(first, second) is agree
    assert answers_agree(second, first) is agree


def test_the_majority_counts_agreeing_answers_as_one_vote():
    answers = ["@mean[3.2]", "@mean[5]", "@mean[3.20]", None, "@mean[5.0]", "@mean[3.201]"]
    assert majority_answer(answers) == "@mean[3.2]"


def test_a_tie_goes_to_the_first_answer_and_no_answer_gives_none():
    assert majority_answer(["East", "West", "west", "east"]) == "East"
    assert majority_answer(["", None, "  "]) is None
    assert majority_answer([]) is None
