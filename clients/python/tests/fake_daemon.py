"""A scripted stand-in for the daemon, for protocol cases a real daemon does not produce on demand
(a refused version, answers out of order, a broken or silent connection). One thread per connection."""

from __future__ import annotations

import socket
import struct
import threading

PREFIX = struct.Struct(">IBBHQI")


def read_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the client closed the connection")
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> tuple[int, int, bytes]:
    """(op, request_id, payload) of the next frame."""
    length, op, _flags, _reserved, request_id, _timeout = PREFIX.unpack(read_exactly(sock, PREFIX.size))
    return op, request_id, read_exactly(sock, length - 16)


def send_frame(sock: socket.socket, op: int, request_id: int, payload: bytes = b"") -> None:
    sock.sendall(PREFIX.pack(16 + len(payload), op, 0, 0, request_id, 0) + payload)


def hello_version(payload: bytes) -> int:
    return struct.unpack_from(">H", payload, 4)[0]


def hello_answer(version: int, max_frame: int = 1 << 20, max_page: int = 1 << 16, slab: str = "",
                 checksum: int = 1) -> bytes:
    path = slab.encode()
    answer = struct.pack(">HII", version, max_frame, max_page) + struct.pack(">H", len(path)) + path
    return answer + (bytes([checksum]) if version >= 2 else b"")


def error_payload(code: int, message: str) -> bytes:
    text = message.encode()
    return struct.pack(">HH", code, len(text)) + text


class FakeDaemon:
    """Listens on 127.0.0.1 (any port) and runs ``handler(sock)`` for each connection accepted."""

    def __init__(self, handler):
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.errors: list[BaseException] = []
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self._sockets.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            self.handler(sock)
        except (ConnectionError, OSError):
            pass
        except BaseException as e:  # reported by the test
            self.errors.append(e)
        finally:
            sock.close()

    def close(self) -> None:
        self.listener.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass
