"""Policy servers over real sockets (uvicorn on loopback), driven as the agent drives vLLM.

Covers the shared app (validation, bounds, API key, SSE streaming), the scripted replay backend
and the rule-based OCR backend on a drawn page. The transformers backend has its own file.
"""
from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from PIL import Image, ImageDraw, ImageFont

from search_engine.page_layout import PageLayout, Region
from testkit.loopback import LoopbackServer, free_port
from vrag_rl.reader import Reader
from vrag_rl.reader.terms import content_terms
from vrag_rl.serving.policy_server.app import create_app
from vrag_rl.serving.policy_server.conversation import NOT_FOUND, page_id_of, question_of
from vrag_rl.serving.policy_server.protocol import (
    MAX_IMAGES,
    BadImageError,
    ChatCompletionRequest,
    ChatMessage,
    apply_stop,
    decode_data_url,
)
from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend, views_of
from vrag_rl.serving.policy_server.scripted import ScriptedBackend

REPO = Path(__file__).resolve().parents[2]
KEY = "test-key"


def data_url(image: Image.Image, fmt: str = "PNG") -> str:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buffer.getvalue()).decode()


def image_msg(url: str, text: str | None = None) -> dict:
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": url}}]
    if text is not None:
        parts.append({"type": "text", "text": text})
    return {"role": "user", "content": parts}


def chat(server, messages, key=KEY, **extra) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/chat/completions", json={"model": "m", "messages": messages, **extra},
                      headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=60)


# --------------------------------------------------------------------------------------------- protocol helpers


def test_apply_stop_cuts_at_the_earliest_stop():
    assert apply_stop("abc</search> tail", ["</answer>", "</search>"]) == ("abc", True)
    assert apply_stop("x STOP y stop", "stop") == ("x STOP y ", True)
    assert apply_stop("nothing", ["zz"]) == ("nothing", False)
    assert apply_stop("nothing", None) == ("nothing", False)


def test_decode_data_url_accepts_only_inline_images():
    image = Image.new("RGB", (30, 20), "red")
    assert decode_data_url(data_url(image)).size == (30, 20)
    assert decode_data_url(data_url(image, "JPEG")).mode == "RGB"
    with pytest.raises(BadImageError, match="remote image URLs are not fetched"):
        decode_data_url("https://example.com/page.png")
    with pytest.raises(BadImageError, match="base64"):
        decode_data_url("data:image/png;base64,!!!not base64!!!")
    with pytest.raises(BadImageError, match="decodable"):
        decode_data_url("data:image/png;base64," + base64.b64encode(b"not an image").decode())
    with pytest.raises(BadImageError):
        decode_data_url("data:text/plain;base64,aGVsbG8=")


def test_request_defaults_and_params():
    request = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], "stop": "x",
                                                    "unknown_vllm_field": 1})
    params = request.params()
    assert (params.temperature, params.top_p, params.max_tokens, params.stop) == (1.0, 1.0, 512, ("x",))
    assert ChatCompletionRequest.model_validate(
        {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 7}).params().max_tokens == 7


# --------------------------------------------------------------------------------------------- scripted server

SCRIPTS = {"alpha": ["a0 {question}", "a1", "a2 last"], "beta": ["b0", "b1"]}


@pytest.fixture(scope="module")
def scripted_server():
    server = LoopbackServer(create_app(ScriptedBackend(SCRIPTS, default=["d0"]), "scripted", api_key=KEY)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(scripted_server):
    with openai.OpenAI(base_url=scripted_server.url + "/v1", api_key=KEY, max_retries=0) as c:
        yield c


@pytest.mark.parametrize("body, status, fragment", [
    ({"messages": [{"role": "user", "content": "x"}], "temperature": 2.5}, 422, "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "temperature": -0.1}, 422, "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "top_p": 1.5}, 422, "top_p"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 422, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 9000}, 422, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "n": 2}, 422, "n"),
    ({"messages": []}, 422, "messages"),
    ({"messages": [{"role": "user", "content": "x"}] * 257}, 422, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, 422, "role"),
    ({"messages": [{"role": "user", "content": [{"type": "audio", "audio": "x"}]}]}, 422, "type"),
    ({"messages": [image_msg("data:image/png;base64,AAAA")] * (MAX_IMAGES + 1)}, 422, f"at most {MAX_IMAGES}"),
    ({"messages": [image_msg("http://169.254.169.254/latest/meta-data")]}, 400, "remote image URLs are not fetched"),
    ({"messages": [image_msg("data:image/png;base64,!!!notbase64")]}, 400, "malformed base64"),
    ({"messages": [image_msg("file:///etc/passwd")]}, 400, "not fetched"),
])
def test_bad_requests_get_4xx_with_detail(scripted_server, body, status, fragment):
    response = httpx.post(f"{scripted_server.url}/v1/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert detail and fragment in json.dumps(detail)
    assert "Traceback" not in response.text


def test_malformed_json_and_huge_input_are_not_echoed(scripted_server):
    response = httpx.post(f"{scripted_server.url}/v1/chat/completions", content=b"{not json",
                          headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}, timeout=30)
    assert response.status_code == 422 and "detail" in response.json()
    big = "A" * 200_000
    response = chat(scripted_server, [{"role": "user", "content": big}], temperature=9)
    assert response.status_code == 422 and len(response.content) < 2_000  # the input is not echoed back


def test_api_key_enforced(scripted_server):
    messages = [{"role": "user", "content": "alpha"}]
    assert chat(scripted_server, messages, key=None).status_code == 401
    assert chat(scripted_server, messages, key="wrong").status_code == 401
    # 401 comes before validation: a stranger learns nothing about the schema
    assert chat(scripted_server, [], key="wrong").status_code == 401
    assert httpx.get(f"{scripted_server.url}/v1/models").status_code == 401
    assert httpx.get(f"{scripted_server.url}/health").status_code == 200  # health stays open
    with openai.OpenAI(base_url=scripted_server.url + "/v1", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model="scripted", messages=messages)


def test_openai_client_replays_by_turn_and_substitutes_the_question(client):
    first = client.chat.completions.create(
        model="scripted", messages=[{"role": "system", "content": "rules"},
                                    {"role": "user", "content": "Question: is alpha here?"}])
    assert first.object == "chat.completion" and first.id.startswith("chatcmpl-")
    assert first.choices[0].message.content == "a0 is alpha here?"
    assert first.choices[0].message.role == "assistant" and first.choices[0].finish_reason == "stop"
    assert first.usage.completion_tokens == 4 and first.usage.total_tokens == first.usage.prompt_tokens + 4
    history = [{"role": "user", "content": [{"type": "text", "text": "Question: alpha"}]},
               {"role": "assistant", "content": "a0"}, {"role": "user", "content": "more"}]
    assert client.chat.completions.create(model="s", messages=history).choices[0].message.content == "a1"
    long = history + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}] * 5
    assert client.chat.completions.create(model="s", messages=long).choices[0].message.content == "a2 last"
    other = client.chat.completions.create(model="s", messages=[{"role": "user", "content": "gamma"}])
    assert other.choices[0].message.content == "d0"
    assert [m.id for m in client.models.list().data] == ["scripted"]


def test_two_conversations_concurrently(client):
    """Stateless replay: interleaved episodes with different keys never see each other's turns."""

    def episode(key: str) -> list[str]:
        messages: list[dict] = [{"role": "user", "content": f"Question: {key} #{time.perf_counter_ns()}"}]
        replies = []
        for _ in range(3):
            reply = client.chat.completions.create(model="s", messages=messages).choices[0].message.content
            replies.append(reply)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "next"}]
        return replies

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(episode, key) for key in ["alpha", "beta"] * 4]
        results = [job.result(timeout=60) for job in jobs]
    for i, replies in enumerate(results):
        if i % 2 == 0:
            assert replies[0].startswith("a0 alpha #") and replies[1:] == ["a1", "a2 last"]
        else:
            assert replies == ["b0", "b1", "b1"]


def test_streaming_chunks_concatenate_to_the_text(client, scripted_server):
    messages = [{"role": "user", "content": "Question: alpha  with\nspaces"}]
    stream = client.chat.completions.create(model="scripted", messages=messages, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "a0 alpha  with\nspaces"
    assert len([c for c in chunks if c.choices]) > 3  # really chunked
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4
    raw = httpx.post(f"{scripted_server.url}/v1/chat/completions", json={"messages": messages, "stream": True},
                     headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.text.rstrip().endswith("data: [DONE]")


def test_stop_strings_and_max_tokens(client):
    reply = client.chat.completions.create(model="s", messages=[{"role": "user", "content": "Question: alpha x"}],
                                           stop=["alpha"])
    assert reply.choices[0].message.content == "a0 " and reply.choices[0].finish_reason == "stop"
    reply = client.chat.completions.create(model="s", messages=[{"role": "user", "content": "Question: alpha x y"}],
                                           max_tokens=2)
    assert reply.choices[0].message.content == "a0 alpha"
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 2


def test_script_files_and_errors(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"scripts": {"k": ["r0", "r1"]}, "default": ["d"]}))
    backend = ScriptedBackend.from_file(path)
    assert backend.scripts == {"k": ["r0", "r1"]} and backend.default == ["d"]
    yaml_path = tmp_path / "s.yaml"
    yaml_path.write_text("scripts:\n  k: [y0]\n")
    assert ScriptedBackend.from_file(yaml_path).scripts == {"k": ["y0"]}
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not valid"):
        ScriptedBackend.from_file(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="non-empty list"):
        ScriptedBackend({"k": "not a list"})
    with pytest.raises(ValueError):
        ScriptedBackend()
    # no matching script and no default: a clear 400, not a 500
    server = LoopbackServer(create_app(ScriptedBackend({"k": ["r"]}), "s")).start()
    try:
        response = chat(server, [{"role": "user", "content": "zzz"}], key=None)
        assert response.status_code == 400 and "no script matches" in response.json()["detail"]
    finally:
        server.stop()


class _Boom:
    def generate(self, messages, params):
        raise RuntimeError("backend exploded")


def test_backend_failure_is_a_clean_500():
    server = LoopbackServer(create_app(_Boom(), "boom")).start()
    try:
        response = chat(server, [{"role": "user", "content": "x"}], key=None)
    finally:
        server.stop()
    assert response.status_code == 500
    # exception text can hold prompts or paths: it goes to the server log, never to the client
    assert "backend exploded" not in response.text and "Traceback" not in response.text
    assert "internal error" in response.json()["detail"]


def test_cli_serves_a_script_file(tmp_path):
    """`python -m vrag_rl.serving.policy_server serve --backend scripted` answers like the in-process app."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": ["<answer>{question}</answer>"]}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "vrag_rl.serving.policy_server", "serve", "--backend", "scripted",
                             "--script", str(script), "--port", str(port), "--api-key", "k",
                             "--served-model-name", "replay", "--log-level", "warning"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "CLI server did not start"
            time.sleep(0.1)
        with openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as c:
            assert [m.id for m in c.models.list().data] == ["replay"]
            reply = c.chat.completions.create(model="replay", messages=[{"role": "user", "content": "Question: 2+2?"}])
            assert reply.choices[0].message.content == "<answer>2+2?</answer>"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_cli_rejects_missing_arguments(tmp_path):
    from typer.testing import CliRunner

    from vrag_rl.serving.policy_server.cli import ServeOptions, app, build_app

    with pytest.raises(SystemExit, match="--model is required"):
        build_app(ServeOptions(backend="transformers"))
    with pytest.raises(SystemExit, match="--script FILE is required"):
        build_app(ServeOptions(backend="scripted"))
    with pytest.raises(SystemExit, match="cannot read script file"):
        build_app(ServeOptions(backend="scripted", script=str(tmp_path / "no")))
    # through the command line: the same one-line errors, exit status 1, no traceback
    result = CliRunner().invoke(app, ["serve", "--backend", "transformers"])
    assert result.exit_code == 1 and "--model is required" in result.output + str(result.exception)
    result = CliRunner().invoke(app, ["serve", "--backend", "nope"])
    assert result.exit_code == 2 and "nope" in result.output


def test_importing_the_package_does_not_import_torch():
    code = ("import sys, vrag_rl.serving.policy_server as p; "
            "from vrag_rl.serving.policy_server import create_app, ScriptedBackend, RuleBasedBackend; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# --------------------------------------------------------------------------------------------- rule-based server

PAGE_LINES = ["Quarterly Report 2023", "Revenue grew to 341 million dollars", "Employees at year end: 1,870",
              "Headquarters are in Lisbon"]
QUESTION = "How many employees were there at year end?"


def _page() -> tuple[Image.Image, list[tuple[int, int, int, int]]]:
    """A white 800x600 page with large printed lines, and where each line was drawn."""
    image = Image.new("RGB", (800, 600), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=28)
    boxes = []
    for i, line in enumerate(PAGE_LINES):
        xy = (60, 60 + i * 110)
        draw.text(xy, line, fill="black", font=font)
        boxes.append(tuple(int(v) for v in draw.textbbox(xy, line, font=font)))
    return image, boxes


@pytest.fixture(scope="module")
def rule_server():
    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    yield server
    server.stop()


def _reply(client: openai.OpenAI, messages: list[dict]) -> str:
    reply = client.chat.completions.create(model="rule-based", messages=messages, temperature=0)
    return reply.choices[0].message.content


def test_rule_based_search_zoom_answer(rule_server):
    page, boxes = _page()
    client = openai.OpenAI(base_url=rule_server.url + "/v1", api_key="none", max_retries=0)
    messages: list[dict] = [{"role": "system", "content": "You answer questions about pages."},
                            {"role": "user", "content": f"Question: {QUESTION}"}]
    first = _reply(client, messages)
    assert re.fullmatch(r"<think>.+</think><search>" + re.escape(QUESTION) + "</search>", first)

    messages += [{"role": "assistant", "content": first}, image_msg(data_url(page), "Search result: page p1.")]
    second = _reply(client, messages)
    match = re.search(r"<think>.+</think><bbox>\[(\d+), (\d+), (\d+), (\d+)\]</bbox>$", second)
    assert match, second
    x1, y1, x2, y2 = map(int, match.groups())
    lx1, ly1, lx2, ly2 = boxes[2]  # "Employees at year end: 1,870"
    assert x1 <= lx1 and y1 <= ly1 and x2 >= lx2 and y2 >= ly2  # the whole line is inside the box
    assert 0 <= x1 and 0 <= y1 and x2 <= page.width and y2 <= page.height
    assert y1 > boxes[1][1] and y2 < boxes[3][3]  # and it is that line, not its neighbours

    crop = page.crop((x1, y1, x2, y2)).resize(((x2 - x1) * 2, (y2 - y1) * 2))  # as the agent zooms
    messages += [{"role": "assistant", "content": second}, image_msg(data_url(crop, "JPEG"), "Zoomed region.")]
    third = _reply(client, messages)
    answer = re.search(r"<answer>(.*)</answer>$", third)
    assert answer and "1,870" in answer.group(1) and "year" not in answer.group(1).lower(), third


def _search_on(client: openai.OpenAI, question: str, page: Image.Image) -> tuple[list[dict], list[str]]:
    """The conversation where every search brings `page`: the messages so far and the policy's replies (the
    first search, then what it does after each showing of the page, up to its last search's page)."""
    searches = RuleBasedBackend().max_searches
    messages: list[dict] = [{"role": "user", "content": f"Question: {question}"}]
    replies = [_reply(client, messages)]
    for _ in range(searches):
        messages += [{"role": "assistant", "content": replies[-1]}, image_msg(data_url(page))]
        replies.append(_reply(client, messages))
    return messages, replies


def test_rule_based_searches_by_key_words_then_gives_up(rule_server):
    page, _ = _page()
    client = openai.OpenAI(base_url=rule_server.url + "/v1", api_key="none", max_retries=0)
    question = "What colour is the zebra's saddle?"
    messages, (first, *again, last) = _search_on(client, question, page)
    assert len(again) == RuleBasedBackend().max_searches - 1 >= 1
    assert all(re.search(r"<search>colour zebra's saddle</search>$", reply) for reply in again), again
    assert last.endswith(f"<answer>{NOT_FOUND}</answer>")
    # a search that brought no page at all: the reformulation is still tried once
    no_page = [{"role": "user", "content": f"Question: {question}"}, {"role": "assistant", "content": first},
               {"role": "user", "content": "The search returned no page you have not already seen."}]
    assert "<search>colour zebra's saddle</search>" in _reply(client, no_page)


def test_rule_based_not_found_still_zooms_where_the_answer_probably_is(rule_server):
    """A page that names the question's subject but not all of it: no answer, but after the last search the
    policy zooms into the closest region (the episode's evidence, highlighted by the demo), then says not found."""
    page, boxes = _page()
    client = openai.OpenAI(base_url=rule_server.url + "/v1", api_key="none", max_retries=0)
    question = "How many employees were there in the Porto office?"
    messages, (_, *again, last) = _search_on(client, question, page)
    assert all("<search>" in reply for reply in again), again  # the reformulations come first
    match = re.search(r"probably.+<bbox>\[(\d+), (\d+), (\d+), (\d+)\]</bbox>$", last)
    assert match, last
    x1, y1, x2, y2 = map(int, match.groups())
    lx1, ly1, lx2, ly2 = boxes[2]  # "Employees at year end: 1,870": the region that names the subject
    assert x1 <= lx1 and y1 <= ly1 and x2 >= lx2 and y2 >= ly2 and y1 > boxes[1][1] and y2 < boxes[3][3]
    crop = page.crop((x1, y1, x2, y2)).resize(((x2 - x1) * 2, (y2 - y1) * 2))
    messages += [{"role": "assistant", "content": last}, image_msg(data_url(crop, "JPEG"), "Zoomed region.")]
    assert _reply(client, messages).endswith(f"<answer>{NOT_FOUND}</answer>")


def test_rule_based_bad_image_is_400(rule_server):
    messages = [{"role": "user", "content": "Question: x"}, {"role": "assistant", "content": "<search>x</search>"},
                image_msg("data:image/png;base64," + base64.b64encode(b"garbage bytes").decode())]
    response = chat(rule_server, messages, key=None)
    assert response.status_code == 400 and "not a decodable image" in response.json()["detail"]


def test_reader_rules_through_the_backend():
    """Evidence by meaning and terms, answers as a value, a label or the whole sentence (more in
    test_rule_based_reader)."""
    question = "What satisfaction score did the Riverside district get?"
    assert content_terms(question) == ["satisfaction", "score", "riverside", "district"]
    rows = ["District Score", "Riverside 7.4", "Northbank 8.1"]
    layout = PageLayout("p", 200, 100, [Region(f"r{i}", "text", (0, 20 * i, 100, 20 * i + 10), text)
                                        for i, text in enumerate(rows)])
    reader = RuleBasedBackend(embedder=None).reader
    reading = reader.read(question, layout)
    # the header line holds only question words and no answer; the row does, read with its header
    assert reading.answer == "7.4" and "Riverside" in reading.evidence and "Score" in reading.evidence
    assert reader.read("zebra", layout) is None
    plant = PageLayout("p", 200, 100, [Region("r", "text", (0, 0, 200, 20),
                                              "The Kestrel Ridge plant produces 410 MW.")])
    assert Reader(None).read("How much power does the Kestrel Ridge solar plant produce?", plant).answer == "410 MW"


def test_conversation_markers_come_from_the_agent_prompts():
    from vrag_rl.vrag.prompts import NO_ANSWER_FALLBACK, SEARCH_RESULT_TEXT

    assert NOT_FOUND == NO_ANSWER_FALLBACK
    assert page_id_of(SEARCH_RESULT_TEXT.format(query="a. b", page_id="doc_3")) == "doc_3"
    assert page_id_of("Zoomed region [1, 2, 3, 4] of the previous image.") is None
    assert question_of([ChatMessage(role="user", content="Rules...\n\nQuestion: Why?")]) == "Why?"


def test_views_follow_zooms_back_to_their_page():
    page, _ = _page()
    crop = page.crop((0, 0, 400, 300))
    messages = [ChatMessage(**m) for m in [
        {"role": "user", "content": "Question: q"}, {"role": "assistant", "content": "<search>q</search>"},
        image_msg(data_url(page), 'Search result for "q": page doc_3.'),
        {"role": "assistant", "content": "<think>t</think><bbox>[0, 0, 400, 300]</bbox>"},
        image_msg(data_url(crop), "Zoomed region [0, 0, 400, 300] of the previous image.")]]
    view = views_of(messages)[-1]
    assert view.page_id == "doc_3" and view.is_crop and view.root.size == page.size
    assert view.crops == [((0.0, 0.0, 400.0, 300.0), page.size, crop.size)]
    assert views_of(messages[:3])[-1].page_id == "doc_3" and not views_of(messages[:3])[-1].is_crop
    assert views_of(messages[:2]) == []
