"""Outside the project's virtualenv, importing the project says what to do instead of `No module named 'PIL'`
(`search_engine.infra.environment`)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from search_engine.infra.environment import (
    CORE_MODULES,
    ProjectEnvironmentError,
    missing_modules,
    require_project_environment,
)

REPO = Path(__file__).resolve().parents[2]
FIX = "source .venv/bin/activate (install: bash scripts/install.sh)"


def test_found_modules_pass_and_missing_ones_are_named():
    assert missing_modules(CORE_MODULES) == []  # this suite runs inside the project's environment
    require_project_environment()
    assert missing_modules(["json", "no_such_module_4711", "os"]) == ["no_such_module_4711"]
    with pytest.raises(ImportError) as caught:  # an ImportError: code that catches those still works
        require_project_environment("vrag_rl", ["json", "no_such_module_4711"])
    assert isinstance(caught.value, ProjectEnvironmentError) and caught.value.name == "no_such_module_4711"
    assert "vrag_rl needs no_such_module_4711" in str(caught.value) and FIX in str(caught.value)


def _without_site_packages(code: str) -> subprocess.CompletedProcess:
    """`code` in this interpreter without its site-packages (`-S`): the standard library only, as in a system
    Python that never had the project's packages installed; the checkout is on the path as in its root."""
    return subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); {code}"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def test_the_check_runs_on_a_bare_standard_library():
    proc = _without_site_packages("from search_engine.infra.environment import require_project_environment; "
                                  "require_project_environment()")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("search_engine.infra.environment.ProjectEnvironmentError: vrag_rl needs numpy, PIL")
    assert FIX in last


@pytest.mark.skipif("require_project_environment" not in (REPO / "vrag_rl" / "__init__.py").read_text(),
                    reason="vrag_rl/__init__.py does not call search_engine.infra.environment yet")
def test_importing_the_agent_outside_the_environment_says_to_activate_it():
    proc = _without_site_packages("from vrag_rl import VRAG")
    assert proc.returncode == 1 and "No module named 'PIL'" not in proc.stderr
    assert FIX in proc.stderr.strip().splitlines()[-1]
