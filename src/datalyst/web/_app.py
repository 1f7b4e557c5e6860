"""The web app: routes of the Ask, Runs and Data pages over :mod:`_conversations` and :mod:`_browse`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from datalyst.agent import DIALECTS, analyst_config, to_html, to_notebook
from datalyst.data import DATA_SUFFIXES, adescribe, start_reader
from datalyst.errors import ConfigError, DatalystError
from datalyst.llm import text_streamed_to
from datalyst.web import _browse
from datalyst.web._conversations import Conversation, Conversations, Models
from datalyst.web._security import AccessGuard, Refused, inside, new_token

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
PAGE_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-src 'self'"
TRAJECTORY_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""Trajectory pages show what a model wrote: escaped, and with no script allowed to run even so."""
SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]")
MAX_QUESTION = 4000


class ServeConfig(BaseModel):
    """What one server offers, and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    token: str = Field(default_factory=new_token, json_schema_extra={"option": False})
    """What every request must carry (a new one each time the server starts)."""
    loopback: bool = Field(True, json_schema_extra={"option": False})
    """Bound to a loopback address (then only loopback host names are answered)."""
    models: list[str] = Field(min_length=1, json_schema_extra={"flag": "--model"})
    """Model spec the Ask page offers (repeatable; the first is the default). [default: embedded:medium (ask's), then
    every other embedded model fetched]"""
    dialects: dict[str, str] = Field({}, json_schema_extra={"option": False})
    """The dialect each model spec was trained in, where it has one (else datamind)."""
    runs: Path | None = None
    """Folder of evaluation runs for the Runs page. [default: ./runs, if there]"""
    data: list[Path] = []
    """Folder of tasks and trajectories files for the Data page (repeatable). [default: the runs folder]"""
    files: Path | None = None
    """Folder of data files offered on the Ask page."""
    max_turns: int = Field(10, ge=1)
    """Turns the agent may take per question."""
    max_upload_mb: float = Field(50.0, gt=0)
    """Largest uploaded file, in MB."""
    upload_files: int = Field(10, ge=1)
    """Files one conversation may upload."""
    conversations: int = Field(16, ge=1)
    """Conversations open at once."""
    idle_s: float = Field(1800.0, gt=0)
    """Seconds after which an idle conversation (and its sandbox) is closed."""
    require_isolation: bool = Field(True, json_schema_extra={"option": False})

    @property
    def upload_bytes(self) -> int:
        return int(self.max_upload_mb * 2**20)

    def dialect_of(self, spec: str) -> str:
        """The dialect a model is asked in unless the page picks another: its trained one, else datamind."""
        return self.dialects.get(spec, "datamind")


def listen(host: str, port: int) -> socket.socket:
    """A bound socket for the server (``port`` 0 picks a free one). Small writes go out at once (no Nagle delay):
    an event stream is many small writes, and each would otherwise wait for the client's delayed ACK."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted connections inherit it
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port") from None
    return listener


def create_app(config: ServeConfig) -> Starlette:
    """The ASGI app of ``datalyst serve``."""
    conversations = Conversations(limit=config.conversations, idle_s=config.idle_s)
    models = Models()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def reap() -> None:
            while True:
                await asyncio.sleep(min(60.0, config.idle_s))
                await conversations.close_idle()

        start_reader()  # the first check of a file need not wait for the reader's libraries
        reaper = asyncio.get_running_loop().create_task(reap())
        try:
            yield
        finally:
            reaper.cancel()
            await conversations.aclose()
            await models.aclose()

    # -- Ask -----------------------------------------------------------------------------------------------

    async def info(request: Request) -> Response:
        offered = []
        if config.files is not None:
            offered = sorted(path.relative_to(config.files).as_posix() for path in config.files.rglob("*")
                             if path.is_file() and path.suffix.lower() in DATA_SUFFIXES)  # fmt: skip
        return JSONResponse({
            "models": [{"spec": spec, "dialect": config.dialect_of(spec)} for spec in config.models],
            "dialects": list(DIALECTS), "files": offered[:1000], "runs": config.runs is not None,
            "data": bool(config.data),
            "limits": {"upload_bytes": config.upload_bytes, "upload_files": config.upload_files},
        })  # fmt: skip

    async def chosen_files(request: Request, folder: Path) -> tuple[list[Path], list[dict[str, Any]]]:
        """The files a form uploads into ``folder`` or picks from the served folder, each described (a file the
        agent could not read is refused in one line)."""
        length = int(request.headers.get("content-length") or 0)
        if length > config.upload_files * config.upload_bytes + 2**20:
            raise Refused(f"uploads are limited to {config.upload_files} files of {_mb(config.upload_bytes)}", 413)
        async with request.form(max_files=config.upload_files, max_fields=config.upload_files + 10) as form:
            files = [await _save(upload, folder, config.upload_bytes) for upload in form.getlist("upload")
                     if isinstance(upload, UploadFile)]  # fmt: skip
            names = [name for name in form.getlist("file") if isinstance(name, str)]
        if names and config.files is None:
            raise Refused("this server was started without a folder of files (--files)")
        files += [inside(config.files, name) for name in names if config.files is not None]
        if not files:
            raise Refused("choose at least one data file", 400)
        if len({file.name for file in files}) < len(files):
            raise Refused("two of the files have the same name; rename one", 400)
        return files, await _described(request, files)

    async def check_files(request: Request) -> Response:
        with tempfile.TemporaryDirectory(prefix="datalyst-web-") as folder:
            _, described = await chosen_files(request, Path(folder))
        return JSONResponse({"files": described})

    async def open_conversation(request: Request) -> Response:
        folder = Path(tempfile.mkdtemp(prefix="datalyst-web-"))
        try:
            files, described = await chosen_files(request, folder)
            conversation = conversations.open(files, folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return JSONResponse({"id": conversation.id, "files": described})

    async def ask(request: Request) -> Response:
        conversation = conversations.get(request.path_params["id"])
        body = await _json(request)
        question = str(body.get("question") or "").strip()
        spec = str(body.get("model") or conversation.model or config.models[0])
        dialect = str(body.get("dialect") or conversation.dialect or config.dialect_of(spec))
        if not question or len(question) > MAX_QUESTION:
            raise Refused(f"write a question of 1 to {MAX_QUESTION} characters", 400)
        if spec not in config.models or dialect not in DIALECTS:
            raise Refused(f"choose a model of {config.models} and a dialect of {list(DIALECTS)}", 400)
        if conversation.busy:
            raise Refused("this conversation is still answering; stop it or wait", 409)
        if conversation.model not in (None, spec) or conversation.dialect not in (None, dialect):
            raise Refused(f"this conversation uses {conversation.model} ({conversation.dialect}); start a new one "
                          "to change them", 409)  # fmt: skip
        conversation.model, conversation.dialect = spec, dialect
        agent_config = analyst_config(
            dialect=dialect, max_turns=config.max_turns, require_isolation=config.require_isolation
        )
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

        def emit(event: str, data: dict[str, Any]) -> None:
            queue.put_nowait((event, data))

        loop, loop_thread = asyncio.get_running_loop(), threading.get_ident()

        def written(text: str) -> None:
            """Emit a piece of the model's text, in order with the events after it, from whichever thread writes it
            (the queue is the loop's: another thread hands the piece over in the order it was written)."""
            if threading.get_ident() == loop_thread:
                emit("text", {"text": text})
            else:
                loop.call_soon_threadsafe(emit, "text", {"text": text})

        async def run() -> None:
            try:
                model = await models.get(spec)
                with text_streamed_to(written):  # the model's text as it writes it, before each step
                    await conversation.ask(question, model, agent_config, emit)
            except asyncio.CancelledError:
                emit("stopped", {"turns": 0})
            except DatalystError as exc:
                emit("error", {"message": str(exc)})
            except Exception as exc:  # the stream must end with a reason whatever went wrong
                log.exception("question %r failed", question)
                emit("error", {"message": f"internal error: {type(exc).__name__}: {exc}"})
            finally:
                queue.put_nowait(None)

        conversation.running = asyncio.get_running_loop().create_task(run())
        return StreamingResponse(_stream(request, queue, conversation, conversations), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})  # fmt: skip

    async def stop(request: Request) -> Response:
        conversations.get(request.path_params["id"]).stop()
        return JSONResponse({"stopped": True})

    async def close(request: Request) -> Response:
        await conversations.close(request.path_params["id"])
        return JSONResponse({"closed": True})

    async def download(request: Request) -> Response:
        conversation = conversations.get(request.path_params["id"])
        if not conversation.trajectories:
            raise Refused("nothing to download yet: ask a question first")
        kind = request.path_params["kind"]
        if kind not in ("notebook", "html"):
            raise Refused(f"there is no {kind!r} download; there are notebook and html")
        if kind == "notebook":
            import nbformat

            body, media, name = (
                nbformat.writes(to_notebook(*conversation.trajectories)),
                "application/x-ipynb+json",
                "ipynb",
            )
        else:
            body, media, name = to_html(*conversation.trajectories), "text/html", "html"
        disposition = f'attachment; filename="datalyst-{conversation.id}.{name}"'
        headers = {"Content-Disposition": disposition, "Content-Security-Policy": TRAJECTORY_POLICY}
        return Response(body, media_type=media, headers=headers)

    # -- Runs and Data -------------------------------------------------------------------------------------

    def runs_root() -> Path:
        if config.runs is None:
            raise Refused("this server was started without a runs folder (--runs)")
        return config.runs

    async def runs(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(_browse.list_runs, runs_root()) if config.runs else [])

    async def run_report(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(_browse.run_report, runs_root(), _param(request, "run")))

    async def run_rows(request: Request) -> Response:
        rows = await asyncio.to_thread(
            _browse.run_rows, runs_root(), _param(request, "run"), dict(request.query_params)
        )
        return JSONResponse(rows)

    async def run_page(request: Request) -> Response:
        page = await asyncio.to_thread(
            _browse.run_page, runs_root(), _param(request, "run"), _param(request, "dialect"), _param(request, "id")
        )
        return HTMLResponse(page, headers={"Content-Security-Policy": TRAJECTORY_POLICY})

    async def run_chart(request: Request) -> Response:
        chart = _browse.run_folder(runs_root(), _param(request, "run")) / "chart.png"
        if not chart.is_file():
            raise Refused("this run has no chart")
        return FileResponse(chart, media_type="image/png")

    async def compare(request: Request) -> Response:
        result = await asyncio.to_thread(_browse.compare, runs_root(), _param(request, "a"), _param(request, "b"))
        return JSONResponse(result)

    async def data(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(_browse.list_data, config.data))

    def data_path(request: Request) -> Path:
        try:
            root = int(request.query_params.get("root", "0"))
        except ValueError:
            raise Refused("root must be a number", 400) from None
        return _browse.data_file(config.data, root, _param(request, "name"))

    async def data_rows(request: Request) -> Response:
        path = data_path(request)
        return JSONResponse(await asyncio.to_thread(_browse.data_rows, path, dict(request.query_params)))

    async def data_page(request: Request) -> Response:
        page = await asyncio.to_thread(_browse.data_page, data_path(request), _param(request, "id"))
        return HTMLResponse(page, headers={"Content-Security-Policy": TRAJECTORY_POLICY})

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Content-Security-Policy": PAGE_POLICY})

    async def favicon(request: Request) -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    routes = [
        Route("/", index),
        Route("/favicon.ico", favicon),
        Route("/api/info", info),
        Route("/api/files/check", check_files, methods=["POST"]),
        Route("/api/conversations", open_conversation, methods=["POST"]),
        Route("/api/conversations/{id}/ask", ask, methods=["POST"]),
        Route("/api/conversations/{id}/stop", stop, methods=["POST"]),
        Route("/api/conversations/{id}/close", close, methods=["POST"]),
        Route("/api/conversations/{id}", close, methods=["DELETE"]),
        Route("/api/conversations/{id}/{kind:str}", download),
        Route("/api/runs", runs),
        Route("/api/runs/report", run_report),
        Route("/api/runs/rows", run_rows),
        Route("/api/runs/page", run_page),
        Route("/api/runs/chart", run_chart),
        Route("/api/runs/compare", compare),
        Route("/api/data", data),
        Route("/api/data/rows", data_rows),
        Route("/api/data/page", data_page),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(AccessGuard, token=config.token, loopback=config.loopback)],
        exception_handlers={Refused: _refused, DatalystError: _failed},
    )
    app.state.conversations = conversations
    return app


async def _stream(
    request: Request,
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None],
    conversation: Conversation,
    conversations: Conversations,
) -> AsyncIterator[str]:
    """Server-sent events until the question ends; a page that goes away mid-answer closes its conversation."""
    gone = asyncio.ensure_future(_disconnected(request))
    ended = False
    try:
        while True:
            item = asyncio.ensure_future(queue.get())
            await asyncio.wait({item, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not item.done():
                item.cancel()
                break
            if (event := item.result()) is None:
                ended = True
                break
            name, data = event
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n"
    finally:
        gone.cancel()
        if not ended:
            conversations.close_soon(conversation.id)


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (its request body was read already, so only that message is left)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _save(upload: UploadFile, folder: Path, limit: int) -> Path:
    name = SAFE_NAME.sub("_", Path(upload.filename or "").name).strip(" .")
    if not name:
        raise Refused("an uploaded file has no usable name", 400)
    if Path(name).suffix.lower() not in DATA_SUFFIXES:
        raise Refused(f"{name}: not a data file ({', '.join(sorted(DATA_SUFFIXES))})", 400)
    target, written = folder / name, 0
    with target.open("wb") as out:
        while chunk := await upload.read(2**20):
            written += len(chunk)
            if written > limit:
                raise Refused(f"{name} is larger than {_mb(limit)}", 413)
            out.write(chunk)
    return target


async def _described(request: Request, files: list[Path]) -> list[dict[str, Any]]:
    """Each file described, all at once; a page that goes away stops the reading."""
    reading = asyncio.gather(*map(_describe, files))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({reading, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        reading.cancel()  # nothing to do once it is done; else its readers are stopped
    if reading not in done:
        raise Refused("the page went away while its files were read", 499)
    return reading.result()


async def _describe(path: Path) -> dict[str, Any]:
    """A file's kind and tables, read as the agent will read it, in a reader within its limits (an unreadable file,
    or one past a limit, is refused in one line)."""
    try:
        info = await adescribe(path)
    except DatalystError as exc:
        raise Refused(str(exc).splitlines()[0].replace(str(path), path.name), 400) from None  # not the server's paths
    tables = [{"name": t.name, "rows": t.row_count, "columns": t.column_count} for t in info.tables]
    if tables and not any(table["rows"] for table in tables):
        raise Refused(f"{path.name}: no rows of data (a header line at most); choose a file with a table in it", 400)
    return {"name": path.name, "kind": info.kind.value, "bytes": info.size_bytes, "tables": tables}


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise Refused("the request body must be JSON", 400) from None
    if not isinstance(body, dict):
        raise Refused("the request body must be a JSON object", 400)
    return body


def _param(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise Refused(f"missing query parameter {name!r}", 400)
    return value


def _mb(size: int) -> str:
    return f"{size / 2**20:g} MB"


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return JSONResponse({"error": str(exc)}, status_code=exc.status)


async def _failed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}, status_code=400)
