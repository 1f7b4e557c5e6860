"""A deterministic judge for free-form answers: numbers within a relative tolerance (3% by default).

``rule_match(predicted, gold)`` compares an agent's answer with a task's gold answer. The gold
answer is a JSON value; the prediction is the answer text or a JSON value. The rules, by gold type:

* **number** (or a string that reads as one, like ``"1,234.5"``, ``"$5"``, ``"12%"``): the
  prediction's number ``p`` matches ``g`` when ``|p - g| <= rel_tol * |g|``, bounds included (a
  relative slack of ``1e-9`` absorbs binary rounding, so exactly 3% counts and 3.01% does not).
  A gold of zero needs ``|p| <= ZERO_TOLERANCE``.
* **reading a number from text**: thousands commas (``1,234.5``), a sign, decimals, scientific
  notation (``1.2e-3``), a currency sign before it and a unit after it (``$5``, ``5 years``, ``5km``)
  are accepted; a number glued to letters in front (``Q3``, ``x2``) is not a number. When the answer
  text holds several numbers the *last* one is the answer (answers tend to end on the value:
  "so the mean is 42.5").
* **percent**: a value written with ``%`` (or "percent") may be read as written or divided by 100,
  on either side: ``"12%"`` matches a gold of ``12`` and of ``0.12``; a gold of ``"12%"`` matches
  ``12``, ``"12 %"`` and ``0.12``. Without a percent sign ``12`` does not match ``0.12``.
* **boolean** (``true``/``false``, or the strings yes/no/true/false): yes/true/y/1 against
  no/false/n/0; for text, the whole answer or else its first word decides ("Yes, it is"). A gold
  string "y", "n", "1" or "0" is not a boolean.
* **string**: both sides are NFKC-normalised, casefolded, their whitespace collapsed, and
  punctuation and quotes stripped from both ends; then they must be equal.
* **list**: same length and element by element, in order. A text prediction may be a JSON list
  (``"[1, 2]"``), or items separated by commas, semicolons or lines (``"a, b and c"``, a bulleted
  list); each split is tried and one that matches is enough.
* **dict**: every gold key must be present and its value must match; extra keys are ignored. Keys
  are compared loosely (``"Mean Fare"`` = ``"mean_fare"``). A text prediction may be a JSON object,
  ``@name[value]`` pairs (DABench style, read up to the first ``]`` on the line), or ``name: value``
  / ``name = value`` items on lines or separated by semicolons or commas. Among repeated names the
  last wins.
* **null**: ``None``, ``"none"``, ``"null"`` or ``"n/a"``.

A leading "answer:" / "the answer is" in a text prediction is ignored. The function is pure,
linear in the size of its input (no regular expression here can backtrack catastrophically) and
never raises: an answer it cannot read is simply wrong.
"""

from __future__ import annotations

import json
import math
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence

__all__ = ["REL_TOL", "ZERO_TOLERANCE", "rule_match"]

REL_TOL = 0.03
ZERO_TOLERANCE = 1e-9
"""How far from zero a prediction may be when the gold number is exactly zero."""
_ROUNDING_SLACK = 1e-9
_MAX_DEPTH = 64  # deeper gold values are not compared (they do not occur in real tasks)

# One number: optional sign, digits with or without thousands commas, decimals, exponent, percent.
# Every part is bounded by a distinct character class, so a failed attempt costs O(length of the token).
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212]?)"
    r"(?P<body>(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<exp>[eE][-+]?[0-9]+)?"
    r"(?P<percent>\s?%|\s(?i:percent)\b|(?i:percent)\b)?"
)
_ANSWER_PREFIX = re.compile(r"(?:the\s+)?(?:final\s+)?answer\b(?:\s+is)?\s*[:=]?\s*", re.IGNORECASE)
_PAIR_START = re.compile(r"@(\w+)\[")
_BULLET = re.compile(r"\s*(?:[-*\u2022]|[0-9]{1,3}[.)])\s+")
_KEY_NOISE = re.compile(r"[^0-9a-z]+")
_EDGE_CHARS = string.punctuation + string.whitespace + "\u201c\u201d\u2018\u2019\u00ab\u00bb\u201e\u201a\u00a0"

_TRUE = frozenset({"yes", "true", "y", "1"})
_FALSE = frozenset({"no", "false", "n", "0"})
_GOLD_BOOLEANS = {"yes": True, "true": True, "no": False, "false": False}  # a gold "y" or "1" is not one
_NULL = frozenset({"none", "null", "n/a", "na"})


def rule_match(predicted: object, gold: object, *, rel_tol: float = REL_TOL) -> bool:
    """Whether ``predicted`` (answer text or a JSON value) matches ``gold`` (a JSON value)."""
    try:
        return _match(predicted, gold, rel_tol, 0)
    except RecursionError:  # a pathologically nested JSON text; treated as unreadable
        return False


def _match(predicted: object, gold: object, rel_tol: float, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(gold, Mapping):
        return _match_dict(predicted, gold, rel_tol, depth)
    if isinstance(gold, Sequence) and not isinstance(gold, str | bytes):
        return _match_list(predicted, gold, rel_tol, depth)
    if isinstance(predicted, list | tuple) and len(predicted) == 1:
        predicted = predicted[0]  # a one-item list against a scalar
    if gold is None:
        return predicted is None or (isinstance(predicted, str) and _normalize(_strip_prefix(predicted)) in _NULL)
    if isinstance(gold, bool):
        return _read_bool(predicted) is gold
    if isinstance(gold, int | float):
        return _match_number(predicted, [_as_float(gold)], rel_tol)
    text = str(gold)
    if (word := _normalize(text)) in _GOLD_BOOLEANS:
        return _read_bool(predicted) is _GOLD_BOOLEANS[word]
    if (gold_numbers := _strict_number(text)) is not None:
        return _match_number(predicted, gold_numbers, rel_tol)
    if isinstance(predicted, Mapping | list | tuple):
        return False
    return _normalize(_strip_prefix(_as_text(predicted))) == _normalize(text)


# ----------------------------------------------------------------------------- numbers


def _as_float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (OverflowError, ValueError, TypeError):
        return math.nan


def _token_values(match: re.Match[str]) -> list[float]:
    """The values a number token may stand for: as written, and divided by 100 after a percent sign."""
    sign = "-" if match["sign"] in ("-", "\u2212") else ""
    value = _as_float(sign + match["body"].replace(",", "") + (match["exp"] or ""))
    return [value, value / 100] if match["percent"] else [value]


def _strict_number(text: str) -> list[float] | None:
    """The values of ``text`` when it is one number, perhaps with a currency sign before and a unit after."""
    matches = list(_NUMBER.finditer(text))
    if len(matches) != 1:
        return None
    match = matches[0]
    before, after = text[: match.start()], text[match.end() :]
    if any(char.isalnum() for char in before) or any(char.isdigit() for char in after):
        return None
    return _token_values(match)


def _loose_number(text: str) -> list[float] | None:
    """The values of the last number in ``text``, or None when it holds none."""
    last = None
    for last in _NUMBER.finditer(text):  # noqa: B007 - only the last one is wanted
        pass
    return _token_values(last) if last is not None else None


def _match_number(predicted: object, gold_values: list[float], rel_tol: float) -> bool:
    if isinstance(predicted, bool) or predicted is None:
        return False
    if isinstance(predicted, int | float):
        values = [_as_float(predicted)]
    elif isinstance(predicted, str):
        values = _loose_number(predicted) or []
    else:
        return False
    return any(_close(p, g, rel_tol) for p in values for g in gold_values)


def _close(p: float, g: float, rel_tol: float) -> bool:
    if not (math.isfinite(p) and math.isfinite(g)):
        return p == g
    if g == 0:
        return abs(p) <= ZERO_TOLERANCE
    return abs(p - g) <= rel_tol * abs(g) * (1 + _ROUNDING_SLACK)


# ----------------------------------------------------------------------------- strings and booleans


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    try:
        return str(value)
    except (ValueError, TypeError):  # int too large to print, an odd object
        return ""


def _normalize(text: str) -> str:
    text = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return text.strip(_EDGE_CHARS)


def _strip_prefix(text: str) -> str:
    """``text`` without a leading "answer:" or "the answer is"."""
    stripped = text.lstrip()
    match = _ANSWER_PREFIX.match(stripped)
    return stripped[match.end() :] if match and match.end() < len(stripped) else text


def _read_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return {1: True, 0: False}.get(value)  # type: ignore[call-overload]
    if not isinstance(value, str):
        return None
    text = _normalize(_strip_prefix(value))
    words = text.split(maxsplit=1)
    for candidate in (text, words[0].strip(_EDGE_CHARS) if words else ""):
        if candidate in _TRUE:
            return True
        if candidate in _FALSE:
            return False
    return None


# ----------------------------------------------------------------------------- lists


def _json_value(text: str, opener: str, closer: str) -> object:
    """The JSON value between the first ``opener`` and the last ``closer`` of ``text``, or None."""
    start, end = text.find(opener), text.rfind(closer)
    if start < 0 or end <= start:
        return None
    try:
        return json.loads(text[start : end + 1])
    except (ValueError, RecursionError):
        return None


def _list_candidates(text: str) -> list[list[str]]:
    """Ways to cut a text answer into items: by lines or semicolons, by ", ", by every comma, by "and"/"or"."""
    body = _strip_prefix(text).strip()
    if len(body) >= 2 and body[0] + body[-1] in ("[]", "()", "{}"):
        body = body[1:-1]
    candidates = []
    if "\n" in body or ";" in body:
        candidates.append([_unbullet(line) for line in body.replace(";", "\n").split("\n") if line.strip()])
    candidates.append(body.split(", "))
    if "," in body:
        candidates.append(body.split(","))
    if " and " in body or " or " in body:  # "a, b and c"
        joined = body.replace(" and ", ",").replace(" or ", ",")
        candidates.append([item for item in joined.split(",") if item.strip()])
    return [[_drop_and(item) for item in items] for items in candidates]


def _unbullet(line: str) -> str:
    """``line`` without a leading list marker ("- ", "* ", "1. ", "2) ")."""
    match = _BULLET.match(line)
    return (line[match.end() :] if match else line).strip()


def _drop_and(item: str) -> str:
    item = item.strip()
    for joiner in ("and ", "or "):
        if item[: len(joiner)].casefold() == joiner:
            return item[len(joiner) :]
    return item


def _match_list(predicted: object, gold: Sequence, rel_tol: float, depth: int) -> bool:
    if isinstance(predicted, list | tuple):
        return len(predicted) == len(gold) and all(
            _match(p, g, rel_tol, depth + 1) for p, g in zip(predicted, gold, strict=True)
        )
    if not isinstance(predicted, str):
        return len(gold) == 1 and _match(predicted, gold[0], rel_tol, depth + 1)
    parsed = _json_value(predicted, "[", "]")
    if isinstance(parsed, list) and _match_list(parsed, gold, rel_tol, depth):
        return True
    return any(_match_list(items, gold, rel_tol, depth) for items in _list_candidates(predicted))


# ----------------------------------------------------------------------------- dicts


def _key(name: object) -> str:
    return _KEY_NOISE.sub("_", unicodedata.normalize("NFKC", _as_text(name)).casefold()).strip("_")


def _at_pairs(text: str) -> dict[str, str]:
    """``@name[value]`` pairs, each value read up to the first ``]`` on its line (linear time)."""
    pairs: dict[str, str] = {}
    for line in text.split("\n"):
        for piece in line.split("]")[:-1]:  # every piece but the last was closed by a "]"
            if (match := _PAIR_START.search(piece)) is not None:
                pairs[match[1]] = piece[match.end() :]
    return pairs


def _colon_pairs(items: list[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        item = _unbullet(item)
        cut = min((index for index in (item.find(":"), item.find("=")) if index > 0), default=-1)
        if cut > 0:
            pairs[item[:cut].strip().strip("*`\"'")] = item[cut + 1 :].strip()
    return pairs


def _dict_candidates(text: str) -> list[Mapping]:
    candidates: list[Mapping] = []
    if isinstance(parsed := _json_value(text, "{", "}"), dict):
        candidates.append(parsed)
    if at_pairs := _at_pairs(text):
        candidates.append(at_pairs)
    for separator in ("\n", ";", ","):
        if (separator == "\n" or separator in text) and (pairs := _colon_pairs(text.split(separator))):
            candidates.append(pairs)
    return candidates


def _match_dict(predicted: object, gold: Mapping, rel_tol: float, depth: int) -> bool:
    if isinstance(predicted, Mapping):
        by_key = {_key(name): value for name, value in predicted.items()}
        return all(
            (key := _key(name)) in by_key and _match(by_key[key], value, rel_tol, depth + 1)
            for name, value in gold.items()
        )
    if not isinstance(predicted, str):
        return False
    return any(_match_dict(candidate, gold, rel_tol, depth) for candidate in _dict_candidates(predicted))
