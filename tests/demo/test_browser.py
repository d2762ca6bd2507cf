"""End to end in a real browser: ./run_demo.sh starts everything, headless Chromium asks a question.

Saves a screenshot (the README's, when VRAG_UPDATE_SCREENSHOT=1). Skips with a reason where
Chromium or chromedriver is not installed (`bash scripts/install.sh --test` installs them).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from testkit.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="chromium and chromedriver are not installed"),
]


@pytest.fixture()
def demo(tmp_path):
    ports = {"VRAG_SEARCH_PORT": free_port(), "VRAG_POLICY_PORT": free_port(), "VRAG_UI_PORT": free_port()}
    env = {**os.environ, **{k: str(v) for k, v in ports.items()},
           "VRAG_INDEX_DIR": str(tmp_path / "index"), "VRAG_SAMPLE_DIR": str(tmp_path / "pdf"),
           "VRAG_LOG_DIR": str(tmp_path / "logs"), "VRAG_POLICY_MODEL": ""}
    for key in ("VRAG_POLICY_URL", "VRAG_MODEL", "VRAG_API_KEY"):
        env.pop(key, None)
    proc = subprocess.Popen(["./run_demo.sh", "vrag"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = []
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            pytest.fail("run_demo.sh exited:\n" + "".join(output))
        output.append(line)
        if "==> ready" in line:
            break
    else:
        pytest.fail("run_demo.sh did not get ready:\n" + "".join(output))
    yield f"http://127.0.0.1:{ports['VRAG_UI_PORT']}", proc, ports, output
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--window-size=1400,2600"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


SAMPLE_QUESTIONS = [  # the sample corpus's own questions, beyond the first; the answer each must show
    ("How many employees did Acme Robotics have at the end of 2023?", r"1,870"),
    ("What share of commuters ride the bicycle according to the Metro Travel Survey?", r"12%"),
    ("What dividend per share did the board approve in the memo?", r"0\.42 dollars"),
    # the UI's placeholder example; tesseract reads this small table's "7.4" as "74" at some sizes
    ("What satisfaction score did the Riverside district get?", r"\b7\.?4\b"),
]
ANSWER_BOX = "//*[@data-testid='stAlertContentSuccess' or @data-testid='stAlert'][contains(., 'Answer:')]"


def _ask(driver, wait, question: str) -> str:
    """Type a question into the form, submit it, and return the answer once the episode has finished
    (read from its history entry, "question → answer", which appears only then; the live view may
    still show the previous episode's stale elements while the new one runs)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC

    box = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'input[aria-label="Question"]')))
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(question)
    box.send_keys(Keys.ENTER)  # submits the form
    entry = re.escape(question) + r" → (.+)"
    text = wait.until(lambda d: re.search(entry, d.find_element(By.TAG_NAME, "body").text))
    return text.group(1)


@pytest.mark.slow
def test_demo_in_a_browser(demo, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, proc, ports, output = demo
    assert any("rule-based OCR" in line for line in output)  # no VLM here: the stand-in policy is announced
    driver = _browser()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 180)
        # the page itself says that a stand-in answers, and how to plug in a real VLM
        wait.until(lambda d: "rule-based stand-in" in d.find_element(By.TAG_NAME, "body").text)
        assert "not a VLM" in driver.find_element(By.TAG_NAME, "body").text
        answer = _ask(driver, wait, "How much power does the Kestrel Ridge solar plant produce?")
        assert answer == "410 MW"
        assert "Answer: 410 MW" in driver.find_elements(By.XPATH, ANSWER_BOX)[0].text
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stImage"] img')) >= 3)
        page_text = driver.find_element(By.TAG_NAME, "body").text
        assert "retrieved page solar_energy_brief_3" in page_text
        assert "where the agent looked (model frame" in page_text and "page pixels" in page_text
        time.sleep(1.0)  # let images finish painting
        shot = tmp_path / "demo.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
        if os.environ.get("VRAG_UPDATE_SCREENSHOT") == "1":
            shutil.copy(shot, REPO / "docs" / "images" / "demo.png")
        artifacts = os.environ.get("VRAG_ARTIFACTS_DIR")
        if artifacts:
            Path(artifacts).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(artifacts) / "demo.png")
        for question, expected in SAMPLE_QUESTIONS:
            answer = _ask(driver, wait, question)
            assert re.search(expected, answer), (question, answer)
    finally:
        driver.quit()
    # Ctrl-C stops every process the script started
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    import socket

    for port in ports.values():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))  # raises if a server still holds the port
