"""Length-prefixed JSON frames over a stream socket (host <-> fork server <-> worker)."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAX_FRAME_BYTES = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")


class WireError(Exception):
    """The peer closed the connection or sent something that is not a frame."""


def send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    payload = json.dumps(message, default=str).encode()
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise WireError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> dict[str, Any]:
    (size,) = _HEADER.unpack(recv_exact(sock, _HEADER.size))
    if size > MAX_FRAME_BYTES:
        raise WireError(f"frame of {size} bytes is larger than {MAX_FRAME_BYTES}")
    try:
        message = json.loads(recv_exact(sock, size))
    except ValueError as exc:
        raise WireError(f"malformed frame: {exc}") from exc
    if not isinstance(message, dict):
        raise WireError("frame is not a JSON object")
    return message


class FrameBuffer:
    """Incremental decoder for a non-blocking reader: feed bytes, take whole frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        frames = []
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > MAX_FRAME_BYTES:
                raise WireError(f"frame of {size} bytes is larger than {MAX_FRAME_BYTES}")
            end = _HEADER.size + size
            if len(self._buf) < end:
                break
            try:
                message = json.loads(bytes(self._buf[_HEADER.size : end]))
            except ValueError as exc:
                raise WireError(f"malformed frame: {exc}") from exc
            del self._buf[:end]
            if not isinstance(message, dict):
                raise WireError("frame is not a JSON object")
            frames.append(message)
        return frames
