"""The Ask endpoints with a recorded model and the real sandbox: uploads, streamed answers, follow-ups,
downloads, stops, disconnects, and a model or sandbox that fails."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import nbformat
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient
from web_helpers import (
    ORIGIN,
    answer,
    code,
    events,
    headers,
    live_server,
    readers,
    script_spec,
    serve_config,
    wide_csv,
)

from datalyst.web import create_app


@pytest.fixture
def app(tmp_path):
    return create_app(serve_config(tmp_path, files=tmp_path / "offered"))


@pytest.fixture
def client(app, tmp_path, examples_dir):
    (tmp_path / "offered" / "sub").mkdir(parents=True)
    (tmp_path / "offered" / "sub" / "shop.sqlite").write_bytes((examples_dir / "shop.sqlite").read_bytes())
    with TestClient(app, base_url=ORIGIN) as client:
        yield client


def upload(client, *files, **form):
    return client.post("/api/conversations", headers=headers(), files=[("upload", f) for f in files], data=form)


def sales(examples_dir):
    return ("sales.csv", (examples_dir / "sales.csv").read_bytes())


def test_info_lists_models_dialects_and_the_offered_files(client):
    info = client.get("/api/info", headers=headers()).json()
    assert info["models"][0]["dialect"] == "datamind" and "jupiter" in info["dialects"]
    assert info["files"] == ["sub/shop.sqlite"]


def test_an_answer_streams_every_step_and_a_follow_up_sees_the_earlier_cells(client, app, examples_dir):
    opened = upload(client, sales(examples_dir)).json()
    assert opened["files"] == [{"name": "sales.csv", "kind": "csv", "bytes": len(sales(examples_dir)[1]),
                                "tables": [{"name": "sales", "rows": 60, "columns": 6}]}]  # fmt: skip
    ask = f"/api/conversations/{opened['id']}/ask"
    stream = client.post(ask, headers=headers(), json={"question": "How many rows?"}).text
    first = events(stream)
    names = [name for name, _ in first]
    assert names == ["question", "step", "turn", "step", "turn", "step", "turn", "answer"]
    written = events(stream, written=True)[1:]
    pieces = [data["text"] for name, data in written[: [name for name, _ in written].index("step")]]
    assert pieces and "".join(pieces).startswith("<think>I load the file.</think>")  # before the step
    order = "".join({"text": "x", "step": "s", "turn": "t"}.get(name, "-") for name, _ in written)
    assert not re.search(r"s[^t]*x", order)  # a turn's text never comes after its step
    assert first[1][1] == {"kind": "code", "thought": "I load the file.", "answer": None,
                           "code": "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))"}  # fmt: skip
    assert first[2][1]["observation"].strip() == "60" and first[2][1]["ok"] is True
    [png] = first[4][1]["figures"]
    assert png.startswith("iVBOR")  # a PNG, base64
    assert first[-1][1]["answer"] == "@rows[20]" and first[-1][1]["termination"] == "answer"
    second = events(client.post(ask, headers=headers(), json={"question": "Largest sale?"}).text)
    assert second[0][1]["follow_up"] is True
    assert second[2][1]["ok"] is True and second[-1][1]["answer"] == "the largest sale"
    notebook = nbformat.reads(client.get(f"/api/conversations/{opened['id']}/notebook", headers=headers()).text, 4)
    nbformat.validate(notebook)
    assert [c.source.split("\n")[0] for c in notebook.cells if c.source.startswith("# ")] == [
        "# How many rows?", "# Largest sale?"]  # fmt: skip
    page = client.get(f"/api/conversations/{opened['id']}/html", headers=headers())
    assert "attachment" in page.headers["content-disposition"] and "Largest sale?" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert client.get(f"/api/conversations/{opened['id']}/pdf", headers=headers()).status_code == 404
    conversation = app.state.conversations.get(opened["id"])
    folder = conversation.folder
    assert client.delete(f"/api/conversations/{opened['id']}", headers=headers()).json() == {"closed": True}
    assert len(app.state.conversations) == 0 and not folder.exists()


def test_a_closed_page_closes_its_conversation(client, app, examples_dir):
    opened = upload(client, sales(examples_dir)).json()
    beacon = client.post(f"/api/conversations/{opened['id']}/close", headers=headers())  # what the page sends
    assert beacon.json() == {"closed": True} and len(app.state.conversations) == 0
    assert client.post(f"/api/conversations/{opened['id']}/close", headers=headers()).status_code == 200


def test_offered_files_are_chosen_by_name_inside_their_folder(client):
    opened = client.post("/api/conversations", headers=headers(), data={"file": "sub/shop.sqlite"})
    assert opened.status_code == 200 and opened.json()["files"][0]["kind"] == "sqlite"
    for name in ["../script.jsonl", "/etc/passwd", "sub/../../script.jsonl"]:
        refused = client.post("/api/conversations", headers=headers(), data={"file": name})
        assert refused.status_code == 404


def test_uploads_are_checked_and_limited(tmp_path, examples_dir, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    config = serve_config(tmp_path, max_upload_mb=2000 / 2**20, upload_files=2)
    with TestClient(create_app(config), base_url=ORIGIN) as client:
        assert upload(client, ("script.py", b"print(1)")).status_code == 400
        assert upload(client, sales(examples_dir)).status_code == 413  # 2.6 kB over a 2 kB limit
        empty = upload(client, ("empty.csv", b""))
        assert empty.status_code == 400
        assert empty.json()["error"].startswith("cannot read 'empty.csv': the file is empty")
        assert upload(client, ("a.csv", b"x\n1\n"), ("b.csv", b"x\n1\n"), ("c.csv", b"x\n1\n")).status_code == 400
        assert upload(client, ("a.csv", b"x\n1\n"), ("a.csv", b"y\n2\n")).status_code == 400
        assert upload(client).status_code == 400
        renamed = upload(client, ("../../evil name!.csv", b"x\n1\n"))
        assert renamed.json()["files"][0]["name"] == "evil name_.csv"
        assert len(client.app.state.conversations) == 1  # refused uploads leave nothing behind
        assert len(os.listdir(tmp_path / "tmp")) == 1


def test_bad_questions_and_unknown_conversations_are_refused(client, examples_dir):
    opened = upload(client, sales(examples_dir)).json()
    ask = f"/api/conversations/{opened['id']}/ask"
    assert client.post(ask, headers=headers(), json={"question": " "}).status_code == 400
    assert client.post(ask, headers=headers(), json={"question": "q", "model": "embedded:medium"}).status_code == 400
    assert client.post(ask, headers=headers(), json={"question": "q", "dialect": "cobol"}).status_code == 400
    assert client.post(ask, headers=headers(), content=b"not json").status_code == 400
    assert client.post("/api/conversations/nope/ask", headers=headers(), json={"question": "q"}).status_code == 404
    assert client.get("/api/conversations/nope/notebook", headers=headers()).status_code == 404
    assert client.get(f"/api/conversations/{opened['id']}/notebook", headers=headers()).status_code == 404
    client.post(ask, headers=headers(), json={"question": "q"})
    other = client.post(ask, headers=headers(), json={"question": "q", "dialect": "jupiter"})
    assert other.status_code == 409 and "start a new one" in other.json()["error"]


def test_a_model_server_that_is_down_ends_the_answer_with_a_reason(tmp_path, examples_dir):
    config = serve_config(tmp_path, models=["openai:m@http://127.0.0.1:9/v1?max_retries=0"])
    with TestClient(create_app(config), base_url=ORIGIN) as client:
        opened = upload(client, sales(examples_dir)).json()
        streamed = events(client.post(f"/api/conversations/{opened['id']}/ask", headers=headers(),
                                      json={"question": "How many rows?"}).text)  # fmt: skip
        assert [name for name, _ in streamed] == ["question", "error"]
        assert "127.0.0.1:9" in streamed[-1][1]["message"]
        assert client.get("/api/info", headers=headers()).status_code == 200  # still serving


@pytest.fixture
def slow(tmp_path, examples_dir):
    """A live server whose model runs a 30-second cell, then gives up; a client, and a conversation about sales.csv."""
    script = [code("import time\ntime.sleep(30)"), answer("gave up")]
    config = serve_config(tmp_path, models=[script_spec(tmp_path / "slow.jsonl", script)])
    with (
        live_server(config) as (base, app),
        httpx2.Client(base_url=base, headers=headers(base), timeout=60) as client,
    ):
        opened = client.post("/api/conversations", files=[("upload", sales(examples_dir))]).json()
        yield app, client, f"/api/conversations/{opened['id']}"


def after_first_step(stream) -> Iterator[str]:
    """The stream's lines, read up to the first step's event (the slow cell is then running, or about to)."""
    lines = stream.iter_lines()
    assert next(lines) == "event: question"
    while next(lines) != "event: step":
        pass
    next(lines)  # its data
    return lines


def test_a_sandbox_killed_mid_cell_is_an_observation_not_a_server_failure(slow):
    _, client, conversation = slow
    with client.stream("POST", f"{conversation}/ask", json={"question": "Crash?"}) as stream:
        lines = after_first_step(stream)
        time.sleep(1)
        assert _kill_sandboxes() > 0
        streamed = events("\n".join(lines))
    assert streamed[0][0] == "turn" and streamed[0][1]["ok"] is False
    assert "WorkerCrashed" in streamed[0][1]["observation"]
    assert streamed[-1] == ("answer", streamed[-1][1]) and streamed[-1][1]["answer"] == "gave up"
    assert client.get("/api/info").status_code == 200


def _kill_sandboxes() -> int:
    """Kill the sandbox workers this test process started, as a crash would; returns how many. (A worker is forked
    by a monitor, which the fork server forked: see datalyst.sandbox._forkserver.)"""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            parents[int(pid)] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    servers = {pid for pid, parent in parents.items() if parent == os.getpid()}
    monitors = {pid for pid, parent in parents.items() if parent in servers}
    workers = [pid for pid, parent in parents.items() if parent in monitors]
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    return len(workers)


def test_stop_ends_the_answer_and_the_next_question_starts_afresh(slow):
    app, client, conversation = slow
    with client.stream("POST", f"{conversation}/ask", json={"question": "Slow?"}) as stream:
        lines = after_first_step(stream)
        began = time.monotonic()
        assert client.post(f"{conversation}/stop").json() == {"stopped": True}
        assert [name for name, _ in events("\n".join(lines))] == ["stopped"]
    assert time.monotonic() - began < 10
    stopped = app.state.conversations.get(conversation.rsplit("/", 1)[1])
    assert stopped.state is None and stopped.trajectories[0].error == "stopped by the user"
    with client.stream("POST", f"{conversation}/ask", json={"question": "Again?"}) as stream:
        lines = stream.iter_lines()
        assert next(lines) == "event: question" and '"follow_up": false' in next(lines)
        client.post(f"{conversation}/stop")


def test_a_page_that_goes_away_mid_answer_closes_its_conversation(slow):
    app, client, conversation = slow
    with client.stream("POST", f"{conversation}/ask", json={"question": "Slow?"}) as stream:
        after_first_step(stream)
    deadline = time.monotonic() + 15
    while len(app.state.conversations) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(app.state.conversations) == 0
    assert client.get("/api/info").status_code == 200


def test_idle_conversations_are_closed(tmp_path, examples_dir):
    with TestClient(create_app(serve_config(tmp_path, idle_s=0.01)), base_url=ORIGIN) as client:
        upload(client, sales(examples_dir))
        time.sleep(0.05)
        conversations = client.app.state.conversations
        client.portal.call(conversations.close_idle)  # on the app's own event loop
        assert len(conversations) == 0


def test_too_many_conversations_are_refused(tmp_path, examples_dir):
    with TestClient(create_app(serve_config(tmp_path, conversations=1)), base_url=ORIGIN) as client:
        assert upload(client, sales(examples_dir)).status_code == 200
        refused = upload(client, sales(examples_dir))
        assert refused.status_code == 429 and "close one" in refused.json()["error"]


def test_a_file_past_a_read_limit_is_refused_and_the_server_answers_while_it_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("DATALYST_READ_DECOMPRESSED_MB", "1")
    zeros = tmp_path / "zeros.parquet"
    pq.write_table(pa.table({"a": pa.array([0] * 2_000_000, pa.int64())}), zeros)
    with (
        live_server(serve_config(tmp_path)) as (base, _),
        httpx2.Client(base_url=base, headers=headers(base), timeout=60) as client,
    ):
        refused = client.post("/api/files/check", files=[("upload", ("zeros.parquet", zeros.read_bytes()))])
        assert refused.status_code == 400
        assert refused.json()["error"] == (
            "cannot read 'zeros.parquet': it unpacks to 8.0 MB, past the 1 MiB limit on decompressed data "
            "(hint: to allow more, set DATALYST_READ_DECOMPRESSED_MB=2 (now 1))"
        )
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            checking = pool.submit(client.post, "/api/files/check", files=[("upload", ("wide.csv", wide_csv()))])
            deadline = time.monotonic() + 20
            while not readers():
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert client.get("/api/info").status_code == 200
            assert readers() and not checking.done()  # answered while the file is still being read
            assert checking.result().json()["files"][0]["tables"][0]["columns"] == 300_000


def test_a_page_that_goes_away_stops_the_reading_of_its_files(tmp_path):
    with live_server(serve_config(tmp_path)) as (base, _):
        with (
            httpx2.Client(base_url=base, headers=headers(base), timeout=1.5) as client,
            pytest.raises(httpx2.TimeoutException),
        ):
            client.post("/api/files/check", files=[("upload", ("wide.csv", wide_csv()))])
        deadline = time.monotonic() + 5
        while readers():
            assert time.monotonic() < deadline, "the reader outlived the request"
            time.sleep(0.05)
