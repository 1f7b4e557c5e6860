"""Sequence generators against terms known from the literature (the OEIS entries named beside each)."""

from __future__ import annotations

import itertools
import random

import pytest

from datalyst.synth._sequences import (
    FAMILIES,
    combinatorial,
    composition,
    digits,
    draw_sequences,
    number_theory,
    polynomial,
    recurrence,
)

KNOWN = {
    "combinatorial.catalan": [1, 1, 2, 5, 14, 42, 132, 429],  # A000108
    "combinatorial.central_binomial": [1, 2, 6, 20, 70, 252],  # A000984
    "combinatorial.bell": [1, 1, 2, 5, 15, 52, 203, 877],  # A000110
    "combinatorial.partitions": [1, 1, 2, 3, 5, 7, 11, 15, 22, 30, 42],  # A000041
    "combinatorial.distinct_partitions": [1, 1, 1, 2, 2, 3, 4, 5, 6, 8, 10],  # A000009
    "combinatorial.derangements": [1, 0, 1, 2, 9, 44, 265],  # A000166
    "combinatorial.motzkin": [1, 1, 2, 4, 9, 21, 51, 127],  # A001006
    "combinatorial.stirling2_k2": [0, 1, 3, 7, 15, 31],  # A000225 shifted, from n = 1
    "combinatorial.stirling2_k3": [0, 0, 1, 6, 25, 90, 301],  # A000392, from n = 1
    "combinatorial.compositions_1_2": [1, 1, 2, 3, 5, 8, 13],  # A000045 shifted
    "combinatorial.compositions_1_3": [1, 1, 1, 2, 3, 4, 6, 9, 13, 19],  # A000930
    "combinatorial.tetrahedral": [0, 1, 4, 10, 20, 35, 56],  # A000292
    "combinatorial.no_adjacent_ones": [1, 2, 3, 5, 8, 13],  # A000045 shifted
    "number_theory.totient": [1, 1, 2, 2, 4, 2, 6, 4, 6, 4],  # A000010
    "number_theory.sigma": [1, 3, 4, 7, 6, 12, 8, 15, 13, 18],  # A000203
    "number_theory.divisor_count": [1, 2, 2, 3, 2, 4, 2, 4, 3, 4],  # A000005
    "number_theory.aliquot": [0, 1, 1, 3, 1, 6, 1, 7, 4, 8],  # A001065
    "number_theory.distinct_prime_factors": [0, 1, 1, 1, 1, 2, 1, 1, 1, 2],  # A001221
    "number_theory.prime": [2, 3, 5, 7, 11, 13, 17],  # A000040
    "number_theory.prime_count": [0, 1, 2, 2, 3, 3, 4, 4, 4, 4],  # A000720
    "number_theory.largest_prime_factor": [1, 2, 3, 2, 5, 3, 7, 2, 3, 5],  # A006530
    "number_theory.mobius": [1, -1, -1, 0, -1, 1, -1, 0, 0, 1],  # A008683
    "number_theory.squarefree": [1, 2, 3, 5, 6, 7, 10, 11, 13, 14],  # A005117
    "number_theory.primes_1_mod_4": [5, 13, 17, 29, 37, 41],  # A002144
    "number_theory.semiprimes": [4, 6, 9, 10, 14, 15, 21, 22, 25, 26],  # A001358
    "digits.digit_sum_base2": [0, 1, 1, 2, 1, 2, 2, 3, 1],  # A000120
    "digits.digit_sum_base10": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2],  # A007953
    "digits.base3_as_decimal": [0, 1, 2, 10, 11, 12, 20, 21, 22, 100],  # A007089
    "digits.reversal": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 11, 21],  # A004086
    "digits.digit_product": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2],  # A007954
    "digits.thue_morse": [0, 1, 1, 0, 1, 0, 0, 1, 1, 0],  # A010060
    "digits.binary_palindromes": [0, 1, 3, 5, 7, 9, 15, 17, 21, 27],  # A006995
    "digits.no_digit_7": [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18],  # A052419 style
    "digits.base5_length": [1, 1, 1, 1, 1, 2, 2],  # A110591
}

CATALOGUE = {s.id: s for s in combinatorial() + number_theory() + digits()}


@pytest.mark.parametrize("sequence_id", sorted(KNOWN))
def test_catalogued_sequences_give_their_known_terms(sequence_id):
    sequence = CATALOGUE[sequence_id]
    expected = KNOWN[sequence_id]
    assert sequence.terms(len(expected)) == expected
    assert all(isinstance(value, int) for value in sequence.terms(3))


def test_every_catalogued_sequence_reaches_its_largest_index():
    for sequence in CATALOGUE.values():
        assert isinstance(sequence.term(sequence.max_n), int), sequence.id


def test_a_recurrence_follows_its_rule_and_explains_a_term():
    sequence = next(s for s in (recurrence(random.Random(seed)) for seed in range(50)) if not s.inductive)
    terms = sequence.terms(12)
    coefficients = [int(c) for c in sequence.id.split(".s")[0].split(".")[1:]]
    order = len(coefficients)
    for n in range(order, 12):
        assert terms[n] == sum(c * terms[n - 1 - i] for i, c in enumerate(coefficients))
    assert sequence.explain(7).endswith(f"= {terms[7]}")


def test_a_polynomial_has_the_degree_it_claims():
    for seed in range(20):
        sequence = polynomial(random.Random(seed))
        degree = {"linear": 1, "quadratic": 2, "cubic": 3}[sequence.definition.split()[3]]
        values = sequence.terms(degree + 3)
        for _ in range(degree):  # finite differences: degree d leaves a constant, non-zero row after d steps
            values = [b - a for a, b in itertools.pairwise(values)]
        assert len(set(values)) == 1 and values[0] != 0
        assert sequence.inductive


def test_compositions_combine_their_parts():
    catalan, prime = CATALOGUE["combinatorial.catalan"], CATALOGUE["number_theory.prime"]
    for seed in range(40):
        sequence = composition(random.Random(seed), [catalan, prime])
        kind = sequence.id.split(".")[1]
        if kind == "interleave":
            first, second = (catalan, prime) if sequence.id.endswith(prime.id) else (prime, catalan)
            assert sequence.terms(6) == [first.term(first.offset), second.term(second.offset),
                                         first.term(first.offset + 1), second.term(second.offset + 1),
                                         first.term(first.offset + 2), second.term(second.offset + 2)]  # fmt: skip
            assert "b(" in sequence.definition and "c(" in sequence.definition
        elif kind == "partial_sums" and sequence.id.endswith("prime"):
            assert sequence.terms(4) == [2, 5, 10, 17]
        elif kind == "differences" and sequence.id.endswith("catalan"):
            assert sequence.terms(4) == [0, 1, 3, 9]
        elif kind.startswith("mod") and sequence.id.endswith("prime"):
            modulus = int(kind[3:])
            assert sequence.terms(5) == [p % modulus for p in (2, 3, 5, 7, 11)]


def test_drawing_is_seeded_diverse_and_unique():
    drawn = draw_sequences(60, seed=3)
    assert [s.id for s in drawn] == [s.id for s in draw_sequences(60, seed=3)]
    assert len({s.id for s in drawn}) == 60
    assert {s.family for s in drawn} == set(FAMILIES)
    assert [s.id for s in draw_sequences(60, seed=4)] != [s.id for s in drawn]


def _fibonacci(count: int) -> list[int]:
    terms = [0, 1]
    while len(terms) < count:
        terms.append(terms[-1] + terms[-2])
    return terms


def test_an_oeis_export_is_read_filtered_and_credited(tmp_path):
    import gzip

    from datalyst.errors import ConfigError
    from datalyst.synth._sequences import oeis_sequences

    rows = {
        "A000045": ("Fibonacci numbers: F(n) = F(n-1) + F(n-2).", _fibonacci(30)),
        "A000290": ("The squares: a(n) = n^2.", [n * n for n in range(25)]),
        "A000001": ("Too short.", [1, 1, 1, 2]),
        "A000071": ("Partial sums of A000045.", list(range(30))),  # built on another sequence: left out
        "A999999": ("Duplicate of the squares.", list(range(30))),
        "A000079": ("Powers of 2 beyond any test.", [2**n for n in range(70)]),
    }
    stripped = "# header\n" + "".join(f"{a} ,{','.join(map(str, t))},\n" for a, (_, t) in rows.items())
    (tmp_path / "stripped.gz").write_bytes(gzip.compress(stripped.encode()))
    (tmp_path / "names").write_text("# header\n" + "".join(f"{a} {name}\n" for a, (name, _) in rows.items()))
    sequences = oeis_sequences(tmp_path, 10)
    assert [s.id for s in sequences] == ["oeis.A000045", "oeis.A000290"]
    fibonacci = sequences[0]
    assert fibonacci.terms(5) == [0, 1, 1, 2, 3] and fibonacci.offset == 1 and fibonacci.max_n == 30
    assert "OEIS A000045: Fibonacci numbers" in fibonacci.definition and "CC BY-SA 4.0" in fibonacci.definition
    assert fibonacci.source == "oeis"
    with pytest.raises(ConfigError, match="no OEIS names file"):
        oeis_sequences(tmp_path / "missing", 1)
