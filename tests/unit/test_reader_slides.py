"""The stand-in reader (`vrag_rl.reader`) on the way slides are built: bullets that a text layer ran into
one string, lines of one sentence that became regions of their own, a title slide whose lines describe
each other, a table named by a superlative, "which X" answered by the name printed before X, typographic
ligatures, counts written as words, a caption named by its label, a long number that names its row, a
table's caption read as its header. Each page is a tiny layout built here (the `search_engine.page_layout`
contract), read with terms only (no embedder), so each test shows one mechanism and fails when it is gone.
"""
from __future__ import annotations

from search_engine.page_layout import PageLayout, Region, TableCell
from vrag_rl.reader import Reader, question_form
from vrag_rl.reader.question import which_head
from vrag_rl.reader.reader import _cover
from vrag_rl.reader.relevance import MIN_COVERAGE
from vrag_rl.reader.spans import head_phrases, items_of, sentences_of
from vrag_rl.reader.terms import content_terms, fold
from vrag_rl.reader.values import values_in


def _page(*regions: Region, page_id: str = "deck_3") -> PageLayout:
    return PageLayout(page_id, 726, 545, list(regions), "pdf")


def _read(question: str, layout: PageLayout) -> str | None:
    reading = Reader(None).read(question, layout)
    return None if reading is None else reading.answer


def test_ligatures_fold_into_their_letters():
    assert fold("The most primitive ﬂowering plant of the Paciﬁc") == (
        "The most primitive flowering plant of the Pacific")
    assert "flowering" in content_terms("ﬂowering plants")
    page = _page(Region("h", "heading", (20, 40, 400, 70), "Zealandia: key features"),
                 Region("t", "text", (40, 100, 700, 130), "The most primitive ﬂowering plant (Amborella) grows here."))
    reading = Reader(None).read("Which plant is the most primitive flowering plant?", page)
    assert reading is not None and "Amborella" in reading.answer
    assert "ﬂ" not in reading.evidence  # the answer quotes plain letters


def test_bullets_in_one_string_are_items():
    line = "▶ Humid and rich ▶ Numerous borders (like Wallace line) ▶ Complex history"
    assert items_of(line) == [("Humid and rich", True), ("Numerous borders (like Wallace line)", True),
                              ("Complex history", True)]
    assert [s.text for s in sentences_of(line)] == ["Humid and rich", "Numerous borders (like Wallace line)",
                                                   "Complex history"]
    # an item never joins the line before it, even when that line ends mid-sentence
    assert [s.text for s in sentences_of("Three things matter\n• Milk\n• Eggs")] == ["Three things matter", "Milk",
                                                                                    "Eggs"]
    # a glyph inside a word or a run of decoration is no bullet
    assert items_of("◃◃◃◃◃◃") == [("◃◃◃◃◃◃", False)]


def test_a_sentence_cut_into_two_regions_is_read_whole():
    page = _page(Region("h", "heading", (17, 44, 284, 70), "Biogeography of Ocean"),
                 Region("a", "text", (38, 196, 679, 318),
                        "▶ Rich coastal waters ▶ Whereas surface biogeography of ocean is determined by"),
                 Region("b", "text", (66, 325, 499, 345), "continents and currents, abyssal biogeography is unique."))
    reading = Reader(None).read("What is the surface biogeography of the ocean determined by?", page)
    assert reading is not None and "continents and currents" in reading.answer
    # a CJK line that the layout made a region of its own continues the line above it
    cjk = _page(Region("h", "figure", (0, 0, 726, 61), "参考文献 I"),
                Region("a", "text", (57, 106, 628, 129), "[1] 刘天亮. 面向狭小空间作业的绳索驱动超冗余机械臂的研"),
                Region("b", "text", (91, 133, 504, 156), "究[D]. 深圳 : 哈尔滨工业大学, 2016 : 61-63."),
                Region("c", "text", (57, 166, 668, 190), "[2] 任春珍, 杨再华, 孙刚. 空环境飞行器交会对接设备精测工"),
                Region("d", "text", (91, 194, 608, 217), "艺方法研究[J]. 航天器环境工程, 2010, 27(6) : 768-771."))
    assert _read("刘天亮的研究是在哪所大学完成的？", cjk) == "哈尔滨工业大学"


def test_items_of_a_definition_list_stay_apart():
    # each line ends where its item ends (short of the right margin, or the next starts further left): no join
    page = _page(Region("a", "text", (110, 374, 431, 404), "zeta 白色文字，红色背景"),
                 Region("b", "text", (45, 434, 680, 464), "其中默认样式为 beta。"))
    reading = Reader(None).read("哪一种样式是白色文字、红色背景？", page)
    assert reading is not None and reading.evidence.startswith("zeta")
    assert "beta" not in reading.evidence


def test_a_title_slide_reads_as_one_unit():
    cover = _page(Region("t", "heading", (57, 152, 197, 181), "Kestrel"),
                  Region("s", "heading", (57, 202, 324, 226), "A modern harbour survey"),
                  Region("a", "text", (57, 308, 230, 326), "Ilse Marrowby"),
                  Region("d", "text", (57, 337, 182, 355), "March 3, 2021"),
                  Region("i", "text", (57, 376, 273, 390), "Institute for harbour surveys"), page_id="kestrel_1")
    assert _read("Who is the author of the Kestrel harbour survey?", cover) == "Ilse Marrowby"
    assert _read("When was the Kestrel harbour survey presented?", cover) == "March 3, 2021"
    chinese = _page(Region("t", "heading", (306, 122, 420, 151), "报告标题"),
                    Region("s", "heading", (298, 261, 428, 282), "学生：杨敬轩"),
                    Region("u", "heading", (323, 370, 403, 390), "清华大学"),
                    Region("d", "heading", (277, 410, 449, 431), "2021 年 11 月 15 日"), page_id="thesis_1")
    assert _read("清华大学报告标题中的学生是谁？", chinese) == "杨敬轩"
    assert len(_cover(cover)) == 5
    # a page of sentences or of numbered items is no title page: a line of it does not borrow the others' words
    body = _page(Region("h", "heading", (20, 20, 400, 50), "Kestrel survey"),
                 Region("a", "text", (40, 100, 700, 130), "Ilse Marrowby"),
                 Region("b", "text", (40, 140, 700, 170), "It counted the harbour's seals. It took a year."),
                 Region("c", "text", (40, 180, 700, 210), "Boats were not counted."))
    assert _cover(body) == []
    items = _page(Region("h", "heading", (20, 20, 400, 50), "Regions"),
                  *(Region(f"i{k}", "text", (40, 100 + 40 * k, 400, 130 + 40 * k), f"{k}. Region {name}")
                    for k, name in enumerate(["North", "East", "South"], start=1)))
    assert _cover(items) == []


def test_spaced_chinese_dates_are_dates():
    assert [v.text for v in values_in("2021 年 11 月 15 日") if v.is_date] == ["2021 年 11 月 15 日"]


def test_a_superlative_the_caption_prints_names_the_table():
    cells = [["City", "Population"], ["Mexico City", "20,116,842"], ["Peking", "15,796,450"],
             ["Istanbul", "14,160,467"]]
    table = Region("t", "table", (253, 236, 473, 378), "\n".join(" | ".join(r) for r in cells),
                   "Table 1: Largest cities in the world",
                   [TableCell(r, c, text, (253 + 110 * c, 236 + 28 * r, 363 + 110 * c, 264 + 28 * r))
                    for r, row in enumerate(cells) for c, text in enumerate(row)], 1, 1)
    page = _page(Region("h", "heading", (20, 17, 88, 41), "Tables"), table)
    assert question_form("What is the population of Peking in the largest cities table?",
                         "Table 1: Largest cities in the world").superlative == 0
    assert _read("What is the population of Peking in the largest cities table?", page) == "15,796,450"
    assert _read("Which city has a population of 14,160,467 in the largest cities table?", page) == "Istanbul"
    # asked as a superlative, it still is one
    assert _read("Which city has the largest population?", page) == "Mexico City"


def test_best_is_a_superlative_in_the_text_too():
    page = _page(Region("h", "heading", (45, 44, 572, 74), "A note on the compiler you are using"),
                 Region("a", "text", (94, 226, 604, 250), "pdfLATEX — very old school compiler - no OTF support"),
                 Region("b", "text", (94, 347, 505, 371), "LuaLATEX — current compiler - your best option"))
    assert _read("Which compiler is the best option?", page) == "LuaLATEX"


def test_verbs_that_quote_the_document_count_only_where_the_page_prints_them():
    page = _page(Region("h", "heading", (17, 44, 377, 70), "Australian regions: key features"),
                 Region("a", "list", (42, 469, 676, 515), "7. Zealandia: no mammals. Extinct moa. "
                                                          "The most primitive flowering plant (Amborella)."))
    # "call" is not on the page: it does not count as a missing subject
    assert _read("Which plant does the lecture call the most primitive flowering plant?", page) == "Amborella"


def test_which_x_is_answered_by_the_name_printed_before_x():
    assert which_head("Which living fossil pine has its home here?") == ["pine", "fossil", "living"]
    assert which_head("在 TeXLive 中可以添加哪个宏包？") == ["宏包"]
    assert which_head("What is the date?") == []
    text = "Home of living fossil Wollemi pine, Wollemia nobilis."
    assert [p for _, p in head_phrases(text, "Which living fossil pine has its home here?")] == ["Wollemi pine"]
    assert [p for _, p in head_phrases("Numerous borders (like Wallace line)", "Which line is a border?")] == [
        "Wallace line"]
    assert [p for _, p in head_phrases("include the appendixnumberbeamer package in your preamble",
                                       "Which package goes in the preamble?")] == ["appendixnumberbeamer package"]
    # an ordinary adjective before the noun names nothing, nor a word the question says itself
    assert head_phrases("LuaLATEX — current compiler", "Which compiler is best?") == []
    assert head_phrases("the MD5 Message-Digest Algorithm", "Besides the MD5 message digest, which algorithm?") == []
    # Chinese: the characters before the noun, not a demonstrative
    assert [p for _, p in head_phrases("可以添加 ctex 宏包，例如：", "可以添加哪个宏包？")] == ["ctex 宏包"]
    assert head_phrases("这个引擎是 pdfTeX 的后继", "是在哪个引擎基础上发展而来的？") == []


def test_counts_written_as_words_answer_how_many():
    from vrag_rl.reader.values import number_words_in

    assert [(v.text, v.number) for v in number_words_in("Prosper offers seven transitions, one of them fades")] == [
        ("seven", 7.0)]  # "one of" is a pronoun, not a count
    assert [(v.text, v.number) for v in number_words_in("每种样式预定义了五种强调颜色和十二个图标")] == [
        ("五种", 5.0), ("十二个", 12.0)]
    page = _page(Region("h", "heading", (20, 40, 400, 70), "Transitions"),
                 Region("t", "text", (40, 100, 700, 130), "Prosper offers seven transitions between slides."))
    assert _read("How many transitions between slides does Prosper offer?", page) == "7"


def test_a_question_naming_a_figure_reads_its_caption():
    page = _page(Region("h", "heading", (20, 17, 300, 41), "Results"),
                 Region("f", "figure", (60, 80, 660, 300), "0 10 20"),
                 Region("c", "caption", (60, 310, 660, 330), "Figure 2: Throughput of the three parsers"),
                 Region("t", "text", (40, 420, 700, 450), "Figure 2 shows that the parsers ran on one core."))
    # the label names the caption even when the question shares no other word with it
    assert _read("图 2 的图题是什么？", page) == "Throughput of the three parsers"
    # another figure's label names nothing here
    assert _read("图 3 的图题是什么？", page) != "Throughput of the three parsers"


def _table(cells: list[list[str]], caption: str) -> Region:
    return Region("t", "table", (100, 100, 500, 260), "\n".join(" | ".join(r) for r in cells), caption,
                  [TableCell(r, c, text, (100 + 200 * c, 100 + 40 * r, 300 + 200 * c, 140 + 40 * r))
                   for r, row in enumerate(cells) for c, text in enumerate(row)], 1, 1)


def test_a_long_number_printed_once_names_its_row():
    table = _table([["Column", "# unique"], ["user_id", "11014"], ["country", "187"], ["plan", "3"]],
                   "Table 1: unique values per column")
    # the question shares nothing with the table but the number: printed in one cell only, it names the row
    assert _read("Which field has 11014 distinct entries?", _page(table)) == "user_id"
    # a number printed in several cells names no row
    table = _table([["Column", "# unique"], ["user_id", "11014"], ["country", "11014"], ["plan", "3"]], "")
    assert _read("Which field has 11014 distinct entries?", _page(table)) is None


def test_a_tables_caption_says_what_its_cells_hold():
    table = _table([["Field", "Count"], ["title", "33117"], ["country", "187"], ["plan", "3"]],
                   "Table 1: distinct values per field of train.csv")
    # the caption's words count as fully as the header row's: the cell is the answer, not half of one
    assert _read("In train.csv, how many distinct values does title hold?", _page(table)) == "33117"


def test_a_time_question_wants_a_date_not_the_word_date():
    from vrag_rl.reader.question import form_words

    assert "date" in form_words("On what date was the talk given?")
    assert "date" not in form_words("Which package sets the date format?")


def test_an_item_reads_with_the_lines_it_hangs_from():
    page = _page(Region("h", "heading", (45, 44, 572, 74), "Fonts galore"),
                 Region("a", "text", (45, 118, 735, 137), "Each compiler loads a different font scheme:"),
                 Region("b", "text", (95, 165, 557, 189), "pdfTeX — old compiler, no OTF support"),
                 Region("c", "text", (169, 192, 557, 211), "Computer Modern Sans Serif is used as font"),
                 Region("d", "text", (95, 225, 600, 249), "LuaTeX — current compiler, OTF support"),
                 Region("e", "text", (169, 253, 600, 272), "Fira Sans is used as font"))
    # the sub-item names no compiler: the item above it, further left, does
    assert _read("With pdfTeX, which font is used?", page) == "Computer Modern Sans Serif"
    assert _read("With LuaTeX, which font is used?", page) == "Fira Sans"
    # a lead-in ending on a colon heads the lines indented under it (Chinese as well)
    page = _page(Region("a", "text", (45, 198, 526, 228), "一个 Beamer 的主题由下列四部分组成："),
                 Region("b", "text", (65, 258, 674, 289), "1. 外部主题，用 \\usebeameroutertheme 命令；"),
                 Region("c", "text", (65, 308, 674, 339), "2. 颜色主题，用 \\usebeamercolortheme 命令；"))
    answer = _read("Beamer 主题的四个组成部分中，颜色主题用哪个命令？", page)
    assert answer is not None and "usebeamercolortheme" in answer


def test_centred_lines_are_no_outline():
    from vrag_rl.reader.reader import _outline_parents

    cover = [Region("a", "text", (200, 100, 526, 130), "A small tour of the facilities"),
             Region("b", "text", (280, 150, 446, 170), "Jane Roe")]  # centred under the title, not indented
    assert _outline_parents(cover) == {}


def test_a_sentence_opening_on_a_pronoun_reads_with_the_one_before():
    page = _page(Region("h", "heading", (45, 44, 267, 74), "Advice"),
                 Region("t", "text", (45, 374, 862, 403),
                        "You can use \\alert to grab the attention of the reader. "
                        "It will typeset your content in red."),
                 Region("u", "text", (45, 424, 853, 460), "Stick to the standard colors of the theme."))
    # "It" is \\alert: the sentence that says "red" is supported by the one before it, which names \\alert
    readings = Reader(None).rank("Which colour does \\alert use for content?", page)
    red = [r for r in readings if "It will" in r.evidence]
    assert red and red[0].coverage >= MIN_COVERAGE


def test_an_address_is_read_with_its_path():
    page = _page(Region("t", "text", (45, 100, 700, 130), "Get the source of this theme from github.com/matze/mtheme"))
    assert _read("Where can the source of the theme be found?", page) == "github.com/matze/mtheme"


def test_an_indefinite_article_introduces_no_name():
    page = _page(Region("t", "text", (45, 100, 700, 130),
                        "The theme defines a custom template to add a text to the footer."))
    assert _read("Which template does the theme define to add text to the footer?", page) != "custom template"
    page = _page(Region("t", "text", (45, 100, 700, 130), "Load the appendixnumberbeamer package for backup slides."))
    assert _read("Which package is loaded for backup slides?", page) == "appendixnumberbeamer package"


def test_the_kind_of_thing_asked_for_need_not_be_printed():
    page = _page(Region("h", "heading", (20, 40, 400, 70), "Overlaps of colors"),
                 Region("t", "text", (40, 100, 700, 130), "Remember how to do that with MS PowerPoint?"))
    # "software" says what kind of answer is wanted; the page prints the software, not the word
    assert _read("Which software does the overlaps of colors slide mention?", page) == "MS PowerPoint"


def test_scattered_labels_are_no_outline():
    from vrag_rl.reader.reader import _outline_parents

    diagram = [Region("a", "text", (542, 591, 1090, 638), "(X − A, N − A) (Y, a)"),
               Region("b", "text", (609, 812, 1096, 859), "(X, N) (Y, N)"),
               Region("c", "text", (880, 585, 897, 614), "a"),  # above the line before it: another block
               Region("d", "text", (702, 716, 717, 744), "r")]  # three lines below: another block
    assert _outline_parents(diagram) == {}


def test_a_paragraph_heads_no_outline_but_a_one_line_item_does():
    from vrag_rl.reader.reader import _outline_parents

    regions = [Region("p", "text", (40, 100, 700, 190), "A paragraph of three lines that ends its sentence.\n"
                                                        "It wraps.\nIt ends here."),
               Region("q", "text", (90, 200, 700, 220), "A quotation set in under it"),
               Region("i", "text", (40, 240, 700, 260), "1 Data may be missing."),
               Region("j", "text", (90, 270, 700, 290), "This makes the problem hard.")]
    assert _outline_parents(regions) == {"j": ["1 Data may be missing."]}


def test_a_pronoun_opening_an_item_stands_for_the_line_it_hangs_from():
    page = _page(Region("h", "heading", (17, 34, 619, 78), "The Model and the Problem"),
                 Region("i", "text", (76, 142, 296, 162), "1 Data may be missing."),
                 Region("j", "text", (100, 171, 488, 190), "This makes the problem NP-complete."))
    answer = _read("What makes the problem NP-complete?", page)
    assert answer is not None and "Data may be missing" in answer


def test_a_command_line_is_one_name():
    from vrag_rl.reader.spans import command_line

    assert command_line("sudo tlmgr update --self --all") and not command_line("Use the -x option to run.")
    page = _page(Region("a", "text", (45, 100, 700, 120), "高级用户可以选择升级特定宏包。建议初级用户执行"),
                 Region("b", "text", (90, 130, 400, 150), "sudo tlmgr update --self --all"))
    assert _read("建议初级用户执行哪条命令同时升级 tlmgr 本身和全部宏包？", page) == "sudo tlmgr update --self --all"


def test_a_latin_name_in_a_cjk_sentence_is_the_name_asked():
    from vrag_rl.reader.spans import latin_in_cjk

    # a name Chinese text borrows is set in Latin letters; what the question already prints names nothing new
    assert latin_in_cjk("Epyt 主题中其中默认样式为 beta。", "Epyt 主题的默认样式是哪一个？") == [(16, "beta")]
    assert latin_in_cjk("使用 MS PowerPoint 制作", "哪个软件？") == [(3, "MS PowerPoint")]
    page = _page(Region("a", "text", (45, 100, 700, 120), "Epyt 主题中所有可用的样式如下所列。"),
                 Region("b", "text", (45, 130, 700, 150), "其中默认样式为 beta。"))
    assert _read("Epyt 主题的默认样式是哪一个？", page) == "beta"


def test_a_position_in_a_list_is_read_by_its_index():
    from vrag_rl.reader.lists import items_in, ordinal

    assert ordinal("What is the last entry of the Items list?") == -1
    assert ordinal("Which transition is listed second?") == 2
    assert ordinal("列表中的第三项是什么？") == 3
    assert ordinal("Which was the first compiler to support OTF?") is None  # a rank, not a list's position
    assert items_in("Split; Blinds; Box; Wipe; Replace.") == ["Split", "Blinds", "Box", "Wipe", "Replace"]
    assert items_in("The theme is simple, clean and modern.") == []  # a sentence's clauses are no list
    table = _table([["Items", "Enumerations"], ["• Milk", "1. First,"], ["• Eggs", "2. Second and"],
                    ["• Potatos", "3. Last."]], "")
    table = Region(table.region_id, table.kind, table.box, table.text, "", table.cells, 0, 0)  # no header row
    page = _page(Region("h", "heading", (19, 17, 69, 41), "Lists"), table)
    assert _read("What is the last entry of the Items list?", page) == "Potatos"
    page = _page(Region("h", "heading", (130, 160, 523, 273), "Transitions"),
                 Region("a", "text", (171, 314, 1303, 391), "Prosper offers seven transitions between slides:"),
                 Region("b", "text", (273, 395, 485, 954), "Split; Blinds; Box; Wipe; Dissolve; Glitter; Replace."))
    assert _read("Which transition is listed last?", page) == "Replace"
    assert _read("Which transition is listed first?", page) == "Split"
    # a position asked of a page that prints no list: nothing, not a sentence that merely names the list
    page = _page(Region("t", "text", (40, 100, 700, 130), "Prosper offers seven transitions between slides."))
    assert _read("Which transition is listed last?", page) is None


def test_full_width_items_indented_under_a_lead_in_are_an_outline():
    from vrag_rl.reader.reader import _outline_parents

    regions = [Region("a", "text", (45, 154, 677, 228), "一个 Beamer 的主题由下列四部分组成："),
               Region("b", "text", (66, 258, 674, 289), "1. 外部主题，用 \\usebeameroutertheme 命令；"),
               Region("c", "text", (66, 308, 674, 339), "2. 颜色主题，用 \\usebeamercolortheme 命令；")]
    # set in by an em on the left only: not a centred block
    assert _outline_parents(regions) == {"b": ["一个 Beamer 的主题由下列四部分组成："],
                                         "c": ["一个 Beamer 的主题由下列四部分组成："]}


def test_a_zoom_reads_the_region_as_the_page_did():
    page = _page(Region("h", "heading", (45, 44, 267, 74), "Advice"),
                 Region("t", "text", (45, 374, 862, 403),
                        "You can use \\alert to grab the attention of the reader. "
                        "It will typeset your content in red."),
                 Region("u", "text", (45, 424, 853, 460), "Stick to the standard colors of the theme."),
                 Region("v", "text", (45, 470, 853, 500), "Use grayscale tints for the content of graphs."))
    question = "Which colour does \\alert typeset the content in?"
    reading = Reader(None).read(question, page)
    assert reading is not None and "red" in reading.answer
    x1, y1, x2, y2 = reading.box
    zoomed = Reader(None).read(question, page, within=(x1 - 12, y1 - 12, x2 + 12, y2 + 12))
    # term rarity is the page's, not the crop's: the zoom confirms the page's answer
    assert zoomed is not None and zoomed.answer == reading.answer and zoomed.coverage == reading.coverage


def test_a_list_naming_the_subject_among_others_is_no_answer():
    page = _page(Region("h", "heading", (45, 22, 252, 56), "Predefined colors"),
                 Region("b", "text", (45, 240, 500, 268), "acolor1 acolor2 acolor3 acolor4 acolor5"))
    # the colour is in the swatches, not in the text: the line of names is no answer
    assert _read("What colour does acolor3 show on the predefined colors slide?", page) is None
    from vrag_rl.reader.lists import items_in

    assert items_in("acolor1 acolor2 acolor3 acolor4") == ["acolor1", "acolor2", "acolor3", "acolor4"]
    assert items_in("Alexey Shipunov Minot State University") == []  # capitalised words are a name


def test_an_identifier_the_question_prints_must_be_in_the_evidence():
    page = _page(Region("t", "text", (45, 100, 700, 130),
                        "如果表 4.1 中的算符不够用的话，amsmath 允许用户在导言区用 \\DeclareMathOperator "
                        "定义自己的算符。"))
    # many shared bigrams, but \gcd is not on the page: nothing here says what \gcd is
    assert _read("表 4.1 中的算符不够用的话，\\gcd 属于哪一类算符？", page) is None


def test_a_long_name_before_the_noun_is_taken_whole():
    text = "The theme itself is licensed under a Creative Commons Attribution-ShareAlike 4.0 International License."
    assert [p for _, p in head_phrases(text, "Under which license is the theme released?")] == [
        "Creative Commons Attribution-ShareAlike 4.0 International License"]
    # a description of lowercase words still stops at three
    assert head_phrases("We use the fancy very old school compiler here.", "Which compiler is used?") == []


def test_a_superlative_describes_and_never_names():
    from vrag_rl.reader.question import names_superlative

    text = "North America remained the largest region in 2023."
    assert head_phrases(text, "Which region brought the most revenue?") == []
    # the page's title printing the superlative does not hide it when the question asks for the top one
    assert not names_superlative("What is the most used travel app in the survey?", "Most used travel apps")
    assert names_superlative("What is the population of Peking in the largest cities table?",
                             "Table 1: Largest cities in the world")


def test_the_embedder_cache_never_loses_a_vector_it_just_looked_up():
    """A full cache evicts its oldest entries when this call's new vectors go in: a text found in the cache
    at lookup must still be answered (it used to be read back after the inserts and crash)."""
    import numpy as np

    from vrag_rl.reader.relevance import Embedder

    class Letters:
        calls: list[list[str]] = []

        def embed_queries(self, texts):
            self.calls.append(list(texts))
            return [np.eye(4, dtype=np.float32)[sum(map(ord, t)) % 4][None, :] for t in texts]

    model = Letters()
    embedder = Embedder(model, cache_size=2)
    embedder.cosines("q", ["a"])  # cache: q, a
    assert embedder.cosines("q2", ["q"]).shape == (1,)  # q cached; inserting q2 used to evict it first
    assert model.calls == [["q", "a"], ["q2"]]  # the cached vector was used, not recomputed


def test_a_lead_in_set_in_by_its_paragraph_indent_heads_the_line_below():
    from vrag_rl.reader.reader import _outline_parents

    # a one-line paragraph set in by its first-line indent (about an em), its command at the margin
    lead_in = "TeX Live をアンインストールには，以下のコマンドを実行します："
    regions = [Region("a", "text", (146, 572, 980, 596), lead_in),
               Region("b", "text", (137, 622, 366, 638), "> tlmgr uninstall --all")]
    assert _outline_parents(regions) == {"b": [lead_in]}
    # further left than an indent: a block of its own
    regions[1] = Region("b", "text", (90, 622, 366, 638), "> tlmgr uninstall --all")
    assert _outline_parents(regions) == {}


def test_a_lead_in_is_no_answer_what_it_heads_is():
    page = _page(Region("h", "heading", (137, 524, 356, 547), "3.6 Uninstalling"),
                 Region("a", "text", (146, 572, 980, 596), "To uninstall TeX Live, run the following command:"),
                 Region("b", "text", (137, 622, 366, 638), "tlmgr uninstall --all"))
    assert _read("Which command uninstalls TeX Live?", page) == "tlmgr uninstall --all"
    # a lead-in that says the answer itself answers
    page = _page(Region("a", "text", (45, 118, 735, 137), "Prosper offers seven transitions:"),
                 Region("b", "text", (95, 165, 557, 189), "Replace, Split, Blinds, Box, Wipe, Dissolve, Glitter"))
    assert _read("How many transitions does Prosper offer?", page) == "7"


def test_a_label_over_its_value_is_a_field_the_label_alone_no_answer():
    # a title page's field on two lines: the label ends on a colon, its value is the line below
    question = "Wie heeft de Engelse versie naar het Nederlands vertaald?"
    page = _page(Region("t", "heading", (458, 441, 906, 557), "De niet zo korte inleiding tot LaTeX"),
                 Region("a", "text", (717, 802, 906, 822), "door Tobias Oetiker"),
                 Region("b", "text", (407, 900, 906, 920), "Vertaling van de Engelse versie naar het Nederlands:"),
                 Region("c", "text", (522, 942, 906, 962), "Stefan Becuwe, Bart Windels en anderen"),
                 Region("d", "text", (719, 998, 906, 1019), "Versie 1.3, april 2003"))
    reading = Reader(None).read(question, page)
    assert reading is not None and reading.answer.startswith("Stefan Becuwe") and reading.coverage == 1.0
    # the label's words named by the question, but no line below it: the label itself answers nothing
    page = _page(*[r for r in page.regions if r.region_id != "c"])
    assert _read(question, page) != "Vertaling van de Engelse versie naar het Nederlands:"


def test_a_label_names_its_value_only_where_the_question_names_most_of_it():
    from vrag_rl.reader.spans import labelled_value

    assert labelled_value("Vertaling van de Engelse versie naar het Nederlands:", "Stefan Becuwe",
                          "Wie heeft de Engelse versie naar het Nederlands vertaald?")[0] == "Stefan Becuwe"
    assert labelled_value("Shipping address of the consignee:", "12 Harbour Road",
                          "Who translated the English version?") == ("", set())
    # a value that only repeats the question says nothing
    assert labelled_value("Translated by:", "English version", "Who translated the English version?") == ("", set())
