"""Regions in the index and in search: ingestion stores page layouts, hits carry their best regions, the API
and the client serve them, and an index of the previous format opens with a message and upgrades in place."""
from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from search_engine.engine import SearchEngine
from search_engine.ingest import Ingestor
from search_engine.regions import LayoutUnavailable
from testkit import structured_pdf as spdf


@pytest.fixture(scope="module")
def report_pdf(tmp_path_factory) -> Path:
    return spdf.build_structured_pdf(tmp_path_factory.mktemp("docs") / "harbour.pdf").path


@pytest.fixture(scope="module")
def region_index(tmp_path_factory, report_pdf, sample_corpus) -> Path:
    """The structured report beside the sample corpus (other documents to rank against), CPU channels."""
    index_dir = tmp_path_factory.mktemp("index") / "regions"
    report = Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False).add(
        [report_pdf, *sample_corpus.files])
    assert not report.failed, report.failed
    return index_dir


@pytest.fixture(scope="module")
def engine(region_index) -> SearchEngine:
    return SearchEngine.load(region_index)


def test_index_stores_layouts_and_region_vectors(region_index):
    manifest = json.loads((region_index / "manifest.json").read_text())
    assert manifest["version"] == 2
    entry = manifest["documents"]["harbour"]
    layout_seg, region_seg = entry["segments"]["layout"], entry["segments"]["text_regions"]
    lines = (region_index / layout_seg["file"]).read_text().splitlines()
    assert len(lines) == layout_seg["pages"] == 3
    layouts = [json.loads(line) for line in lines]
    assert [layout["page_id"] for layout in layouts] == ["harbour_1", "harbour_2", "harbour_3"]
    assert region_seg["counts"] == [len(layout["regions"]) for layout in layouts]
    vectors = np.load(region_index / region_seg["file"])
    assert vectors.shape == (sum(region_seg["counts"]), 384)
    # running headers get no vector (not searched); paragraphs do
    first = layouts[0]["regions"]
    assert first[0]["kind"] == "header" and not np.any(vectors[0])
    fact = next(i for i, r in enumerate(first) if "Quillfeather" in r["text"])
    assert np.linalg.norm(vectors[fact].astype(np.float32)) == pytest.approx(1.0, abs=1e-2)


def test_short_answer_on_a_long_multi_topic_page_is_found_with_its_region(engine):
    hits = engine.search("Who commissioned the new tide gauge at the north pier?", top_k=3)
    top = hits[0]
    assert top.page_id == "harbour_1"
    assert top.regions and "Quillfeather" in top.regions[0].snippet and top.regions[0].kind == "text"
    assert top.metadata["channel_ranks"]["text_regions"] == 1
    layout = engine.page_layout("harbour_1")
    region = layout.region(top.regions[0].region_id)
    assert tuple(round(v, 1) for v in region.box) == top.regions[0].box
    assert all(h.regions[0].score >= h.regions[-1].score for h in hits if h.regions)


def test_table_and_figure_regions_answer_their_questions(engine):
    table_hit = engine.search("number of berths at the container yard terminal", top_k=1)[0]
    assert table_hit.page_id == "harbour_2" and table_hit.regions[0].kind == "table"
    assert "Container yard | 633 | 4,210 | 9" in table_hit.regions[0].snippet
    figure_hit = engine.search("monthly cruise calls chart", top_k=1)[0]
    assert figure_hit.page_id == "harbour_3"
    assert any(r.kind == "figure" and r.snippet.startswith("Figure 1:") for r in figure_hit.regions)


def test_page_layout_errors(engine):
    with pytest.raises(KeyError):
        engine.page_layout("harbour_99")


def _as_previous_format(src: Path, dst: Path) -> Path:
    """A copy of an index as the previous version wrote it: format 1, no layouts, no region vectors."""
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["version"] = 1
    for entry in manifest["documents"].values():
        for key in ("layout", "text_regions"):
            entry["segments"].pop(key, None)
    shutil.rmtree(dst / "layouts")
    shutil.rmtree(dst / "segments" / "text_regions")
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_previous_format_opens_with_a_message_and_upgrades_in_place(region_index, tmp_path, caplog):
    from typer.testing import CliRunner

    from search_engine.api import create_app
    from search_engine.cli import app as cli

    old = _as_previous_format(region_index, tmp_path / "old")
    with caplog.at_level(logging.WARNING, logger="search_engine.engine"):
        engine = SearchEngine.load(old)
    assert any("vrag-search upgrade --index" in r.getMessage() for r in caplog.records)
    hits = engine.search("Who commissioned the new tide gauge at the north pier?", top_k=3)
    assert hits and all(h.regions == [] for h in hits)  # page-level search still works
    with pytest.raises(LayoutUnavailable, match="vrag-search upgrade"):
        engine.page_layout("harbour_1")
    from fastapi.testclient import TestClient

    with TestClient(create_app(engine=engine)) as http:
        response = http.get("/pages/harbour_1/layout")
        assert response.status_code == 404 and "vrag-search upgrade" in response.json()["detail"]
        assert str(old) not in response.text  # no absolute server path without expose_paths (issue 21)

    result = CliRunner().invoke(cli, ["upgrade", "--index", str(old), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "upgraded" in result.output
    manifest = json.loads((old / "manifest.json").read_text())
    assert manifest["version"] == 2 and all("layout" in e["segments"] for e in manifest["documents"].values())
    assert engine.reload()
    upgraded = engine.search("Who commissioned the new tide gauge at the north pier?", top_k=1)[0]
    assert upgraded.page_id == "harbour_1" and "Quillfeather" in upgraded.regions[0].snippet
    assert engine.page_layout("harbour_2").regions == SearchEngine.load(region_index).page_layout("harbour_2").regions
    # the OCR'd memo of the sample corpus was upgraded too, from its stored page image
    memo = engine.page_layout("board_memo_scan_1")
    assert memo.source == "ocr" and any("0.42" in r.text for r in memo.regions)
    # a second run has nothing left to do
    assert Ingestor(old, progress=False).upgrade() == 0


def test_adding_to_a_previous_format_index_upgrades_it_first(region_index, tmp_path, report_pdf):
    old = _as_previous_format(region_index, tmp_path / "old")
    copy = tmp_path / "second.pdf"
    shutil.copy(report_pdf, copy)
    report = Ingestor(old, progress=False).add([copy])
    assert report.added == ["second"]
    manifest = json.loads((old / "manifest.json").read_text())
    assert manifest["version"] == 2 and all("layout" in e["segments"] for e in manifest["documents"].values())


def test_api_and_client_return_regions_and_layouts(engine):
    from search_engine.api import create_app
    from search_engine.client import SearchClient, SearchError
    from testkit.loopback import LoopbackServer

    server = LoopbackServer(create_app(engine=engine)).start()
    try:
        body = httpx.post(server.url + "/search", json={"queries": ["tide gauge north pier engineer"], "top_k": 2},
                          timeout=30).json()
        hit = body["results"][0][0]
        old_fields = {"rank", "page_id", "doc_id", "page_number", "score", "image_path", "metadata", "image_url",
                      "kind", "start_s", "end_s"}
        assert old_fields <= set(hit) and set(hit) - old_fields == {"regions"}  # backward compatible: one field more
        assert set(hit["regions"][0]) == {"region_id", "kind", "box", "snippet", "score"}
        upstream = httpx.get(server.url + "/search", params={"queries": "tide gauge"}, timeout=30).json()
        assert set(upstream[0][0]) == {"idx", "image_file", "page_id", "score"}  # upstream's shape unchanged
        assert httpx.get(server.url + "/pages/nope_1/layout", timeout=30).status_code == 404
        assert httpx.get(server.url + "/pages/..bad/layout", timeout=30).status_code in (404, 422)

        async def client_calls():
            client = SearchClient(server.url, max_retries=0)
            try:
                hits = (await client.search(["tide gauge north pier engineer"], top_k=2))[0]
                layout = await client.page_layout("harbour_2")
                with pytest.raises(SearchError, match="404"):
                    await client.page_layout("nope_1")
                return hits, layout
            finally:
                await client.aclose()

        hits, layout = asyncio.run(client_calls())
        assert hits[0].regions and "Quillfeather" in hits[0].regions[0].snippet
        assert isinstance(hits[0].regions[0].box, tuple)
        assert layout == engine.page_layout("harbour_2")
        table = next(r for r in layout.regions if r.kind == "table")
        assert {(c.row, c.col): c.text for c in table.cells}[(2, 3)] == "9"
    finally:
        server.stop()


def test_ingestion_reads_the_words_of_a_raster_chart(tmp_path):
    """A chart pasted as a picture: ingestion OCRs it, so its labels are in the stored layout and its words
    are searched (the page text and the figure region)."""
    from testkit.raster_chart_pdf import CATEGORIES, build_raster_chart_pdf

    pdf = build_raster_chart_pdf(tmp_path / "sales.pdf")
    index_dir = tmp_path / "index"
    report = Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False).add([pdf])
    assert not report.failed, report.failed
    engine = SearchEngine.load(index_dir)
    figure = next(r for r in engine.page_layout("sales_1").regions if r.kind == "figure")
    assert {name for name, _ in CATEGORIES} <= {label.text for label in figure.labels}
    hit = engine.search("units sold in the South region", top_k=1)[0]
    assert hit.page_id == "sales_1" and any(r.region_id == figure.region_id for r in hit.regions)
    manifest = json.loads((index_dir / "manifest.json").read_text())
    assert "South" in manifest["pages"]["sales_1"]["text"]
