"""End to end in a real browser: ./run_demo.sh starts everything, headless Chromium asks a question.

Saves a screenshot (the README's, when VRAG_UPDATE_SCREENSHOT=1). Skips with a reason where
Chromium or chromedriver is not installed (`bash scripts/install.sh --test` installs them).
"""
from __future__ import annotations

import re
import time

import pytest

from testkit import demo_browser as browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (browser.CHROMIUM and browser.DRIVER), reason="chromium and chromedriver are not installed"),
]


@pytest.fixture()
def demo(tmp_path):
    try:
        with browser.running_demo("vrag", tmp_path) as running:
            yield running
    except browser.DemoFailed as exc:
        pytest.fail(str(exc))


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


def _click_sample(driver, wait, question: str) -> str:
    """Click the sample-question button that holds `question` and return the answer, as `_ask` does."""
    from selenium.webdriver.common.by import By

    def sample_button(d):
        return next((b for b in d.find_elements(By.TAG_NAME, "button") if b.text.strip() == question), None)

    button = wait.until(sample_button)
    button.click()
    entry = re.escape(question) + r" → (.+)"
    text = wait.until(lambda d: re.search(entry, d.find_element(By.TAG_NAME, "body").text))
    return text.group(1)


@pytest.mark.slow
def test_demo_in_a_browser(demo, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    assert any("rule-based OCR" in line for line in demo.output)  # no VLM here: the stand-in policy is announced
    driver = browser.headless_chrome("1400,2600")
    try:
        driver.get(demo.url)
        wait = WebDriverWait(driver, 180)
        # the page itself says that a stand-in answers, and how to plug in a real VLM
        wait.until(lambda d: "rule-based stand-in" in d.find_element(By.TAG_NAME, "body").text)
        # the Corpus panel is open from the start; it renders once the search server has listed the documents,
        # which may be after the page's first lines on a loaded machine (read at once, it failed so in a full run)
        wait.until(lambda d: "page(s) indexed" in d.find_element(By.TAG_NAME, "body").text)
        # the sample buttons are drawn after the question form, which Streamlit may send in a later message
        # (read with the corpus panel, they were missing once in a full CI run)
        wait.until(lambda d: "Try a sample question" in d.find_element(By.TAG_NAME, "body").text)
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "not a VLM" in body
        assert "4 document(s), 12 page(s) indexed" in body
        answer = _ask(driver, wait, "How much power does the Kestrel Ridge solar plant produce?")
        assert answer == "410 MW"
        assert "Answer: 410 MW" in driver.find_elements(By.XPATH, ANSWER_BOX)[0].text
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stImage"] img')) >= 3)
        page_text = driver.find_element(By.TAG_NAME, "body").text
        assert "retrieved page solar_energy_brief_3" in page_text
        assert "where the agent looked (model frame" in page_text and "page pixels" in page_text
        time.sleep(1.0)  # let images finish painting
        assert browser.save_screenshot(driver, "demo.png", tmp_path).stat().st_size > 20_000
        for i, (question, expected) in enumerate(SAMPLE_QUESTIONS):
            answer = (_click_sample if i == 0 else _ask)(driver, wait, question)  # a sample button, then typing
            assert re.search(expected, answer), (question, answer)
    finally:
        driver.quit()
    browser.stop_with_ctrl_c(demo)  # Ctrl-C stops every process the script started and frees the ports
