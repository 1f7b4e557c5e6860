"""Who may use the server: the token, the same-origin rule for changes, loopback names, and confined paths."""

from __future__ import annotations

import os

import pytest
from starlette.testclient import TestClient
from web_helpers import ORIGIN, TOKEN, headers, serve_config

from datalyst.web import create_app
from datalyst.web._security import Refused, inside


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(serve_config(tmp_path)), base_url=ORIGIN) as client:
        yield client


def test_every_request_needs_the_token(client):
    assert client.get("/api/info").status_code == 401
    assert "access token" in client.get("/api/info").json()["error"]
    assert client.get("/").status_code == 401 and "datalyst serve" in client.get("/").text
    assert client.get("/static/app.js").status_code == 401
    assert client.get("/api/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/info", headers=headers()).status_code == 200


def test_the_printed_link_trades_its_token_for_a_cookie(client):
    reply = client.get(f"/?token={TOKEN}", follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/"
    assert "httponly" in reply.headers["set-cookie"].lower() and "samesite=lax" in reply.headers["set-cookie"].lower()
    page = client.get("/")  # the client keeps the cookie
    assert page.status_code == 200 and "<title>datalyst</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/app.js").status_code == 200
    client.cookies.clear()
    assert client.get("/?token=wrong", follow_redirects=False).status_code == 401


@pytest.mark.parametrize("origin", [None, "http://evil.example", "http://127.0.0.1:9999", "null"])
def test_changes_need_the_same_origin(client, origin):
    reply = client.post("/api/conversations", headers=headers(origin), files={"upload": ("a.csv", b"x,y\n1,2\n")})
    assert reply.status_code == 403 and "same origin" in reply.json()["error"]


def test_a_referer_of_the_same_origin_will_do(client):
    refer = headers(None) | {"Referer": f"{ORIGIN}/"}
    assert (
        client.post("/api/conversations", headers=refer, files={"upload": ("a.csv", b"x,y\n1,2\n")}).status_code == 200
    )


def test_a_loopback_server_answers_only_to_loopback_names(tmp_path):
    with TestClient(create_app(serve_config(tmp_path)), base_url="http://rebound.example") as client:
        reply = client.get("/api/info", headers=headers())
    assert reply.status_code == 403 and "loopback" in reply.json()["error"]
    with TestClient(create_app(serve_config(tmp_path, loopback=False)), base_url="http://10.1.2.3:8765") as client:
        assert client.get("/api/info").status_code == 401  # any name, but never without the token
        assert client.get("/api/info", headers=headers()).status_code == 200


def test_names_never_leave_the_served_folder(tmp_path):
    root = tmp_path / "served"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.csv").write_text("a\n1\n")
    (tmp_path / "secret.csv").write_text("a\n1\n")
    os.symlink(tmp_path / "secret.csv", root / "link.csv")
    os.symlink(tmp_path, root / "up")
    assert inside(root, "sub/ok.csv") == (root / "sub" / "ok.csv").resolve()
    for name in ["../secret.csv", "sub/../../secret.csv", "/etc/passwd", str(tmp_path / "secret.csv"), "link.csv",
                 "up/secret.csv", "", "missing.csv", "sub/\x00.csv"]:  # fmt: skip
        with pytest.raises(Refused):
            inside(root, name)
