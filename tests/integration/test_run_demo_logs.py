"""`./run_demo.sh` and `./run_demo.sh vimrag` log to their own folders, so starting one demo never truncates
the other's logs.

Each run is the real script up to the point where it has started (and logged) the search server: the UI
port is held by this test, so the script stops there with its "port is taken" message, and stops the
server it started. The whole start-up, browser included, is `tests/browser/`.
"""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from testkit.loopback import free_port

REPO = Path(__file__).resolve().parents[2]


def _start_until_the_ui(mode: str, index: Path, logs: Path, ui_port: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "VRAG_LOG_DIR": str(logs), "VRAG_SEARCH_PORT": str(free_port()),
           "VRAG_UI_PORT": str(ui_port)}
    for key in ("VRAG_POLICY_URL", "VRAG_MODEL", "VRAG_API_KEY", "DASHSCOPE_API_KEY"):
        env.pop(key, None)
    # an endpoint is given (nothing answers there: the script only warns), so no policy server is started
    return subprocess.run(["./run_demo.sh", mode, "--index", str(index), "--policy-url",
                           f"http://127.0.0.1:{free_port()}/v1"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # two search-server start-ups (~25 s each on a shared 2-core machine)
def test_each_demo_mode_logs_to_its_own_folder(marker_engine, tmp_path):
    logs = tmp_path / "logs"
    with socket.socket() as held:  # the UI's port is taken: each run stops after the search server
        held.bind(("127.0.0.1", 0))
        held.listen()
        ui_port = held.getsockname()[1]
        first = _start_until_the_ui("vrag", marker_engine.index_dir, logs, ui_port)
        assert first.returncode == 1 and f"port {ui_port} (Streamlit) is taken" in first.stderr, first.stderr
        assert f"logs of this demo (vrag): {logs}/vrag/" in first.stdout
        vrag_log = logs / "vrag" / "search.log"
        assert f"(log: {vrag_log})" in first.stdout
        written = vrag_log.read_text()
        assert written.strip()  # the search server wrote its start-up lines there

        second = _start_until_the_ui("vimrag", marker_engine.index_dir, logs, ui_port)
        assert second.returncode == 1, second.stderr
    assert (logs / "vimrag" / "search.log").read_text().strip()
    assert vrag_log.read_text() == written  # the first demo's log is still whole
    assert sorted(p.name for p in logs.iterdir()) == ["vimrag", "vrag"]
