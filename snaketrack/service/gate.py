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
with ``401`` and no WebSocket. An accepted client is relayed, message for
message, through a connection of its own to the SDK's server under the SDK's
name, which keeps its per-client queue (and its dropping of old messages for a
slow client).
"""
from __future__ import annotations

import asyncio
import hmac
import threading
from http import HTTPStatus
from typing import Optional
from urllib.parse import parse_qs, urlsplit

#: the subprotocol name the SDK's server accepts
SDK_SUBPROTOCOL = "foxglove.sdk.v1"
#: the names clients may ask for, the SDK's first: one protocol (the second is its name in @foxglove/ws-protocol)
SUBPROTOCOLS = (SDK_SUBPROTOCOL, "foxglove.websocket.v1")


def presented_token(path: str, headers) -> Optional[str]:
    """The token a handshake presents: the ``Authorization: Bearer`` header, else the ``token`` query field."""
    auth = headers.get("Authorization") or ""
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
        self._ready.wait(10)
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

    def _admit(self, connection, request):
        if self.token is None:
            return None
        got = presented_token(request.path, request.headers)
        if got is None or not hmac.compare_digest(got.encode(), self.token.encode()):
            self.refused += 1
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid token is required\n")
        return None

    async def _relay(self, client) -> None:
        from websockets.asyncio.client import connect

        upstream_url = f"ws://127.0.0.1:{self.upstream_port}"
        async with connect(upstream_url, subprotocols=[SDK_SUBPROTOCOL], max_size=None, compression=None) as upstream:
            async def pump(src, dst):
                async for message in src:
                    await dst.send(message)

            tasks = [asyncio.create_task(pump(client, upstream)), asyncio.create_task(pump(upstream, client))]
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()

    async def _serve(self) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        async with serve(self._relay, self.host, self.requested_port, subprotocols=list(SUBPROTOCOLS),
                         process_request=self._admit, max_size=None, compression=None,
                         server_header="snaketrack") as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            self._ready.set()
            await self._stop.wait()
