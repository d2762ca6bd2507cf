"""`search_engine.infra` is the ground floor: each module imports nothing of the project but the floor itself.

Both checks can fail: the static one on any `import`/`from` line naming another project module (lazy ones
inside functions included), the dynamic one on any project module a fresh interpreter loads with it.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import search_engine.infra

INFRA = Path(search_engine.infra.__file__).parent
MODULES = sorted(p.stem for p in INFRA.glob("*.py") if p.stem != "__init__")
PROJECT = ("search_engine", "vrag_rl", "vimrag", "demo", "testkit")


def _imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_floor_holds_the_shared_infrastructure():
    assert {"torchvision_shim", "devices", "http_guard", "http_session", "malloc_tuning"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_no_import_line_names_another_room(module):
    outside = {name for name in _imported_names(INFRA / f"{module}.py")
               if name.split(".")[0] in PROJECT and not name.startswith("search_engine.infra")}
    assert not outside, f"search_engine.infra.{module} imports {outside}"


@pytest.mark.parametrize("module", MODULES)
def test_loading_it_loads_no_other_room(module):
    code = (f"import sys, json; import search_engine.infra.{module}; "
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {PROJECT!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    # the package's own __init__ (it installs the torchvision hook from the floor) is allowed; nothing else
    allowed = {"search_engine", "search_engine.infra"}
    assert set(loaded) <= allowed | {f"search_engine.infra.{name}" for name in MODULES}, loaded
