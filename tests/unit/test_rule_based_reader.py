"""The CPU demo's stand-in reader answers with a value or a whole evidence line, never a fragment.

Pure rules on hand-made OCR lines, then the real thing: a page of a deck the reader has never seen,
drawn here, read with tesseract and the bundled MiniLM through the policy server on loopback, with
the agent's own resize and crop between the turns.
"""
from __future__ import annotations

import base64
import io
import re

import openai
import pytest
from PIL import Image, ImageDraw, ImageFont

from search_engine.lexical import has_cjk, tokenize
from search_engine.text_extraction import OcrLine, OcrWord
from testkit.loopback import LoopbackServer
from vrag_rl.agent.images import smart_resize
from vrag_rl.policy_server.app import create_app
from vrag_rl.policy_server.rule_based import (
    Evidence,
    RuleBasedBackend,
    candidate_units,
    content_terms,
    extract_answer,
    question_form,
    values_in,
)


def _line(text: str, y: int, x: int = 0) -> OcrLine:
    """A line as tesseract reports it: 20 px per character, words with their boxes."""
    words, start = [], 0
    for word in text.split(" "):
        if word:
            words.append(OcrWord(word, (x + 20 * start, y, x + 20 * (start + len(word)), y + 20)))
        start += len(word) + 1
    return OcrLine(" ".join(text.split()), (x, y, x + 20 * len(text), y + 20), 90.0, words)


def _is_value_or_line(answer: str, evidence: str, lines: list[OcrLine]) -> bool:
    """The contract: a value printed in the evidence, the whole evidence, or a whole table cell."""
    if answer == evidence.strip():
        return True
    if any(answer == v.text for v in values_in(evidence)):
        return True
    # a table's label cell: a row is "label value"
    return any(re.fullmatch(re.escape(answer) + r"\s+\S+", line.text) for line in lines)


def test_question_forms_english_and_chinese():
    assert question_form("How many employees did it have?").quantity
    assert question_form("What share of trips are by bus?").kind == "percent"
    assert question_form("What dividend per share was paid?").kind == "money"  # the first noun decides
    assert question_form("When did the plant open?").time
    assert question_form("Which city has the highest rent?").superlative == 1
    assert question_form("Which city has the highest rent?").entity
    assert not question_form("Which city has the highest rent?").quantity
    assert question_form("数据中心有多少台服务器？").quantity
    assert question_form("哪个地区的收入最高？").superlative == 1


def test_values_keep_currency_scale_and_unit():
    texts = [v.text for v in values_in("Sales were $12.5 million, up 8% on 2021; the site uses 40 MW and 3 km.")]
    assert texts == ["$12.5 million", "8%", "2021", "40 MW", "3 km"]
    assert [v.is_year for v in values_in("in 2021 and 20210")] == [True, False]
    assert [v.text for v in values_in("带宽达到 400G，时延 2 微秒，规模 10万台")] == ["400G", "2", "10万台"]


@pytest.mark.parametrize(("lines", "question", "expected"), [
    (["Harbour traffic report", "The port handled 4.2 million containers in 2022."],
     "How many containers did the port handle in 2022?", "4.2 million"),
    (["Median rent rose to €1,140 per month, 6% more than in 2021."],
     "What was the median rent?", "€1,140"),
    (["Median rent rose to €1,140 per month, 6% more than in 2021."],
     "By what percentage did rent rise?", "6%"),
    (["City Rent", "Porto 880", "Lisbon 1,140", "Braga 610"],
     "Which city has the highest rent?", "Lisbon"),
    (["City Rent", "Porto 880", "Lisbon 1,140", "Braga 610"],
     "Which city has the lowest rent?", "Braga"),
    (["The new terminal opened to passengers in 2019 after four years of work."],
     "When did the new terminal open?", "2019"),
    (["The ferry line is operated by Blue Strait Lines under a ten-year contract."],
     "Who operates the ferry line?", "The ferry line is operated by Blue Strait Lines under a ten-year contract."),
    (["Metric 2021 2022 2023", "Visitors 310 355 402", "Hotels 41 44 47"],
     "How many visitors were there in 2022?", "355"),
])
def test_answers_are_values_or_whole_lines(lines, question, expected):
    ocr = [_line(text, 40 * i) for i, text in enumerate(lines)]
    ranked = RuleBasedBackend(embedder=None).scorer.rank(question, candidate_units(ocr))
    assert ranked, question
    answer = extract_answer(ranked[0], question, ocr)
    assert answer == expected, (question, ranked[0].text, answer)
    assert _is_value_or_line(answer, ranked[0].text, ocr)


def test_never_a_word_deleted_fragment():
    """The old stand-in removed the question's words from the line ("of Directors", "by (USD millions)");
    whatever the question, the answer now is a value of the evidence, the whole evidence, or a label cell."""
    lines = [_line("MEMO - Board of Directors", 0), _line("Revenue by region (USD millions)", 40),
             _line("Residents rated transport in their district from 0 to 10.", 80)]
    questions = ["What did the Board of Directors decide?", "Which region brought the most revenue?",
                 "Residents rated public transport in their what?", "What score did residents give?"]
    for question in questions:
        ranked = RuleBasedBackend(embedder=None).scorer.rank(question, candidate_units(lines))
        for unit in ranked:
            answer = extract_answer(unit, question, lines)
            assert _is_value_or_line(answer, unit.text, lines), (question, unit.text, answer)


def test_cjk_terms_are_character_bigrams():
    assert has_cjk("数据中心网络") and not has_cjk("data centre")
    # function words split the run: no bigram spans "的"
    assert tokenize("数据中心网络面临的挑战") == ["数据", "据中", "中心", "心网", "网络", "络面", "面临", "挑战"]
    assert content_terms("数据中心有多少台服务器？") == ["数据", "据中", "中心", "心有", "台服", "服务", "务器"]
    # a Chinese question finds the Chinese line by shared bigrams
    lines = [_line("网络架构演进", 0), _line("单集群规模达到10万台服务器", 40)]
    ranked = RuleBasedBackend(embedder=None).scorer.rank("单集群规模是多少台服务器？", candidate_units(lines))
    assert ranked[0].text == "单集群规模达到10万台服务器"
    assert extract_answer(ranked[0], "单集群规模是多少台服务器？", lines) == "10万台"


# ---- the real reader on an unseen page, through the server ---------------------------------------------------

DECK = [  # (text, font size): a page of a deck no rule was written for
    ("Northwind Ferries - 2025 operations", 34),
    ("The fleet carried 2.7 million passengers in 2025.", 24),
    ("Average crossing time fell to 48 minutes.", 24),
    ("Route   Sailings", 22),
    ("Bayview   1,240", 22),
    ("Eastport   860", 22),
    ("Kellen Island   415", 22),
    ("Fares are set by the regional transport authority.", 24),
]


def _deck_page() -> Image.Image:
    image = Image.new("RGB", (1400, 900), "white")
    draw = ImageDraw.Draw(image)
    y = 50
    for text, size in DECK:
        draw.text((60, y), text, fill="black", font=ImageFont.load_default(size=size))
        y += int(size * 2.6)
    return image


def _data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _image_msg(image: Image.Image, text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text},
                                        {"type": "image_url", "image_url": {"url": _data_url(image)}}]}


@pytest.fixture(scope="module")
def reader():
    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    yield openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
    server.stop()


def _ask(client: openai.OpenAI, page: Image.Image, question: str) -> tuple[str, str]:
    """search → page (resized as the agent does) → bbox → crop → answer; returns (evidence, answer)."""
    def reply(messages):
        return client.chat.completions.create(model="rule-based", messages=messages, temperature=0) \
            .choices[0].message.content

    h, w = smart_resize(page.height, page.width)
    shown = page.resize((w, h))
    messages = [{"role": "user", "content": f"Question: {question}"}]
    first = reply(messages)
    assert "<search>" in first
    messages += [{"role": "assistant", "content": first}, _image_msg(shown, "Search result.")]
    second = reply(messages)
    box = re.search(r"<bbox>\[(\d+), (\d+), (\d+), (\d+)\]</bbox>", second)
    assert box, second
    x1, y1, x2, y2 = (int(v) for v in box.groups())
    sx, sy = page.width / w, page.height / h
    crop = page.crop((int(x1 * sx), int(y1 * sy), int(x2 * sx), int(y2 * sy)))
    ch, cw = smart_resize(crop.height, crop.width)
    messages += [{"role": "assistant", "content": second}, _image_msg(crop.resize((cw, ch)), "Zoomed region.")]
    third = reply(messages)
    evidence = re.search(r'reads "(.*)"\.</think>', third)
    answer = re.search(r"<answer>(.*)</answer>$", third)
    assert evidence and answer, third
    return evidence.group(1), answer.group(1)


@pytest.mark.parametrize(("question", "expected"), [
    ("How many passengers did the fleet carry in 2025?", "2.7 million"),
    ("How long is the average crossing?", "48 minutes"),
    ("How many sailings were there on the Eastport route?", "860"),
    ("Who sets the fares?", "Fares are set by the regional transport authority."),
])
def test_unseen_page_answers_with_a_value_or_the_whole_line(reader, question, expected):
    evidence, answer = _ask(reader, _deck_page(), question)
    assert answer == expected, (question, evidence, answer)
    assert answer == evidence or answer in [v.text for v in values_in(evidence)]


def test_evidence_type_is_an_evidence():
    unit = Evidence([_line("a", 0), _line("b", 30)])
    assert unit.text == "a b" and unit.box == (0, 0, 20, 50)
