"""Start `./run_demo.sh` on free ports and drive it with headless Chromium (the browser tests' shared part).

`run_demo.sh` is started in its own process group with the sample corpus in a scratch folder and no
real model configured, so each test sees exactly what a new user sees; the group is killed at the end.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from testkit.loopback import free_port

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
MODEL_ENV = ("VRAG_POLICY_URL", "VRAG_MODEL", "VRAG_API_KEY", "DASHSCOPE_API_KEY")


class DemoFailed(RuntimeError):
    """run_demo.sh exited or did not print "==> ready" in time; the message holds its output."""


@dataclass
class RunningDemo:
    url: str  # the UI
    proc: subprocess.Popen
    ports: dict[str, int]
    output: list[str]  # run_demo.sh's lines up to "==> ready"


@contextlib.contextmanager
def running_demo(mode: str, scratch: Path, ready_timeout_s: float = 400) -> Iterator[RunningDemo]:
    """`./run_demo.sh MODE` on free ports, its data under `scratch`, until "==> ready"; killed on exit."""
    ports = {"VRAG_SEARCH_PORT": free_port(), "VRAG_POLICY_PORT": free_port(), "VRAG_UI_PORT": free_port()}
    env = {**os.environ, **{k: str(v) for k, v in ports.items()},
           "VRAG_INDEX_DIR": str(scratch / "index"), "VRAG_SAMPLE_DIR": str(scratch / "pdf"),
           "VRAG_LOG_DIR": str(scratch / "logs"), "VRAG_POLICY_MODEL": ""}
    for key in MODEL_ENV:
        env.pop(key, None)
    proc = subprocess.Popen(["./run_demo.sh", mode], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output: list[str] = []
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if time.monotonic() > deadline:
                raise DemoFailed(f"run_demo.sh {mode} did not get ready:\n" + "".join(output))
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise DemoFailed(f"run_demo.sh {mode} exited:\n" + "".join(output))
            output.append(line)
            if "==> ready" in line:
                break
        yield RunningDemo(f"http://127.0.0.1:{ports['VRAG_UI_PORT']}", proc, ports, output)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def headless_chrome(window_size: str = "1400,2600"):
    """A Selenium Chrome driver on the installed Chromium, headless."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", f"--window-size={window_size}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def save_screenshot(driver, name: str, scratch: Path) -> Path:
    """Screenshot to `scratch/name`; also the docs' copy (docs/images/) with VRAG_UPDATE_SCREENSHOT=1, and a copy
    under VRAG_ARTIFACTS_DIR when set (CI keeps it)."""
    shot = scratch / name
    driver.save_screenshot(str(shot))
    if os.environ.get("VRAG_UPDATE_SCREENSHOT") == "1":
        shutil.copy(shot, REPO / "docs" / "images" / name)
    artifacts = os.environ.get("VRAG_ARTIFACTS_DIR")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / name)
    return shot


def stop_with_ctrl_c(demo: RunningDemo, timeout_s: float = 60) -> None:
    """Ctrl-C to the script's process group, as a user would; raises if it hangs or leaves a port held."""
    import socket

    os.killpg(demo.proc.pid, signal.SIGINT)
    demo.proc.wait(timeout=timeout_s)
    for port in demo.ports.values():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))  # raises if a server still holds the port
