"""Who may use the server, and which files a request may name.

Every request needs the server's token (from the link printed at start-up, kept in a cookie, or sent as
``Authorization: Bearer``). Requests that change state must also come from the page itself (same origin),
and a server on loopback answers only to loopback host names, so a web page elsewhere can neither drive
it nor read it through a rebound DNS name.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_COOKIE = "datalyst_token"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Refused(Exception):
    """A request names something it may not have; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


def new_token() -> str:
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    return host.strip("[]") in LOOPBACK_NAMES or host.startswith("127.")


def inside(root: Path, name: str) -> Path:
    """The file or folder ``name`` (relative to ``root``) with every link resolved, when it stays inside ``root``.

    Absolute names, ``..`` that climbs out and links that point out are refused alike, as not found."""
    if not name or name.startswith(("/", "\\")) or Path(name).is_absolute() or "\x00" in name:
        raise Refused(f"{name!r} is not a name inside the served folders")
    base = root.resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base) or not path.exists():
        raise Refused(f"{name!r} is not in the served folders")
    return path


class AccessGuard:
    """ASGI middleware: the token on every request, the same origin on every change, loopback names on loopback."""

    def __init__(self, app: ASGIApp, *, token: str, loopback: bool) -> None:
        self.app, self.token, self.loopback = app, token, loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.check(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def check(self, scope: Scope) -> Response | None:
        """The response that refuses this request, or None to let it through."""
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.loopback and not is_loopback(urlsplit(f"//{host}").hostname or ""):
            return _refuse(scope, 403, f"this server answers only to loopback names, not {host!r}")
        offered = parse_qs(scope.get("query_string", b"").decode()).get("token", [None])[0]
        if offered is not None and scope["path"] == "/" and self.valid(offered):
            response = RedirectResponse("/", status_code=303)  # the token leaves the address bar for a cookie
            response.set_cookie(TOKEN_COOKIE, offered, httponly=True, samesite="lax")
            return response
        if not self.valid(_presented(headers)):
            return _refuse(scope, 401, "open the link `datalyst serve` printed: it carries the access token")
        if scope["method"] not in SAFE_METHODS and not _same_origin(headers, host):
            return _refuse(scope, 403, "changes are accepted only from the app's own pages (same origin)")
        return None

    def valid(self, offered: str | None) -> bool:
        return offered is not None and secrets.compare_digest(offered.encode(), self.token.encode())


def _presented(headers: Headers) -> str | None:
    """The token the request carries: a bearer header, else the cookie."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == TOKEN_COOKIE:
            return value
    return None


def _same_origin(headers: Headers, host: str) -> bool:
    """The request names this server as its origin (``Origin``, else ``Referer``); a request naming none is
    refused, as a cross-site form could be."""
    origin = headers.get("origin") or headers.get("referer")
    if not origin:
        return False
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc == host


def _refuse(scope: Scope, status: int, message: str) -> Response:
    if scope["path"].startswith("/api/"):
        return JSONResponse({"error": message}, status_code=status)
    return PlainTextResponse(f"datalyst: {message}\n", status_code=status)
