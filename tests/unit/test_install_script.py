"""`scripts/install.sh` as a new user sees it: numbered steps while it works, pip's own per-package
output (not `-q`), and a last line naming the command to run next.

It runs the real script in a scratch copy of the repository with stand-ins for what it calls (dpkg,
apt-get, the Python that makes the virtualenv, and that virtualenv's python), so nothing is installed;
the stand-ins log their arguments. The real install is run by CI (`.ci/run`) and by every fresh machine.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

VENV_PYTHON = """#!/usr/bin/env bash
echo "venv-python $*" >> "$CALLS"
case "$*" in
  *sysconfig*) echo "$SITE_DIR" ;;
  *"import torch, transformers"*) echo "torch 0.0-test transformers 0.0-test" ;;
esac
"""
SYSTEM_PYTHON = """#!/usr/bin/env bash
echo "system-python $*" >> "$CALLS"
if [[ "$1" == "-m" && "$2" == "venv" ]]; then
  mkdir -p "$3/bin" && cp "$VENV_PYTHON_STUB" "$3/bin/python" && chmod +x "$3/bin/python"
fi
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture()
def checkout(tmp_path):
    """A scratch repository holding the real install script, and stand-ins on PATH."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "install.sh", repo / "scripts" / "install.sh")
    (repo / "requirements_demo.txt").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "dpkg", '#!/usr/bin/env bash\n[[ " $MISSING " != *" ${@: -1} "* ]]\n')
    _executable(bin_dir / "apt-get", '#!/usr/bin/env bash\necho "apt-get $*" >> "$CALLS"\n')
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "CALLS": str(tmp_path / "calls.log"),
           "SITE_DIR": str(tmp_path / "site"), "MISSING": "",
           "VENV_PYTHON_STUB": str(_executable(tmp_path / "venv_python", VENV_PYTHON)),
           "PYTHON": str(_executable(tmp_path / "python3", SYSTEM_PYTHON))}
    (tmp_path / "site").mkdir()
    return repo, env


def _install(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(repo / "scripts" / "install.sh"), *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode, next_command", [("", "./run_demo.sh"), ("--test", "bash scripts/run_tests.sh")])
def test_install_numbers_its_steps_and_names_the_next_command(checkout, mode, next_command):
    repo, env = checkout
    proc = _install(repo, env, *([mode] if mode else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    steps = [line for line in lines if line.startswith("[install] ") and "/4 " in line]
    assert [s.split()[1] for s in steps] == ["1/4", "2/4", "3/4", "4/4"]
    assert "system packages" in steps[0] and ("chromium" in steps[0]) == (mode == "--test")
    # the OCR packs of the scripts ingestion detects per page (search_engine/ocr_languages.py)
    assert all(f"tesseract-ocr-{pack}" in steps[0] for pack in ("eng", "chi-sim", "jpn", "kor"))
    assert "python packages" in steps[2] and "minutes" in steps[2]  # the long step says it is long
    assert lines[-2].startswith("[install] done: torch 0.0-test")
    assert lines[-1].startswith(f"[install] next: {next_command} ") and "source .venv/bin/activate" in lines[-1]
    calls = (Path(env["CALLS"])).read_text().splitlines()
    pip = [c for c in calls if " -m pip install " in c]
    assert len(pip) == 2 and "-r requirements_demo.txt" in pip[0]
    assert " -q " not in pip[0] and "--progress-bar" in pip[0]  # pip shows what it does while it does it
    assert (Path(env["SITE_DIR"]) / "vrag_torchvision_shim.pth").is_file()
    assert (repo / ".venv" / "bin" / "python").is_file()


def test_a_second_run_updates_the_venv_and_missing_system_packages_are_named(checkout):
    repo, env = checkout
    assert _install(repo, env).returncode == 0
    if os.geteuid() != 0:
        pytest.skip("the apt-get path needs root or sudo")
    proc = _install(repo, {**env, "MISSING": "tesseract-ocr-chi-sim"})
    assert proc.returncode == 0, proc.stderr
    assert ".venv exists: updating it" in proc.stdout
    assert "missing: tesseract-ocr-chi-sim" in proc.stdout
    assert "apt-get install -y -qq tesseract-ocr-chi-sim" in Path(env["CALLS"]).read_text()


def test_an_unknown_option_is_refused_before_anything_runs(checkout):
    repo, env = checkout
    proc = _install(repo, env, "--tests")
    assert proc.returncode == 2 and "unknown option '--tests'" in proc.stderr
    assert not Path(env["CALLS"]).exists()
