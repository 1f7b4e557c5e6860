"""Integer sequences from families whose generators we write ourselves: the raw material of sequence problems.

CodeSeq packages sequences scraped from the web into problems that ask for their general term. We compute
every term here, so each problem's examples and test cases are exact and any sequence can be made again
from its family and seed. Six families: polynomials, linear recurrences,
combinatorial numbers, number-theoretic functions, digit and base functions, and interleavings or
compositions of simpler sequences. Each sequence has an offset (the index of its first term) and a largest
index ``max_n`` up to which a direct computation stays fast, so a problem never asks for a term that only a
clever solution could reach in time.
"""

from __future__ import annotations

import gzip
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sympy import (
    bell,
    binomial,
    catalan,
    divisor_count,
    divisor_sigma,
    fibonacci,
    isprime,
    prime,
    primefactors,
    primepi,
    totient,
)
from sympy.functions.combinatorial.numbers import mobius, partition, stirling, subfactorial

from datalyst.errors import ConfigError

Term = Callable[[int], int]

FAMILIES = ("polynomial", "recurrence", "combinatorial", "number_theory", "digits", "composition")


@dataclass(frozen=True)
class Sequence:
    """One integer sequence: a definition in words and a function that computes its terms."""

    id: str
    """Stable and unique: the family and the parameters, e.g. ``recurrence.2.-1.0.1``."""
    family: str
    definition: str
    """What ``a(n)`` is, in one or two sentences (for an inductive sequence, only the kind of rule)."""
    offset: int
    """The index of the first term."""
    max_n: int
    """The largest index a problem asks about."""
    term: Term
    inductive: bool = False
    """The definition names only the kind of rule, so a solver must infer it from the first terms."""
    why: Callable[[int], str] | None = None
    """How ``a(n)`` comes out for one ``n``, for the explanations of a problem's examples."""
    source: str = "generated"

    def terms(self, count: int) -> list[int]:
        """The first ``count`` terms, from ``a(offset)`` on."""
        return [self.term(n) for n in range(self.offset, self.offset + count)]

    def explain(self, n: int) -> str:
        """Why ``a(n)`` is what it is, or the index's place in the sequence when there is no shorter account."""
        if self.why is not None:
            return self.why(n)
        place = n - self.offset + 1
        return f"a({n}) is term number {place} of the sequence (the first term is a({self.offset}))"


# ---- polynomials and linear recurrences: drawn at random, usually with the rule left to be inferred


def polynomial(rng: random.Random) -> Sequence:
    """``a(n) = c_d n^d + ... + c_0`` of degree 1 to 3 with small integer coefficients; the terms show which."""
    degree = rng.choice((1, 2, 2, 3))
    coefficients = [rng.randint(-6, 6) for _ in range(degree)] + [rng.choice((-3, -2, -1, 1, 2, 3))]
    offset = rng.choice((0, 1))

    def term(n: int) -> int:
        return sum(c * n**power for power, c in enumerate(coefficients))

    name = {1: "linear", 2: "quadratic", 3: "cubic"}[degree]
    return Sequence(
        id=f"polynomial.{'.'.join(map(str, coefficients))}.o{offset}",
        family="polynomial",
        definition=f"a(n) is a {name} polynomial in n with integer coefficients.",
        offset=offset,
        max_n=10_000,
        term=term,
        inductive=True,
    )


def recurrence(rng: random.Random) -> Sequence:
    """``a(n) = p a(n-1) + q a(n-2) (+ r a(n-3))`` from small starting values; the rule is given or inferred."""
    order = rng.choice((2, 2, 3))
    coefficients = [rng.choice((-2, -1, 1, 1, 2, 3)) for _ in range(order - 1)] + [rng.choice((-1, 1, 2))]
    start = [rng.randint(0, 3) for _ in range(order)]
    if not any(start):
        start[-1] = 1
    inductive = rng.random() < 0.5

    @cache
    def term(n: int) -> int:
        values = list(start)
        for _ in range(order, n + 1):
            values.append(sum(c * values[-1 - i] for i, c in enumerate(coefficients)))
        return values[n]

    previous = _combination(coefficients, [f"a(n-{i + 1})" for i in range(order)])
    starts = ", ".join(f"a({i}) = {v}" for i, v in enumerate(start))
    if inductive:
        definition = (f"Each term from a({order}) on is a fixed integer combination of the {order} terms "
                      f"before it (the same coefficients every time); {starts}.")  # fmt: skip
    else:
        definition = f"{starts}, and a(n) = {previous} for n >= {order}."

    def why(n: int) -> str:
        if n < order:
            return f"a({n}) = {start[n]} is one of the starting values"
        earlier = [f"a({n - i - 1})" for i in range(order)]
        known = [term(n - i - 1) for i in range(order)]
        values = _combination(coefficients, [str(v) if v >= 0 else f"({v})" for v in known], times="*")
        return f"a({n}) = {_combination(coefficients, earlier)} = {values} = {term(n)}"

    return Sequence(
        id=f"recurrence.{'.'.join(map(str, coefficients))}.s{'.'.join(map(str, start))}",
        family="recurrence",
        definition=definition,
        offset=0,
        max_n=60,
        term=term,
        inductive=inductive,
        why=None if inductive else why,
    )


def _combination(coefficients: list[int], terms: list[str], times: str = "") -> str:
    """``2a(n-1) - a(n-2)``: each term with its coefficient, a coefficient of 1 or -1 left implicit."""
    text = ""
    for c, term in zip(coefficients, terms, strict=True):
        sign = "-" if c < 0 else "+"
        factor = "" if abs(c) == 1 else f"{abs(c)}{times}"
        text += f" {sign} {factor}{term}" if text else f"{'-' if c < 0 else ''}{factor}{term}"
    return text


# ---- catalogues: named sequences with known definitions


def _fixed(family: str, key: str, definition: str, offset: int, max_n: int, term: Term,
           why: Callable[[int], str] | None = None) -> Sequence:  # fmt: skip
    return Sequence(id=f"{family}.{key}", family=family, definition=definition, offset=offset, max_n=max_n,
                    term=lambda n: int(term(n)), why=why)  # fmt: skip


def _divisors_text(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def _nth(predicate: Callable[[int], bool], n: int, start: int = 1) -> int:
    """The ``n``-th integer from ``start`` on (counting from 1) that satisfies ``predicate``."""
    found, k = 0, start - 1
    while found < n:
        k += 1
        found += predicate(k)
    return k


def _squarefree(k: int) -> bool:
    return all(k % (p * p) for p in primefactors(k))


def _digits(n: int, base: int) -> list[int]:
    digits = []
    while n:
        n, digit = divmod(n, base)
        digits.append(digit)
    return digits[::-1] or [0]


def combinatorial() -> list[Sequence]:
    c = "combinatorial"
    return [
        _fixed(c, "catalan", "a(n) is the n-th Catalan number, C(2n, n) / (n + 1): the number of ways to "
               "arrange n pairs of parentheses so that they match.", 0, 60, catalan,
               lambda n: f"C({2 * n}, {n}) / {n + 1} = {binomial(2 * n, n)} / {n + 1} = {catalan(n)}"),
        _fixed(c, "central_binomial", "a(n) = C(2n, n), the number of ways to choose n things out of 2n.",
               0, 60, lambda n: binomial(2 * n, n), lambda n: f"C({2 * n}, {n}) = {binomial(2 * n, n)}"),
        _fixed(c, "bell", "a(n) is the number of ways to split a set of n labelled elements into non-empty "
               "blocks (the Bell numbers).", 0, 40, bell),
        _fixed(c, "partitions", "a(n) is the number of ways to write n as a sum of positive integers, "
               "disregarding order.", 0, 300, partition),
        _fixed(c, "distinct_partitions", "a(n) is the number of ways to write n as a sum of distinct positive "
               "integers, disregarding order.", 0, 300, lambda n: _distinct_partitions(n)),
        _fixed(c, "derangements", "a(n) is the number of permutations of n elements that leave no element in "
               "its place.", 0, 40, subfactorial),
        _fixed(c, "motzkin", "a(n) is the number of ways to draw non-crossing chords between some of n points "
               "on a circle (the Motzkin numbers).", 0, 60, _motzkin),
        _fixed(c, "stirling2_k2", "a(n) is the number of ways to split a set of n labelled elements into "
               "exactly 2 non-empty blocks.", 1, 60, lambda n: stirling(n, 2)),
        _fixed(c, "stirling2_k3", "a(n) is the number of ways to split a set of n labelled elements into "
               "exactly 3 non-empty blocks.", 1, 60, lambda n: stirling(n, 3)),
        _fixed(c, "compositions_1_2", "a(n) is the number of ways to write n as an ordered sum of 1s and 2s.",
               0, 80, lambda n: fibonacci(n + 1)),
        _fixed(c, "compositions_1_3", "a(n) is the number of ways to write n as an ordered sum of 1s and 3s.",
               0, 80, lambda n: _ordered_sums(n, (1, 3))),
        _fixed(c, "tetrahedral", "a(n) = C(n + 2, 3), the number of balls in a triangular pyramid with n "
               "layers.", 0, 10_000, lambda n: binomial(n + 2, 3)),
        _fixed(c, "no_adjacent_ones", "a(n) is the number of binary strings of length n with no two 1s next "
               "to each other.", 0, 80, lambda n: fibonacci(n + 2)),
    ]  # fmt: skip


@cache
def _distinct_partitions(n: int, largest: int | None = None) -> int:
    """Partitions of ``n`` into distinct parts no larger than ``largest``."""
    largest = n if largest is None else largest
    if n == 0:
        return 1
    return sum(_distinct_partitions(n - part, part - 1) for part in range(1, min(n, largest) + 1))


@cache
def _motzkin(n: int) -> int:
    """Chords among n points: the first point is either free or joined to a point that splits the rest in two.

    (sympy 1.14's ``motzkin`` gives 1 at n = 2, not 2.)"""
    if n < 2:
        return 1
    return _motzkin(n - 1) + sum(_motzkin(k) * _motzkin(n - 2 - k) for k in range(n - 1))


@cache
def _ordered_sums(n: int, parts: tuple[int, ...]) -> int:
    if n == 0:
        return 1
    return sum(_ordered_sums(n - part, parts) for part in parts if part <= n)


def number_theory() -> list[Sequence]:
    t = "number_theory"
    return [
        _fixed(t, "totient", "a(n) is the number of integers from 1 to n that share no factor with n except 1 "
               "(Euler's totient).", 1, 10_000, totient),
        _fixed(t, "sigma", "a(n) is the sum of all positive divisors of n.", 1, 10_000, lambda n: divisor_sigma(n),
               lambda n: f"the divisors of {n} are {_divisors_text(n)}, which add up to {divisor_sigma(n)}"),
        _fixed(t, "divisor_count", "a(n) is the number of positive divisors of n.", 1, 10_000, divisor_count,
               lambda n: f"the divisors of {n} are {_divisors_text(n)}: {divisor_count(n)} of them"),
        _fixed(t, "aliquot", "a(n) is the sum of the divisors of n that are smaller than n.", 1, 10_000,
               lambda n: divisor_sigma(n) - n),
        _fixed(t, "distinct_prime_factors", "a(n) is the number of distinct primes that divide n.", 1, 10_000,
               lambda n: len(primefactors(n)),
               lambda n: f"{n} is divisible by the primes {primefactors(n) or 'none'}"),
        _fixed(t, "prime", "a(n) is the n-th prime number (a(1) = 2).", 1, 2_000, prime),
        _fixed(t, "prime_count", "a(n) is how many prime numbers are at most n.", 1, 10_000, primepi),
        _fixed(t, "largest_prime_factor", "a(n) is the largest prime dividing n, and a(1) = 1.", 1, 10_000,
               lambda n: max(primefactors(n), default=1)),
        _fixed(t, "mobius", "a(n) is the Moebius function of n: 0 if a square larger than 1 divides n, else 1 "
               "or -1 as n has an even or odd number of prime factors.", 1, 10_000, mobius),
        _fixed(t, "squarefree", "a(n) is the n-th positive integer that no square larger than 1 divides.",
               1, 2_000, lambda n: _nth(_squarefree, n)),
        _fixed(t, "primes_1_mod_4", "a(n) is the n-th prime that leaves remainder 1 when divided by 4.", 1, 1_000,
               lambda n: _nth(lambda k: k % 4 == 1 and isprime(k), n)),
        _fixed(t, "semiprimes", "a(n) is the n-th positive integer that is the product of exactly two primes "
               "(not necessarily different).", 1, 1_000,
               lambda n: _nth(lambda k: sum(e for e in _exponents(k)) == 2, n)),
    ]  # fmt: skip


def _exponents(k: int) -> list[int]:
    exponents = []
    for p in primefactors(k):
        count = 0
        while k % p == 0:
            k //= p
            count += 1
        exponents.append(count)
    return exponents


def digits() -> list[Sequence]:
    d = "digits"
    sequences = [_digit_sum(base) for base in (2, 3, 7, 10)]
    sequences += [
        _fixed(d, "base3_as_decimal", "a(n) is n written in base 3 and the digits read as a decimal number.",
               0, 10**6, lambda n: int("".join(map(str, _digits(n, 3))))),
        _fixed(d, "reversal", "a(n) is the number whose decimal digits are those of n in reverse order.",
               0, 10**6, lambda n: int(str(n)[::-1])),
        _fixed(d, "digit_product", "a(n) is the product of the decimal digits of n.", 0, 10**6,
               lambda n: _product(_digits(n, 10))),
        _fixed(d, "thue_morse", "a(n) is 0 when n written in binary has an even number of 1s and 1 when it has "
               "an odd number.", 0, 10**6, lambda n: bin(n).count("1") % 2,
               lambda n: f"{n} is {bin(n)[2:]} in binary, with {bin(n).count('1')} ones"),
        _fixed(d, "binary_palindromes", "a(n) is the n-th non-negative integer whose binary digits read the same "
               "backwards (a(1) = 0).", 1, 2_000,
               lambda n: _nth(lambda k: bin(k)[2:] == bin(k)[:1:-1], n, start=0)),
        _fixed(d, "no_digit_7", "a(n) is the n-th positive integer without the digit 7 in its decimal form.",
               1, 10_000, lambda n: _nth(lambda k: "7" not in str(k), n)),
        _fixed(d, "base5_length", "a(n) is the number of digits of n written in base 5 (a(0) = 1).", 0, 10**6,
               lambda n: len(_digits(n, 5))),
    ]  # fmt: skip
    return sequences


def _digit_sum(base: int) -> Sequence:
    def why(n: int) -> str:
        return f"{n} in base {base} has the digits {_digits(n, base)}, which add up to {sum(_digits(n, base))}"

    return _fixed("digits", f"digit_sum_base{base}", f"a(n) is the sum of the digits of n written in base {base}.",
                  0, 10**6, lambda n: sum(_digits(n, base)), why)  # fmt: skip


def _product(values: list[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def composition(rng: random.Random, parts: list[Sequence]) -> Sequence:
    """A sequence made of simpler ones: two interleaved, partial sums, first differences or a residue."""
    first, second = rng.sample([s for s in parts if not s.inductive], 2)
    kind = rng.choice(("interleave", "partial_sums", "differences", "mod"))
    if kind == "interleave":
        definition = (f"The terms alternate between two sequences b and c: a(2k) = b(k + {first.offset}) and "
                      f"a(2k + 1) = c(k + {second.offset}) for k >= 0, where {_renamed(first.definition, 'b')} "
                      f"And {_renamed(second.definition, 'c')}")  # fmt: skip

        def term(n: int) -> int:
            k, odd = divmod(n, 2)
            return second.term(k + second.offset) if odd else first.term(k + first.offset)

        return Sequence(id=f"composition.interleave.{first.id}.{second.id}", family="composition",
                        definition=definition, offset=0, max_n=2 * min(first.max_n, second.max_n, 200),
                        term=term)  # fmt: skip
    base = first
    if kind == "partial_sums":
        definition = (f"a(n) is the sum of b(k) for k from {base.offset} to n, where "
                      f"{_renamed(base.definition, 'b')}")  # fmt: skip
        return Sequence(id=f"composition.partial_sums.{base.id}", family="composition", definition=definition,
                        offset=base.offset, max_n=min(base.max_n, 300),
                        term=lambda n: sum(base.term(k) for k in range(base.offset, n + 1)))  # fmt: skip
    if kind == "differences":
        definition = f"a(n) = b(n + 1) - b(n), where {_renamed(base.definition, 'b')}"
        return Sequence(id=f"composition.differences.{base.id}", family="composition", definition=definition,
                        offset=base.offset, max_n=min(base.max_n - 1, 300),
                        term=lambda n: base.term(n + 1) - base.term(n))  # fmt: skip
    modulus = rng.choice((3, 7, 10, 11))
    definition = (f"a(n) is the remainder of b(n) divided by {modulus}, where "
                  f"{_renamed(base.definition, 'b')}")  # fmt: skip
    return Sequence(id=f"composition.mod{modulus}.{base.id}", family="composition", definition=definition,
                    offset=base.offset, max_n=min(base.max_n, 300), term=lambda n: base.term(n) % modulus)  # fmt: skip


def _renamed(definition: str, name: str) -> str:
    """A definition of ``a`` as one of ``name``, starting lower case so it can follow "where"."""
    definition = definition.replace("a(", f"{name}(")
    return definition[:1].lower() + definition[1:]


def draw_sequences(count: int, seed: int = 0) -> list[Sequence]:
    """``count`` different sequences, the families taking turns, each drawn from a generator seeded by ``seed``."""
    rng = random.Random(seed)
    catalogue = {"combinatorial": combinatorial(), "number_theory": number_theory(), "digits": digits()}
    named = [s for family in catalogue.values() for s in family]
    chosen: dict[str, Sequence] = {}
    turns = 0
    while len(chosen) < count:
        family = FAMILIES[turns % len(FAMILIES)]
        turns += 1
        if turns > 50 * count:
            break
        if family == "polynomial":
            sequence = polynomial(rng)
        elif family == "recurrence":
            sequence = recurrence(rng)
        elif family == "composition":
            sequence = composition(rng, named)
        else:
            unused = [s for s in catalogue[family] if s.id not in chosen]
            if not unused:
                continue
            sequence = rng.choice(unused)
        chosen.setdefault(sequence.id, sequence)
    return list(chosen.values())


OEIS_LICENCE = "CC BY-SA 4.0"
OEIS_MIN_TERMS = 20
_OEIS_LINE = re.compile(r"^(A\d{6})\s+(.*)$")


def oeis_sequences(folder: Path, count: int, seed: int = 0, *, largest: int = 10**18) -> list[Sequence]:
    """``count`` sequences drawn from a local copy of the OEIS data export (``stripped`` and ``names``, plain or
    gzipped), for users who provide one; its licence is CC BY-SA 4.0, so every problem made from it says so.

    The export lists terms without their offsets, so the terms are numbered from 1 in the order listed. As
    CodeSeq filters, a sequence is left out when it has fewer than 20 terms, a term beyond ``largest``, or a
    name that refers to another sequence (an A-number) or marks it dead, duplicate or erroneous.
    """
    names = dict(_oeis_lines(folder, "names"))
    usable = []
    for number, line in _oeis_lines(folder, "stripped"):
        name = names.get(number, "")
        terms = [int(term) for term in line.strip(" ,").split(",") if term.strip()]
        if (len(terms) < OEIS_MIN_TERMS or max(map(abs, terms)) > largest or not name
                or re.search(r"\bA\d{6}\b|\b(?:dead|duplicate|erroneous)\b", name, re.IGNORECASE)):  # fmt: skip
            continue
        usable.append((number, name, terms))
    chosen = random.Random(seed).sample(usable, min(count, len(usable)))
    return [_oeis_sequence(number, name, terms) for number, name, terms in sorted(chosen)]


def _oeis_sequence(number: str, name: str, terms: list[int]) -> Sequence:
    definition = (f"a(n) is the n-th term of OEIS {number}: {name.rstrip('.')}. The terms are numbered from 1 in "
                  f"the order the OEIS lists them (OEIS data, {OEIS_LICENCE}).")  # fmt: skip
    return Sequence(id=f"oeis.{number}", family="oeis", definition=definition, offset=1, max_n=len(terms),
                    term=lambda n: terms[n - 1], source="oeis")  # fmt: skip


def _oeis_lines(folder: Path, stem: str) -> list[tuple[str, str]]:
    """The ``A-number rest`` lines of ``folder/stem`` (or ``stem.gz``), comments skipped."""
    for path in (folder / stem, folder / f"{stem}.gz"):
        if path.is_file():
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8", errors="replace")
            return [match.groups() for line in text.splitlines() if (match := _OEIS_LINE.match(line))]
    raise ConfigError(f"no OEIS {stem} file (or {stem}.gz) in {folder}; download the OEIS data export there")
