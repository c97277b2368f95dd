"""One TCP connection to the daemon: connect, handshake, and deadline-bounded frame I/O.

A :class:`Connection` is not thread-safe; the client's pool lends each one to a single call at a time. Every
blocking operation takes an absolute ``deadline`` (``time.monotonic()`` seconds) and raises
:class:`HiCacheTimeoutError` when it passes, :class:`HiCacheConnectionError` when the socket fails; either marks
the connection broken, and the pool then drops it. Their messages name the daemon's address, the OS error, and what
to check: the client reports them as they are (``HiCacheClient.last_error``, the ``hicache.client`` log).
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import time
from typing import Optional, Sequence

from . import protocol
from .errors import HiCacheConnectionError, HiCacheError, HiCacheProtocolError, HiCacheTimeoutError, error_from_frame
from .protocol import Bytes, ErrorCode, HelloAnswer, Op

try:
    _IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)
except (AttributeError, ValueError, OSError):
    _IOV_MAX = 1024
_DISCARD_CHUNK = 1 << 16
# How long to look for the daemon's ERROR frame after it closed the connection under a send.
_ERROR_AFTER_SEND_FAILURE_S = 0.2
START_ONE = "is the daemon running there? `./hicache serve` starts one"
"""The advice of a failed connect, in the reason the client gives (``HiCacheClient.last_error``)."""


def address(host: str, port: int) -> str:
    """``host:port`` as a reason names it, an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class VersionRefused(HiCacheError):
    """The daemon answered HELLO with ERROR VERSION: it does not speak the version asked for."""


class Frame:
    """The length field and header of an answer just read; its payload is still on the socket."""

    __slots__ = ("op", "request_id", "payload_length")

    def __init__(self, op: int, request_id: int, payload_length: int):
        self.op = op
        self.request_id = request_id
        self.payload_length = payload_length


_BUDGET_REFRESH_S = 0.02


def remaining_s(deadline: float) -> float:
    """Seconds left until ``deadline``; raises HiCacheTimeoutError when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise HiCacheTimeoutError("the call's deadline passed")
    return left


def timeout_ms_until(deadline: float) -> int:
    """The ``timeout_ms`` to send for ``deadline``: at least 1, as 0 would mean the daemon's default of 30 s."""
    return max(1, min(0xFFFFFFFF, int((deadline - time.monotonic()) * 1000)))


class Connection:
    """A connection whose HELLO was accepted. Not thread-safe: one call at a time (the pool sees to that)."""

    def __init__(self, sock: socket.socket, hello: HelloAnswer, next_request_id: int, where: str = "?"):
        self.sock = sock
        self.hello = hello
        self.where = where  # the daemon's host:port, for messages
        self.broken = False
        # An ERROR answer that failed pages of the current call without raising (BUSY, SHUTTING_DOWN, INTERNAL,
        # TIMED_OUT; see transfers.chunk_error), kept for the client to report. The client clears it per call.
        self.refusal: Optional[HiCacheError] = None
        self._next_request_id = next_request_id
        self._prefix = bytearray(protocol.PREFIX_BYTES)
        self._budget_deadline = 0.0  # the deadline the socket's timeout was last set for, and when
        self._budget_set_at = 0.0

    @property
    def version(self) -> int:
        return self.hello.version

    @property
    def checksum(self) -> int:
        """The page checksum kind in force on this connection (0 CRC-32C, 1 CRC-32)."""
        return self.hello.checksum

    def new_request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    @classmethod
    def open(cls, host: str, port: int, token: str, version: int, checksum: int, deadline: float,
             tls: Optional[ssl.SSLContext] = None) -> "Connection":
        """Connects (over TLS with ``tls``) and shakes hands; raises VersionRefused on ERROR VERSION,
        HiCacheAuthError on a wrong token, HiCacheConnectionError on a certificate either side refuses."""
        where = address(host, port)
        budget = 0.0
        try:
            budget = remaining_s(deadline)
            sock = socket.create_connection((host, port), timeout=budget)
            if tls is not None:
                try:
                    sock = tls.wrap_socket(sock, server_hostname=host)
                except (ssl.SSLError, ssl.CertificateError) as e:
                    sock.close()
                    raise HiCacheConnectionError(f"the TLS handshake with the daemon at {where} failed: {e}") from None
        except HiCacheTimeoutError:
            raise HiCacheTimeoutError(f"the deadline passed before connecting to the daemon at {where}") from None
        except socket.timeout:
            raise HiCacheTimeoutError(f"connecting to the daemon at {where} took past the deadline ({budget:.3g} s) "
                                      f"and nothing answered; check the host, the port and any firewall: "
                                      f"{START_ONE}") from None
        except OSError as e:
            raise HiCacheConnectionError(f"cannot connect to the daemon at {where}: {e}; {START_ONE}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = cls(sock, HelloAnswer(version, 0, 0, "", checksum), next_request_id=1, where=where)
            hello_id = connection.new_request_id()
            payload = protocol.hello_payload(version, token, checksum)
            connection.send([protocol.frame_prefix(Op.HELLO, hello_id, timeout_ms_until(deadline), len(payload)),
                             payload], deadline)
            frame = connection.read_frame(deadline)
            body = connection.read_payload(frame, deadline)
            if frame.op == Op.ERROR:
                code, message = protocol.parse_error(body)
                if code == ErrorCode.VERSION:
                    raise VersionRefused(message, ErrorCode.VERSION)
                raise error_from_frame(code, f"the daemon at {where} refused the handshake: {message}")
            if frame.op != Op.HELLO | protocol.ANSWER_FLAG or frame.request_id != hello_id:
                raise HiCacheProtocolError(f"the daemon answered HELLO with op 0x{frame.op:x}, id {frame.request_id}")
            try:
                connection.hello = protocol.parse_hello_answer(body, version)
            except (ValueError, UnicodeDecodeError) as e:
                raise HiCacheProtocolError(f"a HELLO answer that does not parse: {e}") from None
            return connection
        except BaseException:
            sock.close()
            raise

    def close(self) -> None:
        self.broken = True
        try:
            self.sock.close()
        except OSError:
            pass

    def looks_closed(self) -> bool:
        """True if an idle connection has something to read: the daemon closed it (or sent what nobody asked)."""
        if self.broken:
            return True
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _wait_budget(self, deadline: float) -> None:
        """Bounds the next socket call by ``deadline``. The timeout is set again only when the deadline changed or
        :data:`_BUDGET_REFRESH_S` passed since (setting it on each of a large page's many ``recv_into`` calls took a
        tenth of a GET's time), so a call may end that much after its deadline at most."""
        left = remaining_s(deadline)
        now = deadline - left
        if deadline != self._budget_deadline or now - self._budget_set_at > _BUDGET_REFRESH_S:
            self.sock.settimeout(left)
            self._budget_deadline, self._budget_set_at = deadline, now

    def _failed(self, error: BaseException, doing: str) -> HiCacheError:
        self.broken = True
        if isinstance(error, socket.timeout) or (isinstance(error, HiCacheTimeoutError) and error.code is None):
            return HiCacheTimeoutError(f"the daemon at {self.where} did not answer in time (the call's deadline "
                                       f"passed while {doing}); it may be stalled or overloaded, or the call's "
                                       f"timeout_s too short")
        if isinstance(error, HiCacheError):
            return error
        return HiCacheConnectionError(f"the connection to the daemon at {self.where} failed while {doing}: {error}; "
                                      f"the daemon may have stopped or restarted (the next call connects again)")

    def send(self, buffers: Sequence[Bytes], deadline: float) -> None:
        """Sends ``buffers`` back to back (one ``sendmsg`` per up to IOV_MAX of them, no joined copy)."""
        views = [memoryview(b) for b in buffers]
        views = [v if v.format == "B" and v.ndim == 1 else v.cast("B") for v in views if v.nbytes]
        first = 0
        try:
            if isinstance(self.sock, ssl.SSLSocket):  # TLS has no sendmsg: one record stream per buffer
                for view in views:
                    self._wait_budget(deadline)
                    self.sock.sendall(view)
                return
            while first < len(views):
                self._wait_budget(deadline)
                sent = self.sock.sendmsg(views[first:first + _IOV_MAX])
                while sent:
                    n = views[first].nbytes
                    if sent >= n:
                        sent -= n
                        first += 1
                    else:
                        views[first] = views[first][sent:]
                        sent = 0
        except (OSError, HiCacheError) as e:
            error = self._failed(e, "sending a request")
            if isinstance(error, HiCacheConnectionError):
                refusal = self._error_frame_after_send_failure()
                if refusal is not None:
                    raise refusal from None
            raise error from None

    def _error_frame_after_send_failure(self) -> Optional[HiCacheError]:
        """The daemon's ERROR frame if it sent one before closing (TOO_LARGE, BUSY, AUTH...), else None."""
        try:
            deadline = time.monotonic() + _ERROR_AFTER_SEND_FAILURE_S
            frame = self.read_frame(deadline)
            if frame.op != Op.ERROR or frame.payload_length > 8192:
                return None
            code, message = protocol.parse_error(self.read_payload(frame, deadline))
            return error_from_frame(code, message)
        except (HiCacheError, OSError):
            return None

    def recv_into(self, view: memoryview, deadline: float) -> None:
        """Fills ``view`` completely from the socket."""
        got = 0
        total = view.nbytes
        try:
            while got < total:
                self._wait_budget(deadline)
                n = self.sock.recv_into(view[got:] if got else view)
                if n == 0:
                    raise HiCacheConnectionError(f"the daemon at {self.where} closed the connection; it may have "
                                                 f"stopped or restarted, or refused the request (its log says why)")
                got += n
        except (OSError, HiCacheError) as e:
            raise self._failed(e, "reading an answer") from None

    def read_frame(self, deadline: float) -> Frame:
        """Reads the next answer's length field and header."""
        self.recv_into(memoryview(self._prefix), deadline)
        length, op, _flags, _reserved, request_id, _timeout = protocol.FRAME_PREFIX.unpack(self._prefix)
        if length < protocol.HEADER_BYTES:
            self.broken = True
            raise HiCacheProtocolError(f"an answer frame of length {length}, shorter than its header")
        return Frame(op, request_id, length - protocol.HEADER_BYTES)

    def read_payload(self, frame: Frame, deadline: float) -> bytearray:
        """The whole payload of ``frame``, into a new bytearray (for small answers)."""
        payload = bytearray(frame.payload_length)
        self.recv_into(memoryview(payload), deadline)
        return payload

    def read_bytes(self, count: int, deadline: float) -> bytearray:
        data = bytearray(count)
        self.recv_into(memoryview(data), deadline)
        return data

    def discard(self, count: int, deadline: float) -> None:
        """Reads and drops ``count`` bytes (the payload of an answer nobody waits for)."""
        scratch = memoryview(bytearray(min(count, _DISCARD_CHUNK)))
        while count:
            n = min(count, scratch.nbytes)
            self.recv_into(scratch[:n], deadline)
            count -= n
