"""Tesseract runs with one OpenMP thread, and that limit no longer leaks into this process's torch.

The limit used to be written into `os.environ` at import, where torch's own OpenMP runtime read it:
ingestion's MiniLM batches then ran on one core of two while torch reported two threads.
"""

import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
from PIL import Image, ImageDraw

from search_engine import text_extraction

pytestmark = pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs the tesseract binary")


def test_importing_ingestion_leaves_the_process_openmp_alone():
    env = {key: value for key, value in os.environ.items() if key != "OMP_THREAD_LIMIT"}
    code = textwrap.dedent("""
        import os
        import search_engine.ingest, search_engine.text_extraction, search_engine.layout.pdf, search_engine.layout.ocr
        print(os.environ.get("OMP_THREAD_LIMIT", "unset"))
    """)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "unset"


def test_tesseract_itself_gets_one_openmp_thread(tmp_path, monkeypatch):
    import pytesseract

    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    monkeypatch.setenv("VRAG_TEST_MARK", "seen")  # the live environment still reaches tesseract
    seen = tmp_path / "env.txt"
    wrapper = tmp_path / "tesseract"
    wrapper.write_text(f'#!/bin/sh\nenv > "{seen}"\nexec "{shutil.which("tesseract")}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", str(wrapper))
    text_extraction._checked_tesseract.cache_clear()
    image = Image.new("RGB", (400, 120), "white")
    ImageDraw.Draw(image).text((20, 40), "HELLO WORLD", fill="black")
    try:
        text_extraction.ocr_reading(image, "eng")
    finally:
        text_extraction._checked_tesseract.cache_clear()
    env_lines = seen.read_text().splitlines()
    assert "OMP_THREAD_LIMIT=1" in env_lines and "VRAG_TEST_MARK=seen" in env_lines
    assert "OMP_THREAD_LIMIT" not in os.environ
