"""The replies a worker may send, checked by the host before it uses any of them.

The worker shares its process with model code, which can write any frame on the worker's socket
with the right request ID (it can read it from the worker's stack). So every reply is validated:
strict types, no unknown fields, bounded sizes, plain paths inside the work folder. A reply that
fails is treated like a crash of the worker: it is killed, and the cell's result says so.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from datalyst.sandbox._result import CellError

MAX_SHORT_TEXT = 4_096
"""Longest exception name, message or module name in a reply (the worker clips them well below: 200 and 2,000)."""
MAX_PATH_CHARS = 4_096
MAX_REPORTED_FILES = 1_000
"""Files one cell reports as created or changed (the worker lists the first ones, in order)."""
MAX_COLUMNS = 32_767
"""SQLite's largest possible number of result columns."""
REPLY_BASE_BYTES = 16 * 1024 * 1024


def max_reply_bytes(max_output_chars: int) -> int:
    """Largest reply frame the host reads: room for the other fields and for a traceback of
    ``max_output_chars`` characters, each up to 12 bytes once escaped in JSON."""
    return REPLY_BASE_BYTES + 12 * max_output_chars


class MalformedReply(Exception):
    """A reply with the right ID that is not what the worker sends; the message says what is wrong, on one line."""


def _inside_workdir(path: str) -> str:
    if not path or path.startswith("/") or "\0" in path or ".." in path.split("/"):
        raise ValueError("not a path inside the work folder")
    return path


_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(value: Any) -> Any:
    """A string with its lone surrogates replaced by U+FFFD (anything else as it is, for the type check).

    Names that are not UTF-8 (a file ``b"\\xff.txt"``, an error about it) reach the host as lone surrogates,
    which no UTF-8 writer accepts; replaced, what the host passes on can always be written."""
    return _SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


Text = Annotated[str, BeforeValidator(_utf8)]
ShortText = Annotated[str, BeforeValidator(_utf8), Field(max_length=MAX_SHORT_TEXT)]
WorkPath = Annotated[str, BeforeValidator(_utf8), Field(max_length=MAX_PATH_CHARS), AfterValidator(_inside_workdir)]


class _Reply(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ErrorReply(_Reply):
    ename: ShortText
    evalue: ShortText
    traceback: Text = ""
    missing_module: ShortText | None = None

    def cell_error(self) -> CellError:
        return CellError(**self.model_dump())


class Ready(_Reply):
    """The worker's greeting, sent before any model code runs."""

    op: Literal["ready"]


class Replayed(_Reply):
    """Replay mode: the earlier steps were run again; what each raised (an exception name or None)."""

    op: Literal["replayed"]
    id: str
    errors: list[ShortText | None]


class CellReply(_Reply):
    id: str
    error: ErrorReply | None = None
    files: list[WorkPath] = Field(default=[], max_length=MAX_REPORTED_FILES)


class SqlReply(_Reply):
    id: str
    columns: list[Text] = Field(max_length=MAX_COLUMNS)
    n_rows: int = Field(ge=0)
    preview: Text
    output_path: Annotated[Text, Field(max_length=MAX_PATH_CHARS)] | None
    error: ErrorReply | None = None
    timed_out: bool = False


ReplyT = TypeVar("ReplyT", bound=_Reply)


def parse_reply(kind: type[ReplyT], frame: dict[str, Any]) -> ReplyT:
    """``frame`` as a ``kind`` reply, or MalformedReply naming the first thing wrong with it."""
    try:
        return kind.model_validate(frame)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(map(str, first["loc"])) or "the reply"
        text = " ".join(f"{kind.__name__} {where}: {first['msg']}".split())  # a key the cell chose may hold anything
        raise MalformedReply(text[:300]) from None
