"""Split the world development set's documents into a development half and a held-back half.

Written and run before any question of the world set existed (issue 32 item 4); `split.json` beside this
file is its output and the benchmark reads it. Re-running it gives the same split.

The documents: the 36 third-party PDFs of the pool beside the checkout (`../shared/data/dev_docs/pdfs`,
described in that folder's SOURCES.md) and the 9 Debian documents of `real_docs_dev.jsonl`
(`scripts/fetch_dev_docs.py`). The rule:

* stratified by genre: in each genre half the documents go to each half (an odd genre's extra one to
  a half chosen by the draw);
* Debian documents keep the role they already had: the five whose questions the stand-in reader was
  developed on (`snp_block_partitioning_talk`, `reportlab_userguide`, `r_intro`, `lshort_zh_cn`,
  `install_latex_guide_zh_cn`) are development documents; the four held back while it was developed
  (`--held-back-docs mnras_author_guide,gs9_color_management,pgfplots_manual,ctex_manual`,
  docs/benchmarks.md) stay held back; the draw fills each genre's remaining places from the pool;
* `random.Random(SEED)`: the pool documents of each genre (in file-name order, genres in name order)
  are shuffled and the first ones fill the development places; the whole draw is repeated with the
  same generator until every document language that two or more documents have is in both halves;
  `split.json` records how many draws that took.

    python scripts/devset/make_split.py          # writes scripts/devset/split.json
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 32  # the number
HERE = Path(__file__).resolve().parent

# (file name, genre, document languages, source); genres and languages as in the pool's SOURCES.md.
DOCUMENTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("alphabet_ar2022_p56_59.pdf", "financial report", ("en",), "pool"),
    ("mitsubishi_electric_ar2021_statements.pdf", "financial report", ("en",), "pool"),
    ("kyokuyo_kessan_tanshin_fy2013_ja.pdf", "financial report", ("ja",), "pool"),
    ("gaoce_broker_note_2022_zh.pdf", "financial report", ("zh",), "pool"),
    ("bok_ny_us_economy_2024_ko.pdf", "government / statistical report", ("ko",), "pool"),
    ("nrel_fuel_saving_driving.pdf", "government / statistical report", ("en",), "pool"),
    ("fisheries_exports_2007_es.pdf", "government / statistical report", ("es",), "pool"),
    ("medenine_election_2014_ar.pdf", "government / statistical report", ("ar",), "pool"),
    ("paclitaxel_aidsinfo_2007.pdf", "medical or consumer leaflet / form", ("en",), "pool"),
    ("blood_test_report_zh.pdf", "medical or consumer leaflet / form", ("zh",), "pool"),
    ("cerfa_14411_ayants_droit_fr.pdf", "medical or consumer leaflet / form", ("fr",), "pool"),
    ("cms1490s_medical_payment_form.pdf", "medical or consumer leaflet / form", ("en",), "pool"),
    ("ieee_tcsvt1997_video_storage.pdf", "scientific paper", ("en",), "pool"),
    ("aimag2010_open_ie.pdf", "scientific paper", ("en",), "pool"),
    ("chi2013_multimodal_feedback_eeg.pdf", "scientific paper", ("en",), "pool"),
    ("olap_query_logs_paper_fr.pdf", "scientific paper", ("fr",), "pool"),
    ("svolt_lfp_cell_spec_zh_en.pdf", "product / technical manual", ("zh", "en"), "pool"),
    ("lg_g3_datasheet_de.pdf", "product / technical manual", ("de",), "pool"),
    ("adsp21161n_ezkit_manual.pdf", "product / technical manual", ("en",), "pool"),
    ("case_cx57c_excavator_specs.pdf", "product / technical manual", ("en",), "pool"),
    ("pike_go_design_keynote.pdf", "slide deck", ("en",), "pool"),
    ("go_lecture_beamer.pdf", "slide deck", ("en",), "pool"),
    ("fda_labeling_slides_2017.pdf", "slide deck", ("en",), "pool"),
    ("pto_meeting_slides_2018.pdf", "slide deck", ("en",), "pool"),
    ("language_discrete_chapter_scan.pdf", "scanned (image-only)", ("en",), "pool"),
    ("lincoln_letter_scan.pdf", "scanned (image-only)", ("en",), "pool"),
    ("romney_1040_2011_p15_16_scan.pdf", "scanned (image-only)", ("en",), "pool"),
    ("magazine_page_scan_zh.pdf", "scanned (image-only)", ("zh",), "pool"),
    ("dragon_dispatch_newsletter_2014.pdf", "newsletter / brochure / infographic", ("en",), "pool"),
    ("zcore_capability_statement.pdf", "newsletter / brochure / infographic", ("en",), "pool"),
    ("hif_industry_issue_2024_08_ko.pdf", "newsletter / brochure / infographic", ("ko",), "pool"),
    ("chevron_csr2022_east_med_infographic.pdf", "newsletter / brochure / infographic", ("en",), "pool"),
    ("lenze_invoice_2017_nl.pdf", "invoice / receipt / tables-heavy", ("nl",), "pool"),
    ("noisebridge_receipt_2024.pdf", "invoice / receipt / tables-heavy", ("en",), "pool"),
    ("jal_traffic_data_fy2015.pdf", "invoice / receipt / tables-heavy", ("en",), "pool"),
    ("shipping_order_zh_en.pdf", "invoice / receipt / tables-heavy", ("zh", "en"), "pool"),
    # The Debian documents of real_docs_dev.jsonl (scripts/fetch_dev_docs.py).
    ("mnras_author_guide.pdf", "scientific paper", ("en",), "debian"),
    ("gs9_color_management.pdf", "scientific paper", ("en",), "debian"),
    ("snp_block_partitioning_talk.pdf", "slide deck", ("en",), "debian"),
    ("reportlab_userguide.pdf", "product / technical manual", ("en",), "debian"),
    ("pgfplots_manual.pdf", "product / technical manual", ("en",), "debian"),
    ("r_intro.pdf", "product / technical manual", ("en",), "debian"),
    ("ctex_manual.pdf", "product / technical manual", ("zh",), "debian"),
    ("lshort_zh_cn.pdf", "product / technical manual", ("zh",), "debian"),
    ("install_latex_guide_zh_cn.pdf", "product / technical manual", ("zh",), "debian"),
)

# Added to the development half after the draw (2026-11-29), outside it: the draw had put every German, Dutch,
# Spanish and Japanese document in the held-back half, so questions asked in those languages could not be
# developed on. Debian documents (scripts/fetch_dev_docs.py); the draw above is unchanged by them.
ADDED_TO_DEVELOPMENT: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("texlive_guide_de.pdf", "product / technical manual", ("de",), "debian"),
    ("texlive_guide_es.pdf", "product / technical manual", ("es",), "debian"),
    ("texlive_guide_ja.pdf", "product / technical manual", ("ja",), "debian"),
    ("lshort_nl.pdf", "product / technical manual", ("nl",), "debian"),
)

# Debian documents whose half is fixed by their history (see the module docstring).
FIXED = {
    "snp_block_partitioning_talk.pdf": "dev", "reportlab_userguide.pdf": "dev", "r_intro.pdf": "dev",
    "lshort_zh_cn.pdf": "dev", "install_latex_guide_zh_cn.pdf": "dev",
    "mnras_author_guide.pdf": "held_back", "gs9_color_management.pdf": "held_back",
    "pgfplots_manual.pdf": "held_back", "ctex_manual.pdf": "held_back",
}


def draw(rng: random.Random) -> dict[str, str]:
    """One stratified draw: file name -> "dev" / "held_back"."""
    split = dict(FIXED)
    for genre in sorted({g for _, g, _, _ in DOCUMENTS}):
        members = sorted(f for f, g, _, _ in DOCUMENTS if g == genre)
        n_dev = len(members) // 2 + (rng.randint(0, 1) if len(members) % 2 else 0)
        free = [f for f in members if f not in FIXED]
        rng.shuffle(free)
        places = n_dev - sum(1 for f in members if FIXED.get(f) == "dev")
        places = max(0, min(places, len(free)))
        for i, f in enumerate(free):
            split[f] = "dev" if i < places else "held_back"
    return split


def languages_in_both(split: dict[str, str]) -> bool:
    counts: dict[str, set[str]] = {}
    n_docs: dict[str, int] = {}
    for f, _, langs, _ in DOCUMENTS:
        for lang in langs:
            counts.setdefault(lang, set()).add(split[f])
            n_docs[lang] = n_docs.get(lang, 0) + 1
    return all(len(halves) == 2 for lang, halves in counts.items() if n_docs[lang] >= 2)


def make_split(seed: int = SEED) -> dict:
    rng = random.Random(seed)
    draws = 0
    while True:
        draws += 1
        split = draw(rng)
        if languages_in_both(split):
            break
    documents = [{"file_name": f, "doc": Path(f).stem, "genre": g, "languages": list(langs), "source": s,
                  "split": split[f]} for f, g, langs, s in DOCUMENTS]
    documents += [{"file_name": f, "doc": Path(f).stem, "genre": g, "languages": list(langs), "source": s,
                   "split": "dev", "added": "2026-11-29"} for f, g, langs, s in ADDED_TO_DEVELOPMENT]
    return {
        "seed": seed,
        "draws": draws,
        "rule": ("stratified by genre: half of each genre's documents in each half (an odd genre's extra one "
                 "where the draw puts it); Debian documents keep their earlier role (developed on -> dev, "
                 "held back while developing -> held_back) and the pool documents fill each genre's remaining "
                 "places: random.Random(seed) shuffles each genre's pool documents (file-name order, genres in "
                 "name order) and the first fill the dev places; the draw is repeated with the same generator "
                 "until every document language that >= 2 documents have is in both halves"),
        "made_by": "scripts/devset/make_split.py",
        "counts": {h: sum(1 for d in documents if d["split"] == h) for h in ("dev", "held_back")},
        "documents": documents,
    }


def main() -> int:
    data = make_split()
    out = HERE / "split.json"
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    for half in ("dev", "held_back"):
        docs = [d for d in data["documents"] if d["split"] == half]
        print(f"{half}: {len(docs)} documents")
        for d in docs:
            print(f"   {d['genre']:40s} {'+'.join(d['languages']):6s} {d['doc']}")
    print(f"seed {data['seed']}, {data['draws']} draw(s); written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
