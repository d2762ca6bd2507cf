"""Session-wide fixtures: tiny offline models, the generated sample corpus, and its index.

Nothing here downloads: models are built from configs through the real classes (testkit), and
the corpus is drawn by the project's own generator. Fixtures that need `../shared` skip with a
reason when it is absent (a user's clone has no `../shared`).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # tesseract: 1.5 s instead of 5 s per dense page
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import testkit  # noqa: E402,F401  (installs the torchvision shim before anything imports it)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("VRAG_SHARED_DIR", REPO_ROOT.parent / "shared"))
SHARED_CORPUS = SHARED_DIR / "data" / "vrag_example_corpus"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files that hold a `slow` test run first — first of all those with a test that sets a longer timeout
    than the suite's (verl's own trainer on the CPU) — each file's tests in their own order. With two workers
    (scripts/run_tests.sh: `-n 2 --dist loadfile --no-loadscope-reorder`) the longest files start while the
    short ones fill the other worker, instead of one long file ending the run alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    # a test that declares its own timeout above the suite's expects to run longest: its file goes first of all
    longest: dict[Path, float] = {}
    for item in items:
        marker = item.get_closest_marker("timeout")
        if marker is not None and marker.args:
            longest[item.path] = max(longest.get(item.path, 0.0), float(marker.args[0]))
    # stable: every file keeps its order
    items.sort(key=lambda item: (-longest.get(item.path, 0.0), item.path not in slow_files))


@pytest.fixture(scope="session")
def shared_corpus_dir() -> Path:
    if not (SHARED_CORPUS / "colqwen2_v1.0_page_embeddings.npz").exists():
        pytest.skip(f"shared reference data not found at {SHARED_CORPUS} (only present on the project's machines)")
    return SHARED_CORPUS


@pytest.fixture(scope="session")
def tiny_colqwen2_dir(tmp_path_factory) -> Path:
    from testkit.tiny_models import build_tiny_colqwen2

    return build_tiny_colqwen2(tmp_path_factory.mktemp("models") / "tiny-colqwen2")


@pytest.fixture(scope="session")
def tiny_qwen25vl_dir(tmp_path_factory) -> Path:
    from testkit.tiny_models import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("models") / "tiny-qwen25vl")


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory):
    from search_engine.sample_corpus import generate_sample_corpus

    return generate_sample_corpus(tmp_path_factory.mktemp("sample_corpus"))


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, sample_corpus, tiny_colqwen2_dir) -> Path:
    """The sample corpus ingested with both channels: tiny random ColQwen2 and the real MiniLM."""
    from search_engine.ingest import Ingestor

    index_dir = tmp_path_factory.mktemp("index") / "sample"
    report = Ingestor(index_dir, visual_model=str(tiny_colqwen2_dir), text_model="minilm", progress=False).add(
        sample_corpus.files
    )
    assert not report.failed, report.failed
    return index_dir


@pytest.fixture(scope="session")
def sample_engine(sample_index):
    from search_engine.engine import SearchEngine

    return SearchEngine.load(sample_index)


@pytest.fixture(scope="session")
def search_server(sample_engine):
    """The real search API on a loopback port, serving the sample index."""
    from search_engine.api import create_app
    from testkit.loopback import LoopbackServer

    server = LoopbackServer(create_app(engine=sample_engine)).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def text_index(tmp_path_factory, request) -> Path:
    """The sample corpus with the CPU channels only (MiniLM + BM25): what the demo uses without a GPU.

    `VRAG_TEST_TEXT_INDEX_DIR` (set by scripts/mutation_agent.sh) keeps it in one folder across sessions.
    """
    from search_engine.ingest import Ingestor

    cache = os.environ.get("VRAG_TEST_TEXT_INDEX_DIR")
    if cache and (Path(cache) / "manifest.json").exists():
        return Path(cache)
    sample_corpus = request.getfixturevalue("sample_corpus")
    index_dir = Path(cache) if cache else tmp_path_factory.mktemp("index") / "text"
    report = Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False).add(sample_corpus.files)
    assert not report.failed, report.failed
    return index_dir


@pytest.fixture(scope="session")
def text_search_server(text_index):
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer

    server = LoopbackServer(create_app(engine=SearchEngine.load(text_index))).start()
    yield server
    server.stop()


@pytest.fixture()
def scripted_policy():
    """Start a scripted policy server on loopback: `url = scripted_policy({"key": [replies]}, default=[...])`."""
    from testkit.loopback import LoopbackServer
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.scripted import ScriptedBackend

    servers = []

    def start(scripts=None, default=None) -> str:
        server = LoopbackServer(create_app(ScriptedBackend(scripts, default), "scripted")).start()
        servers.append(server)
        return server.url + "/v1"

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def marker_engine(tmp_path_factory):
    """Two drawn pages (`testkit.marker_pages`) with the MiniLM channel: seconds to build, pixels to check."""
    from testkit.marker_pages import build_marker_engine

    cache = os.environ.get("VRAG_TEST_MARKER_DIR")  # set by scripts/mutation_agent.sh: one build, many sessions
    return build_marker_engine(Path(cache) if cache else tmp_path_factory.mktemp("marker"))


@pytest.fixture(scope="session")
def remote_search(marker_engine):
    """The real search API over the marker pages, looking like a server on another machine (no local paths)."""
    from search_engine.api import create_app
    from testkit.loopback import LoopbackServer
    from testkit.marker_pages import RemoteLooking

    wrapped = RemoteLooking(create_app(engine=marker_engine))
    server = LoopbackServer(wrapped).start()
    server.wrapped = wrapped
    yield server
    server.stop()
