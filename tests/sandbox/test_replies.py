"""Replies from the worker: what an honest worker sends is accepted; anything else becomes a dead worker, never
an exception in the host."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from datalyst.sandbox._process import WorkerProcess
from datalyst.sandbox._replies import (
    MAX_REPORTED_FILES,
    CellReply,
    MalformedReply,
    Ready,
    Replayed,
    SqlReply,
    max_reply_bytes,
    parse_reply,
)
from datalyst.sandbox._worker import Kernel, run_sql

ID = "0123456789abcdef"
GOOD_ERROR = {"ename": "ValueError", "evalue": "bad", "traceback": "Traceback ...", "missing_module": None}


# ---------------------------------------------------------------- the models


def test_what_the_worker_sends_for_a_cell_is_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kernel = Kernel(max_output_chars=2000, cpu_s=30)
    code = "from pathlib import Path\nPath('out.txt').touch()\nPath('d').mkdir()\nPath('d/a b.csv').touch()"
    made = kernel.run(code, "<c1>")
    failed = kernel.run("import no_such_module_here", "<c2>")
    for reply in (made, failed):
        parse_reply(CellReply, json.loads(json.dumps({**reply, "id": ID}, default=str)))
    assert parse_reply(CellReply, {**made, "id": ID}).files == ["d/a b.csv", "out.txt"]
    assert parse_reply(CellReply, {**failed, "id": ID}).error.cell_error().missing_module == "no_such_module_here"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("E = type('E' * 10_000, (Exception,), {})\nraise E('x' * 10_000)", id="long-exception-name"),
        pytest.param("import importlib\nimportlib.import_module('m' * 5_000)", id="long-module-name"),
        pytest.param("for i in range(1_500):\n    open(f'{i:05}.txt', 'w').close()", id="many-files"),
        pytest.param(
            "import os\nhere = os.getcwd()\nfor _ in range(20):\n    os.mkdir('d' * 200)\n    os.chdir('d' * 200)\n"
            "open('f' * 250, 'w').close()\nos.chdir(here)",
            id="long-path",
        ),
    ],
)
def test_extreme_but_honest_cells_still_give_a_valid_reply(tmp_path, monkeypatch, code):
    monkeypatch.chdir(tmp_path)
    reply = Kernel(max_output_chars=2000, cpu_s=30).run(code, "<c1>")
    parse_reply(CellReply, json.loads(json.dumps({**reply, "id": ID})))


def test_what_the_worker_sends_for_a_query_is_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with sqlite3.connect("db.sqlite") as connection:
        connection.execute("CREATE TABLE t (a, b)")
        connection.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(20)])
    connection.close()
    queries = [("SELECT * FROM t", "out.csv"), ("SELECT nope FROM t", None), (f"SELECT {'n' * 9_000} FROM t", None)]
    for sql, output_path in queries:
        reply = run_sql({"db": "db.sqlite", "sql": sql, "output_path": output_path, "timeout_s": 5})
        parse_reply(SqlReply, json.loads(json.dumps({**reply, "id": ID})))


def test_greeting_and_replay_notice_are_accepted():
    assert parse_reply(Ready, {"op": "ready"}).op == "ready"
    notice = {"op": "replayed", "id": ID, "errors": [None, "KeyError"]}
    assert parse_reply(Replayed, notice).errors == [None, "KeyError"]


CELL = {"id": ID, "error": GOOD_ERROR, "files": ["a.png", "d/b.csv"]}
SQL = {"id": ID, "columns": ["a"], "n_rows": 1, "preview": "a\n1", "output_path": None, "error": None}


@pytest.mark.parametrize(
    ("kind", "good", "field", "bad"),
    [
        (CellReply, CELL, "id", 7),
        (CellReply, CELL, "error", "boom"),
        (CellReply, CELL, "error", ["ValueError"]),
        (CellReply, CELL, "error", {"ename": "E"}),  # no evalue
        (CellReply, CELL, "error", {**GOOD_ERROR, "ename": 1}),
        (CellReply, CELL, "error", {**GOOD_ERROR, "evalue": None}),
        (CellReply, CELL, "error", {**GOOD_ERROR, "evalue": "x" * 100_000}),
        (CellReply, CELL, "error", {**GOOD_ERROR, "traceback": ["a"]}),
        (CellReply, CELL, "error", {**GOOD_ERROR, "missing_module": {"a": 1}}),
        (CellReply, CELL, "error", {**GOOD_ERROR, "extra": 1}),
        (CellReply, CELL, "files", "a.png"),  # a string, which the host would have iterated
        (CellReply, CELL, "files", [1]),
        (CellReply, CELL, "files", [None]),
        (CellReply, CELL, "files", ["/etc/passwd"]),
        (CellReply, CELL, "files", ["../../etc/x.png"]),
        (CellReply, CELL, "files", ["figs/../../x.png"]),
        (CellReply, CELL, "files", [""]),
        (CellReply, CELL, "files", ["a\0b"]),
        (CellReply, CELL, "files", ["f.png"] * (MAX_REPORTED_FILES + 1)),
        (CellReply, CELL, "files", ["x" * 10_000]),
        (CellReply, CELL, "stdout", "forged"),
        (SqlReply, SQL, "id", None),
        (SqlReply, SQL, "columns", "a"),
        (SqlReply, SQL, "columns", [1]),
        (SqlReply, SQL, "n_rows", "1"),
        (SqlReply, SQL, "n_rows", 1.0),
        (SqlReply, SQL, "n_rows", True),
        (SqlReply, SQL, "n_rows", -1),
        (SqlReply, SQL, "preview", None),
        (SqlReply, SQL, "output_path", 3),
        (SqlReply, SQL, "error", 0),
        (SqlReply, SQL, "timed_out", "yes"),
        (SqlReply, SQL, "timed_out", 1),
        (Replayed, {"op": "replayed", "id": ID, "errors": []}, "errors", "KeyError"),
        (Replayed, {"op": "replayed", "id": ID, "errors": []}, "errors", [{"ename": "KeyError"}]),
        (Replayed, {"op": "replayed", "id": ID, "errors": []}, "errors", ["E" * 10_000]),
        (Ready, {"op": "ready"}, "op", "steady"),
    ],
)
def test_wrong_types_and_sizes_in_any_field_are_refused(kind, good, field, bad):
    parse_reply(kind, good)
    with pytest.raises(MalformedReply) as info:
        parse_reply(kind, {**good, field: bad})
    assert "\n" not in str(info.value) and len(str(info.value)) <= 300


@pytest.mark.parametrize("field", ["id", "columns", "n_rows", "preview", "output_path"])
def test_missing_fields_are_refused(field):
    with pytest.raises(MalformedReply, match=field):
        parse_reply(SqlReply, {k: v for k, v in SQL.items() if k != field})


# ---------------------------------------------------------------- the host's side of an exchange


class FakeWorker:
    """A worker process stand-in: the test writes its frames; the host-side handle reads them."""

    def __init__(self) -> None:
        self.sock, ctrl = socket.socketpair()
        out_r, self.out_w = os.pipe()
        err_r, self.err_w = os.pipe()
        status_r, status_w = os.pipe()
        os.close(status_w)  # the "monitor" has reported and exited: kill() returns at once
        handle = WorkerProcess.__new__(WorkerProcess)
        handle.ctrl = ctrl
        ctrl.setblocking(False)
        handle.stdout_fd, handle.stderr_fd, handle.status_fd = out_r, err_r, status_r
        for fd in (out_r, err_r, status_r):
            os.set_blocking(fd, False)
        handle._status_buf = b""
        handle._fds_lock = threading.Lock()
        handle.pid, handle.pidfd, handle.wait_status, handle.report, handle.degraded = 0, None, None, {}, ""
        handle.processes = None
        self.handle = handle
        self.requests: list[dict[str, Any]] = []
        self.server: threading.Thread | None = None

    def answer(self, make_frames: Any) -> None:
        """In a thread: read the next request, then send the raw frames ``make_frames(request)`` gives."""

        def serve() -> None:
            header = self.sock.recv(4, socket.MSG_WAITALL)
            if len(header) < 4:  # the host side closed without asking anything
                return
            (size,) = struct.unpack(">I", header)
            request = json.loads(self.sock.recv(size, socket.MSG_WAITALL))
            self.requests.append(request)
            try:
                for frame in make_frames(request):
                    self.sock.sendall(frame if isinstance(frame, bytes) else raw(json.dumps(frame).encode()))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the host refused a frame and hung up before the rest was sent, as it should

        self.server = threading.Thread(target=serve, daemon=True)
        self.server.start()

    def close(self) -> None:
        self.handle.close()
        if self.server is not None:
            self.server.join(timeout=10)  # so that nothing it raises is blamed on a later test
        for fd in (self.out_w, self.err_w):
            os.close(fd)
        self.sock.close()


def raw(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


@pytest.fixture
def fake() -> Iterator[FakeWorker]:
    worker = FakeWorker()
    yield worker
    worker.close()


def run_cell(fake: FakeWorker, **options: Any):
    request = {"op": "run", "code": "1", "name": "<c>", "replay": []}
    return asyncio.run(fake.handle.exchange(request, reply=CellReply, timeout_s=10, max_output_bytes=1000, **options))


def test_an_honest_reply_is_taken(fake):
    fake.answer(lambda request: [{"id": request["id"], "error": None, "files": ["a.png"]}])
    exchange = run_cell(fake)
    assert not exchange.died and exchange.reply == CellReply(id=fake.requests[0]["id"], files=["a.png"])


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda rid: [{"id": rid, "error": {"ename": 1}}], id="wrong-type"),
        pytest.param(lambda rid: [{"id": rid, "files": "abc"}], id="string-files"),
        pytest.param(lambda rid: [{"id": rid, "error": "x" * 100}], id="error-not-an-object"),
        pytest.param(lambda rid: [{"id": rid, "files": ["../../../etc/passwd"]}], id="path-outside"),
        pytest.param(
            lambda rid: [raw(b'{"id": "%s", "files": ' % rid.encode() + b"[" * 50_000 + b"]" * 50_000 + b"}")],
            id="deeply-nested",
        ),
        pytest.param(lambda rid: [struct.pack(">I", max_reply_bytes(1000) + 1) + b"{"], id="huge"),
        pytest.param(lambda rid: [raw(b'{"id": "%s", ' % rid.encode())], id="not-json"),
        pytest.param(lambda rid: [raw(json.dumps([rid]).encode())], id="not-an-object"),
    ],
)
def test_a_malformed_reply_is_a_dead_worker_not_an_exception(fake, forge):
    fake.answer(lambda request: forge(request["id"]))
    exchange = run_cell(fake)
    assert exchange.died and exchange.reply is None and not exchange.timed_out
    assert exchange.exit_note.startswith("the worker sent a malformed reply ("), exchange.exit_note
    assert "\n" not in exchange.exit_note


def test_a_malformed_replay_notice_is_a_dead_worker(fake):
    fake.answer(lambda request: [{"op": "replayed", "id": request["id"], "errors": {"a": 1}}])
    exchange = run_cell(fake, after_replay_s=5)
    assert exchange.died and exchange.reply is None
    assert "malformed reply" in exchange.exit_note


def test_frames_for_other_requests_are_skipped_unread(fake):
    def frames(request: dict[str, Any]) -> list[Any]:
        return [
            {"id": "not-this-one", "files": 3},  # malformed, but not an answer to this request
            {"id": None, "error": "x"},
            {"id": request["id"], "files": ["b.png"]},
            {"id": request["id"], "files": ["late.png"]},  # a second answer is not taken for the first
        ]

    fake.answer(frames)
    exchange = run_cell(fake)
    assert not exchange.died and exchange.reply is not None and exchange.reply.files == ["b.png"]


def test_lone_surrogates_are_replaced_so_that_results_can_be_written_as_utf8():
    error = {**GOOD_ERROR, "evalue": "bad \udcfe name", "traceback": "T \udcfe"}
    reply = parse_reply(CellReply, {"id": ID, "error": error, "files": ["a\udcff.png"]})
    assert reply.files == ["a\ufffd.png"] and reply.error.evalue == "bad \ufffd name"
    reply.model_dump_json()
    sql = parse_reply(SqlReply, {**SQL, "columns": ["c\udcff"], "preview": "p\udcff"})
    assert sql.columns == ["c\ufffd"] and sql.preview == "p\ufffd"


def test_a_worker_that_stops_reading_cannot_hold_the_event_loop(fake):
    """A request the worker never reads ends at its deadline, and other coroutines run meanwhile."""
    ticks = []

    async def go():
        async def tick():
            while True:
                ticks.append(1)
                await asyncio.sleep(0.05)

        ticker = asyncio.ensure_future(tick())
        request = {"op": "run", "code": "x" * (8 << 20), "name": "<c>", "replay": []}
        try:
            return await fake.handle.exchange(request, reply=CellReply, timeout_s=1, max_output_bytes=1000)
        finally:
            ticker.cancel()

    exchange = asyncio.run(go())
    assert exchange.timed_out and exchange.reply is None and len(ticks) >= 10
