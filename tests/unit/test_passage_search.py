"""A long table is searched by BM25 as passages of a few rows led by its column names: the one row of a
40-row bill of materials that names the part asked about outranks a short paragraph that only names the
table (scored whole, the table's length divided its match away)."""
from __future__ import annotations

import numpy as np

from search_engine.layout.search_texts import PASSAGE_LINES, region_passages, region_search_texts
from search_engine.lexical import BM25Channel, PassageBM25
from search_engine.page_layout import PageLayout, Region

_PARTS = [f"{n} | 1 | RESISTOR-{n}K-0603 | R{n} | PANASONIC | ERJ-3EKF{n:04d}V" for n in range(2, 41)]
BOM = PageLayout("manual_24", 1000, 1400, [
    Region("r0", "heading", (50, 40, 600, 70), "Appendix A: Bill of materials"),
    Region("r1", "table", (50, 90, 950, 1300),
           "\n".join(["Item | Qty | Description | Reference | Manufacturer | Part Number",
                      "1 | 1 | FLASH-512K-X-8 | U5 | ST MICRO | M29W040B120K6", *_PARTS])),
], source="pdf")
OVERVIEW = PageLayout("manual_2", 1000, 1400, [
    Region("r0", "text", (50, 40, 950, 120), "The bill of materials lists which manufacturer supplies each part "
                                            "of the board."),
], source="pdf")
# the other pages of the manual, so that the words of the question weigh as they would in a real collection
OTHER_PAGES = [[f"Chapter {i}: connect the board to the computer and install the software of the evaluation kit."]
               for i in range(10)]
QUESTION = "In the bill of materials, which manufacturer supplies the FLASH-512K-X-8 part (U5)?"


def test_a_long_table_is_cut_into_passages_led_by_its_heading_and_column_names():
    passages = region_passages(BOM, "EZ-KIT manual")
    assert passages[0] == [""]  # a heading leads the regions under it, it is not searched alone
    table = passages[1]
    assert len(table) == -(-40 // PASSAGE_LINES)  # 40 rows below the column names, PASSAGE_LINES a passage
    assert all(p.startswith("EZ-KIT manual Appendix A: Bill of materials Item | Qty | Description") for p in table)
    assert "FLASH-512K-X-8" in table[0] and "FLASH-512K-X-8" not in table[1]
    # a short region stays one passage: its search text
    assert region_passages(OVERVIEW) == [region_search_texts(OVERVIEW)]


def test_the_row_that_names_the_part_outranks_a_paragraph_that_names_the_table():
    regions = region_passages(BOM) + region_passages(OVERVIEW) + OTHER_PAGES
    scores = PassageBM25(regions).score([QUESTION])[0]
    assert scores[0] <= 0  # the heading: nothing to score
    assert int(np.argmax(scores)) == 1
    # scored whole, as before, the table lost to the paragraph
    whole = region_search_texts(BOM) + region_search_texts(OVERVIEW) + [texts[0] for texts in OTHER_PAGES]
    assert int(np.argmax(BM25Channel(whole).score([QUESTION])[0])) == 2


def test_a_long_paragraph_is_read_as_half_overlapping_windows_led_by_its_heading():
    from search_engine.layout.search_texts import WINDOW_WORDS

    words = [f"w{i}" for i in range(5 * WINDOW_WORDS)]
    page = PageLayout("paper_3", 1000, 1400, [
        Region("r0", "heading", (50, 40, 600, 70), "Related work"),
        Region("r1", "text", (50, 90, 950, 1300), " ".join(words)),
        Region("r2", "text", (50, 1310, 950, 1390), " ".join(words[:WINDOW_WORDS])),  # short: one passage
    ], source="pdf")
    windows = region_passages(page, "A paper")[1]
    assert all(w.startswith("A paper Related work w") for w in windows)
    assert windows[0].split()[4:] == words[:WINDOW_WORDS]
    assert windows[1].split()[4:] == words[WINDOW_WORDS // 2: WINDOW_WORDS // 2 + WINDOW_WORDS]  # half overlap
    assert " ".join(w.split()[-1] for w in windows[-2:]) == f"{words[-1]} {words[-1]}"  # the end is read
    assert region_passages(page, "A paper")[2] == [region_search_texts(page, "A paper")[2]]
