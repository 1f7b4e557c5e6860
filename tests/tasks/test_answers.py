"""What keeps an answer from fitting its task's ``@name[value]`` format (``format_problems``)."""

from __future__ import annotations

from datalyst.tasks import format_problems

TWO = "@correlation_coefficient[r_value]\nwhere r_value is a number between -1 and 1, rounded to two decimal places."


def test_an_answer_that_fits_has_no_problems():
    assert format_problems(TWO, "@correlation_coefficient[0.21]") == []
    assert format_problems(TWO, "The coefficient is @correlation_coefficient[-0.2].") == []


def test_a_part_the_format_asks_for_and_the_answer_leaves_out():
    assert format_problems(TWO, "@0.21") == ["it does not give @correlation_coefficient[...]"]
    assert format_problems(TWO, "0.21") == ["it does not give @correlation_coefficient[...]"]


def test_more_decimal_places_than_the_format_allows():
    assert format_problems(TWO, "@correlation_coefficient[0.20510382556972828]") == [
        "@correlation_coefficient[0.20510382556972828] has more decimal places than the format asks for"
    ]


def test_the_most_decimal_places_named_anywhere_in_the_format_is_allowed():
    both = "@mean[m] @p_value[p] where m is rounded to 2 decimal places and p to four decimal places."
    assert format_problems(both, "@mean[1.234] @p_value[0.0012]") == []
    assert format_problems(both, "@mean[1.23] @p_value[0.00123]") == [
        "@p_value[0.00123] has more decimal places than the format asks for"
    ]


def test_scientific_notation_where_the_format_counts_decimal_places():
    four = "@p_value[p] where p is rounded to four decimal places."
    assert format_problems(four, "@p_value[1.5995e-31]") == [
        "@p_value[1.5995e-31] is in scientific notation; write it as a decimal number"
    ]


def test_only_the_parts_asked_for_are_checked_and_only_numbers_count_decimals():
    assert format_problems(TWO, "@correlation_coefficient[0.21] @extra[0.123456]") == []
    words = "@outliers[names] as a comma-separated list; values rounded to two decimal places"
    assert format_problems(words, "@outliers[Kuwait, Saudi Arabia]") == []


def test_a_format_with_no_named_parts_accepts_any_answer():
    assert format_problems("A number rounded to two decimal places.", "0.123456") == []
    assert format_problems("", "anything") == []


def test_a_format_that_names_no_decimal_places_leaves_numbers_alone():
    assert format_problems("@count[n] the number of rows", "@count[12.5000001]") == []
