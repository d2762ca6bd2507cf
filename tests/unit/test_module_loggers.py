"""A logger per module: every module that logs asks for `logging.getLogger(__name__)`, so a user can tune one
room (`logging.getLogger("search_engine.ingest").setLevel(...)`) and a moved module's logger moves with it."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("search_engine", "vrag_rl", "vimrag", "demo", "testkit")


def test_loggers_are_named_by_their_module():
    named = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for match in re.finditer(r"logging\.getLogger\(([^)]*)\)", path.read_text()):
                if match.group(1).strip() != "__name__":
                    named.append(f"{path.relative_to(REPO)}: getLogger({match.group(1)})")
    assert named == []


def test_library_modules_do_not_log_through_the_root_logger():
    root_calls = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\blogging\.(debug|info|warning|error|exception|critical)\(", line):
                    root_calls.append(f"{path.relative_to(REPO)}:{number}")
    assert root_calls == []
