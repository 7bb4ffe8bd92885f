"""A gate in front of the Foxglove SDK's WebSocket server: the token check and both subprotocol names.

The SDK's server cannot refuse a client at the handshake, and it accepts only
the subprotocol name ``foxglove.sdk.v1``: a client that asks for the same
protocol by its older name, ``foxglove.websocket.v1`` (apps built on
``@foxglove/ws-protocol``, roslibjs-foxglove, older Lichtblick), gets HTTP 400.
So the service runs the SDK's server on a private loopback port and puts
:class:`TokenGate` where clients connect. The gate answers the HTTP upgrade
request itself: it accepts either name (:data:`SUBPROTOCOLS`) and, with a
token, refuses a client without it (``Authorization: Bearer TOKEN`` or the
query ``?token=TOKEN``, the form a browser such as the Foxglove app can send)
with ``401`` and no WebSocket. An accepted client gets a connection of its own
to the SDK's server, opened under the SDK's name; once both handshakes are
done the gate copies the bytes both ways without reading the frames (the
WebSocket framing is the same under either name, and no extension is
negotiated), so a slow client still fills the SDK's per-client queue and the
SDK drops its old messages.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import threading
from http import HTTPStatus
from typing import Optional
from urllib.parse import parse_qs, urlsplit

#: the subprotocol name the SDK's server accepts
SDK_SUBPROTOCOL = "foxglove.sdk.v1"
#: the names clients may ask for, the SDK's first: one protocol (the second is its name in @foxglove/ws-protocol)
SUBPROTOCOLS = (SDK_SUBPROTOCOL, "foxglove.websocket.v1")
#: RFC 6455's key suffix for Sec-WebSocket-Accept
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
HANDSHAKE_TIMEOUT_S = 10.0
MAX_HANDSHAKE_BYTES = 64 * 1024
COPY_CHUNK = 256 * 1024


def _accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key.strip() + _WS_GUID).encode()).digest()).decode()


def _parse_request(head: bytes):
    """``(path, headers)`` of an HTTP GET request's head; header names lower-cased."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, version = lines[0].split(" ", 2)
    if method != "GET" or not version.startswith("HTTP/1.1"):
        raise ValueError(lines[0])
    headers = {}
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return path, headers


async def _refuse(writer: asyncio.StreamWriter, status: HTTPStatus, body: str) -> None:
    data = body.encode()
    writer.write((f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: text/plain\r\n"
                  f"Content-Length: {len(data)}\r\nConnection: close\r\nServer: snaketrack\r\n\r\n").encode() + data)
    try:
        await writer.drain()
    except ConnectionError:
        pass


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Bytes from ``src`` to ``dst`` until either side closes; ``drain`` carries a slow reader's backpressure."""
    try:
        while data := await src.read(COPY_CHUNK):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, OSError):
        pass


def presented_token(path: str, headers) -> Optional[str]:
    """The token a handshake presents: the ``Authorization: Bearer`` header (``headers``: names lower-cased),
    else the ``token`` query field."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    values = parse_qs(urlsplit(path).query).get("token")
    return values[0] if values else None


class TokenGate:
    """Listen on ``host:port`` (0: any free port), admit clients with ``token`` (None: every client) that ask
    for one of :data:`SUBPROTOCOLS`, relay them to ``127.0.0.1:upstream_port``. Runs its own event loop in a
    thread."""

    def __init__(self, token: Optional[str], host: str, port: int, upstream_port: int):
        self.token, self.host, self.requested_port, self.upstream_port = token, host, int(port), int(upstream_port)
        self.refused = 0
        self.port: Optional[int] = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="snaketrack-gate", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the gate did not start listening within 10 s")
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as e:  # reported to start()
            self._error = e
            self._ready.set()
        finally:
            self._loop.close()

    def _admit(self, path: str, headers) -> Optional[HTTPStatus]:
        """None to accept a handshake, else the status refusing it."""
        if self.token is None:
            return None
        got = presented_token(path, headers)
        if got is None or not hmac.compare_digest(got.encode(), self.token.encode()):
            self.refused += 1
            return HTTPStatus.UNAUTHORIZED
        return None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream, copies = None, []
        self._open[asyncio.current_task()] = [writer]
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANDSHAKE_TIMEOUT_S)
                path, headers = _parse_request(head)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                return await _refuse(writer, HTTPStatus.BAD_REQUEST, "not a WebSocket handshake\n")
            if "websocket" not in headers.get("upgrade", "").lower() or "sec-websocket-key" not in headers:
                return await _refuse(writer, HTTPStatus.UPGRADE_REQUIRED, "a WebSocket handshake is required\n")
            offered = [n.strip() for n in headers.get("sec-websocket-protocol", "").split(",")]
            name = next((n for n in offered if n in SUBPROTOCOLS), None)
            if name is None:
                return await _refuse(writer, HTTPStatus.BAD_REQUEST,
                                     f"subprotocol {' or '.join(SUBPROTOCOLS)} is required\n")
            status = self._admit(path, headers)
            if status is not None:
                return await _refuse(writer, status, "a valid token is required\n")
            try:
                upstream = await asyncio.wait_for(self._open_upstream(), HANDSHAKE_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                return await _refuse(writer, HTTPStatus.BAD_GATEWAY, "the tracker's server did not answer\n")
            writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Accept: {_accept_key(headers['sec-websocket-key'])}\r\n"
                          f"Sec-WebSocket-Protocol: {name}\r\nServer: snaketrack\r\n\r\n").encode())
            await writer.drain()
            up_reader, up_writer = upstream
            self._open[asyncio.current_task()].append(up_writer)
            copies = [asyncio.create_task(_copy(reader, up_writer)), asyncio.create_task(_copy(up_reader, writer))]
            await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
        except (ConnectionError, OSError):
            pass
        finally:
            self._open.pop(asyncio.current_task(), None)
            for task in copies:
                task.cancel()
            if copies:
                await asyncio.gather(*copies, return_exceptions=True)
            for w in (writer, upstream[1] if upstream else None):
                if w is not None:
                    w.close()

    async def _open_upstream(self):
        """A connection to the SDK's server under its subprotocol name, its handshake done."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{self.upstream_port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"Sec-WebSocket-Protocol: {SDK_SUBPROTOCOL}\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].split()
        if len(status_line) < 2 or status_line[1] != b"101":
            writer.close()
            raise ValueError(f"upstream answered {head[:40]!r}")
        return reader, writer

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._open: dict = {}  # each relay's task: its client's and its upstream's writers
        server = await asyncio.start_server(self._handle, self.host, self.requested_port, limit=MAX_HANDSHAKE_BYTES)
        async with server:
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await self._stop.wait()
            server.close()  # no client accepted after the relays are ended
            relays = list(self._open)
            for writers in list(self._open.values()):  # closed sockets end each relay's copies
                for w in writers:
                    w.close()
            if relays:
                await asyncio.wait(relays, timeout=2.0)
