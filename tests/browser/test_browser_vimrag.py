"""`./run_demo.sh vimrag` end to end in headless Chromium: a question asked, the memory graph drawn
live (its nodes present in the page), the answer shown. Saves docs/vimrag.md's screenshot when
VRAG_UPDATE_SCREENSHOT=1. Skips where Chromium or chromedriver is not installed."""
from __future__ import annotations

import time

import pytest

from testkit import demo_browser as browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not (browser.CHROMIUM and browser.DRIVER), reason="chromium and chromedriver are not installed"),
]


@pytest.fixture()
def vimrag_demo(tmp_path):
    try:
        with browser.running_demo("vimrag", tmp_path) as running:
            yield running
    except browser.DemoFailed as exc:
        pytest.fail(str(exc))


def _graph_nodes(driver) -> list[str]:
    """Texts of the nodes of the drawn memory graph (SVG rendered by Streamlit's bundled Graphviz)."""
    from selenium.webdriver.common.by import By

    return [n.text for n in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stGraphVizChart"] svg g.node')]


def test_vimrag_demo_draws_the_graph_and_answers(vimrag_demo, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    demo = vimrag_demo
    assert any("vimrag-rule-based OCR stand-in" in line for line in demo.output)  # no endpoint, no key
    driver = browser.headless_chrome("1500,2100")
    try:
        driver.get(demo.url)
        wait = WebDriverWait(driver, 240)
        box = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'input[aria-label="Question"]')))
        box.send_keys("How much power does the Kestrel Ridge solar plant produce?")
        box.send_keys(Keys.ENTER)
        answer = wait.until(EC.presence_of_element_located(
            (By.XPATH, "//*[@data-testid='stAlertContentSuccess' or @data-testid='stAlert'][contains(., 'Answer')]")))
        assert "410" in answer.text
        nodes = []
        for _ in range(60):  # Graphviz renders asynchronously (WASM)
            nodes = _graph_nodes(driver)
            if len(nodes) >= 3:
                break
            time.sleep(0.5)
        joined = "\n".join(nodes)
        assert len(nodes) >= 3 and "question" in joined and "answer" in joined and "search_1" in joined, nodes
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "Memory graph" in body and "New node search_1" in body and "Memorised" in body
        assert "solar_energy_brief_3" in body
        time.sleep(1.5)  # let images and the graph finish painting
        assert browser.save_screenshot(driver, "vimrag_demo.png", tmp_path).stat().st_size > 20_000
    finally:
        driver.quit()
    browser.stop_with_ctrl_c(demo)  # Ctrl-C stops every process the script started and frees the ports
