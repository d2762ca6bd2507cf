"""One way to start the search server: `vrag-search serve` (= `python -m search_engine serve`), no second CLI."""

import subprocess
import sys


def test_the_module_form_is_the_serve_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "search_engine", "serve", "--index", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no index at" in proc.stderr and "Traceback" not in proc.stderr


def test_the_old_second_way_says_which_command_to_use(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "search_engine.api", "--index", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "vrag-search serve --index DIR" in proc.stderr and "Traceback" not in proc.stderr
