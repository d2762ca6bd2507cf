"""Is this Python the project's environment? One clear sentence instead of `No module named 'PIL'`.

`scripts/install.sh` installs everything into `.venv`. A newcomer who runs `python -c "from vrag_rl
import VRAG"` (or `python scripts/...`) with the system's Python gets, without this check, an
ImportError for whichever third-party module happens to be imported first — true, but it does not
say what to do. `require_project_environment()` looks the core packages up without importing them
(`importlib.util.find_spec`, a few milliseconds) and raises one `ImportError` that names the missing
ones and the fix. Standard library only: it runs before anything else can be imported.
"""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable

# Import names of the core dependencies (pyproject.toml's `dependencies`) that the agent and the search
# client import first; finding them all is a good sign the interpreter has the project's packages.
CORE_MODULES = ("numpy", "PIL", "aiohttp", "httpx", "pydantic", "typer", "yaml")

HOW_TO_FIX = "run inside the project's virtualenv: source .venv/bin/activate (install: bash scripts/install.sh)"


class ProjectEnvironmentError(ImportError):
    """The interpreter lacks the project's dependencies; the message says how to get into the right one."""


def missing_modules(modules: Iterable[str] = CORE_MODULES) -> list[str]:
    """The top-level modules of `modules` this interpreter cannot import (found by lookup, not imported)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken or half-installed package counts as missing
            found = False
        if not found:
            missing.append(name)
    return missing


def require_project_environment(package: str = "vrag_rl", modules: Iterable[str] = CORE_MODULES) -> None:
    """Raise `ProjectEnvironmentError` (an ImportError) when any of `modules` is missing, saying to run
    inside the project's virtualenv; return quietly otherwise."""
    missing = missing_modules(modules)
    if missing:
        raise ProjectEnvironmentError(
            f"{package} needs {', '.join(missing)}, which this Python ({sys.executable}) does not have: "
            f"{HOW_TO_FIX}", name=missing[0])
