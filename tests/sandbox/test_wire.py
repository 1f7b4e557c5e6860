"""Frames between host, fork server and worker: whole frames only, bounded in size and nesting, never a crash."""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator

import pytest

from datalyst.sandbox._wire import (
    MAX_DEPTH,
    FrameBuffer,
    MalformedFrame,
    WireError,
    recv_frame,
    recv_frame_with_fds,
    send_frame,
)

DEEP = b"[" * 20_000 + b"]" * 20_000  # far past the recursion limit of Python's JSON decoder


def raw(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    with a, b:
        yield a, b


def test_frames_carry_descriptors(pair):
    a, b = pair
    r, w = os.pipe()
    try:
        send_frame(a, {"op": "spawn", "n": 1}, fds=[w])
        message, fds = recv_frame_with_fds(b, max_fds=4)
        assert message == {"op": "spawn", "n": 1} and len(fds) == 1
        os.write(fds[0], b"through")
        os.close(fds[0])
        assert os.read(r, 16) == b"through"
    finally:
        os.close(r)
        os.close(w)


def test_a_frame_sent_in_pieces_is_read_whole(pair):
    a, b = pair
    r, w = os.pipe()
    data = raw(json.dumps({"spec": "x" * 100_000}).encode())
    socket.send_fds(a, [data[:2]], [w])  # part of the header, with the descriptors
    a.sendall(data[2:50])
    a.sendall(data[50:])
    message, fds = recv_frame_with_fds(b, max_fds=4)
    assert message == {"spec": "x" * 100_000} and len(fds) == 1
    for fd in (r, w, *fds):
        os.close(fd)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b"\xff\xfe{}", id="not-utf8"),
        pytest.param(b'{"a": ' + DEEP + b"}", id="deep"),
    ],
)
def test_a_malformed_frame_is_refused_and_the_stream_stays_in_step(pair, payload):
    a, b = pair
    a.sendall(raw(payload))
    send_frame(a, {"after": True})
    with pytest.raises(MalformedFrame):
        recv_frame(b)
    assert recv_frame(b) == {"after": True}


def test_an_oversized_frame_is_skipped_and_the_stream_stays_in_step(pair):
    a, b = pair
    send_frame(a, {"big": "x" * 5000})
    send_frame(a, {"after": True})
    with pytest.raises(MalformedFrame, match="larger than 1000"):
        recv_frame(b, max_bytes=1000)
    assert recv_frame(b) == {"after": True}


def test_descriptors_of_a_malformed_frame_are_closed(pair):
    a, b = pair
    r, w = os.pipe()
    socket.send_fds(a, [raw(b"{broken")], [w])
    os.close(w)
    with pytest.raises(MalformedFrame):
        recv_frame_with_fds(b, max_fds=4)
    assert os.read(r, 1) == b""  # the received copy of the write end was closed too
    os.close(r)


def test_a_closed_connection_is_a_wire_error(pair):
    a, b = pair
    a.sendall(raw(b'{"cut": ')[:6])
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(WireError):
        recv_frame(b)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '[{"x": "]]]"}] \\" [[[' * 1000
    nested: object = "leaf"
    for _ in range(MAX_DEPTH - 1):
        nested = [nested]
    message = {"traceback": text, "nested": nested}
    assert FrameBuffer().feed(raw(json.dumps(message).encode())) == [message]


def test_nesting_deeper_than_the_limit_is_refused():
    nested: object = "leaf"
    for _ in range(MAX_DEPTH):
        nested = [nested]
    with pytest.raises(MalformedFrame, match="nested"):
        FrameBuffer().feed(raw(json.dumps({"nested": nested}).encode()))


def test_buffer_refuses_a_deep_frame_without_recursing():
    with pytest.raises(MalformedFrame):
        FrameBuffer().feed(raw(b'{"files": ' + DEEP + b"}"))


def test_buffer_refuses_an_oversized_frame_from_its_header_alone():
    with pytest.raises(WireError, match="larger than 4096"):
        FrameBuffer(max_bytes=4096).feed(struct.pack(">I", 1 << 30) + b"{")


def test_buffer_assembles_frames_split_anywhere():
    data = b"".join(raw(json.dumps({"n": i}).encode()) for i in range(5))
    buffer, frames = FrameBuffer(), []
    for i in range(0, len(data), 3):
        frames += buffer.feed(data[i : i + 3])
    assert frames == [{"n": i} for i in range(5)]
