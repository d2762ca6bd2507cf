"""scripts/bench_real_docs.py: its scoring (`vrag_rl.evaluation.document_bench`: answer in a region, honest
refusals, per-type tables) and its plumbing (a generated two-page PDF ingested in a child process, questions
asked through the engine).

The real numbers come from running the script; these tests check that what it counts is counted right.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vrag_rl.evaluation.document_bench import (
    QuestionResult,
    answer_in_text,
    format_table,
    is_not_found,
    score_answer,
    score_retrieval,
    summarize,
)

REPO = Path(__file__).resolve().parents[2]


def test_answer_in_text_whole_tokens_compact_forms_and_short_references():
    assert answer_in_text("The running head must be ⩽45 characters on a line", ["45 characters"])
    assert answer_in_text("表3 华文字库 中易字库+微软雅黑 Fandol", ["中易字库+ 微软雅黑"])
    assert answer_in_text("-sDeviceNProﬁle = c:/my.icc", ["-sDeviceNProfile"])  # the 'ﬁ' ligature
    assert not answer_in_text("revision 120 of the guide", ["12"])  # not inside another number
    assert not answer_in_text("page 23", ["2"])  # one-character answers only as whole tokens
    assert answer_in_text("state 2 is heterozygous", ["2"])
    assert not answer_in_text("", ["x"]) and not answer_in_text("text", [])


def test_not_found_is_an_honest_refusal_not_a_wrong_answer():
    from vrag_rl.vrag.prompts import NO_ANSWER_FALLBACK

    assert is_not_found(NO_ANSWER_FALLBACK)
    assert is_not_found("I could not find the answer in these pages.")
    assert is_not_found("文档中没有找到相关信息")
    assert is_not_found(None) and is_not_found("  ")
    assert not is_not_found("1.52")
    assert not is_not_found("The answer is not found in most books, but here it is: " + "x" * 200)


def _result(uid, ctype, page="doc_1", refs=("42",)):
    return QuestionResult(uid=uid, query="q", content_type=ctype, language="en",
                          reference_page_ids=[page], reference_answer=list(refs))


def test_retrieval_rank_and_best_region_of_the_right_page():
    from search_engine.page_layout import RegionHit
    from search_engine.types import SearchHit

    def hit(page_id, regions=()):
        doc_id, page = page_id.rsplit("_", 1)
        return SearchHit(rank=1, page_id=page_id, doc_id=doc_id, page_number=int(page), score=1.0, image_path="",
                         regions=list(regions))

    r = _result("a", "table", page="doc_2")
    regions = [RegionHit("r1", "text", (0, 0, 1, 1), "nothing here", 0.2),
               RegionHit("r2", "table", (0, 0, 1, 1), "Sun | 1.00 | 42", 0.9)]
    score_retrieval(r, [hit("doc_1"), hit("doc_2", regions), hit("doc_3")])
    assert r.rank == 2 and r.regions_returned
    assert r.best_region_holds is True and r.best_region["region_id"] == "r2"  # the best by score, not first

    missed = _result("b", "table", page="doc_9")
    score_retrieval(missed, [hit("doc_1", regions)])
    assert missed.rank is None and missed.best_region_holds is None

    # A snippet is cut short: the region's whole text (from the page layout) is what counts when given.
    cut = _result("d", "table", page="doc_2", refs=("7.5",))
    cut_regions = [RegionHit("r5", "table", (0, 0, 1, 1), "Size | Value | …", 0.9)]
    score_retrieval(cut, [hit("doc_2", cut_regions)])
    assert cut.best_region_holds is False
    score_retrieval(cut, [hit("doc_2", cut_regions)], lambda page_id, region: "Size | Value ; six | 7.5")
    assert cut.best_region_holds is True and cut.best_snippet_holds is False

    def broken(page_id, region):
        raise LookupError("no stored layout")

    score_retrieval(cut, [hit("doc_2", cut_regions)], broken)  # falls back to the snippet
    assert cut.best_region_holds is False

    no_regions = _result("c", "text")
    score_retrieval(no_regions, [hit("doc_1")])
    assert no_regions.rank == 1 and not no_regions.regions_returned and no_regions.best_region_holds is None


def test_summary_per_type_counts_not_found_apart_from_wrong():
    rows = []
    for uid, ctype, rank, prediction, contains in [("1", "text", 1, "42", 1.0), ("2", "text", 3, "41", 0.0),
                                                   ("3", "table", None, "I could not find it.", 0.0),
                                                   ("4", "table", 1, "42 units", 1.0)]:
        r = _result(uid, ctype)
        r.rank = rank
        score_answer(r, {"prediction": prediction, "status": "answered", "em": float(prediction == "42"),
                         "contains": contains, "error": None,
                         "retrieved_page_ids": ["doc_1"] if contains else ["doc_7"]})
        rows.append(r)
    table = summarize(rows)
    assert list(table) == ["text", "table", "overall"]
    assert table["text"]["recall@1"] == 0.5 and table["text"]["recall@5"] == 1.0
    assert table["table"]["recall@5"] == 0.5
    assert table["overall"]["contains"] == 0.5 and table["overall"]["em"] == 0.25
    assert table["overall"]["not_found"] == 1 and table["overall"]["wrong"] == 1 and table["overall"]["right"] == 2
    assert table["overall"]["agent_page"] == 0.5  # the agent looked at the reference page in 2 of 4
    assert table["overall"]["region_best"] is None  # no regions anywhere: n/a, not 0
    text = format_table(table)
    assert "n/a" in text and "overall" in text.splitlines()[-1]


def _bench_real_docs(*args: str) -> subprocess.CompletedProcess[str]:
    """The script run as a user runs it, in its own process."""
    return subprocess.run([sys.executable, str(REPO / "scripts" / "bench_real_docs.py"), *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def test_plumbing_on_a_generated_pdf(tmp_path):
    """Ingest a two-page PDF in a child process and ask two questions: pages, speed, RSS and recall land
    in the JSON report."""
    import pymupdf

    docs = tmp_path / "docs"
    docs.mkdir()
    with pymupdf.open() as pdf:
        for text in ["Quarterly tomato harvest report. The greenhouse yield was 812 kilograms of tomatoes.",
                     "Bicycle maintenance manual. Inflate the tyres to a pressure of 65 psi every week."]:
            page = pdf.new_page()
            page.insert_textbox(pymupdf.Rect(72, 72, 520, 300), text, fontsize=14)
        pdf.save(docs / "farm_and_bike.pdf")
    questions = tmp_path / "q.jsonl"
    rows = [{"uid": "t1", "query": "How many kilograms of tomatoes did the greenhouse yield?",
             "reference_answer": "812", "meta_info": {"file_name": "farm_and_bike.pdf", "reference_page": 1},
             "content_type": "text", "language": "en"},
            {"uid": "t2", "query": "What tyre pressure does the bicycle manual recommend?",
             "reference_answer": ["65 psi"], "meta_info": {"file_name": "farm_and_bike.pdf", "reference_page": 2},
             "content_type": "table", "language": "en"}]
    questions.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "report.json"

    proc = _bench_real_docs("--docs", str(docs), "--questions", str(questions), "--index", str(tmp_path / "index"),
                            "--no-e2e", "--ocr-lang", "eng", "--held-back-docs", "farm_and_bike", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    ingestion = report["ingestion"]
    assert ingestion["pages"] == 2 and ingestion["documents"] == 1 and not ingestion["failed"]
    assert ingestion["pages_per_s"] > 0 and ingestion["peak_rss_mib"] > 50  # a Python process with MiniLM
    assert ingestion["cpu_seconds"] > 0 and ingestion["pages_per_cpu_s"] > 0
    overall = report["by_content_type"]["overall"]
    assert overall["n"] == 2 and overall["recall@1"] == 1.0
    assert overall["contains"] is None  # no end-to-end run was asked for
    # per document, and the held-back half apart from the development half (here: all of it held back)
    assert report["by_document"]["farm_and_bike"]["n"] == 2
    assert list(report["by_half"]) == ["held-back", "overall"] and report["by_half"]["held-back"]["n"] == 2
    assert report["held-back_by_content_type"]["overall"]["n"] == 2
    assert report["development_by_content_type"]["overall"]["n"] == 0
    # a half held back by --held-back-docs is measured, never shown (as the world set's is)
    assert report["questions_detail"] == [] and report["held_back_detail_withheld"] == 2

    # An existing index is never overwritten.
    proc = _bench_real_docs("--docs", str(docs), "--questions", str(questions), "--index", str(tmp_path / "index"),
                            "--no-e2e", "--out", str(out))
    assert proc.returncode == 2, proc.stderr[-2000:]


def _bench_module():
    """scripts/bench_real_docs.py imported (its helpers, not its command line)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_real_docs_under_test", REPO / "scripts" / "bench_real_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_world_question_files_follow_the_split():
    """scripts/devset/world_*.jsonl: every question's document, half, genre and page id agree with split.json."""
    from search_engine.corpus import doc_id_for

    devset = REPO / "scripts" / "devset"
    split = json.loads((devset / "split.json").read_text())
    docs = {d["file_name"]: d for d in split["documents"]}
    assert {d["split"] for d in docs.values()} == {"dev", "held_back"}
    uids = set()
    for half in ("dev", "held_back"):
        rows = [json.loads(line) for line in (devset / f"world_{half}.jsonl").read_text().splitlines() if line]
        assert rows
        for row in rows:
            doc = docs[row["meta_info"]["file_name"]]
            assert row["split"] == doc["split"] == half and row["genre"] == doc["genre"], row["uid"]
            assert row["page"] == row["meta_info"]["reference_page"] >= 1
            assert row["page_id"] == f"{doc_id_for(row['meta_info']['file_name'])}_{row['page']}"
            assert row["content_type"] in ("text", "table", "chart", "figure") and row["language"]
            assert row["reference_answer"] == [row["answer"], *row["answer_variants"]]
            assert row["uid"] not in uids
            uids.add(row["uid"])


def test_world_halves_come_from_the_split_field_and_absences_are_named(tmp_path):
    bench = _bench_module()
    assert bench.half_of("dev") == "development" and bench.half_of("held_back") == "held-back"
    assert bench.half_of(None) == "" and bench.half_of("") == ""

    pool, debian, questions = tmp_path / "pool", tmp_path / "debian", tmp_path / "q.jsonl"
    absent = bench.world_absent(pool, debian, [questions])
    assert len(absent) == 3 and str(pool) in absent[0] and "VRAG_DEV_POOL" in absent[0]
    assert "fetch_dev_docs" in absent[1] and str(questions) in absent[2]
    pool.mkdir(), debian.mkdir()
    (pool / "a.pdf").write_bytes(b"%PDF-1.4")
    questions.write_text(json.dumps({"query": "q", "reference_answer": "x",
                                     "meta_info": {"file_name": "a.pdf", "reference_page": 1}}) + "\n"
                         + json.dumps({"query": "q", "reference_answer": "x",
                                       "meta_info": {"file_name": "b.pdf", "reference_page": 1}}) + "\n")
    absent = bench.world_absent(pool, debian, [questions])
    assert len(absent) == 1 and absent[0].startswith("b.pdf")
    assert bench.world_absent(pool, debian, [questions], check_files=False) == []


def test_world_set_without_its_pool_stops_and_names_it(tmp_path):
    proc = _bench_real_docs("--world", "--pool", str(tmp_path / "no_pool"), "--docs", str(tmp_path), "--no-e2e",
                            "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert "skipped" in proc.stderr and str(tmp_path / "no_pool") in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_world_plumbing_reports_both_halves_and_withholds_held_back_details(tmp_path):
    """--world ingests the pool and the Debian folder together and prints every table per half; the held-back
    half's questions are counted in the tables but not written out one by one."""
    import pymupdf

    pool, debian = tmp_path / "pool", tmp_path / "debian"
    for folder, name, text in [(pool, "tomatoes.pdf", "Greenhouse report. The tomato yield was 812 kilograms."),
                               (debian, "bikes.pdf", "Bicycle manual. Inflate the tyres to a pressure of 65 psi.")]:
        folder.mkdir()
        with pymupdf.open() as pdf:
            pdf.new_page().insert_textbox(pymupdf.Rect(72, 72, 520, 300), text, fontsize=14)
            pdf.save(folder / name)
    questions = tmp_path / "world.jsonl"
    rows = [{"uid": "d1", "query": "How many kilograms of tomatoes did the greenhouse yield?",
             "reference_answer": ["812"], "meta_info": {"file_name": "tomatoes.pdf", "reference_page": 1},
             "content_type": "text", "language": "en", "split": "dev"},
            {"uid": "h1", "query": "What tyre pressure does the bicycle manual recommend?",
             "reference_answer": ["65 psi"], "meta_info": {"file_name": "bikes.pdf", "reference_page": 1},
             "content_type": "table", "language": "en", "split": "held_back"}]
    questions.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "report.json"
    proc = _bench_real_docs("--world", "--pool", str(pool), "--docs", str(debian), "--questions", str(questions),
                            "--index", str(tmp_path / "index"), "--no-e2e", "--ocr-lang", "eng", "--verbose",
                            "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["ingestion"]["documents"] == 2 and report["ingestion"]["pages"] == 2
    assert list(report["by_half"]) == ["development", "held-back", "overall"]
    for half in ("development", "held-back"):
        assert report[f"{half}_by_content_type"]["overall"]["n"] == 1
        assert report[f"{half}_by_language"]["en"]["recall@1"] == 1.0
    assert report["held_back_docs"] == ["bikes"]
    assert [d["uid"] for d in report["questions_detail"]] == ["d1"] and report["held_back_detail_withheld"] == 1
    assert " d1 " in proc.stdout and " h1 " not in proc.stdout and "65 psi" not in proc.stdout
