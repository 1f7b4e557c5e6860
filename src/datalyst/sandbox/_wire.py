"""Length-prefixed JSON frames over a stream socket (host <-> fork server <-> worker).

A frame is a 4-byte big-endian length and that many bytes of one JSON object. Frames may carry
file descriptors (host -> fork server). What a peer sends is bounded before it is decoded: in size,
and in nesting depth, so a deeply nested frame cannot make Python's recursive JSON decoder overflow.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any

from datalyst.jsonl import nesting_depth

MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 16
"""Deepest nesting of arrays and objects in a frame (ours never go past 4)."""
_HEADER = struct.Struct(">I")


class WireError(Exception):
    """The peer closed the connection or sent something that is not a frame."""


class MalformedFrame(WireError):
    """A whole frame arrived but is too large, too deep or not a JSON object (the stream is still in step)."""


def send_frame(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one frame; ``fds`` travel with its first bytes."""
    data = _frame(message)
    if fds:
        data = data[socket.send_fds(sock, [data], list(fds)) :]
    sock.sendall(data)


async def asend_frame(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """``send_frame`` on a non-blocking socket: waits, without blocking the event loop, while the peer reads."""
    loop = asyncio.get_running_loop()
    data = _frame(message)
    while fds:
        try:
            data, fds = data[socket.send_fds(sock, [data], list(fds)) :], ()
        except BlockingIOError:
            writable = loop.create_future()
            loop.add_writer(sock, _settle, writable)
            try:
                await writable
            finally:
                loop.remove_writer(sock)
    await loop.sock_sendall(sock, data)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _frame(message: dict[str, Any]) -> bytes:
    payload = json.dumps(message, default=str).encode()
    return _HEADER.pack(len(payload)) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise WireError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, *, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Read one frame (a frame over ``max_bytes`` is read past and refused with MalformedFrame)."""
    return _read_rest(sock, recv_exact(sock, _HEADER.size), max_bytes)


def recv_frame_with_fds(
    sock: socket.socket, max_fds: int, *, max_bytes: int = MAX_FRAME_BYTES
) -> tuple[dict[str, Any], list[int]]:
    """Read one frame and the descriptors that came with it (closed again if the frame is refused)."""
    start, fds, _, _ = socket.recv_fds(sock, _HEADER.size, max_fds)
    if not start:
        raise WireError("connection closed")
    try:
        return _read_rest(sock, start + recv_exact(sock, _HEADER.size - len(start)), max_bytes), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _read_rest(sock: socket.socket, header: bytes, max_bytes: int) -> dict[str, Any]:
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        remaining = size
        while remaining:  # skip it, so that the next frame is read from its start
            remaining -= len(recv_exact(sock, min(remaining, 1 << 20)))
        raise MalformedFrame(f"frame of {size} bytes is larger than {max_bytes}")
    return decode(recv_exact(sock, size))


def decode(payload: bytes) -> dict[str, Any]:
    """The JSON object in one frame's payload; MalformedFrame when it is anything else or nests too deep."""
    if nesting_depth(payload) > MAX_DEPTH:
        raise MalformedFrame(f"frame nested deeper than {MAX_DEPTH} levels")
    try:
        message = json.loads(payload)
    except ValueError as exc:
        raise MalformedFrame(f"malformed frame: {exc}") from exc
    if not isinstance(message, dict):
        raise MalformedFrame("frame is not a JSON object")
    return message


class FrameBuffer:
    """Incremental decoder for a non-blocking reader: feed bytes, take whole frames."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self.max_bytes = max_bytes

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Whole frames completed by ``data``; WireError as soon as a header announces a frame over ``max_bytes``."""
        self._buf += data
        frames = []
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > self.max_bytes:
                raise WireError(f"frame of {size} bytes is larger than {self.max_bytes}")
            end = _HEADER.size + size
            if len(self._buf) < end:
                break
            payload = bytes(self._buf[_HEADER.size : end])
            del self._buf[:end]
            frames.append(decode(payload))
        return frames
