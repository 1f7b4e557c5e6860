"""The 18-category taxonomy: complete, well-formed, and written afresh (no benchmark question reused)."""

from __future__ import annotations

import re

import pytest

from datalyst.errors import ConfigError
from datalyst.synth import CATEGORIES, category
from datalyst.tasks import load_dabench


def test_the_eighteen_categories_each_have_exemplars_and_a_stepwise_workflow():
    assert len(CATEGORIES) == 18
    assert len({c.name for c in CATEGORIES}) == 18
    for item in CATEGORIES:
        assert len(item.description) > 40
        assert 4 <= len(item.exemplars) <= 6, item.name
        assert len(set(item.exemplars)) == len(item.exemplars)
        steps = re.findall(r"^(\d+)\. ", item.workflow, flags=re.MULTILINE)
        assert [int(step) for step in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 3, item.name


def test_lookup_ignores_case_and_names_the_choices_when_wrong():
    assert category("  correlation analysis ").name == "Correlation Analysis"
    with pytest.raises(ConfigError, match="Feature Engineering"):
        category("Astrology")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def test_no_exemplar_shares_eight_words_in_a_row_with_a_dabench_question(dabench_tables):
    grams = {tuple(w[i : i + 8]) for task in load_dabench() for w in [words(task.question)] for i in range(len(w) - 7)}
    for item in CATEGORIES:
        for exemplar in item.exemplars:
            w = words(exemplar)
            assert not any(tuple(w[i : i + 8]) in grams for i in range(len(w) - 7)), exemplar
