"""Text files: encoding and delimiter detection, and cheap line counting."""

from __future__ import annotations

import codecs
import csv
import os
from dataclasses import dataclass

import charset_normalizer

from ._common import exc_text, file_error

PREFIX_BYTES = 1 << 20  # bytes examined to guess the encoding
SNIFF_CHARS = 64 * 1024  # characters handed to csv.Sniffer
SNIFF_LINES = 200
DELIMITERS = ",;\t|"
_CHUNK = 1 << 20

_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_WIDE = {"utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"}
_ALLOWED_CONTROLS = {"\t", "\n", "\r", "\f", "\v"}
_BINARY_HINT = (
    "check that this really is a text file; if it is Excel, Parquet or SQLite, give it the matching extension"
)


@dataclass(frozen=True)
class TextSample:
    """The guessed encoding of a text file and its decoded beginning."""

    encoding: str
    text: str
    whole_file: bool  # True when `text` is the complete file


def _read_prefix(path: str | os.PathLike[str]) -> tuple[bytes, bool]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(PREFIX_BYTES + 1)
    except OSError as exc:
        raise file_error(path, f"cannot open the file: {exc_text(exc)}", "check the permissions") from exc
    whole = len(data) <= PREFIX_BYTES
    return data[:PREFIX_BYTES], whole


def _utf16_without_bom(data: bytes) -> str | None:
    """Recognise UTF-16 text without a byte-order mark by where its zero bytes sit."""
    sample = data[:4096]
    half = len(sample) // 2
    if half < 2:
        return None
    even_zero = sample[0::2].count(0) / half
    odd_zero = sample[1::2].count(0) / half
    if odd_zero > 0.3 and even_zero < 0.05:
        return "utf-16-le"
    if even_zero > 0.3 and odd_zero < 0.05:
        return "utf-16-be"
    return None


def _guess_with_charset_normalizer(data: bytes) -> str | None:
    results = charset_normalizer.from_bytes(data)
    best = results.best()
    if best is None:
        return None
    # Western code pages often decode a sample identically; prefer the common one.
    tied = [r for r in results if r.chaos <= best.chaos + 0.1]
    for preferred in ("cp1252", "latin_1"):
        for match in tied:
            if match.encoding == preferred or preferred in match.could_be_from_charset:
                return preferred
    return best.encoding


def _decode(data: bytes, encoding: str, final: bool) -> str:
    return codecs.getincrementaldecoder(encoding)(errors="strict").decode(data, final=final)


def _looks_binary(text: str) -> bool:
    if not text:
        return False
    odd = sum(
        1
        for ch in text[:20_000]
        if (ord(ch) < 32 and ch not in _ALLOWED_CONTROLS) or 0x7F <= ord(ch) <= 0x9F or ch == "\ufffd"
    )
    return odd > 0.05 * min(len(text), 20_000)


def sample_text(path: str | os.PathLike[str]) -> TextSample:
    """Guess the encoding of a text file and decode its beginning.

    Order: a byte-order mark, then UTF-8, then charset-normalizer on the first MiB.
    Raises DataFileError for binary content or an encoding that cannot be found.
    """
    data, whole = _read_prefix(path)
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is None and b"\x00" in data:
        encoding = _utf16_without_bom(data)
        if encoding is None:
            raise file_error(path, "the file contains binary data (NUL bytes), not text", _BINARY_HINT)
    if encoding is None:
        try:
            _decode(data, "utf-8", final=whole)
            encoding = "utf-8"
        except UnicodeDecodeError:
            if not whole and b"\n" in data:
                data = data[: data.rfind(b"\n") + 1]
            encoding = _guess_with_charset_normalizer(data)
            if encoding is None:
                raise file_error(
                    path,
                    "could not detect the text encoding (the bytes fit no known encoding)",
                    "the file may be binary or corrupt; otherwise re-save it as UTF-8",
                ) from None
    encoding = codecs.lookup(encoding).name
    try:
        text = _decode(data, encoding, final=whole)
    except UnicodeDecodeError as exc:
        raise file_error(
            path, f"the text is not valid {encoding}: {exc_text(exc)}", "re-save the file as UTF-8"
        ) from exc
    text = text.removeprefix("\ufeff")
    if _looks_binary(text):
        raise file_error(path, "the file looks like binary data, not text", _BINARY_HINT)
    return TextSample(encoding=encoding, text=text, whole_file=whole)


def sniff_delimiter(text: str) -> str:
    """Pick the delimiter of delimited text with csv.Sniffer; ',' when unsure."""
    lines = text.splitlines()[:SNIFF_LINES]
    if not lines:
        return ","
    header = lines[0]
    sample = "\n".join(lines)[:SNIFF_CHARS]
    try:
        found = csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        found = None
    if found and found in header:
        return found
    counts = {ch: header.count(ch) for ch in DELIMITERS}
    best = max(counts, key=lambda ch: counts[ch])
    return best if counts[best] > 0 else ","


def count_lines(path: str | os.PathLike[str], encoding: str) -> int:
    """Count the lines of a text file by streaming it (a last line without newline counts)."""
    newlines = 0
    last = ""
    if codecs.lookup(encoding).name in _WIDE:
        with open(path, encoding=encoding, newline="") as fh:
            while chunk := fh.read(_CHUNK):
                newlines += chunk.count("\n")
                last = chunk[-1]
    else:
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                newlines += chunk.count(b"\n")
                last = chunk[-1:].decode("latin-1")
    return newlines + (1 if last and last != "\n" else 0)
