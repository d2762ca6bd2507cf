"""Run a real ASGI app under uvicorn on a free loopback port, in a background thread.

Tests talk to servers over real sockets (as an agent talks to vLLM and the search server), not to
patched functions; this keeps the start/stop boilerplate in one place.
"""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import uvicorn


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LoopbackServer:
    def __init__(self, app, port: int | None = None, health_path: str = "/health"):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.health_path = health_path
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self, timeout: float = 60.0) -> LoopbackServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._server.started:
                try:
                    if httpx.get(self.url + self.health_path, timeout=2.0).status_code < 500:
                        return self
                except httpx.HTTPError:
                    pass
            if not self._thread.is_alive():
                raise RuntimeError("server thread died during start-up")
            time.sleep(0.05)
        raise TimeoutError(f"server on {self.url} did not become healthy in {timeout}s")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@contextlib.contextmanager
def serve(app, port: int | None = None, health_path: str = "/health") -> Iterator[LoopbackServer]:
    server = LoopbackServer(app, port=port, health_path=health_path).start()
    try:
        yield server
    finally:
        server.stop()


class RecordingApp:
    """An ASGI app whose every HTTP request target is recorded in `paths` (the raw path, plus the query string
    with `with_query`): what a client's arguments made it reach, for the URL-injection tests."""

    def __init__(self, app, with_query: bool = True):
        self.app = app
        self.with_query = with_query
        self.paths: list[str] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
            query = scope.get("query_string", b"").decode("latin-1") if self.with_query else ""
            self.paths.append(f"{path}?{query}" if query else path)
        await self.app(scope, receive, send)


def recording_search_server(index_dir, with_query: bool = True) -> LoopbackServer:
    """A started search server over `index_dir` (paths exposed, as on loopback) whose requests are recorded
    in `server.recorder.paths`; the caller stops it."""
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine

    recorder = RecordingApp(create_app(engine=SearchEngine.load(index_dir), expose_paths=True), with_query)
    server = LoopbackServer(recorder).start()
    server.recorder = recorder
    return server
