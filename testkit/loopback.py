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
