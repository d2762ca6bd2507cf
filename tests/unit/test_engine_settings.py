"""The engine is configured by what it is given: `EngineSettings`, read from the environment only by the entry
points (`EngineSettings.from_env`, the `vrag-search` commands), never by `SearchEngine` itself."""
from __future__ import annotations

import inspect
import os

import pytest

import search_engine.engine
from search_engine.cli import _engine_settings
from search_engine.engine import SearchEngine
from search_engine.ingest import Ingestor
from search_engine.settings import EngineSettings
from testkit.patch_embedder import PatchEmbedder, draw_page

CLUSTER_ENV = {"VRAG_QDRANT_URL": "http://qdrant-1:6333", "VRAG_QDRANT_COLLECTION": "pages",
               "VRAG_QDRANT_API_KEY": "k", "VRAG_QDRANT_SHARDS": "6", "VRAG_QDRANT_REPLICAS": "2",
               "VRAG_QDRANT_POOL_GROUPS": "32", "VRAG_QDRANT_PREFETCH": "400",
               "VRAG_QDRANT_QUANTIZATION": "scalar", "VRAG_QDRANT_ON_DISK": "1"}


@pytest.fixture()
def index(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    for seed in range(3):
        draw_page(seed).save(folder / f"page{seed:04d}.png")
    Ingestor(tmp_path / "index", visual_model=None, text_model=None, visual_embedder=PatchEmbedder(),
             progress=False, ocr=False).add(folder)
    return tmp_path / "index"


def test_the_engine_ignores_the_environment(index, monkeypatch):
    monkeypatch.setenv("VRAG_VISUAL_BACKEND", "no-such-backend")
    monkeypatch.setenv("VRAG_QDRANT_URL", ":memory:")
    engine = SearchEngine(index, visual_embedder=PatchEmbedder(), use_bm25=False)
    assert engine.visual_backend == "auto" and engine.visual_backend_name == "exact"
    assert engine.qdrant_options == {}
    # the environment reaches it only through the settings an entry point reads
    with pytest.raises(ValueError, match="no-such-backend"):
        SearchEngine(index, visual_embedder=PatchEmbedder(), use_bm25=False, settings=EngineSettings.from_env())
    source = inspect.getsource(search_engine.engine)
    assert "os.environ" not in source and "getenv" not in source


def test_arguments_win_over_settings(index):
    settings = EngineSettings(visual_backend="fast", qdrant_options={"location": ":memory:"})
    engine = SearchEngine(index, visual_embedder=PatchEmbedder(), use_bm25=False, settings=settings,
                          visual_backend="exact", qdrant={"location": ":memory:", "collection": "mine"})
    assert engine.visual_backend_name == "exact" and engine.qdrant_options["collection"] == "mine"


def test_from_env_reads_the_backend_and_the_qdrant_options():
    assert EngineSettings.from_env({}) == EngineSettings(visual_backend="auto", qdrant_options={})
    assert EngineSettings.from_env({"VRAG_VISUAL_BACKEND": "fast"}).visual_backend == "fast"
    assert EngineSettings.from_env({"VRAG_QDRANT_SHARDS": "6"}).qdrant_options == {}  # no URL: no Qdrant options
    assert EngineSettings.from_env(CLUSTER_ENV).qdrant_options == {
        "location": "http://qdrant-1:6333", "collection": "pages", "api_key": "k", "shard_number": 6,
        "replication_factor": 2, "pool_groups": 32, "prefetch_limit": 400, "quantization": "scalar", "on_disk": True}
    assert EngineSettings.from_env({"VRAG_QDRANT_URL": ":memory:"}).qdrant_options == {
        "location": ":memory:", "collection": "vrag_pages", "api_key": None}


def test_from_env_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("VRAG_VISUAL_BACKEND", "exact")
    monkeypatch.delenv("VRAG_QDRANT_URL", raising=False)
    assert EngineSettings.from_env() == EngineSettings(visual_backend="exact")


def test_settings_are_frozen():
    settings = EngineSettings.from_env(CLUSTER_ENV)
    with pytest.raises(AttributeError):
        settings.visual_backend = "exact"  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.qdrant_options["collection"] = "other"  # type: ignore[index]


def test_cli_flags_go_over_the_environment_without_changing_it(monkeypatch):
    for var, value in CLUSTER_ENV.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("VRAG_VISUAL_BACKEND", raising=False)
    settings = _engine_settings("qdrant", "http://other:6333", "vrag_pages")
    assert settings.visual_backend == "qdrant"
    assert settings.qdrant_options["location"] == "http://other:6333"
    assert settings.qdrant_options["collection"] == "vrag_pages"  # the flag's value, as `serve` always gave it
    assert settings.qdrant_options["shard_number"] == 6  # the rest from the environment
    assert "VRAG_VISUAL_BACKEND" not in os.environ and os.environ["VRAG_QDRANT_URL"] == "http://qdrant-1:6333"
    assert _engine_settings(None, None, "vrag_pages").visual_backend == "auto"
